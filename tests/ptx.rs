//! The embedded PTX, one module per architecture, checked without a GPU: each defines every
//! kernel declared in `kernels-gpu` with the declared parameter sizes (the launchers' argument
//! lists come from the same declarations), has no unresolved externals, and NVIDIA's
//! assembler accepts it for its own architecture and the newer ones of sm_75, sm_80 and
//! sm_90. Where the architecture has `cvt.rn.bf16.f32` (sm_80 and newer) the PTX uses it, and
//! the compute kernel is the same code in every module; the layer kernel reads each element's
//! weight and input in one basic block, as nvcc does.
//!
//! `ptxas` comes from the CUDA toolkit (`$CUDA_HOME/bin`, `/usr/local/cuda/bin`) or from
//! `scripts/fetch-cuda-deps.sh` (`.deps/cuda/bin`). If none is found the test fails: a check
//! that silently passes without its tool would prove nothing.
use std::path::PathBuf;
use std::process::Command;

use kernels_gpu::kernels::signatures;
use streamlab::runtime::ptx::{embedded, Ptx};

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
    for Ptx { arch, text } in embedded() {
        for &(name, sizes) in signatures::ALL {
            assert!(
                sizes.len() <= streamlab::runtime::launch::MAX_ARGS,
                "{name}: more parameters than a launch passes"
            );
            let in_ptx =
                param_sizes(text, name).unwrap_or_else(|| panic!("{arch}: no .entry for {name}"));
            assert_eq!(in_ptx, sizes, "{arch} {name}: PTX .param sizes vs the declaration");
        }
        // The check itself can fail: a list with one parameter too many is told apart.
        let (name, sizes) = signatures::ALL[2];
        let mut wrong = sizes.to_vec();
        wrong.push(4);
        assert_ne!(param_sizes(text, name).unwrap(), wrong);
    }
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
    for Ptx { arch, text } in embedded() {
        assert!(!text.contains(".extern"), "{arch}: unresolved .extern in the PTX");
        // libdevice's sinf was linked in and inlined: its body is there, no call to it is left.
        assert!(text.contains("__nv_sinf.exit"), "{arch}: libdevice's __nv_sinf body is missing");
        assert!(
            !text.contains("__nv_sinf,") && !text.contains("__nv_sinf("),
            "{arch}: a call to __nv_sinf survived"
        );
    }
}

/// The lines of `.entry name(...) { ... }` in `text`, without comments (LLVM's comments name
/// basic blocks after inlined functions, which differ between builds of the same code).
fn entry_body(text: &str, name: &str) -> Vec<String> {
    let start = text.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no {name}"));
    let end = start + text[start..].find("\n}\n").expect("the entry's end");
    text[start..end]
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").trim_end().to_string())
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// The instruction replaces the integer rounding exactly where the architecture has it (the
/// bits are the same: tests/mixed_precision.rs), and nothing else differs between the modules
/// but that: the compute kernel, which the benches compare with nvcc's, is one code for all.
#[test]
fn bf16_uses_the_instruction_where_the_architecture_has_it() {
    let set = embedded();
    for Ptx { arch, text } in &set {
        let number: u32 = arch.trim_start_matches("sm_").trim_end_matches('a').parse().unwrap();
        let has = text.contains("cvt.rn.bf16.f32");
        assert_eq!(has, number >= 80, "{arch}: cvt.rn.bf16.f32 in the PTX: {has}");
        let layer = entry_body(text, "half_layer_kernel").join("\n");
        assert_eq!(layer.contains("cvt.rn.bf16.f32"), number >= 80, "{arch}: half_layer_kernel");
        // f16's conversion is an instruction on every architecture.
        assert!(layer.contains("cvt.rn.f16.f32"), "{arch}");
    }
    let oldest = &set[0];
    for newer in &set[1..] {
        for kernel in ["compute_kernel", "chunk_kernel", "master_update_kernel", "produce_kernel"] {
            assert_eq!(
                entry_body(oldest.text, kernel),
                entry_body(newer.text, kernel),
                "{kernel}: {} and {} differ",
                oldest.arch,
                newer.arch
            );
        }
        assert_ne!(
            entry_body(oldest.text, "half_layer_kernel"),
            entry_body(newer.text, "half_layer_kernel")
        );
    }
    // The architectures with the instruction share one layer kernel: a GPU run that checks
    // the bits of one of them (sm_90's on an H100) then speaks for all of them.
    let with_instruction: Vec<&Ptx> = set
        .iter()
        .filter(|p| {
            p.arch.trim_start_matches("sm_").trim_end_matches('a').parse::<u32>().unwrap() >= 80
        })
        .collect();
    for pair in with_instruction.windows(2) {
        assert_eq!(
            entry_body(pair[0].text, "half_layer_kernel"),
            entry_body(pair[1].text, "half_layer_kernel"),
            "half_layer_kernel: {} and {} differ",
            pair[0].arch,
            pair[1].arch
        );
    }
}

/// The PTX's basic blocks: runs of lines cut after each branch and before each label.
fn basic_blocks(body: &[String]) -> Vec<Vec<&str>> {
    let mut blocks = vec![Vec::new()];
    for line in body.iter().map(|l| l.trim()) {
        if line.ends_with(':') {
            blocks.push(Vec::new());
        }
        blocks.last_mut().unwrap().push(line);
        if line.contains("bra") || line.starts_with("ret") {
            blocks.push(Vec::new());
        }
    }
    blocks
}

/// The layer kernel reads an element's 16-bit weight in the same basic block as its f32
/// input, so both loads are in flight at once as in nvcc's code. LLVM once sank the weight's
/// load behind the input's conversion (the weight is unused when `iters` is 0), and each
/// element waited for one load, then the other.
#[test]
fn the_layer_kernel_reads_weight_and_input_together() {
    for Ptx { arch, text } in embedded() {
        let body = entry_body(text, "half_layer_kernel");
        let blocks = basic_blocks(&body);
        let weight_reads: Vec<_> =
            blocks.iter().filter(|b| b.iter().any(|l| l.starts_with("ld.global.b16"))).collect();
        assert_eq!(weight_reads.len(), 2, "{arch}: one weight read per format");
        for block in weight_reads {
            assert!(
                block.iter().any(|l| l.starts_with("ld.global.b32")),
                "{arch}: the weight is read in a block without the input's read:\n{}",
                block.join("\n")
            );
        }
    }
    // The check can fail: a branch between the two reads is seen.
    let split: Vec<String> =
        ["ld.global.b32 %r1, [%rd1];", "@%p1 bra $L__BB0_2;", "ld.global.b16 %rs1, [%rd2];"]
            .map(String::from)
            .into();
    let blocks = basic_blocks(&split);
    assert!(blocks.iter().all(|b| !(b.iter().any(|l| l.starts_with("ld.global.b16"))
        && b.iter().any(|l| l.starts_with("ld.global.b32")))));
}

/// Every module assembles for its own architecture and every newer one of sm_75, sm_80 and
/// sm_90 (a GPU newer than the module's JIT-compiles it the same way).
#[test]
fn ptxas_assembles_every_ptx_for_its_arch_and_newer() {
    let ptxas = ptxas();
    let dir = std::env::temp_dir().join(format!("streamlab-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut assembled = 0;
    for Ptx { arch, text } in embedded() {
        let ptx = dir.join(format!("kernels.{arch}.ptx"));
        std::fs::write(&ptx, text).unwrap();
        let own: u32 = arch.trim_start_matches("sm_").trim_end_matches('a').parse().unwrap();
        let targets = ["sm_75", "sm_80", "sm_90"].into_iter().map(String::from);
        let targets: Vec<String> = targets
            .filter(|t| t[3..].parse::<u32>().unwrap() > own)
            .chain([arch.to_string()])
            .collect();
        for target in targets {
            let cubin = dir.join(format!("kernels.{arch}.on.{target}.cubin"));
            let out = Command::new(&ptxas)
                .arg(format!("-arch={target}"))
                .arg(&ptx)
                .arg("-o")
                .arg(&cubin)
                .output()
                .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
            assert!(
                out.status.success(),
                "ptxas -arch={target} on the {arch} PTX failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let size = std::fs::metadata(&cubin).unwrap().len();
            assert!(size > 1000, "suspiciously small cubin for {arch} on {target}");
            assembled += 1;
        }
    }
    // The default set: sm_75 on 3 targets, sm_80 on 2, sm_90 on 1.
    assert!(assembled >= embedded().len(), "{assembled} cubins");
    std::fs::remove_dir_all(&dir).ok();
}
