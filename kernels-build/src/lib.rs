//! Builds a Rust kernel crate to PTX, one module per GPU architecture, from a build script:
//! the role Rust-CUDA's `cuda_builder` plays, done with rustc's own NVPTX backend and the LLVM
//! tools of the pinned toolchain instead of Rust-CUDA's `rustc_codegen_nvvm` (which needs
//! libNVVM and an old LLVM). Made for build scripts: no dependencies beyond std.
//!
//! ```no_run
//! // build.rs of the host crate
//! let built = kernels_build::PtxBuilder::new("../kernels-gpu") // relative to the manifest dir
//!     .archs_from_env("STREAMLAB_PTX_ARCHS", &kernels_build::DEFAULT_ARCHS)
//!     .build_or_exit(); // or `.build()?` for a `Result<Built, BuildError>`
//! assert!(built.ptx()[0].path().ends_with("kernels.sm_75.ptx"));
//! ```
//!
//! The pipeline (every tool checked first, with a one-line fix when something is missing),
//! for each architecture, oldest first:
//! 1. `cargo rustc --target nvptx64-nvidia-cuda -Zbuild-std=core --crate-type cdylib` with fat
//!    LTO, `--emit=llvm-bc` and `-C target-cpu=<arch>`: one bitcode module holding every
//!    kernel, compiled with `cfg(target_feature = "sm_80")` and the like true up to `<arch>`,
//!    so a kernel can use an instruction where the architecture has it. `core` is built once
//!    for all of them (only the kernel crate's own flags differ). The link step that follows
//!    would need `llvm-bitcode-linker`, which nightly does not ship, so it is neutralised
//!    (`-C linker=true`): the bitcode is all we want.
//! 2. `llvm-link --only-needed` with NVIDIA's `libdevice.10.bc`: `__nv_sinf`/`__nv_cosf` are
//!    the functions nvcc's `sinf`/`cosf` compile to, so results match CUDA C++ bit for bit.
//!    Where libdevice is looked for, and how it is fetched when it is nowhere, is described
//!    on [`PtxBuilder::build`].
//! 3. `opt` (internalize all but the kernels, then `default<O3>`) and `llc -O3 -mcpu=<arch>`,
//!    then checks: no `.extern` left in the PTX, and an `.entry` for every kernel.
//!
//! For the host crate, [`PtxBuilder::build`] writes `$OUT_DIR/kernels.<arch>.ptx` for each
//! architecture and `$OUT_DIR/kernels_ptx.rs`, which declares `PTX_BY_ARCH`, every
//! `(architecture, PTX text)` oldest first (to embed with
//! `include!(concat!(env!("OUT_DIR"), "/kernels_ptx.rs"))`), and sets the compile-time
//! variables `STREAMLAB_PTX_ARCHS` and `STREAMLAB_KERNEL_NAMES` (both comma-separated).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod arch;
mod embed;
mod libdevice;
mod pipeline;

pub use arch::DEFAULT_ARCHS;
pub use embed::embed_files;

use std::env;
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming `libdevice.10.bc` explicitly; it wins over every search.
pub const LIBDEVICE_ENV: &str = "STREAMLAB_LIBDEVICE";

/// The environment variables whose change makes cargo rerun the build script (besides the
/// architecture variable given to [`PtxBuilder::archs_from_env`]).
const WATCHED_ENV: [&str; 4] = [LIBDEVICE_ENV, "CUDA_HOME", "CUDA_PATH", "CUDA_LIBRARY_PATH"];

/// The file, in the output directory, that lists the PTX of every architecture.
const INDEX_FILE: &str = "kernels_ptx.rs";

/// Where the target architectures come from.
#[derive(Debug, Clone)]
enum ArchSource {
    Fixed(Vec<String>),
    Env { var: String, default: Vec<String> },
}

/// Builds a kernel crate to PTX: configure, then [`build`](Self::build). Made for build
/// scripts (it reads `CARGO_MANIFEST_DIR`, `OUT_DIR`, `CARGO`, `RUSTC` and `HOST` when they
/// are set), usable elsewhere with [`out_dir`](Self::out_dir) and an absolute crate path.
#[derive(Debug, Clone)]
pub struct PtxBuilder {
    kernels: PathBuf,
    archs: ArchSource,
    out_dir: Option<PathBuf>,
    kernels_target_dir: Option<PathBuf>,
    cargo_instructions: bool,
}

fn owned(archs: &[&str]) -> Vec<String> {
    archs.iter().map(|a| a.to_string()).collect()
}

impl PtxBuilder {
    /// A builder for the kernel crate at `kernels_crate`: a path relative to the calling
    /// crate's manifest directory (`CARGO_MANIFEST_DIR`), or an absolute path. The default
    /// architectures are [`DEFAULT_ARCHS`].
    pub fn new(kernels_crate: impl AsRef<Path>) -> Self {
        PtxBuilder {
            kernels: kernels_crate.as_ref().to_path_buf(),
            archs: ArchSource::Fixed(owned(&DEFAULT_ARCHS)),
            out_dir: None,
            kernels_target_dir: None,
            cargo_instructions: true,
        }
    }

    /// Targets `arch` alone (`sm_75`, `sm_80`, `sm_90`, …: CUDA 13 supports `sm_75` and up).
    pub fn arch(self, arch: &str) -> Self {
        self.archs(&[arch])
    }

    /// Targets each of `archs` (in any order: they are built oldest first).
    pub fn archs(mut self, archs: &[&str]) -> Self {
        self.archs = ArchSource::Fixed(owned(archs));
        self
    }

    /// Targets the architectures listed in the environment variable `var` (separated by
    /// commas or spaces), or `default` when it is unset; cargo reruns the build script when
    /// `var` changes.
    pub fn archs_from_env(mut self, var: impl Into<String>, default: &[&str]) -> Self {
        self.archs = ArchSource::Env { var: var.into(), default: owned(default) };
        self
    }

    /// Writes the PTX files, their index and the intermediate bitcode to `dir` instead of
    /// `$OUT_DIR`.
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

    /// Whether to print `cargo:` instructions (rerun triggers, `rustc-env`) on stdout; on by
    /// default, as a build script wants. The fetch's notice goes to stderr either way.
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
    /// `.deps/cuda/nvvm/libdevice/`, `ptxas` beside it in `.deps/cuda/bin/`, and a line on
    /// the build script's stderr says so (`cargo build -vv` shows it). Nothing the fetch
    /// writes is watched: the next build finds the file and runs nothing again.
    pub fn build(&self) -> Result<Built, BuildError> {
        let kernels_dir = self.kernels_dir()?;
        if self.cargo_instructions {
            for watched in ["src", "Cargo.toml"] {
                println!("cargo:rerun-if-changed={}", kernels_dir.join(watched).display());
            }
            if let ArchSource::Env { var, .. } = &self.archs {
                println!("cargo:rerun-if-env-changed={var}");
            }
            for var in WATCHED_ENV {
                println!("cargo:rerun-if-env-changed={var}");
            }
        }
        let archs = self.resolve_archs()?;
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
        let libdevice = libdevice::locate(workspace)?;
        if libdevice.fetched {
            announce_fetch(&libdevice);
        }
        let mut kernels: Vec<String> = Vec::new();
        let mut ptx = Vec::new();
        for arch in &archs {
            let bitcode = pipeline::kernel_bitcode(&kernels_dir, &target_dir, arch, &out_dir)?;
            let names = pipeline::kernel_names(&tools, &bitcode)?;
            if kernels.is_empty() {
                kernels = names;
            } else if names != kernels {
                return Err(BuildError::new(format!(
                    "the kernels built for {arch} ({}) are not those built for {} ({}): a kernel must not depend on the architecture",
                    names.join(", "),
                    archs[0],
                    kernels.join(", ")
                )));
            }
            let path = pipeline::bitcode_to_ptx(
                &tools,
                &bitcode,
                &libdevice.path,
                &kernels,
                arch,
                &out_dir,
            )?;
            ptx.push(BuiltPtx { arch: arch.clone(), path });
        }
        let index = out_dir.join(INDEX_FILE);
        let listed: Vec<(String, &Path)> =
            ptx.iter().map(|p| (p.arch.clone(), p.path.as_path())).collect();
        std::fs::write(&index, arch::index_source(&listed))
            .map_err(|e| BuildError::new(format!("writing {}: {e}", index.display())))?;

        if self.cargo_instructions {
            println!("cargo:rustc-env=STREAMLAB_PTX_ARCHS={}", archs.join(","));
            println!("cargo:rustc-env=STREAMLAB_KERNEL_NAMES={}", kernels.join(","));
        }
        Ok(Built { ptx, index, kernels, libdevice: libdevice.path })
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

    fn resolve_archs(&self) -> Result<Vec<String>, BuildError> {
        match &self.archs {
            ArchSource::Fixed(archs) => arch::parse_list(archs, ""),
            ArchSource::Env { var, default } => match env::var(var) {
                Ok(value) => {
                    arch::parse_list(std::slice::from_ref(&value), &format!("{var}={value:?}: "))
                }
                Err(_) => arch::parse_list(default, "default "),
            },
        }
    }
}

/// Says that libdevice was fetched, on the build script's stderr: cargo shows it with
/// `-vv` and keeps it in the script's `stderr` file, and `.deps/cuda` stays as the
/// evidence. Not a `cargo:warning`: cargo replays a build script's warnings on every
/// build until the script runs again, and the only way to say one once, asking the
/// script to run again on the next build, made that build recompile the host crate
/// (about 27 s): a second build from a fresh clone must compile nothing.
fn announce_fetch(libdevice: &libdevice::Located) {
    let message = libdevice::fetched_message(&libdevice.path);
    eprintln!("warning: {message}");
}

fn required_env(var: &str, fix: &str) -> Result<String, BuildError> {
    env::var(var).map_err(|_| BuildError::new(format!("{var} is not set: {fix}")))
}

/// What [`PtxBuilder::build`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    ptx: Vec<BuiltPtx>,
    index: PathBuf,
    kernels: Vec<String>,
    libdevice: PathBuf,
}

/// One architecture's PTX module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltPtx {
    arch: String,
    path: PathBuf,
}

impl BuiltPtx {
    /// The architecture it targets (`sm_75`, `sm_90`, …).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The file: `kernels.<arch>.ptx` in the output directory (`$OUT_DIR` in a build script).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Built {
    /// Every architecture's PTX, oldest first.
    pub fn ptx(&self) -> &[BuiltPtx] {
        &self.ptx
    }

    /// `kernels_ptx.rs` in the output directory: Rust source declaring `PTX_BY_ARCH`, every
    /// `(architecture, PTX text)` oldest first, the texts by `include_str!`.
    pub fn index_path(&self) -> &Path {
        &self.index
    }

    /// The kernels (`.entry` functions) in the PTX, in the order the crate defines them: the
    /// same for every architecture.
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
    fn arch_errors_name_their_origin() {
        let err = PtxBuilder::new("/k").arch("sm_70").resolve_archs().unwrap_err();
        assert!(err.message().starts_with("architecture \"sm_70\" is not"), "{err}");
        let built = PtxBuilder::new("/k").archs(&["sm_90", "sm_75"]);
        assert_eq!(built.resolve_archs().unwrap(), ["sm_75", "sm_90"]);
        assert_eq!(PtxBuilder::new("/k").resolve_archs().unwrap(), DEFAULT_ARCHS);
        let var = "KERNELS_BUILD_TEST_ARCH_UNSET_9d1c";
        let built = PtxBuilder::new("/k").archs_from_env(var, &["sm_90"]);
        assert_eq!(built.resolve_archs().unwrap(), ["sm_90"]);
        // An unset variable's bad default names the default, a set one names the variable.
        let err = PtxBuilder::new("/k").archs_from_env(var, &["sm_61"]).resolve_archs();
        let err = err.unwrap_err();
        assert!(err.message().starts_with("default architecture \"sm_61\" is not"), "{err}");
        let set = "KERNELS_BUILD_TEST_ARCH_SET_4f2a";
        env::set_var(set, "sm_75,sm_52");
        let err = PtxBuilder::new("/k").archs_from_env(set, &["sm_90"]).resolve_archs();
        let err = err.unwrap_err();
        let start = format!("{set}=\"sm_75,sm_52\": architecture \"sm_52\" is not");
        assert!(err.message().starts_with(&start), "{err}");
        env::set_var(set, "sm_90 sm_80");
        let built = PtxBuilder::new("/k").archs_from_env(set, &["sm_75"]);
        let archs = built.resolve_archs().unwrap();
        assert_eq!(archs, ["sm_80", "sm_90"], "the variable wins over the default");
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
