//! Builds `kernels-gpu` to PTX, one module per GPU architecture (`$OUT_DIR/kernels.<arch>.ptx`,
//! listed in `$OUT_DIR/kernels_ptx.rs`), which the host embeds, with the `kernels-build`
//! pipeline (rustc's NVPTX backend + libdevice + LLVM's tools); lists the recorded runs in
//! `docs/recorded/*.json` for `--recorded` (`$OUT_DIR/recorded.rs`); and builds the recorder
//! `streamlab trace` injects (`inject/`, release) into `$OUT_DIR/libstreamlab_inject.so`, which
//! `trace::capture::injection` embeds. `STREAMLAB_PTX_ARCHS` (comma-separated) replaces the
//! default set, sm_75, sm_80 and sm_90; `STREAMLAB_LIBDEVICE` names libdevice. Which PTX a GPU
//! loads is decided at run time (`runtime::ptx`).
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    kernels_build::PtxBuilder::new("../kernels-gpu")
        .archs_from_env("STREAMLAB_PTX_ARCHS", &kernels_build::DEFAULT_ARCHS)
        .build_or_exit();
    if let Err(e) =
        kernels_build::embed_files("../docs/recorded", "json", "recorded.rs", "RECORDED")
    {
        eprintln!("error: streamlab build: recorded runs: {e}");
        std::process::exit(1);
    }
    if let Err(e) = build_injected_recorder() {
        eprintln!("error: streamlab build: the injected recorder (inject/): {e}");
        std::process::exit(1);
    }
}

fn env_path(key: &str) -> Result<PathBuf, String> {
    std::env::var_os(key).map(PathBuf::from).ok_or_else(|| format!("{key} is not set"))
}

/// The nested build's target folder: `<target>/streamlab-inject-<key>` for an `OUT_DIR` of
/// `<target>/<profile>/build/<pkg>/out`, shared by debug, release and test builds (the
/// recorder is always built in release, once). It must not be the outer build's own target
/// folder, whose lock the outer cargo holds while this script runs. The key is a hash of the
/// workspace's path: two checkouts sharing one `CARGO_TARGET_DIR` would otherwise overwrite
/// each other's library between a build and its copy.
fn nested_target_dir(out_dir: &Path, workspace: &Path) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    workspace.hash(&mut hasher);
    let name = format!("streamlab-inject-{:016x}", hasher.finish());
    out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
        .map(|target| target.join(&name))
        .unwrap_or_else(|| out_dir.join(name))
}

/// `cargo build -p streamlab-inject --release --locked` in its own target folder, then the
/// library copied into `$OUT_DIR`. From clean, 17 crates: 11 to 17 s on a busy 2-core machine
/// (13 s of CPU); 0.1 s when nothing changed.
fn build_injected_recorder() -> Result<(), String> {
    let manifest_dir = env_path("CARGO_MANIFEST_DIR")?;
    let workspace = manifest_dir.parent().ok_or("the host crate has no parent folder")?;
    let out_dir = env_path("OUT_DIR")?;
    for watched in ["inject/src", "inject/Cargo.toml", "cupti/src", "cupti/Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    // The lock pins the recorder's dependencies; the root manifest holds the release profile.
    for watched in ["Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    let target_dir = nested_target_dir(&out_dir, workspace);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "-p", "streamlab-inject", "--lib", "--release", "--locked"])
        .arg("--target-dir")
        .arg(&target_dir);
    // What cargo sets for this build script must not steer the nested build: clippy's
    // wrapper (the library must really be built), the outer flags and target, the outer
    // target folder, the jobserver of the outer build, its profile and cfg values. `RUSTC`
    // stays: it names the toolchain's compiler, the same one.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in std::env::vars_os() {
        let outer = key
            .to_str()
            .is_some_and(|k| k.starts_with("CARGO_PROFILE_") || k.starts_with("CARGO_CFG_"));
        if outer {
            cmd.env_remove(key);
        }
    }
    let output = cmd.output().map_err(|e| format!("could not start cargo: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let errors: Vec<&str> =
            stderr.lines().filter(|l| !l.trim().is_empty()).rev().take(12).collect();
        let errors: Vec<&str> = errors.into_iter().rev().collect();
        return Err(format!(
            "cargo build -p streamlab-inject failed ({}):\n{}",
            output.status,
            errors.join("\n")
        ));
    }
    let built = target_dir.join("release/libstreamlab_inject.so");
    let embedded = out_dir.join("libstreamlab_inject.so");
    std::fs::copy(&built, &embedded)
        .map_err(|e| format!("copying {} to {}: {e}", built.display(), embedded.display()))?;
    Ok(())
}
