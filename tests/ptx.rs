//! The embedded PTX, checked without a GPU: it defines every kernel declared in
//! `kernels-gpu` with the declared parameter sizes (the launchers' argument lists come from
//! the same declarations), has no unresolved externals, and NVIDIA's assembler accepts it for
//! sm_75, sm_80 and sm_90.
//!
//! `ptxas` comes from the CUDA toolkit (`$CUDA_HOME/bin`, `/usr/local/cuda/bin`) or from
//! `scripts/fetch-cuda-deps.sh` (`.deps/cuda/bin`). If none is found the test fails: a check
//! that silently passes without its tool would prove nothing.
use std::path::PathBuf;
use std::process::Command;

use kernels_gpu::kernels::signatures;
use streamlab::runtime::kernels::PTX;

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

/// The sizes of the `.param`s of `.entry name(...)` in `ptx`, in order.
fn param_sizes(ptx: &str, name: &str) -> Option<Vec<usize>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let list = &ptx[start..start + ptx[start..].find(')')?];
    Some(
        list.lines()
            .filter_map(|l| l.trim().strip_prefix(".param "))
            .map(|p| match p.split_whitespace().next() {
                Some(".u64" | ".b64" | ".s64" | ".f64") => 8,
                Some(".u32" | ".b32" | ".s32" | ".f32") => 4,
                Some(".u16" | ".b16" | ".s16") => 2,
                Some(".u8" | ".b8" | ".s8") => 1,
                other => panic!("{name}: unexpected .param type {other:?}"),
            })
            .collect(),
    )
}

#[test]
fn every_declared_kernel_is_in_the_ptx_with_its_declared_parameters() {
    assert_eq!(
        signatures::ALL.len(),
        14,
        "a kernel was added or removed: update this test's count"
    );
    for &(name, sizes) in signatures::ALL {
        assert!(
            sizes.len() <= streamlab::runtime::launch::MAX_ARGS,
            "{name}: more parameters than a launch passes"
        );
        let in_ptx = param_sizes(PTX, name).unwrap_or_else(|| panic!("no .entry for {name}"));
        assert_eq!(in_ptx, sizes, "{name}: PTX .param sizes vs the declaration in kernels-gpu");
    }
    // The check itself can fail: a list with one parameter too many is told apart.
    let (name, sizes) = signatures::ALL[2];
    let mut wrong = sizes.to_vec();
    wrong.push(4);
    assert_ne!(param_sizes(PTX, name).unwrap(), wrong);
}

/// `extern "C" __global__` kernels of a CUDA C++ file: name and parameter sizes (x86-64/CUDA:
/// pointers and `unsigned long long` 8 bytes, `unsigned` and `float` 4).
fn cuda_kernels(source: &str) -> Vec<(String, Vec<usize>)> {
    let mut kernels = Vec::new();
    for piece in source.split("extern \"C\" __global__ void ").skip(1) {
        let (name, rest) = piece.split_once('(').expect("a kernel's parameter list");
        let list = &rest[..rest.find(')').expect("a closed parameter list")];
        let sizes = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p {
                _ if p.contains('*') => 8,
                _ if p.starts_with("unsigned long long") => 8,
                _ if p.starts_with("unsigned ") || p.starts_with("float ") => 4,
                other => panic!("{name}: parameter type of `{other}` not known to this test"),
            })
            .collect();
        kernels.push((name.trim().to_string(), sizes));
    }
    kernels
}

/// `cuda-reference/kernels.cu` is what `Gpu::with_kernels_from` loads in place of the PTX,
/// and it refuses a module without every declared kernel (`benches/kernels.rs` failed so
/// once, when the mixed-precision kernels were added to kernels-gpu only).
#[test]
fn the_cuda_twin_defines_every_declared_kernel_with_its_parameters() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cuda-reference/kernels.cu");
    let source = std::fs::read_to_string(&path).expect("cuda-reference/kernels.cu");
    let twin = cuda_kernels(&source);
    let mut want: Vec<(String, Vec<usize>)> =
        signatures::ALL.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect();
    let mut have = twin.clone();
    want.sort();
    have.sort();
    assert_eq!(have, want, "kernels.cu's kernels vs the declarations in kernels-gpu");
    // The reading can fail: a twin without its last kernel is told apart.
    assert_ne!(cuda_kernels(&source[..source.rfind("extern \"C\"").unwrap()]).len(), twin.len());
}

#[test]
fn no_externals_are_left_and_libdevice_is_inlined() {
    assert!(!PTX.contains(".extern"), "unresolved .extern in the PTX");
    // libdevice's sinf was linked in and inlined: its body is there, no call to it is left.
    assert!(PTX.contains("__nv_sinf.exit"), "libdevice's __nv_sinf body is not in the PTX");
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
