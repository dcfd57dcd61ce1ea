//! Builds the real `kernels-gpu` crate to PTX, as `host/build.rs` does, into a scratch
//! output directory under cargo's target, and checks the result.
use std::fs;
use std::path::Path;

#[test]
fn builds_kernels_gpu_to_ptx() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out_dir = tmp.join(format!("build-kernels-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out_dir);
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels-gpu");
    let built = kernels_build::PtxBuilder::new(&kernels)
        .arch("sm_90")
        .out_dir(&out_dir)
        // The host build's nested target directory, so `core` for nvptx64 is built once.
        .kernels_target_dir(tmp.join("../nvptx-kernels"))
        .cargo_instructions(false)
        .build()
        .unwrap_or_else(|e| panic!("streamlab kernel build: {e}"));

    assert_eq!(built.ptx_path(), out_dir.join("kernels.ptx"));
    assert_eq!(built.arch(), "sm_90");
    assert!(built.libdevice_path().is_file());
    assert!(
        built.kernel_names().iter().any(|k| k == "compute_kernel"),
        "{:?}",
        built.kernel_names()
    );
    let ptx = fs::read_to_string(built.ptx_path()).unwrap();
    assert!(ptx.contains(".target sm_90"));
    assert!(ptx.contains(".entry compute_kernel("));
    assert!(!ptx.contains(".extern"));
    for kernel in built.kernel_names() {
        assert!(ptx.contains(&format!(".entry {kernel}(")), "{kernel}");
    }
    let _ = fs::remove_dir_all(&out_dir);
}

#[test]
fn a_bad_architecture_is_one_line_before_any_work() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels-gpu");
    let err = kernels_build::PtxBuilder::new(kernels)
        .arch("sm_60")
        .out_dir(Path::new(env!("CARGO_TARGET_TMPDIR")).join("never-written"))
        .cargo_instructions(false)
        .build()
        .unwrap_err();
    assert_eq!(
        err.message(),
        "architecture \"sm_60\" is not a GPU architecture CUDA 13 supports: use sm_75, sm_80, sm_86, sm_89, sm_90, ..."
    );
    assert!(!Path::new(env!("CARGO_TARGET_TMPDIR")).join("never-written").exists());
}
