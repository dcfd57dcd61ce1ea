//! The embedded PTX, checked without a GPU: it names every kernel the host launches, has no
//! unresolved externals, and NVIDIA's assembler accepts it for sm_75, sm_80 and sm_90.
//!
//! `ptxas` comes from the CUDA toolkit (`$CUDA_HOME/bin`, `/usr/local/cuda/bin`) or from
//! `scripts/fetch-cuda-deps.sh` (`.deps/cuda/bin`). If none is found the test fails: a check
//! that silently passes without its tool would prove nothing.
use std::path::PathBuf;
use std::process::Command;

use streamlab::gpu::{KERNEL_NAMES, PTX};

fn ptxas() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut candidates: Vec<PathBuf> = Vec::new();
    for var in ["STREAMLAB_PTXAS"] {
        if let Some(p) = std::env::var_os(var) {
            candidates.push(p.into());
        }
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(p) = std::env::var_os(var) {
            candidates.push(PathBuf::from(p).join("bin/ptxas"));
        }
    }
    candidates.push(root.join(".deps/cuda/bin/ptxas"));
    candidates.push("/usr/local/cuda/bin/ptxas".into());
    candidates.into_iter().find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("ptxas not found: install the CUDA toolkit, run scripts/fetch-cuda-deps.sh, or set STREAMLAB_PTXAS")
    })
}

#[test]
fn ptx_defines_every_kernel_and_no_externals() {
    let names: Vec<&str> = KERNEL_NAMES.split(',').collect();
    for kernel in [
        "sleep_kernel",
        "sleep_stamped_kernel",
        "compute_kernel",
        "chunk_kernel",
        "vector_add_kernel",
        "produce_kernel",
        "combine_kernel",
        "scale_kernel",
        "slow_scale_kernel",
        "empty_kernel",
    ] {
        assert!(names.contains(&kernel), "{kernel} missing from {names:?}");
        assert!(
            PTX.contains(&format!(".entry {kernel}(")),
            "no .entry for {kernel}"
        );
    }
    assert!(!PTX.contains(".extern"), "unresolved .extern in the PTX");
    // libdevice's sinf was linked in and inlined: its body is there, no call to it is left.
    assert!(
        PTX.contains("__nv_sinf.exit"),
        "libdevice's __nv_sinf body is not in the PTX"
    );
    assert!(
        !PTX.contains("__nv_sinf,") && !PTX.contains("__nv_sinf("),
        "a call to __nv_sinf survived"
    );
}

#[test]
fn ptxas_assembles_the_ptx_for_sm_75_80_90() {
    let ptxas = ptxas();
    let dir = std::env::temp_dir().join(format!("streamlab-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx = dir.join("kernels.ptx");
    std::fs::write(&ptx, PTX).unwrap();
    for arch in ["sm_75", "sm_80", "sm_90"] {
        let out = Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .arg(&ptx)
            .arg("-o")
            .arg(dir.join(format!("kernels.{arch}.cubin")))
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
        assert!(
            out.status.success(),
            "ptxas -arch={arch} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cubin = std::fs::metadata(dir.join(format!("kernels.{arch}.cubin"))).unwrap();
        assert!(cubin.len() > 1000, "suspiciously small cubin for {arch}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
