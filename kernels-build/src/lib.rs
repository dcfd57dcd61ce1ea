//! Builds a Rust kernel crate to one PTX module from a build script: the role Rust-CUDA's
//! `cuda_builder` plays, done with rustc's own NVPTX backend and the LLVM tools of the pinned
//! toolchain instead of Rust-CUDA's `rustc_codegen_nvvm` (which needs libNVVM and an old
//! LLVM). Made for build scripts: no dependencies beyond std.
//!
//! ```no_run
//! // build.rs of the host crate
//! let built = kernels_build::PtxBuilder::new("../kernels-gpu") // relative to the manifest dir
//!     .arch_from_env("STREAMLAB_GPU_ARCH", "sm_75")
//!     .build_or_exit(); // or `.build()?` for a `Result<Built, BuildError>`
//! assert!(built.ptx_path().ends_with("kernels.ptx"));
//! ```
//!
//! The pipeline (every tool checked first, with a one-line fix when something is missing):
//! 1. `cargo rustc --target nvptx64-nvidia-cuda -Zbuild-std=core --crate-type cdylib` with fat
//!    LTO and `--emit=llvm-bc`: one bitcode module holding every kernel. The link step that
//!    follows would need `llvm-bitcode-linker`, which nightly does not ship, so it is
//!    neutralised (`-C linker=true`): the bitcode is all we want.
//! 2. `llvm-link --only-needed` with NVIDIA's `libdevice.10.bc`: `__nv_sinf`/`__nv_cosf` are
//!    the functions nvcc's `sinf`/`cosf` compile to, so results match CUDA C++ bit for bit.
//!    Where libdevice is looked for, and how it is fetched when it is nowhere, is described
//!    on [`PtxBuilder::build`].
//! 3. `opt` (internalize all but the kernels, then `default<O3>`) and `llc -O3 -mcpu=<arch>`,
//!    then checks: no `.extern` left in the PTX, and an `.entry` for every kernel.
//!
//! For the host crate, [`PtxBuilder::build`] writes `$OUT_DIR/kernels.ptx` (to embed with
//! `include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"))`) and sets the compile-time
//! variables `STREAMLAB_PTX_ARCH` and `STREAMLAB_KERNEL_NAMES` (comma-separated).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod embed;
mod libdevice;
mod pipeline;

pub use embed::embed_files;

use std::env;
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming `libdevice.10.bc` explicitly; it wins over every search.
pub const LIBDEVICE_ENV: &str = "STREAMLAB_LIBDEVICE";

/// The environment variables whose change makes cargo rerun the build script (besides the
/// architecture variable given to [`PtxBuilder::arch_from_env`]).
const WATCHED_ENV: [&str; 4] = [LIBDEVICE_ENV, "CUDA_HOME", "CUDA_PATH", "CUDA_LIBRARY_PATH"];

/// Where the target architecture comes from.
#[derive(Debug, Clone)]
enum ArchSource {
    Fixed(String),
    Env { var: String, default: String },
}

/// Builds a kernel crate to PTX: configure, then [`build`](Self::build). Made for build
/// scripts (it reads `CARGO_MANIFEST_DIR`, `OUT_DIR`, `CARGO`, `RUSTC` and `HOST` when they
/// are set), usable elsewhere with [`out_dir`](Self::out_dir) and an absolute crate path.
#[derive(Debug, Clone)]
pub struct PtxBuilder {
    kernels: PathBuf,
    arch: ArchSource,
    out_dir: Option<PathBuf>,
    kernels_target_dir: Option<PathBuf>,
    cargo_instructions: bool,
}

impl PtxBuilder {
    /// A builder for the kernel crate at `kernels_crate`: a path relative to the calling
    /// crate's manifest directory (`CARGO_MANIFEST_DIR`), or an absolute path. The default
    /// architecture is `sm_75`.
    pub fn new(kernels_crate: impl AsRef<Path>) -> Self {
        PtxBuilder {
            kernels: kernels_crate.as_ref().to_path_buf(),
            arch: ArchSource::Fixed("sm_75".to_string()),
            out_dir: None,
            kernels_target_dir: None,
            cargo_instructions: true,
        }
    }

    /// Targets `arch` (`sm_75`, `sm_80`, `sm_90`, …: CUDA 13 supports `sm_75` and up).
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = ArchSource::Fixed(arch.into());
        self
    }

    /// Targets the architecture named by the environment variable `var`, or `default` when
    /// it is unset; cargo reruns the build script when `var` changes.
    pub fn arch_from_env(mut self, var: impl Into<String>, default: impl Into<String>) -> Self {
        self.arch = ArchSource::Env { var: var.into(), default: default.into() };
        self
    }

    /// Writes `kernels.ptx` and the intermediate bitcode to `dir` instead of `$OUT_DIR`.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The cargo target directory of the nested nvptx64 build. By default it is
    /// `<target>/nvptx-kernels`, found from `OUT_DIR` (`<target>/<profile>/build/<pkg>/out`),
    /// so debug, release and test builds share one build of `core`; when `OUT_DIR` is not
    /// under a `build` directory, `<out dir>/nvptx-kernels`. It must not be the outer
    /// build's own target directory: the nested cargo would wait forever on its lock.
    pub fn kernels_target_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.kernels_target_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to print `cargo:` instructions (rerun triggers, `rustc-env`, warnings) on
    /// stdout; on by default, as a build script wants. Off, warnings go to stderr.
    pub fn cargo_instructions(mut self, on: bool) -> Self {
        self.cargo_instructions = on;
        self
    }

    /// Runs the pipeline and returns what it built.
    ///
    /// `libdevice.10.bc` is the first of: the file named by `STREAMLAB_LIBDEVICE` (an error
    /// if it is not a file); `nvvm/libdevice/libdevice.10.bc` under the roots in `CUDA_HOME`,
    /// `CUDA_PATH`, `CUDA_LIBRARY_PATH`, then `/usr/local/cuda`, `/opt/cuda`, then the
    /// repository's `.deps/cuda` (the repository being the kernel crate's parent directory);
    /// then Python packages that ship it (`triton`, `nvidia-cuda-nvcc-cu12`) in `python3`'s
    /// site directories and in `/opt/torch/.venv`. Where it is in none of them, it is fetched
    /// from PyPI (`nvidia-cuda-nvcc-cu12`, with `pip download`, no install) into
    /// `.deps/cuda/nvvm/libdevice/`, `ptxas` beside it in `.deps/cuda/bin/`, and a cargo
    /// warning says so.
    pub fn build(&self) -> Result<Built, BuildError> {
        let kernels_dir = self.kernels_dir()?;
        if self.cargo_instructions {
            for watched in ["src", "Cargo.toml"] {
                println!("cargo:rerun-if-changed={}", kernels_dir.join(watched).display());
            }
            if let ArchSource::Env { var, .. } = &self.arch {
                println!("cargo:rerun-if-env-changed={var}");
            }
            for var in WATCHED_ENV {
                println!("cargo:rerun-if-env-changed={var}");
            }
        }
        let arch = self.resolve_arch()?;
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => PathBuf::from(required_env(
                "OUT_DIR",
                "call from a build script, or set `.out_dir()`",
            )?),
        };
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| BuildError::new(format!("could not create {}: {e}", out_dir.display())))?;
        let target_dir = self
            .kernels_target_dir
            .clone()
            .unwrap_or_else(|| pipeline::default_target_dir(&out_dir));

        let tools = pipeline::llvm_tools(&kernels_dir)?;
        let workspace = kernels_dir.parent().unwrap_or(&kernels_dir);
        let libdevice = libdevice::locate(workspace, &|msg: &str| self.warn(msg))?;
        let bitcode = pipeline::kernel_bitcode(&kernels_dir, &target_dir)?;
        let kernels = pipeline::kernel_names(&tools, &bitcode)?;
        let ptx =
            pipeline::bitcode_to_ptx(&tools, &bitcode, &libdevice, &kernels, &arch, &out_dir)?;

        if self.cargo_instructions {
            println!("cargo:rustc-env=STREAMLAB_PTX_ARCH={arch}");
            println!("cargo:rustc-env=STREAMLAB_KERNEL_NAMES={}", kernels.join(","));
        }
        Ok(Built { ptx, arch, kernels, libdevice })
    }

    /// [`build`](Self::build) for build scripts: on failure prints one line,
    /// `error: streamlab kernel build: <cause and fix>`, and exits with status 1 (no panic,
    /// no backtrace).
    pub fn build_or_exit(&self) -> Built {
        self.build().unwrap_or_else(|e| e.exit())
    }

    fn kernels_dir(&self) -> Result<PathBuf, BuildError> {
        let dir = if self.kernels.is_absolute() {
            self.kernels.clone()
        } else {
            let manifest = required_env(
                "CARGO_MANIFEST_DIR",
                "call from a build script, or give the kernel crate as an absolute path",
            )?;
            Path::new(&manifest).join(&self.kernels)
        };
        if !dir.join("Cargo.toml").is_file() {
            return Err(BuildError::new(format!(
                "no kernel crate at {} (no Cargo.toml there): fix the path given to PtxBuilder::new",
                dir.display()
            )));
        }
        dir.canonicalize().map_err(|e| BuildError::new(format!("{}: {e}", dir.display())))
    }

    fn resolve_arch(&self) -> Result<String, BuildError> {
        let (arch, named) = match &self.arch {
            ArchSource::Fixed(arch) => (arch.clone(), format!("architecture {arch:?}")),
            ArchSource::Env { var, default } => match env::var(var) {
                Ok(value) => (value.clone(), format!("{var}={value:?}")),
                Err(_) => (default.clone(), format!("default architecture {default:?}")),
            },
        };
        if arch_supported(&arch) {
            Ok(arch)
        } else {
            Err(BuildError::new(format!(
                "{named} is not a GPU architecture CUDA 13 supports: use sm_75, sm_80, sm_86, sm_89, sm_90, ..."
            )))
        }
    }

    fn warn(&self, message: &str) {
        if self.cargo_instructions {
            println!("cargo:warning={message}");
        } else {
            eprintln!("warning: {message}");
        }
    }
}

/// `sm_NN` (or `sm_NNa`) with NN at least 75: what CUDA 13 can compile for.
fn arch_supported(arch: &str) -> bool {
    arch.strip_prefix("sm_")
        .and_then(|n| n.trim_end_matches('a').parse::<u32>().ok())
        .is_some_and(|n| n >= 75)
}

fn required_env(var: &str, fix: &str) -> Result<String, BuildError> {
    env::var(var).map_err(|_| BuildError::new(format!("{var} is not set: {fix}")))
}

/// What [`PtxBuilder::build`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    ptx: PathBuf,
    arch: String,
    kernels: Vec<String>,
    libdevice: PathBuf,
}

impl Built {
    /// The PTX module: `kernels.ptx` in the output directory (`$OUT_DIR` in a build script).
    pub fn ptx_path(&self) -> &Path {
        &self.ptx
    }

    /// The architecture the PTX targets (`sm_75`, `sm_90`, …).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The kernels (`.entry` functions) in the PTX, in the order the crate defines them.
    pub fn kernel_names(&self) -> &[String] {
        &self.kernels
    }

    /// The `libdevice.10.bc` that was linked in.
    pub fn libdevice_path(&self) -> &Path {
        &self.libdevice
    }
}

/// Why a build failed: one line, the cause and how to fix it. Build tool output, when a tool
/// failed, follows on the next lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    message: String,
}

impl BuildError {
    fn new(message: impl Into<String>) -> Self {
        BuildError { message: message.into() }
    }

    /// The cause and its fix, without the `error: streamlab kernel build:` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prints `error: streamlab kernel build: <message>` on stderr and exits with status 1:
    /// how a build script should stop, without a panic's backtrace.
    pub fn exit(&self) -> ! {
        eprintln!("error: streamlab kernel build: {}", self.message);
        std::process::exit(1)
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_architectures() {
        for ok in ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120"] {
            assert!(arch_supported(ok), "{ok}");
        }
        for bad in ["sm_70", "sm_52", "compute_90", "90", "sm_", "sm_9x", ""] {
            assert!(!arch_supported(bad), "{bad}");
        }
    }

    #[test]
    fn arch_errors_name_their_origin() {
        let err = PtxBuilder::new("/k").arch("sm_70").resolve_arch().unwrap_err();
        assert!(err.message().starts_with("architecture \"sm_70\" is not"), "{err}");
        let var = "KERNELS_BUILD_TEST_ARCH_UNSET_9d1c";
        let built = PtxBuilder::new("/k").arch_from_env(var, "sm_90");
        assert_eq!(built.resolve_arch().unwrap(), "sm_90");
        // An unset variable's bad default names the default, a set one names the variable.
        let err = PtxBuilder::new("/k").arch_from_env(var, "sm_61").resolve_arch().unwrap_err();
        assert!(err.message().starts_with("default architecture \"sm_61\" is not"), "{err}");
        let set = "KERNELS_BUILD_TEST_ARCH_SET_4f2a";
        env::set_var(set, "sm_52");
        let err = PtxBuilder::new("/k").arch_from_env(set, "sm_90").resolve_arch().unwrap_err();
        assert!(err.message().starts_with(&format!("{set}=\"sm_52\" is not")), "{err}");
        env::set_var(set, "sm_80");
        let built = PtxBuilder::new("/k").arch_from_env(set, "sm_90");
        assert_eq!(built.resolve_arch().unwrap(), "sm_80", "the variable wins over the default");
        env::remove_var(set);
    }

    #[test]
    fn missing_kernel_crate_is_one_line() {
        let err = PtxBuilder::new("/nonexistent/kernels-gpu")
            .cargo_instructions(false)
            .build()
            .unwrap_err();
        assert!(err.message().contains("no kernel crate at /nonexistent/kernels-gpu"));
        assert!(!err.message().contains('\n'));
    }
}
