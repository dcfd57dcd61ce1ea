//! Finding and loading libcupti: the search of the CUDA roots and Python packages, the entry
//! points streamlab calls, and the one library loaded for the process.
use std::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::Library;

/// What every CUPTI call returns when it succeeds.
pub(super) const CUPTI_SUCCESS: u32 = 0;
/// CUDA 12.0's CUPTI API version: the oldest whose record layouts [`layout`](super::layout)
/// describes.
pub const OLDEST_API_VERSION: u32 = 18;

pub(super) type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
/// `CUpti_BuffersCallbackRequestFunc`: CUPTI asks for an empty buffer (`buffer`, `size`,
/// `maxNumRecords` out).
pub type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
/// `CUpti_BuffersCallbackCompleteFunc`: CUPTI hands a buffer back (`context`, `streamId`,
/// `buffer`, `size`, `validSize`).
pub type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
/// `cuptiActivityEnableDriverApi` and `cuptiActivityEnableRuntimeApi` (CUPTI 12.x and later).
pub(super) type EnableCallFn = unsafe extern "C" fn(u32, u8) -> u32;

/// The CUPTI entry points streamlab calls, copied out of the library (which stays loaded
/// for the life of the process: it is kept in a static beside them).
pub(super) struct Api {
    pub(super) get_version: unsafe extern "C" fn(*mut u32) -> u32,
    pub(super) get_result_string: unsafe extern "C" fn(u32, *mut *const c_char) -> u32,
    pub(super) get_timestamp: unsafe extern "C" fn(*mut u64) -> u32,
    pub(super) activity_enable: unsafe extern "C" fn(u32) -> u32,
    pub(super) activity_disable: unsafe extern "C" fn(u32) -> u32,
    pub(super) activity_flush_all: unsafe extern "C" fn(u32) -> u32,
    pub(super) activity_get_next_record:
        unsafe extern "C" fn(*mut u8, usize, *mut *mut c_void) -> u32,
    pub(super) activity_register_callbacks: unsafe extern "C" fn(RequestFn, CompleteFn) -> u32,
    pub(super) activity_dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> u32,
    pub(super) subscribe: unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> u32,
    pub(super) enable_callback: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> u32,
    pub(super) get_callback_name: unsafe extern "C" fn(u32, u32, *mut *const c_char) -> u32,
    /// Absent from older CUPTIs: the injected recorder then records every call of the
    /// domain and keeps the ones it wants.
    pub(super) activity_enable_driver_api: Option<EnableCallFn>,
    pub(super) activity_enable_runtime_api: Option<EnableCallFn>,
}

/// A loaded CUPTI library.
pub struct Cupti {
    pub(super) api: Api,
    path: PathBuf,
    version: u32,
    /// The callback subscription (`CUpti_SubscriberHandle`), made once, on first use.
    pub(super) subscriber: OnceLock<std::result::Result<usize, String>>,
    _library: Library,
}

/// The library, once [`load`] has looked for it.
pub(super) static CUPTI: OnceLock<std::result::Result<Cupti, String>> = OnceLock::new();

impl Cupti {
    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// CUPTI's API version (`cuptiGetVersion`: 26 for CUDA 12.8, 130001 for 13.0).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// CUPTI's clock in ns, the clock of every record and call.
    pub fn now_ns(&self) -> u64 {
        let mut t = 0;
        // SAFETY: valid out-pointer; the call is thread-safe (it is made from host-function
        // threads too).
        unsafe { (self.api.get_timestamp)(&mut t) };
        t
    }
}

/// Where libcupti may be, best first: `STREAMLAB_CUPTI` (a file), then under each CUDA root
/// (`CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`, `/usr/local/cuda-*` newest first, `/opt/cuda`)
/// the `targets/x86_64-linux/lib`, `extras/CUPTI/lib64` and `lib64` folders, then Python
/// packages (`nvidia/cuda_cupti/lib`, `nvidia/cu13/lib`) in the usual site folders and
/// PyTorch's venv, then bare names for the loader's own path. In each folder the newest
/// `libcupti.so.N` comes first.
pub fn candidates() -> Vec<PathBuf> {
    let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let mut roots: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|k| env(k)).collect();
    roots.push("/usr/local/cuda".into());
    roots.extend(versioned_dirs(Path::new("/usr/local"), "cuda-"));
    roots.push("/opt/cuda".into());
    let mut out: Vec<PathBuf> = env("STREAMLAB_CUPTI").into_iter().collect();
    out.extend(candidates_in(&roots, &python_sites()));
    out.extend(["libcupti.so.13", "libcupti.so.12", "libcupti.so"].iter().map(PathBuf::from));
    out
}

/// The Python package folders where NVIDIA's wheels put their libraries: the environment this
/// executable is installed in (the pip wheel's `streamlab`, found without activating its venv),
/// the usual system folders, PyTorch's venv, conda, and the active `VIRTUAL_ENV`.
pub fn python_sites() -> Vec<PathBuf> {
    let mut sites = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        sites.extend(environment_sites(&exe));
    }
    for base in ["/usr/lib", "/usr/local/lib", "/opt/torch/.venv/lib", "/opt/conda/lib"] {
        for python in versioned_dirs(Path::new(base), "python3") {
            sites.push(python.join("site-packages"));
            sites.push(python.join("dist-packages"));
        }
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from) {
        for python in versioned_dirs(&venv.join("lib"), "python3") {
            sites.push(python.join("site-packages"));
        }
    }
    sites
}

/// `<env>/lib/python3.*/site-packages`, the highest Python first, for an executable `exe` at
/// `<env>/bin/NAME`: where pip installs a wheel's executable in a venv, a conda environment or
/// `--user`. Nothing for an executable elsewhere (`target/release/`), nor where `<env>/lib`
/// holds no Python (`~/.cargo/bin/`).
fn environment_sites(exe: &Path) -> Vec<PathBuf> {
    let Some(env) = exe.parent().filter(|bin| bin.ends_with("bin")).and_then(Path::parent) else {
        return Vec::new();
    };
    versioned_dirs(&env.join("lib"), "python3")
        .into_iter()
        .map(|p| p.join("site-packages"))
        .collect()
}

/// The libcupti files under CUDA `roots` and Python `sites` (see [`candidates`]).
pub fn candidates_in(roots: &[PathBuf], sites: &[PathBuf]) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    for root in roots {
        for sub in ["targets/x86_64-linux/lib", "extras/CUPTI/lib64", "lib64"] {
            folders.push(root.join(sub));
        }
    }
    for site in sites {
        for sub in ["nvidia/cuda_cupti/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"] {
            folders.push(site.join(sub));
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for folder in folders {
        for file in libraries_in(&folder) {
            if !out.contains(&file) {
                out.push(file);
            }
        }
    }
    out
}

/// `libcupti.so*` files in `folder`, newest version first (`.so.13` before `.so.12.9`
/// before `.so`).
fn libraries_in(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u32>, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix("libcupti.so")?;
            let version: Option<Vec<u32>> =
                rest.split('.').filter(|p| !p.is_empty()).map(|p| p.parse().ok()).collect();
            Some((version?, e.path()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// Subfolders of `base` named `prefix…`, the highest version first.
fn versioned_dirs(base: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u32>, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix(prefix)?;
            let version = rest.split('.').map(|p| p.parse().unwrap_or(0)).collect();
            e.path().is_dir().then(|| (version, e.path()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// CUPTI, loaded on first use from the first of [`candidates`] that opens and is new enough;
/// the error is one line saying why none could be used.
pub fn load() -> std::result::Result<&'static Cupti, String> {
    CUPTI.get_or_init(open_first).as_ref().map_err(Clone::clone)
}

/// CUPTI from exactly `path`, with no search: the injected recorder loads the file the trace
/// command chose (the one NVTX is injected with too). Like [`load`], once per process: a
/// library already loaded stays the one returned.
pub fn load_file(path: &Path) -> std::result::Result<&'static Cupti, String> {
    CUPTI.get_or_init(|| open(path)).as_ref().map_err(Clone::clone)
}

fn open_first() -> std::result::Result<Cupti, String> {
    let mut reasons = Vec::new();
    for path in candidates() {
        match open(&path) {
            Ok(c) => return Ok(c),
            Err(e) if path.is_absolute() => reasons.push(e),
            Err(_) => {} // a bare name the loader does not know: nothing to report
        }
    }
    Err(if reasons.is_empty() {
        "libcupti not found (searched the CUDA roots, Python packages and the loader path; STREAMLAB_CUPTI names a file)".into()
    } else {
        reasons.join("; ")
    })
}

fn open(path: &Path) -> std::result::Result<Cupti, String> {
    let shown = path.display();
    // SAFETY: opening a shared library runs its initialisers; libcupti's have no
    // preconditions (it initialises lazily on its first API call).
    let library = unsafe { Library::new(path) }.map_err(|e| format!("{shown}: {e}"))?;
    macro_rules! symbol {
        ($name:literal) => {
            // SAFETY: the type is the function's C signature from cupti.h (enums are C
            // `int`s, handles are pointers); the library stays loaded beside the pointer.
            *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{shown}: {}: {e}", $name))?
        };
    }
    let api = Api {
        get_version: symbol!("cuptiGetVersion"),
        get_result_string: symbol!("cuptiGetResultString"),
        get_timestamp: symbol!("cuptiGetTimestamp"),
        activity_enable: symbol!("cuptiActivityEnable"),
        activity_disable: symbol!("cuptiActivityDisable"),
        activity_flush_all: symbol!("cuptiActivityFlushAll"),
        activity_get_next_record: symbol!("cuptiActivityGetNextRecord"),
        activity_register_callbacks: symbol!("cuptiActivityRegisterCallbacks"),
        activity_dropped: symbol!("cuptiActivityGetNumDroppedRecords"),
        subscribe: symbol!("cuptiSubscribe"),
        enable_callback: symbol!("cuptiEnableCallback"),
        get_callback_name: symbol!("cuptiGetCallbackName"),
        // SAFETY: as in `symbol!`; a missing symbol is `None`.
        activity_enable_driver_api: unsafe { library.get(b"cuptiActivityEnableDriverApi\0") }
            .ok()
            .map(|f| *f),
        // SAFETY: as above.
        activity_enable_runtime_api: unsafe { library.get(b"cuptiActivityEnableRuntimeApi\0") }
            .ok()
            .map(|f| *f),
    };
    let mut version = 0;
    // SAFETY: valid out-pointer; cuptiGetVersion needs no initialisation.
    let status = unsafe { (api.get_version)(&mut version) };
    if status != CUPTI_SUCCESS {
        return Err(format!("{shown}: cuptiGetVersion failed ({status})"));
    }
    if version < OLDEST_API_VERSION {
        return Err(format!("{shown}: CUPTI API version {version} is older than CUDA 12.0's ({OLDEST_API_VERSION}), whose record layouts streamlab reads"));
    }
    Ok(Cupti {
        api,
        path: path.to_path_buf(),
        version,
        subscriber: OnceLock::new(),
        _library: library,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_cuda_roots_and_wheels_newest_first() {
        let root = std::env::temp_dir().join(format!("streamlab-cupti-{}", std::process::id()));
        let lib = root.join("cuda-13.0/targets/x86_64-linux/lib");
        let wheel = root.join("site/nvidia/cuda_cupti/lib");
        for dir in [&lib, &wheel] {
            std::fs::create_dir_all(dir).unwrap();
        }
        for file in ["libcupti.so", "libcupti.so.13", "libcupti.so.12.9", "libcupti_static.a"] {
            std::fs::write(lib.join(file), b"").unwrap();
        }
        std::fs::write(wheel.join("libcupti.so.12"), b"").unwrap();
        let found = candidates_in(&[root.join("cuda-13.0")], &[root.join("site")]);
        let names: Vec<String> =
            found.iter().map(|p| p.strip_prefix(&root).unwrap().display().to_string()).collect();
        assert_eq!(
            names,
            [
                "cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13",
                "cuda-13.0/targets/x86_64-linux/lib/libcupti.so.12.9",
                "cuda-13.0/targets/x86_64-linux/lib/libcupti.so",
                "site/nvidia/cuda_cupti/lib/libcupti.so.12",
            ]
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_executable_in_an_environments_bin_searches_that_environments_site_packages() {
        let root = std::env::temp_dir().join(format!("streamlab-cupti-env-{}", std::process::id()));
        for dir in ["venv/bin", "venv/lib/python3.9", "venv/lib/python3.11", "venv/lib/other"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::create_dir_all(root.join("target/release")).unwrap();
        let sites = |exe: &str| -> Vec<String> {
            environment_sites(&root.join(exe))
                .iter()
                .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            sites("venv/bin/streamlab"),
            ["venv/lib/python3.11/site-packages", "venv/lib/python3.9/site-packages"]
        );
        assert!(sites("target/release/streamlab").is_empty());
        assert!(sites("venv/lib/streamlab").is_empty());
        std::fs::remove_dir_all(root).unwrap();
    }
}
