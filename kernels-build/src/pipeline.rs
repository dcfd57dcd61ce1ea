//! The steps of the pipeline: the nested nvptx64 cargo build, the kernel names, and
//! `llvm-link`/`opt`/`llc` to PTX, with the final checks.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BuildError;

const TARGET: &str = "nvptx64-nvidia-cuda";

/// `<target>/nvptx-kernels` for an `OUT_DIR` of `<target>/<profile>/build/<pkg>/out`, shared
/// by debug, release and test builds so `core` is built once; `<out>/nvptx-kernels` otherwise.
pub(crate) fn default_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
        .map(|target| target.join("nvptx-kernels"))
        .unwrap_or_else(|| out_dir.join("nvptx-kernels"))
}

/// Runs `cmd`; on failure, the error names `what` and carries the first lines of its stderr.
pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<(), BuildError> {
    let output = cmd.output().map_err(|e| {
        BuildError::new(format!("could not start {what} ({:?}): {e}", cmd.get_program()))
    })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The first few lines carry the cause; the rest is usually a backtrace of the tool.
    let head: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).take(8).collect();
    Err(BuildError::new(format!("{what} failed ({}):\n{}", output.status, head.join("\n"))))
}

/// The trimmed stdout of a command that succeeded, or `None`.
fn stdout_of(cmd: &mut Command) -> Option<String> {
    cmd.output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The directory holding `llvm-link`, `opt`, `llc` and `llvm-dis` from the `llvm-tools`
/// component of the toolchain that builds `kernels_dir` (its `rust-toolchain.toml` applies).
pub(crate) fn llvm_tools(kernels_dir: &Path) -> Result<PathBuf, BuildError> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let ask = |args: &[&str]| stdout_of(Command::new(&rustc).current_dir(kernels_dir).args(args));
    let sysroot = ask(&["--print", "sysroot"])
        .map(PathBuf::from)
        .ok_or_else(|| BuildError::new(format!("could not ask {rustc} for its sysroot")))?;
    if !sysroot.join("lib/rustlib/src/rust/library/core").is_dir() {
        return Err(BuildError::new("the toolchain has no `rust-src` (needed to build `core` for nvptx64): run `rustup toolchain install` in the repository root, or `rustup component add rust-src`"));
    }
    let host = match env::var("HOST") {
        Ok(host) => host,
        Err(_) => ask(&["-vV"])
            .and_then(|v| v.lines().find_map(|l| l.strip_prefix("host: ").map(str::to_string)))
            .ok_or_else(|| BuildError::new(format!("could not ask {rustc} for its host")))?,
    };
    let bin = sysroot.join("lib/rustlib").join(host).join("bin");
    for tool in ["llvm-link", "opt", "llc", "llvm-dis"] {
        if !bin.join(tool).is_file() {
            return Err(BuildError::new(format!(
                "`{tool}` not found in {}: run `rustup toolchain install` in the repository root, or `rustup component add llvm-tools`",
                bin.display()
            )));
        }
    }
    Ok(bin)
}

/// Builds the kernel crate for nvptx64 and `arch` into `target_dir`, and copies its LTO'd
/// bitcode to `out_dir/kernels.<arch>.bc`, whose path it returns. Every architecture's build
/// writes the same file in `target_dir` (only the kernel crate's flags differ, so `core` is
/// built once), and other builds (debug, release, tests) share that directory: a lock held
/// from the build to the copy keeps another architecture's bitcode from being copied.
pub(crate) fn kernel_bitcode(
    kernels_dir: &Path,
    target_dir: &Path,
    arch: &str,
    out_dir: &Path,
) -> Result<PathBuf, BuildError> {
    fs::create_dir_all(target_dir)
        .map_err(|e| BuildError::new(format!("could not create {}: {e}", target_dir.display())))?;
    let lock_path = target_dir.join("kernels-build.lock");
    let lock = fs::File::create(&lock_path)
        .map_err(|e| BuildError::new(format!("could not create {}: {e}", lock_path.display())))?;
    lock.lock()
        .map_err(|e| BuildError::new(format!("could not lock {}: {e}", lock_path.display())))?;
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(kernels_dir)
        .args(["rustc", "--release", "--target", TARGET, "-Zbuild-std=core"])
        .args(["--crate-type", "cdylib", "--target-dir"])
        .arg(target_dir)
        .args(["--config", "profile.release.lto=\"fat\""])
        .args(["--config", "profile.release.codegen-units=1"])
        .args(["--config", "profile.release.panic=\"abort\""])
        .args(["--config", "profile.release.opt-level=3"])
        .args(["--", "--emit=llvm-bc", "-C", "linker=true"])
        .arg(format!("-Ctarget-cpu={arch}"));
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
    for (key, _) in env::vars_os() {
        let scrubbed = key
            .to_str()
            .is_some_and(|k| k.starts_with("CARGO_PROFILE_") || k.starts_with("CARGO_CFG_"));
        if scrubbed {
            cmd.env_remove(key);
        }
    }
    run(&mut cmd, "cargo (building the kernel crate for nvptx64)")?;
    let name = crate_name(kernels_dir)?;
    let bitcode = target_dir.join(TARGET).join(format!("release/deps/{name}.bc"));
    if !bitcode.is_file() {
        return Err(BuildError::new(format!(
            "the kernel build wrote no bitcode at {}",
            bitcode.display()
        )));
    }
    let copy = out_dir.join(format!("kernels.{arch}.bc"));
    fs::copy(&bitcode, &copy).map_err(|e| {
        BuildError::new(format!("copying {} to {}: {e}", bitcode.display(), copy.display()))
    })?;
    drop(lock);
    Ok(copy)
}

/// The kernel crate's library name as rustc names its outputs: `[lib] name`, or the package
/// name with `-` turned into `_`.
fn crate_name(kernels_dir: &Path) -> Result<String, BuildError> {
    let manifest = kernels_dir.join("Cargo.toml");
    let text = fs::read_to_string(&manifest)
        .map_err(|e| BuildError::new(format!("reading {}: {e}", manifest.display())))?;
    let name = |section: &str| {
        let mut in_section = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_section = line == section;
            } else if in_section {
                let value = line.strip_prefix("name")?.trim_start().strip_prefix('=');
                if let Some(value) = value {
                    return Some(value.trim().trim_matches('"').to_string());
                }
            }
        }
        None
    };
    name("[lib]")
        .or_else(|| name("[package]"))
        .map(|n| n.replace('-', "_"))
        .ok_or_else(|| BuildError::new(format!("no package name in {}", manifest.display())))
}

/// Every `ptx_kernel` function defined in the bitcode: these stay visible, the rest is internal.
pub(crate) fn kernel_names(tools: &Path, bitcode: &Path) -> Result<Vec<String>, BuildError> {
    let output = Command::new(tools.join("llvm-dis"))
        .arg(bitcode)
        .arg("-o")
        .arg("-")
        .output()
        .map_err(|e| BuildError::new(format!("could not run llvm-dis: {e}")))?;
    let names = kernels_in_ir(&String::from_utf8_lossy(&output.stdout));
    if names.is_empty() {
        return Err(BuildError::new("no kernels found in the kernel crate's bitcode"));
    }
    Ok(names)
}

fn kernels_in_ir(ir: &str) -> Vec<String> {
    ir.lines()
        .filter(|l| l.starts_with("define") && l.contains(" ptx_kernel "))
        .filter_map(|l| {
            let at = l.find('@')? + 1;
            let end = l[at..].find('(')? + at;
            Some(l[at..end].trim_matches('"').to_string())
        })
        .collect()
}

/// `llvm-link` with libdevice, `opt`, `llc`: writes `out_dir/kernels.<arch>.ptx`, checks it,
/// and returns its path.
pub(crate) fn bitcode_to_ptx(
    tools: &Path,
    bitcode: &Path,
    libdevice: &Path,
    kernels: &[String],
    arch: &str,
    out_dir: &Path,
) -> Result<PathBuf, BuildError> {
    let linked = out_dir.join(format!("kernels.{arch}.linked.bc"));
    let optimized = out_dir.join(format!("kernels.{arch}.opt.bc"));
    let ptx = out_dir.join(format!("kernels.{arch}.ptx"));
    let tool = |name: &str| Command::new(tools.join(name));
    run(
        tool("llvm-link").arg(bitcode).arg("--only-needed").arg(libdevice).arg("-o").arg(&linked),
        "llvm-link (kernels + libdevice)",
    )?;
    run(
        tool("opt")
            .arg(format!("-mtriple={TARGET}"))
            .arg(format!("-mcpu={arch}"))
            .arg(format!("--internalize-public-api-list={}", kernels.join(",")))
            .arg("--passes=internalize,default<O3>")
            .arg(&linked)
            .arg("-o")
            .arg(&optimized),
        "opt",
    )?;
    run(
        tool("llc").arg("-O3").arg(format!("-mcpu={arch}")).arg(&optimized).arg("-o").arg(&ptx),
        "llc (bitcode to PTX)",
    )?;
    let text = fs::read_to_string(&ptx)
        .map_err(|e| BuildError::new(format!("reading {}: {e}", ptx.display())))?;
    check_ptx(&text, kernels)?;
    Ok(ptx)
}

/// No unresolved `.extern` functions, and an `.entry` for every kernel.
fn check_ptx(text: &str, kernels: &[String]) -> Result<(), BuildError> {
    if text.contains(".extern") {
        return Err(BuildError::new("the PTX still has unresolved `.extern` functions: a libdevice function is missing from the link"));
    }
    for kernel in kernels {
        if !text.contains(&format!(".entry {kernel}(")) {
            return Err(BuildError::new(format!("kernel `{kernel}` is missing from the PTX")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_dir_is_shared_from_out_dir() {
        let out = Path::new("/w/target/debug/build/streamlab-123/out");
        assert_eq!(default_target_dir(out), Path::new("/w/target/nvptx-kernels"));
        let loose = Path::new("/tmp/somewhere");
        assert_eq!(default_target_dir(loose), Path::new("/tmp/somewhere/nvptx-kernels"));
    }

    #[test]
    fn kernel_names_from_ir() {
        let ir = "define ptx_kernel void @compute_kernel(ptr %a) #0 {\n\
                  define internal void @helper() {\n\
                  define ptx_kernel void @\"odd name\"(i32 %n) {\n\
                  declare float @__nv_sinf(float)\n";
        assert_eq!(kernels_in_ir(ir), ["compute_kernel", "odd name"]);
    }

    #[test]
    fn ptx_checks() {
        let names = ["k".to_string()];
        assert!(check_ptx(".visible .entry k(\n", &names).is_ok());
        assert!(check_ptx(".visible .entry other(\n", &names).is_err());
        assert!(check_ptx(".extern .func f;\n.entry k(", &names).is_err());
    }
}
