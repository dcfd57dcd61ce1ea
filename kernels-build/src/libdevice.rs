//! Finding NVIDIA's `libdevice.10.bc`, or fetching it from PyPI when it is nowhere on the
//! machine, so that `cargo build` needs no manual step. The search is a pure function of a
//! [`Search`] (what the environment says), tested over fake directory trees.
use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{BuildError, LIBDEVICE_ENV};

/// Where libdevice sits in a CUDA root (the toolkit, or `.deps/cuda`).
const IN_CUDA_ROOT: &str = "nvvm/libdevice/libdevice.10.bc";
/// Where Python packages that ship libdevice keep it, under a site-packages directory:
/// triton (every PyTorch install has it), then NVIDIA's nvcc wheel.
const IN_SITE_PACKAGES: [&str; 2] = [
    "triton/backends/nvidia/lib/libdevice.10.bc",
    "nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
];
/// The environment variables naming CUDA roots, in the order they are tried.
const CUDA_ROOT_VARS: [&str; 3] = ["CUDA_HOME", "CUDA_PATH", "CUDA_LIBRARY_PATH"];
/// Where the CUDA toolkit installs itself.
const SYSTEM_ROOTS: [&str; 2] = ["/usr/local/cuda", "/opt/cuda"];
/// The `lib` directory of the PyTorch virtual environment on the GPU machines.
const TORCH_VENV_LIB: &str = "/opt/torch/.venv/lib";
/// The wheel fetched when libdevice is nowhere: it holds `nvvm/libdevice/libdevice.10.bc`
/// and `bin/ptxas` (what `scripts/fetch-cuda-deps.sh` takes from it too).
const PYPI_PACKAGE: &str = "nvidia-cuda-nvcc-cu12";
const PYPI_VERSION: &str = "12.9.86";

/// What the search looks at, in order.
#[derive(Debug, Default, Clone)]
struct Search {
    /// `STREAMLAB_LIBDEVICE`: the file itself; an error if it is not one.
    explicit: Option<PathBuf>,
    /// CUDA roots from `CUDA_HOME`, `CUDA_PATH`, `CUDA_LIBRARY_PATH`, in that order.
    env_roots: Vec<PathBuf>,
    /// `/usr/local/cuda`, `/opt/cuda`.
    system_roots: Vec<PathBuf>,
    /// The repository root: its `.deps/cuda` is a CUDA root.
    workspace: PathBuf,
    /// Python site-packages directories.
    site_dirs: Vec<PathBuf>,
}

impl Search {
    /// The search as the environment describes it, without the Python site directories
    /// (asking `python3` costs a process: done only when everything else came up empty).
    fn from_env(workspace: &Path) -> Self {
        Search {
            explicit: env::var_os(LIBDEVICE_ENV).map(PathBuf::from),
            env_roots: roots_from_vars(|var| env::var_os(var)),
            system_roots: SYSTEM_ROOTS.iter().map(PathBuf::from).collect(),
            workspace: workspace.to_path_buf(),
            site_dirs: Vec::new(),
        }
    }

    /// Every place libdevice may be, in the order they are tried (the explicit file aside).
    fn candidates(&self) -> Vec<PathBuf> {
        let roots = self
            .env_roots
            .iter()
            .chain(&self.system_roots)
            .cloned()
            .chain([deps_root(&self.workspace)]);
        let in_roots = roots.map(|root| root.join(IN_CUDA_ROOT));
        let in_sites = self
            .site_dirs
            .iter()
            .flat_map(|dir| IN_SITE_PACKAGES.iter().map(move |rel| dir.join(rel)));
        in_roots.chain(in_sites).collect()
    }

    /// The first candidate that is a file; the explicit one if it is given.
    fn find(&self) -> Result<Option<PathBuf>, BuildError> {
        if let Some(path) = &self.explicit {
            return if path.is_file() {
                Ok(Some(path.clone()))
            } else {
                Err(BuildError::new(format!(
                    "{LIBDEVICE_ENV}={} is not a file: point it at libdevice.10.bc, or unset it to search",
                    path.display()
                )))
            };
        }
        Ok(self.candidates().into_iter().find(|p| p.is_file()))
    }
}

/// The repository's own CUDA root, filled by `scripts/fetch-cuda-deps.sh` or by [`fetch`].
fn deps_root(workspace: &Path) -> PathBuf {
    workspace.join(".deps/cuda")
}

/// The CUDA roots named by [`CUDA_ROOT_VARS`] (each may hold a path list), in order.
fn roots_from_vars(get: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    CUDA_ROOT_VARS
        .iter()
        .filter_map(|var| get(var))
        .flat_map(|value| env::split_paths(&value).collect::<Vec<_>>())
        .filter(|p| !p.as_os_str().is_empty())
        .collect()
}

/// One directory per non-empty line of `python3 -c 'import site; print(...)'`.
fn parse_site_output(output: &str) -> Vec<PathBuf> {
    output.lines().map(str::trim).filter(|l| !l.is_empty()).map(PathBuf::from).collect()
}

/// `<lib>/python3*/site-packages` of a virtual environment, sorted.
fn venv_site_packages(lib: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(lib) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// `python3`'s site directories (nothing if there is no python3), then PyTorch's venv.
fn python_site_dirs() -> Vec<PathBuf> {
    let script =
        "import site,sys; print(\"\\n\".join(site.getsitepackages()+[site.getusersitepackages()]))";
    let mut dirs = Command::new("python3")
        .args(["-c", script])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| parse_site_output(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default();
    dirs.extend(venv_site_packages(Path::new(TORCH_VENV_LIB)));
    dirs
}

/// Where libdevice was found, and whether this build fetched it.
pub(crate) struct Located {
    pub(crate) path: PathBuf,
    pub(crate) fetched: bool,
}

/// What the build says after it fetched libdevice to `path` (in `<deps>/nvvm/libdevice/`).
pub(crate) fn fetched_message(path: &Path) -> String {
    let deps = path.ancestors().nth(3).unwrap_or(path);
    format!(
        "libdevice.10.bc was not on this machine: fetched it from PyPI ({PYPI_PACKAGE} {PYPI_VERSION}) into {} (and ptxas into {})",
        path.display(),
        deps.join("bin").display()
    )
}

/// Finds libdevice for a kernel crate in `workspace`, or fetches it into
/// `workspace/.deps/cuda`.
pub(crate) fn locate(workspace: &Path) -> Result<Located, BuildError> {
    let mut search = Search::from_env(workspace);
    let found = |path| Ok(Located { path, fetched: false });
    if let Some(path) = search.find()? {
        return found(path);
    }
    search.site_dirs = python_site_dirs();
    if let Some(path) = search.find()? {
        return found(path);
    }
    let deps = deps_root(workspace);
    match fetch(&deps) {
        Ok(path) => Ok(Located { path, fetched: true }),
        Err(cause) => Err(BuildError::new(format!(
            "NVIDIA's libdevice.10.bc not found (looked under {LIBDEVICE_ENV}, CUDA_HOME, CUDA_PATH, CUDA_LIBRARY_PATH, /usr/local/cuda, /opt/cuda, {}, Python site-packages) and fetching it from PyPI failed ({cause}): install the CUDA toolkit (or set CUDA_HOME to it), or run `scripts/fetch-cuda-deps.sh`, or `python3 -m pip install {PYPI_PACKAGE}`, or set {LIBDEVICE_ENV}=/path/to/libdevice.10.bc",
            deps.display()
        ))),
    }
}

/// Downloads the nvcc wheel with pip (no install) and takes libdevice and ptxas from it into
/// the CUDA root `deps`. The cause of a failure comes back as one line.
fn fetch(deps: &Path) -> Result<PathBuf, String> {
    let tmp = env::temp_dir().join(format!("kernels-build-fetch-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let result = download_wheel(&tmp).and_then(|wheel| extract_from_wheel(&wheel, deps));
    let _ = fs::remove_dir_all(&tmp);
    result
}

fn download_wheel(dir: &Path) -> Result<PathBuf, String> {
    let output = Command::new("python3")
        .args(["-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"])
        .args(["--platform", "manylinux2014_x86_64", "--python-version", "3.11"])
        .args(["--disable-pip-version-check", "--retries", "2", "--timeout", "30"])
        .arg("-d")
        .arg(dir)
        .arg(format!("{PYPI_PACKAGE}=={PYPI_VERSION}"))
        .output()
        .map_err(|e| format!("could not run python3 -m pip: {e}"))?;
    if !output.status.success() {
        return Err(last_line(&output.stderr, "pip download failed"));
    }
    fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| "pip download left no wheel".to_string())
}

/// Takes `…nvvm/libdevice/libdevice.10.bc` and `…bin/ptxas` out of `wheel` (a zip) into
/// `deps/nvvm/libdevice/` and `deps/bin/` with Python's zipfile; files already there are
/// kept. Each is written under a temporary name and renamed, so concurrent builds never see
/// half a file. Returns the libdevice path.
fn extract_from_wheel(wheel: &Path, deps: &Path) -> Result<PathBuf, String> {
    const EXTRACT: &str = r#"
import os, shutil, sys, zipfile
wheel, libdevice, ptxas = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    def member(suffix):
        return next((n for n in names if n.endswith(suffix)), None)
    wanted = [(member("nvvm/libdevice/libdevice.10.bc"), libdevice, 0o644),
              (member("bin/ptxas"), ptxas, 0o755)]
    if wanted[0][0] is None:
        sys.exit("the wheel holds no nvvm/libdevice/libdevice.10.bc")
    for name, dest, mode in wanted:
        if name is None or os.path.exists(dest):
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        part = "%s.part%d" % (dest, os.getpid())
        with z.open(name) as src, open(part, "wb") as out:
            shutil.copyfileobj(src, out)
        os.chmod(part, mode)
        os.replace(part, dest)
"#;
    let libdevice = deps.join(IN_CUDA_ROOT);
    let output = Command::new("python3")
        .args(["-c", EXTRACT])
        .arg(wheel)
        .arg(&libdevice)
        .arg(deps.join("bin/ptxas"))
        .output()
        .map_err(|e| format!("could not run python3: {e}"))?;
    if !output.status.success() {
        return Err(last_line(&output.stderr, "extracting the wheel failed"));
    }
    if libdevice.is_file() {
        Ok(libdevice)
    } else {
        Err(format!("{} was not written", libdevice.display()))
    }
}

/// The last non-empty line of a tool's stderr (where pip and Python put the cause).
fn last_line(stderr: &[u8], otherwise: &str) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(otherwise)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempTree(PathBuf);

    impl TempTree {
        fn new(name: &str) -> Self {
            let dir =
                env::temp_dir().join(format!("kernels-build-test-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempTree(dir)
        }

        /// Creates the file `rel` (and its parents); returns its path.
        fn file(&self, rel: &str) -> PathBuf {
            let path = self.0.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, b"BC").unwrap();
            path
        }

        fn dir(&self, rel: &str) -> PathBuf {
            let path = self.0.join(rel);
            fs::create_dir_all(&path).unwrap();
            path
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A search over the fake tree: every kind of place, each its own directory.
    fn full_search(t: &TempTree) -> Search {
        Search {
            explicit: None,
            env_roots: vec![t.0.join("cuda_home"), t.0.join("cuda_path"), t.0.join("cuda_lib")],
            system_roots: vec![t.0.join("usr_local_cuda"), t.0.join("opt_cuda")],
            workspace: t.0.join("repo"),
            site_dirs: vec![t.0.join("site1"), t.0.join("site2")],
        }
    }

    #[test]
    fn order_of_the_search() {
        let t = TempTree::new("order");
        let search = full_search(&t);
        // Fill every place from the last to the first: each new file must win.
        let places = [
            "site2/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
            "site2/triton/backends/nvidia/lib/libdevice.10.bc",
            "site1/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
            "site1/triton/backends/nvidia/lib/libdevice.10.bc",
            "repo/.deps/cuda/nvvm/libdevice/libdevice.10.bc",
            "opt_cuda/nvvm/libdevice/libdevice.10.bc",
            "usr_local_cuda/nvvm/libdevice/libdevice.10.bc",
            "cuda_lib/nvvm/libdevice/libdevice.10.bc",
            "cuda_path/nvvm/libdevice/libdevice.10.bc",
            "cuda_home/nvvm/libdevice/libdevice.10.bc",
        ];
        assert_eq!(search.find().unwrap(), None);
        for rel in places {
            let path = t.file(rel);
            assert_eq!(search.find().unwrap(), Some(path), "{rel} should win");
        }
        // The candidates list is exactly that order, reversed.
        let expected: Vec<PathBuf> = places.iter().rev().map(|rel| t.0.join(rel)).collect();
        assert_eq!(search.candidates(), expected);
    }

    #[test]
    fn explicit_file_wins_and_a_wrong_one_is_an_error() {
        let t = TempTree::new("explicit");
        let mut search = full_search(&t);
        t.file("cuda_home/nvvm/libdevice/libdevice.10.bc");
        let mine = t.file("elsewhere/my-libdevice.bc");
        search.explicit = Some(mine.clone());
        assert_eq!(search.find().unwrap(), Some(mine));
        search.explicit = Some(t.0.join("missing.bc"));
        let err = search.find().unwrap_err();
        assert!(err.message().starts_with(LIBDEVICE_ENV), "{err}");
        // A directory is not the file either.
        search.explicit = Some(t.dir("cuda_home"));
        assert!(search.find().is_err());
    }

    #[test]
    fn roots_without_libdevice_are_skipped() {
        let t = TempTree::new("skip");
        let search = full_search(&t);
        t.dir("cuda_home/nvvm"); // a root, but no libdevice in it
        t.dir("usr_local_cuda/bin");
        let deps = t.file("repo/.deps/cuda/nvvm/libdevice/libdevice.10.bc");
        assert_eq!(search.find().unwrap(), Some(deps));
    }

    #[test]
    fn cuda_variables_in_order_with_path_lists() {
        let a = env::join_paths(["/a1", "/a2"]).unwrap();
        let vars: HashMap<&str, OsString> = [
            ("CUDA_LIBRARY_PATH", OsString::from("/c")),
            ("CUDA_HOME", a),
            ("CUDA_PATH", OsString::from("")),
        ]
        .into();
        let roots = roots_from_vars(|v| vars.get(v).cloned());
        assert_eq!(roots, [Path::new("/a1"), Path::new("/a2"), Path::new("/c")]);
        assert!(roots_from_vars(|_| None).is_empty());
    }

    #[test]
    fn from_env_covers_the_fixed_places() {
        let search = Search::from_env(Path::new("/repo"));
        let candidates = search.candidates();
        let fixed = [
            "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc",
            "/opt/cuda/nvvm/libdevice/libdevice.10.bc",
            "/repo/.deps/cuda/nvvm/libdevice/libdevice.10.bc",
        ];
        let tail: Vec<&Path> = candidates.iter().rev().take(3).rev().map(|p| p.as_path()).collect();
        assert_eq!(tail, fixed.map(Path::new));
    }

    #[test]
    fn site_directories_from_python_and_venvs() {
        assert_eq!(
            parse_site_output("/usr/lib/python3/site-packages\n\n  /root/.local/x  \n"),
            [Path::new("/usr/lib/python3/site-packages"), Path::new("/root/.local/x")]
        );
        let t = TempTree::new("venv");
        let b = t.dir("lib/python3.12/site-packages");
        let a = t.dir("lib/python3.10/site-packages");
        t.dir("lib/python2.7/site-packages");
        t.dir("lib/python3.11"); // no site-packages
        assert_eq!(venv_site_packages(&t.0.join("lib")), [a, b]);
        assert!(venv_site_packages(&t.0.join("nowhere")).is_empty());
    }

    #[test]
    fn the_fetch_message_names_both_files() {
        let path = Path::new("/repo/.deps/cuda/nvvm/libdevice/libdevice.10.bc");
        let message = fetched_message(path);
        assert!(message.contains(&format!("into {} (and ptxas", path.display())), "{message}");
        assert!(message.ends_with("ptxas into /repo/.deps/cuda/bin)"), "{message}");
    }

    #[test]
    fn extracts_libdevice_and_ptxas_from_a_wheel() {
        let t = TempTree::new("wheel");
        let wheel = t.0.join("fake.whl");
        let make = "import sys, zipfile\n\
                    with zipfile.ZipFile(sys.argv[1], 'w') as z:\n    \
                    z.writestr('nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc', 'BC')\n    \
                    z.writestr('nvidia/cuda_nvcc/bin/ptxas', 'ELF')\n";
        let made = Command::new("python3").args(["-c", make]).arg(&wheel).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("no python3 here: wheel extraction not tested");
            return;
        }
        let deps = t.0.join("repo/.deps/cuda");
        let lib = extract_from_wheel(&wheel, &deps).unwrap();
        assert_eq!(lib, deps.join("nvvm/libdevice/libdevice.10.bc"));
        assert_eq!(fs::read(&lib).unwrap(), b"BC");
        assert_eq!(fs::read(deps.join("bin/ptxas")).unwrap(), b"ELF");
        // What the search then finds, through the repository's .deps.
        let search = Search { workspace: t.0.join("repo"), ..Search::default() };
        assert_eq!(search.find().unwrap(), Some(lib));
        let junk = t.file("junk.whl");
        assert!(extract_from_wheel(&junk, &deps).is_err());
    }
}
