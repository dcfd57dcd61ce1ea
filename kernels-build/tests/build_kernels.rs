//! Builds the real `kernels-gpu` crate to PTX for two architectures, as `host/build.rs` does,
//! into a scratch output directory under cargo's target, and checks the result.
use std::fs;
use std::path::Path;

#[test]
fn builds_kernels_gpu_to_ptx() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out_dir = tmp.join(format!("build-kernels-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out_dir);
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels-gpu");
    let built = kernels_build::PtxBuilder::new(&kernels)
        .archs(&["sm_90", "sm_75"])
        .out_dir(&out_dir)
        // The host build's nested target directory, so `core` for nvptx64 is built once.
        .kernels_target_dir(tmp.join("../nvptx-kernels"))
        .cargo_instructions(false)
        .build()
        .unwrap_or_else(|e| panic!("streamlab kernel build: {e}"));

    let archs: Vec<&str> = built.ptx().iter().map(|p| p.arch()).collect();
    assert_eq!(archs, ["sm_75", "sm_90"], "oldest first");
    assert!(built.libdevice_path().is_file());
    assert!(
        built.kernel_names().iter().any(|k| k == "compute_kernel"),
        "{:?}",
        built.kernel_names()
    );
    for ptx in built.ptx() {
        let arch = ptx.arch();
        assert_eq!(ptx.path(), out_dir.join(format!("kernels.{arch}.ptx")));
        let text = fs::read_to_string(ptx.path()).unwrap();
        assert!(text.contains(&format!(".target {arch}\n")), "{arch}");
        assert!(!text.contains(".extern"), "{arch}");
        for kernel in built.kernel_names() {
            assert!(text.contains(&format!(".entry {kernel}(")), "{arch}: {kernel}");
        }
        // Each module was compiled for its own architecture: the kernel crate's
        // cfg(target_feature = "sm_80") code is in sm_90's only.
        assert_eq!(text.contains("cvt.rn.bf16.f32"), arch == "sm_90", "{arch}");
    }
    let index = fs::read_to_string(built.index_path()).unwrap();
    assert_eq!(built.index_path(), out_dir.join("kernels_ptx.rs"));
    let sm_75 = index.find(&format!("(\"sm_75\", include_str!({:?}))", built.ptx()[0].path()));
    let sm_90 = index.find(&format!("(\"sm_90\", include_str!({:?}))", built.ptx()[1].path()));
    assert!(sm_75.unwrap() < sm_90.unwrap(), "{index}");
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
