//! Builds `kernels-gpu` to PTX and hands it to the host crate: the job Rust-CUDA's
//! `cuda_builder` does, done with rustc's own NVPTX backend and LLVM's tools.
//!
//! Pipeline (every step checked first, with a one-line fix when something is missing):
//! 1. `cargo rustc --target nvptx64-nvidia-cuda -Zbuild-std=core --crate-type cdylib` with fat
//!    LTO and `--emit=llvm-bc`: one bitcode module holding every kernel. The link step that
//!    follows would need `llvm-bitcode-linker`, which nightly does not ship, so it is
//!    neutralised (`-C linker=true`): the bitcode is all we want.
//! 2. `llvm-link --only-needed` with NVIDIA's `libdevice.10.bc`: `__nv_sinf`/`__nv_cosf` are
//!    the functions nvcc's `sinf`/`cosf` compile to, so results match CUDA C++ bit for bit.
//! 3. `opt` (internalize all but the kernels, then `default<O3>`) and `llc -mcpu=<arch>`.
//!
//! Settings (environment variables):
//! - `STREAMLAB_GPU_ARCH`: the PTX target, default `sm_75`: one PTX that the driver
//!   JIT-compiles for every GPU CUDA 13 supports. `sm_90` targets Hopper directly.
//! - `STREAMLAB_LIBDEVICE`: path of `libdevice.10.bc`; otherwise it is looked for under
//!   `CUDA_HOME`, `CUDA_PATH`, `CUDA_LIBRARY_PATH`, `/usr/local/cuda`, `/opt/cuda`.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const TARGET: &str = "nvptx64-nvidia-cuda";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels_dir = manifest_dir.join("../kernels-gpu");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for watched in ["src", "Cargo.toml"] {
        println!(
            "cargo:rerun-if-changed={}",
            kernels_dir.join(watched).display()
        );
    }
    for var in [
        "STREAMLAB_GPU_ARCH",
        "STREAMLAB_LIBDEVICE",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_LIBRARY_PATH",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let arch = env::var("STREAMLAB_GPU_ARCH").unwrap_or_else(|_| "sm_75".to_string());
    let arch_ok = arch
        .strip_prefix("sm_")
        .and_then(|n| n.trim_end_matches('a').parse::<u32>().ok())
        .is_some_and(|n| n >= 75);
    if !arch_ok {
        fail(&format!(
            "STREAMLAB_GPU_ARCH={arch:?} is not a GPU architecture CUDA 13 supports: use sm_75, sm_80, sm_86, sm_89, sm_90, ..."
        ));
    }

    let tools = llvm_tools();
    let libdevice = find_libdevice();
    let bitcode = build_kernel_bitcode(&kernels_dir, &out_dir);
    let kernels = kernel_names(&tools, &bitcode);

    let linked = out_dir.join("kernels.linked.bc");
    let optimized = out_dir.join("kernels.opt.bc");
    let ptx = out_dir.join("kernels.ptx");
    run(
        Command::new(tools.join("llvm-link"))
            .arg(&bitcode)
            .arg("--only-needed")
            .arg(&libdevice)
            .arg("-o")
            .arg(&linked),
        "llvm-link (kernels + libdevice)",
    );
    run(
        Command::new(tools.join("opt"))
            .arg(format!("-mtriple={TARGET}"))
            .arg(format!("-mcpu={arch}"))
            .arg(format!(
                "--internalize-public-api-list={}",
                kernels.join(",")
            ))
            .arg("--passes=internalize,default<O3>")
            .arg(&linked)
            .arg("-o")
            .arg(&optimized),
        "opt",
    );
    run(
        Command::new(tools.join("llc"))
            .arg("-O3")
            .arg(format!("-mcpu={arch}"))
            .arg(&optimized)
            .arg("-o")
            .arg(&ptx),
        "llc (bitcode to PTX)",
    );

    let text = fs::read_to_string(&ptx)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", ptx.display())));
    if text.contains(".extern") {
        fail("the PTX still has unresolved `.extern` functions: a libdevice function is missing from the link");
    }
    for kernel in &kernels {
        if !text.contains(&format!(".entry {kernel}(")) {
            fail(&format!("kernel `{kernel}` is missing from the PTX"));
        }
    }
    println!("cargo:rustc-env=STREAMLAB_PTX_ARCH={arch}");
    println!(
        "cargo:rustc-env=STREAMLAB_KERNEL_NAMES={}",
        kernels.join(",")
    );
}

/// Prints one short cause (and how to fix it) and stops the build, without a panic backtrace.
fn fail(message: &str) -> ! {
    eprintln!("error: streamlab kernel build: {message}");
    exit(1);
}

fn run(cmd: &mut Command, what: &str) {
    let output = cmd.output().unwrap_or_else(|e| {
        fail(&format!(
            "could not start {what} ({:?}): {e}",
            cmd.get_program()
        ))
    });
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        // The first few lines carry the cause; the rest is usually a backtrace of the tool.
        let head: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(8)
            .collect();
        fail(&format!(
            "{what} failed ({}):\n{}",
            output.status,
            head.join("\n")
        ));
    }
}

/// The directory holding `llvm-link`, `opt`, `llc` and `llvm-dis` from the `llvm-tools`
/// component of the pinned toolchain.
fn llvm_tools() -> PathBuf {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let sysroot = Command::new(&rustc)
        .arg("--print")
        .arg("sysroot")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_else(|| fail(&format!("could not ask {rustc} for its sysroot")));
    if !sysroot.join("lib/rustlib/src/rust/library/core").is_dir() {
        fail("the toolchain has no `rust-src` (needed to build `core` for nvptx64): run `rustup toolchain install` in the repository root, or `rustup component add rust-src`");
    }
    let host = env::var("HOST").unwrap();
    let bin = sysroot.join("lib/rustlib").join(host).join("bin");
    for tool in ["llvm-link", "opt", "llc", "llvm-dis"] {
        if !bin.join(tool).is_file() {
            fail(&format!(
                "`{tool}` not found in {}: run `rustup toolchain install` in the repository root, or `rustup component add llvm-tools`",
                bin.display()
            ));
        }
    }
    bin
}

fn find_libdevice() -> PathBuf {
    if let Ok(path) = env::var("STREAMLAB_LIBDEVICE") {
        let path = PathBuf::from(path);
        if path.is_file() {
            return path;
        }
        fail(&format!(
            "STREAMLAB_LIBDEVICE={} is not a file",
            path.display()
        ));
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH", "CUDA_LIBRARY_PATH"] {
        if let Ok(value) = env::var(var) {
            roots.extend(env::split_paths(&value));
        }
    }
    roots.push("/usr/local/cuda".into());
    roots.push("/opt/cuda".into());
    let found = roots
        .iter()
        .map(|root| root.join("nvvm/libdevice/libdevice.10.bc"))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        fail("NVIDIA's libdevice.10.bc not found (looked under CUDA_HOME, CUDA_PATH, CUDA_LIBRARY_PATH, /usr/local/cuda, /opt/cuda): install the CUDA toolkit, or run `scripts/fetch-cuda-deps.sh`, or set STREAMLAB_LIBDEVICE")
    })
}

/// Builds the kernel crate for nvptx64 into its own target directory (a nested cargo on the
/// outer one's directory would wait forever on its lock) and returns its LTO'd bitcode.
fn build_kernel_bitcode(kernels_dir: &Path, out_dir: &Path) -> PathBuf {
    // Shared by debug, release and test builds of the host, so `core` is built once.
    let target_dir = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
        .map(|target| target.join("nvptx-kernels"))
        .unwrap_or_else(|| out_dir.join("nvptx-kernels"));
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(kernels_dir)
        .args(["rustc", "--release", "--target", TARGET, "-Zbuild-std=core"])
        .args(["--crate-type", "cdylib", "--target-dir"])
        .arg(&target_dir)
        .args(["--config", "profile.release.lto=\"fat\""])
        .args(["--config", "profile.release.codegen-units=1"])
        .args(["--config", "profile.release.panic=\"abort\""])
        .args(["--config", "profile.release.opt-level=3"])
        .args(["--", "--emit=llvm-bc", "-C", "linker=true"]);
    // What the outer build sets for the host must not leak into the nvptx build
    // (clippy's wrapper, host RUSTFLAGS, coverage flags, a forced target directory...).
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in env::vars() {
        if key.starts_with("CARGO_PROFILE_") || key.starts_with("CARGO_CFG_") {
            cmd.env_remove(key);
        }
    }
    run(&mut cmd, "cargo (building kernels-gpu for nvptx64)");
    let bitcode = target_dir.join(TARGET).join("release/deps/kernels_gpu.bc");
    if !bitcode.is_file() {
        fail(&format!(
            "the kernel build wrote no bitcode at {}",
            bitcode.display()
        ));
    }
    bitcode
}

/// Every `ptx_kernel` function defined in the bitcode: these stay visible, the rest is internal.
fn kernel_names(tools: &Path, bitcode: &Path) -> Vec<String> {
    let output = Command::new(tools.join("llvm-dis"))
        .arg(bitcode)
        .arg("-o")
        .arg("-")
        .output()
        .unwrap_or_else(|e| fail(&format!("could not run llvm-dis: {e}")));
    let ir = String::from_utf8_lossy(&output.stdout);
    let names: Vec<String> = ir
        .lines()
        .filter(|l| l.starts_with("define") && l.contains(" ptx_kernel "))
        .filter_map(|l| {
            let at = l.find('@')? + 1;
            let end = l[at..].find('(')? + at;
            Some(l[at..end].trim_matches('"').to_string())
        })
        .collect();
    if names.is_empty() {
        fail("no kernels found in the kernel crate's bitcode");
    }
    names
}
