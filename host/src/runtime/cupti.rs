//! CUPTI, the CUDA Profiling Tools Interface, opened at run time: what each copy and kernel
//! really did on the GPU (start and end on the engine, stream, device, bytes, grid), plus the
//! driver calls that enqueued and waited for them.
//!
//! Two CUPTI APIs are used, the way PyTorch's profiler uses them:
//! - the **activity API** with `CONCURRENT_KERNEL` (not `KERNEL`, which serializes kernels),
//!   `MEMCPY`, `MEMCPY2` (peer copies) and `MEMSET`: one record per operation, delivered in
//!   buffers this module hands to CUPTI;
//! - a **callback subscription** on the driver API, for a fixed list of calls (launches,
//!   copies, memsets, host functions, graph launches, event records and waits,
//!   synchronizations). The callback runs on the calling thread when the call enters and
//!   exits: it notes the call's correlation id, its host-side span, and the "op tag" the
//!   caller set with [`with_op_tag`], so each activity record (which carries the same
//!   correlation id) can be named by whoever enqueued it.
//!
//! ## Why not cudarc's `cupti` module
//! cudarc opens libcupti by name through the dynamic loader only, with names built from the
//! CUDA version its features select (`libcupti.so.12` for the `cuda-12080` bindings the
//! runtime uses), so it does not find `libcupti.so.13` in
//! `/usr/local/cuda-13.0/targets/x86_64-linux/lib`, which is not on the loader path, nor the
//! copy in PyTorch's wheels; and it panics when no candidate loads. Its record structs are
//! those of one CUDA version. So this module is a minimal FFI over `libloading` (the loader
//! cudarc itself uses): [`candidates`] searches the CUDA roots and Python packages
//! explicitly, the newest library wins, and failure is a one-line reason the lab reports
//! ("timeline from events") instead of a panic.
//!
//! ## Record layouts
//! CUPTI writes the newest version of each record struct it knows (`CUpti_ActivityKernel9`
//! in CUDA 12.x, `…Kernel10`/`11`/`12`/`13` in 13.x; `Memcpy5`/`6`/`7`, `MemcpyPtoP4`,
//! `Memset4`/`5`). Versions only append fields, so this module reads the `kind` first, skips
//! unknown kinds, and for the four kinds it knows reads only the leading fields that every
//! version from CUDA 12.0 (CUPTI API version 18) to 13.x shares ([`layout`]'s structs,
//! transcribed from `cupti_activity.h`). Older CUPTI versions are refused.
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use libloading::Library;

/// What kind of GPU work an activity record describes.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    Kernel {
        name: String,
        grid: [u32; 3],
        block: [u32; 3],
    },
    Copy {
        kind: CopyKind,
        src: MemoryKind,
        dst: MemoryKind,
    },
    /// A copy between two devices (`MEMCPY2` records).
    Peer {
        src_device: u32,
        dst_device: u32,
    },
    Memset,
}

/// `CUpti_ActivityMemcpyKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    HostToHost,
    PeerToPeer,
    Other(u8),
}

impl CopyKind {
    fn from_raw(raw: u8) -> CopyKind {
        match raw {
            1 => CopyKind::HostToDevice,
            2 => CopyKind::DeviceToHost,
            8 => CopyKind::DeviceToDevice,
            9 => CopyKind::HostToHost,
            10 => CopyKind::PeerToPeer,
            other => CopyKind::Other(other),
        }
    }
}

/// `CUpti_ActivityMemoryKind`: where a copy's source or destination lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    Pageable,
    Pinned,
    Device,
    Managed,
    Other(u8),
}

impl MemoryKind {
    fn from_raw(raw: u8) -> MemoryKind {
        match raw {
            1 => MemoryKind::Pageable,
            2 => MemoryKind::Pinned,
            3 | 6 => MemoryKind::Device,
            5 | 7 => MemoryKind::Managed,
            other => MemoryKind::Other(other),
        }
    }
}

/// One activity record: an operation as the GPU ran it. Times are CUPTI timestamps (ns).
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    pub work: Work,
    pub start_ns: u64,
    pub end_ns: u64,
    pub device: u32,
    /// CUPTI's id of the stream (not the `CUstream` handle).
    pub stream: u32,
    pub correlation: u32,
    pub bytes: u64,
}

/// One driver call seen by the callback subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// The driver function, as CUPTI names it (`cuMemcpyHtoDAsync_v2`).
    pub function: &'static str,
    pub correlation: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The tag set with [`with_op_tag`] around the call, if any.
    pub tag: Option<u64>,
    /// A small number per host thread, 1 for the first thread that made a traced call.
    pub thread: u64,
    /// The `CUstream` and `CUevent` arguments of record, wait and synchronize calls
    /// (0 where the call has none).
    pub stream: usize,
    pub event: usize,
}

/// What a session collected.
#[derive(Debug, Default)]
pub struct Collected {
    pub activities: Vec<Activity>,
    pub calls: Vec<ApiCall>,
    /// Records of kinds this module does not read (skipped, counted).
    pub skipped: usize,
    /// Records CUPTI dropped for lack of buffer space.
    pub dropped: usize,
}

/// The leading fields of each record kind read, transcribed field by field from
/// `cupti_activity.h` (the same in every version of each struct from CUDA 12.0 to 13.x).
/// CUPTI declares its records packed (`__attribute__((packed, aligned(8)))`), so these are
/// `repr(C, packed)`: the compiler lays out the offsets the header does, and the tests below
/// check them against the header's numbers.
pub mod layout {
    use std::mem::size_of;

    pub const KIND_MEMCPY: u32 = 1;
    pub const KIND_MEMSET: u32 = 2;
    pub const KIND_CONCURRENT_KERNEL: u32 = 10;
    pub const KIND_MEMCPY2: u32 = 22;

    /// `CUpti_ActivityKernel4`…`13`, up to the `name` pointer.
    #[repr(C, packed)]
    #[derive(Clone, Copy)]
    pub struct Kernel {
        pub kind: u32,
        pub cache_config: u8,
        pub shared_memory_config: u8,
        pub registers_per_thread: u16,
        /// `partitionedGlobalCacheRequested`, `…Executed`.
        pub partitioned_global_cache: [u32; 2],
        pub start: u64,
        pub end: u64,
        pub completed: u64,
        pub device_id: u32,
        pub context_id: u32,
        pub stream_id: u32,
        /// `gridX`, `gridY`, `gridZ` (`int32_t`, never negative).
        pub grid: [u32; 3],
        pub block: [u32; 3],
        /// `staticSharedMemory`, `dynamicSharedMemory`.
        pub shared_memory: [i32; 2],
        /// `localMemoryPerThread`, `localMemoryTotal`.
        pub local_memory: [u32; 2],
        pub correlation_id: u32,
        pub grid_id: i64,
        /// `const char *name` (64-bit targets only, as is CUPTI).
        pub name: u64,
    }

    /// What every copy and memset record starts with, up to `streamId`.
    #[repr(C, packed)]
    #[derive(Clone, Copy)]
    pub struct Transfer {
        pub kind: u32,
        /// A copy's `copyKind`, `srcKind`, `dstKind`, `flags`; a memset's `uint32_t value`.
        pub head: [u8; 4],
        pub bytes: u64,
        pub start: u64,
        pub end: u64,
        pub device_id: u32,
        pub context_id: u32,
        pub stream_id: u32,
    }

    /// `CUpti_ActivityMemcpy`…`Memcpy7` and `CUpti_ActivityMemset`…`Memset5`, up to
    /// `correlationId`: the two layouts are the same there but for bytes 4..8.
    #[repr(C, packed)]
    #[derive(Clone, Copy)]
    pub struct Memcpy {
        pub transfer: Transfer,
        pub correlation_id: u32,
    }

    /// `CUpti_ActivityMemcpyPtoP`…`PtoP4`, up to `correlationId`.
    #[repr(C, packed)]
    #[derive(Clone, Copy)]
    pub struct MemcpyPtoP {
        pub transfer: Transfer,
        pub src_device_id: u32,
        pub src_context_id: u32,
        pub dst_device_id: u32,
        pub dst_context_id: u32,
        pub correlation_id: u32,
    }

    /// Lets `bytemuck` copy these structs out of a record's bytes (they are only ever read).
    macro_rules! plain_old_data {
        ($($record:ty),*) => {$(
            // SAFETY: every field is an integer or an array of them: all zeros is valid.
            unsafe impl bytemuck::Zeroable for $record {}
            // SAFETY: `repr(C, packed)` leaves no padding, every field is an integer or an
            // array of them (every bit pattern valid), and the struct is `Copy + 'static`.
            unsafe impl bytemuck::Pod for $record {}
        )*};
    }
    plain_old_data!(Kernel, Transfer, Memcpy, MemcpyPtoP);

    /// How many leading bytes of a record of `kind` are read; `None` for kinds skipped.
    pub fn prefix_len(kind: u32) -> Option<usize> {
        match kind {
            KIND_CONCURRENT_KERNEL => Some(size_of::<Kernel>()),
            KIND_MEMCPY | KIND_MEMSET => Some(size_of::<Memcpy>()),
            KIND_MEMCPY2 => Some(size_of::<MemcpyPtoP>()),
            _ => None,
        }
    }
}

/// The record struct `T` from the start of `bytes`, if there are enough of them.
fn read<T: bytemuck::Pod>(bytes: &[u8]) -> Option<T> {
    bytes.get(..std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned)
}

impl layout::Transfer {
    fn activity(self, work: Work, correlation: u32) -> Activity {
        Activity {
            work,
            start_ns: self.start,
            end_ns: self.end,
            device: self.device_id,
            stream: self.stream_id,
            correlation,
            bytes: self.bytes,
        }
    }
}

/// Reads a record's leading bytes (at least [`layout::prefix_len`] of its kind). A kernel's
/// name is a pointer in the record: `kernel_name` turns it into text. `None` for kinds this
/// module does not read, or a prefix too short.
pub fn parse_record(bytes: &[u8], kernel_name: impl FnOnce(usize) -> String) -> Option<Activity> {
    use layout::*;
    let kind: u32 = read(bytes)?;
    let activity = match kind {
        KIND_CONCURRENT_KERNEL => {
            let k: Kernel = read(bytes)?;
            Activity {
                work: Work::Kernel {
                    name: kernel_name(k.name as usize),
                    grid: k.grid,
                    block: k.block,
                },
                start_ns: k.start,
                end_ns: k.end,
                device: k.device_id,
                stream: k.stream_id,
                correlation: k.correlation_id,
                bytes: 0,
            }
        }
        KIND_MEMCPY | KIND_MEMSET => {
            let c: Memcpy = read(bytes)?;
            let [copy, src, dst, _flags] = c.transfer.head;
            let work = if kind == KIND_MEMSET {
                Work::Memset
            } else {
                Work::Copy {
                    kind: CopyKind::from_raw(copy),
                    src: MemoryKind::from_raw(src),
                    dst: MemoryKind::from_raw(dst),
                }
            };
            c.transfer.activity(work, c.correlation_id)
        }
        KIND_MEMCPY2 => {
            let p: MemcpyPtoP = read(bytes)?;
            let work = Work::Peer { src_device: p.src_device_id, dst_device: p.dst_device_id };
            p.transfer.activity(work, p.correlation_id)
        }
        _ => return None,
    };
    Some(activity)
}

/// The driver calls the subscription traces, by CUPTI callback id
/// (`CUpti_driver_api_trace_cbid`, an append-only enum), and which handles their parameter
/// structs start with.
const TRACED: &[(u32, Handles)] = &[
    (17, Handles::None),         // cuCtxSynchronize
    (119, Handles::EventStream), // cuEventRecord
    (121, Handles::Event),       // cuEventSynchronize
    (126, Handles::Stream),      // cuStreamSynchronize
    (216, Handles::None),        // cuMemsetD8Async
    (220, Handles::None),        // cuMemsetD32Async
    (249, Handles::None),        // cuMemsetD8_v2
    (251, Handles::None),        // cuMemsetD32_v2
    (276, Handles::None),        // cuMemcpyHtoD_v2
    (277, Handles::None),        // cuMemcpyHtoDAsync_v2
    (278, Handles::None),        // cuMemcpyDtoH_v2
    (279, Handles::None),        // cuMemcpyDtoHAsync_v2
    (281, Handles::None),        // cuMemcpyDtoDAsync_v2
    (295, Handles::StreamEvent), // cuStreamWaitEvent
    (305, Handles::None),        // cuMemcpy
    (306, Handles::None),        // cuMemcpyAsync
    (307, Handles::None),        // cuLaunchKernel
    (318, Handles::None),        // cuMemcpyPeer
    (319, Handles::None),        // cuMemcpyPeerAsync
    (514, Handles::None),        // cuGraphLaunch
    (527, Handles::None),        // cuLaunchHostFunc
    (587, Handles::EventStream), // cuEventRecordWithFlags
    (652, Handles::None),        // cuLaunchKernelEx
];

/// The leading pointer-sized fields of a traced call's parameter struct
/// (`cuEventRecord_params { hEvent, hStream }`, `cuStreamWaitEvent_params { hStream, hEvent,
/// Flags }`, `cuStreamSynchronize_params { hStream }`, `cuEventSynchronize_params { hEvent }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handles {
    None,
    Stream,
    Event,
    EventStream,
    StreamEvent,
}

const CUPTI_SUCCESS: u32 = 0;
const DOMAIN_DRIVER_API: u32 = 1;
const API_ENTER: u32 = 0;
const FLUSH_FORCED: u32 = 1;
/// CUDA 12.0's CUPTI API version: the oldest whose record layouts [`layout`] describes.
pub const OLDEST_API_VERSION: u32 = 18;

/// `CUpti_CallbackData` (the same in CUPTI 12 and 13).
#[repr(C)]
struct CallbackData {
    callback_site: u32,
    function_name: *const c_char,
    function_params: *const c_void,
    function_return_value: *mut c_void,
    symbol_name: *const c_char,
    context: *mut c_void,
    context_uid: u32,
    correlation_data: *mut u64,
    correlation_id: u32,
}

type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);

/// The CUPTI entry points streamlab calls, copied out of the library (which stays loaded
/// for the life of the process: it is kept in a static beside them).
struct Api {
    get_version: unsafe extern "C" fn(*mut u32) -> u32,
    get_result_string: unsafe extern "C" fn(u32, *mut *const c_char) -> u32,
    get_timestamp: unsafe extern "C" fn(*mut u64) -> u32,
    activity_enable: unsafe extern "C" fn(u32) -> u32,
    activity_disable: unsafe extern "C" fn(u32) -> u32,
    activity_flush_all: unsafe extern "C" fn(u32) -> u32,
    activity_get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut c_void) -> u32,
    activity_register_callbacks: unsafe extern "C" fn(RequestFn, CompleteFn) -> u32,
    activity_dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> u32,
    subscribe: unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> u32,
    enable_callback: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> u32,
}

/// A loaded CUPTI library.
pub struct Cupti {
    api: Api,
    path: PathBuf,
    version: u32,
    /// The callback subscription (`CUpti_SubscriberHandle`), made once, on first use.
    subscriber: OnceLock<std::result::Result<usize, String>>,
    _library: Library,
}

static CUPTI: OnceLock<std::result::Result<Cupti, String>> = OnceLock::new();
/// CUPTI on for one holder at a time: its activity buffers are process-wide.
static ENABLED: Mutex<()> = Mutex::new(());
/// Whether a [`Session`] is recording: otherwise the callback and the buffers keep nothing.
static RECORDING: AtomicBool = AtomicBool::new(false);
static ACTIVITIES: Mutex<Vec<Activity>> = Mutex::new(Vec::new());
static CALLS: Mutex<Vec<ApiCall>> = Mutex::new(Vec::new());
static SKIPPED: AtomicUsize = AtomicUsize::new(0);
static THREADS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static OP_TAG: Cell<Option<u64>> = const { Cell::new(None) };
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned sink still holds valid records; a panic elsewhere must not lose them.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` with `tag` as this thread's current op tag: the driver calls `f` makes are
/// noted with it, so their activity records can be named by the tag's owner.
pub fn with_op_tag<T>(tag: u64, f: impl FnOnce() -> T) -> T {
    let previous = OP_TAG.with(|t| t.replace(Some(tag)));
    let out = f();
    OP_TAG.with(|t| t.set(previous));
    out
}

fn thread_number() -> u64 {
    THREAD.with(|t| {
        if t.get() == 0 {
            t.set(THREADS.fetch_add(1, Ordering::Relaxed) + 1);
        }
        t.get()
    })
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

/// The Python package folders where NVIDIA's wheels put their libraries: the usual system
/// folders, PyTorch's venv, conda, and the active `VIRTUAL_ENV`.
pub(crate) fn python_sites() -> Vec<PathBuf> {
    let mut sites = Vec::new();
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

/// The activity kinds a session records.
const KINDS: [u32; 4] = [
    layout::KIND_CONCURRENT_KERNEL,
    layout::KIND_MEMCPY,
    layout::KIND_MEMCPY2,
    layout::KIND_MEMSET,
];

impl Cupti {
    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// CUPTI's API version (`cuptiGetVersion`: 26 for CUDA 12.8, 130001 for 13.0).
    pub fn version(&self) -> u32 {
        self.version
    }

    fn check(&self, status: u32, call: &str) -> std::result::Result<(), String> {
        if status == CUPTI_SUCCESS {
            return Ok(());
        }
        let mut text = std::ptr::null();
        // SAFETY: valid out-pointer; CUPTI returns a static string or an error.
        let known = unsafe { (self.api.get_result_string)(status, &mut text) } == CUPTI_SUCCESS;
        let why = if known && !text.is_null() {
            // SAFETY: checked non-null; CUPTI owns a static NUL-terminated string.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        } else {
            format!("CUPTI error {status}")
        };
        Err(format!("{call}: {why}"))
    }

    /// CUPTI's clock in ns, the clock of every record and call.
    pub fn now_ns(&self) -> u64 {
        let mut t = 0;
        // SAFETY: valid out-pointer; the call is thread-safe (it is made from host-function
        // threads too).
        unsafe { (self.api.get_timestamp)(&mut t) };
        t
    }

    fn subscriber(&'static self) -> std::result::Result<*mut c_void, String> {
        let handle = self.subscriber.get_or_init(|| {
            // SAFETY: the buffer functions match CUpti_BuffersCallbackRequestFunc and
            // CompleteFunc, and stay valid for the life of the process.
            let status = unsafe {
                (self.api.activity_register_callbacks)(buffer_requested, buffer_completed)
            };
            self.check(status, "cuptiActivityRegisterCallbacks")?;
            let mut subscriber = std::ptr::null_mut();
            // SAFETY: valid out-pointer; `on_driver_call` matches CUpti_CallbackFunc and
            // needs no user data.
            let status = unsafe {
                (self.api.subscribe)(&mut subscriber, on_driver_call, std::ptr::null_mut())
            };
            self.check(status, "cuptiSubscribe")?;
            Ok(subscriber as usize)
        });
        handle.clone().map(|h| h as *mut c_void)
    }

    /// Turns the traced calls' callbacks on or off. A call this CUPTI does not know is left
    /// out; it is an error only when none could be turned on.
    fn set_callbacks(&self, subscriber: *mut c_void, on: bool) -> std::result::Result<(), String> {
        let mut first_error = None;
        let mut done = 0;
        for (cbid, _) in TRACED {
            // SAFETY: a live subscriber handle and a callback id of the driver API domain.
            let status = unsafe {
                (self.api.enable_callback)(on as u32, subscriber, DOMAIN_DRIVER_API, *cbid)
            };
            match self.check(status, "cuptiEnableCallback") {
                Ok(()) => done += 1,
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        match first_error {
            Some(e) if done == 0 => Err(e),
            _ => Ok(()),
        }
    }

    /// Turns the recorded activity kinds on or off. Kernels and copies must be there; peer
    /// copies and memsets are recorded where this CUPTI allows it.
    fn set_activities(&self, on: bool) -> std::result::Result<(), String> {
        for kind in KINDS {
            // SAFETY: plain enum arguments.
            let status = unsafe {
                if on {
                    (self.api.activity_enable)(kind)
                } else {
                    (self.api.activity_disable)(kind)
                }
            };
            let call = if on { "cuptiActivityEnable" } else { "cuptiActivityDisable" };
            let required = kind == layout::KIND_CONCURRENT_KERNEL || kind == layout::KIND_MEMCPY;
            match self.check(status, call) {
                Err(e) if required => return Err(format!("{e} (activity kind {kind})")),
                _ => {}
            }
        }
        Ok(())
    }

    /// Turns CUPTI on: the four activity kinds and the traced driver calls, until the
    /// returned [`Enabled`] drops. One at a time in a process (a second waits): CUPTI's
    /// activity buffers are process-wide.
    ///
    /// Turning CUPTI on and off is kept out of the runs: enable once, run the work once as a
    /// warm-up whose records are thrown away, then record each run with
    /// [`Enabled::start`], which only clears the sinks.
    pub fn enable(&'static self) -> std::result::Result<Enabled, String> {
        self.enable_with(true)
    }

    /// [`Cupti::enable`], with the driver calls traced only if `host_calls`: without them
    /// the recording has the GPU's work only (what tracing the host costs can be measured).
    pub fn enable_with(&'static self, host_calls: bool) -> std::result::Result<Enabled, String> {
        let exclusive = lock(&ENABLED);
        let subscriber = self.subscriber()?;
        let enabled = Enabled { cupti: self, subscriber, _exclusive: exclusive };
        // `enabled` turns off whatever was turned on should either step fail.
        if host_calls {
            self.set_callbacks(subscriber, true)?;
        }
        self.set_activities(true)?;
        Ok(enabled)
    }

    /// Delivers every buffered record of completed work to [`buffer_completed`].
    fn flush(&self) -> std::result::Result<(), String> {
        // SAFETY: plain flag argument; buffers are delivered to `buffer_completed`.
        let status = unsafe { (self.api.activity_flush_all)(FLUSH_FORCED) };
        self.check(status, "cuptiActivityFlushAll")
    }

    /// Records CUPTI dropped for lack of buffer space since the last call.
    fn dropped(&self) -> std::result::Result<usize, String> {
        let mut dropped = 0;
        // SAFETY: valid out-pointer; a null context and stream 0 ask for all of them.
        let status = unsafe { (self.api.activity_dropped)(std::ptr::null_mut(), 0, &mut dropped) };
        self.check(status, "cuptiActivityGetNumDroppedRecords")?;
        Ok(dropped)
    }
}

/// CUPTI turned on (see [`Cupti::enable`]); dropping it turns CUPTI off again. While no
/// [`Session`] records, the callback returns at once and delivered records are discarded.
pub struct Enabled {
    cupti: &'static Cupti,
    subscriber: *mut c_void,
    _exclusive: MutexGuard<'static, ()>,
}

impl Enabled {
    /// The library that is on.
    pub fn cupti(&self) -> &'static Cupti {
        self.cupti
    }

    /// Starts recording, until [`Session::finish`]. Nothing is enabled or flushed here (a
    /// flush makes CUPTI set up a new buffer on the next record, inside the run): the sinks
    /// are cleared, and records of earlier work still buffered are left out by their start.
    pub fn start(&mut self) -> std::result::Result<Session<'_>, String> {
        let c = self.cupti;
        c.dropped()?;
        lock(&ACTIVITIES).clear();
        lock(&CALLS).clear();
        SKIPPED.store(0, Ordering::Relaxed);
        ready_buffers();
        let start_ns = c.now_ns();
        RECORDING.store(true, Ordering::SeqCst);
        Ok(Session { enabled: self, start_ns })
    }
}

impl Drop for Enabled {
    fn drop(&mut self) {
        let c = self.cupti;
        let _ = c.set_activities(false);
        let _ = c.set_callbacks(self.subscriber, false);
        // Records still buffered are delivered now (and discarded: nothing records).
        let _ = c.flush();
    }
}

/// A recording in progress; dropping it without [`Session::finish`] stops it too (CUPTI
/// stays on until its [`Enabled`] drops).
pub struct Session<'a> {
    enabled: &'a mut Enabled,
    start_ns: u64,
}

impl Session<'_> {
    /// Stops recording and hands over everything recorded. Call it once the recorded work
    /// has completed: records of unfinished work are not delivered.
    pub fn finish(self) -> std::result::Result<Collected, String> {
        let c = self.enabled.cupti;
        c.flush()?;
        RECORDING.store(false, Ordering::SeqCst);
        let dropped = c.dropped()?;
        let mut activities = std::mem::take(&mut *lock(&ACTIVITIES));
        // Work enqueued before the session cannot be in it, whenever CUPTI delivered it.
        activities.retain(|a| a.start_ns >= self.start_ns);
        activities.sort_by_key(|a| (a.start_ns, a.correlation));
        Ok(Collected {
            activities,
            calls: std::mem::take(&mut *lock(&CALLS)),
            skipped: SKIPPED.swap(0, Ordering::Relaxed),
            dropped,
        })
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        RECORDING.store(false, Ordering::SeqCst);
    }
}

/// Activity buffers: a few thousand records each (CUPTI asks for another when one fills).
const BUFFER_BYTES: usize = 2 << 20;
const BUFFER_ALIGN: usize = 8;
/// Buffers kept ready before a recording starts.
const BUFFERS_READY: usize = 4;

/// Buffers CUPTI handed back, kept for its next request (addresses). A fresh allocation is
/// fresh pages, faulted in as CUPTI first writes them, on the thread enqueueing the work and
/// inside the recorded run: with a new 8 MiB buffer per recording, the first copy of an H200
/// run finished 2 to 4 ms late (recording cost +25%). Reused buffers are resident.
static POOL: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn buffer_layout(size: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(size, BUFFER_ALIGN).ok()
}

/// A buffer of [`BUFFER_BYTES`], from the pool or newly allocated (null when out of memory).
fn take_buffer() -> *mut u8 {
    if let Some(address) = lock(&POOL).pop() {
        return address as *mut u8;
    }
    match buffer_layout(BUFFER_BYTES) {
        // SAFETY: a non-zero size with a valid alignment.
        Some(l) => unsafe { std::alloc::alloc(l) },
        None => std::ptr::null_mut(),
    }
}

/// Fills the pool up to [`BUFFERS_READY`] buffers with every page touched, so no recorded
/// run pays for faulting them in.
fn ready_buffers() {
    let missing = BUFFERS_READY.saturating_sub(lock(&POOL).len());
    for _ in 0..missing {
        let buffer = take_buffer();
        if buffer.is_null() {
            return;
        }
        // SAFETY: a fresh allocation of BUFFER_BYTES bytes that nothing else uses.
        unsafe { std::ptr::write_bytes(buffer, 0, BUFFER_BYTES) };
        lock(&POOL).push(buffer as usize);
    }
}

/// CUPTI asks for an empty activity buffer.
unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let memory = take_buffer();
    // SAFETY: CUPTI passes valid out-pointers.
    unsafe {
        *buffer = memory;
        *size = if memory.is_null() { 0 } else { BUFFER_BYTES };
        *max = 0;
    }
}

/// CUPTI hands back a buffer of records (on its own thread, or in a flush).
unsafe extern "C" fn buffer_completed(
    _context: *mut c_void,
    _stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    // Records of work done while nothing records (warm-ups, runs between sessions) are
    // discarded unread.
    let recording = RECORDING.load(Ordering::SeqCst);
    if let (true, Some(Ok(cupti))) = (recording, CUPTI.get()) {
        let mut parsed = Vec::new();
        let mut record: *mut c_void = std::ptr::null_mut();
        loop {
            // SAFETY: `buffer` holds `valid` bytes of records; CUPTI advances `record`.
            let status =
                unsafe { (cupti.api.activity_get_next_record)(buffer, valid, &mut record) };
            if status != CUPTI_SUCCESS || record.is_null() {
                break; // CUPTI_ERROR_MAX_LIMIT_REACHED: no more records
            }
            // SAFETY: every record starts with its 4-byte kind.
            let kind = unsafe { (record as *const u32).read_unaligned() };
            let Some(len) = layout::prefix_len(kind) else {
                SKIPPED.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            // SAFETY: a record of this kind is at least `len` bytes (module doc, Record
            // layouts), inside the valid part of the buffer.
            let bytes = unsafe { std::slice::from_raw_parts(record as *const u8, len) };
            let name = |ptr: usize| {
                if ptr == 0 {
                    return String::new();
                }
                // SAFETY: a kernel record's name is a NUL-terminated string CUPTI keeps
                // alive at least while its buffer is being read.
                unsafe { CStr::from_ptr(ptr as *const c_char) }.to_string_lossy().into_owned()
            };
            match parse_record(bytes, name) {
                Some(a) => parsed.push(a),
                None => {
                    SKIPPED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        lock(&ACTIVITIES).extend(parsed);
    }
    if size == BUFFER_BYTES {
        lock(&POOL).push(buffer as usize);
    } else if let Some(l) = buffer_layout(size) {
        // SAFETY: `buffer` came from `buffer_requested` with this size and alignment.
        unsafe { std::alloc::dealloc(buffer, l) };
    }
}

/// CUPTI calls this on the calling thread as a traced driver call enters and exits.
unsafe extern "C" fn on_driver_call(
    _userdata: *mut c_void,
    domain: u32,
    cbid: u32,
    data: *const c_void,
) {
    // Enabled but idle costs the traced call only this load.
    if !RECORDING.load(Ordering::Relaxed) {
        return;
    }
    let Some(Ok(cupti)) = CUPTI.get() else { return };
    if domain != DOMAIN_DRIVER_API || data.is_null() {
        return;
    }
    let now = cupti.now_ns();
    // SAFETY: for the driver API domain CUPTI passes a CUpti_CallbackData.
    let data = unsafe { &*(data as *const CallbackData) };
    if data.callback_site != API_ENTER {
        let mut calls = lock(&CALLS);
        if let Some(call) = calls.iter_mut().rev().find(|c| c.correlation == data.correlation_id) {
            call.end_ns = now;
        }
        return;
    }
    let handles = TRACED.iter().find(|(id, _)| *id == cbid).map_or(Handles::None, |(_, h)| *h);
    let params = data.function_params as *const usize;
    let field = |i: usize| {
        if params.is_null() {
            0
        } else {
            // SAFETY: the parameter struct of these calls starts with `i + 1` handles
            // (see `Handles`).
            unsafe { params.add(i).read_unaligned() }
        }
    };
    let (stream, event) = match handles {
        Handles::None => (0, 0),
        Handles::Stream => (field(0), 0),
        Handles::Event => (0, field(0)),
        Handles::EventStream => (field(1), field(0)),
        Handles::StreamEvent => (field(0), field(1)),
    };
    // Borrowed, not copied: this runs inside every traced call while the run is timed.
    let function = if data.function_name.is_null() {
        "driver call"
    } else {
        // SAFETY: CUPTI passes the function's NUL-terminated name, "a global constant and so
        // may be accessed outside of the callback" (`CUpti_CallbackData::functionName`).
        let name: &'static CStr = unsafe { CStr::from_ptr(data.function_name) };
        name.to_str().unwrap_or("driver call")
    };
    let call = ApiCall {
        function,
        correlation: data.correlation_id,
        start_ns: now,
        end_ns: now,
        tag: OP_TAG.with(Cell::get),
        thread: thread_number(),
        stream,
        event,
    };
    lock(&CALLS).push(call);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(len: usize, fields: &[(usize, &[u8])]) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for (at, bytes) in fields {
            b[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        b
    }

    /// The offsets of the fields read, as `cupti_activity.h` lays them out (CUDA 12.0 to 13.x):
    /// a transcription error in `layout` moves one of them.
    #[test]
    fn layouts_match_cupti_activity_h() {
        use layout::*;
        use std::mem::{offset_of, size_of};
        let kernel = [
            offset_of!(Kernel, start),
            offset_of!(Kernel, end),
            offset_of!(Kernel, device_id),
            offset_of!(Kernel, stream_id),
            offset_of!(Kernel, grid),
            offset_of!(Kernel, block),
            offset_of!(Kernel, correlation_id),
            offset_of!(Kernel, name),
        ];
        assert_eq!(kernel, [16, 24, 40, 48, 52, 64, 92, 104]);
        assert_eq!(size_of::<Kernel>(), 112);
        let transfer = [
            offset_of!(Transfer, head),
            offset_of!(Transfer, bytes),
            offset_of!(Transfer, start),
            offset_of!(Transfer, end),
            offset_of!(Transfer, device_id),
            offset_of!(Transfer, stream_id),
        ];
        assert_eq!(transfer, [4, 8, 16, 24, 32, 40]);
        assert_eq!((offset_of!(Memcpy, correlation_id), size_of::<Memcpy>()), (44, 48));
        let peer = [
            offset_of!(MemcpyPtoP, src_device_id),
            offset_of!(MemcpyPtoP, dst_device_id),
            offset_of!(MemcpyPtoP, correlation_id),
        ];
        assert_eq!(peer, [44, 52, 60]);
        assert_eq!(size_of::<MemcpyPtoP>(), 64);
    }

    // The records below are written at the header's offsets (numbers, not `layout`'s names).

    #[test]
    fn a_kernel_record_is_read_from_its_shared_prefix() {
        // A CUpti_ActivityKernel10 is 256 bytes; only the prefix is read.
        let grid: Vec<u8> = [4096u32, 1, 1].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let block: Vec<u8> = [256u32, 1, 1].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let b = record(
            256,
            &[
                (0, &10u32.to_ne_bytes()),
                (16, &1_000u64.to_ne_bytes()), // start
                (24, &3_500u64.to_ne_bytes()), // end
                (40, &1u32.to_ne_bytes()),     // deviceId
                (48, &13u32.to_ne_bytes()),    // streamId
                (52, &grid),
                (64, &block),
                (92, &77u32.to_ne_bytes()),      // correlationId
                (104, &0xABCDu64.to_ne_bytes()), // name
            ],
        );
        let a = parse_record(&b, |ptr| format!("kernel@{ptr:x}")).unwrap();
        assert_eq!(
            a,
            Activity {
                work: Work::Kernel {
                    name: "kernel@abcd".into(),
                    grid: [4096, 1, 1],
                    block: [256, 1, 1]
                },
                start_ns: 1_000,
                end_ns: 3_500,
                device: 1,
                stream: 13,
                correlation: 77,
                bytes: 0,
            }
        );
    }

    #[test]
    fn copies_peer_copies_and_memsets_are_read() {
        // Memcpy, PtoP and Memset share bytes (8), start (16), end (24), deviceId (32) and
        // streamId (40); `tail` writes the u32 fields after those.
        let transfer = |len: usize, kind: u32, head: [u8; 4], tail: &[(usize, u32)]| {
            let mut b = record(
                len,
                &[
                    (0, &kind.to_ne_bytes()),
                    (4, &head),
                    (8, &(8u64 << 20).to_ne_bytes()),
                    (16, &10u64.to_ne_bytes()),
                    (24, &20u64.to_ne_bytes()),
                    (32, &2u32.to_ne_bytes()),
                    (40, &7u32.to_ne_bytes()),
                ],
            );
            for (at, v) in tail {
                b[*at..*at + 4].copy_from_slice(&v.to_ne_bytes());
            }
            let a = parse_record(&b, |_| unreachable!()).unwrap();
            assert_eq!(
                (a.bytes, a.start_ns, a.end_ns, a.device, a.stream),
                (8 << 20, 10, 20, 2, 7)
            );
            (a.work, a.correlation)
        };
        // A CUpti_ActivityMemcpy6 is 88 bytes; only the prefix is read. 44: correlationId.
        let pinned_to_device = Work::Copy {
            kind: CopyKind::HostToDevice,
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
        };
        assert_eq!(transfer(88, 1, [1, 2, 3, 0], &[(44, 5)]), (pinned_to_device, 5));
        // 44: srcDeviceId, 52: dstDeviceId, 60: correlationId.
        let peer = Work::Peer { src_device: 0, dst_device: 1 };
        assert_eq!(transfer(64, 22, [10, 3, 3, 0], &[(44, 0), (52, 1), (60, 9)]), (peer, 9));
        // A memset's bytes 4..8 are its value.
        assert_eq!(transfer(48, 2, 0xFFu32.to_ne_bytes(), &[(44, 6)]), (Work::Memset, 6));
    }

    #[test]
    fn unknown_kinds_and_short_records_are_skipped() {
        assert!(
            parse_record(&record(64, &[(0, &4u32.to_ne_bytes())]), |_| unreachable!()).is_none()
        );
        assert!(
            parse_record(&record(40, &[(0, &10u32.to_ne_bytes())]), |_| unreachable!()).is_none()
        );
        assert!(
            parse_record(&record(44, &[(0, &1u32.to_ne_bytes())]), |_| unreachable!()).is_none()
        );
        assert!(parse_record(&[1, 0], |_| unreachable!()).is_none());
    }

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
    fn traced_calls_are_listed_once() {
        let mut ids: Vec<u32> = TRACED.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), TRACED.len());
    }
}
