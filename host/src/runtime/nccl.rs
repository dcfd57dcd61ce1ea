//! NCCL, opened at run time: communicators and the all-reduce, enqueued on streamlab's
//! streams like any other operation.
//!
//! Why not cudarc's `nccl` module: its loader looks for `libnccl.so`, `libnccl.so.12`,
//! `.so.11`, ... but not `libnccl.so.2`, the name Debian's `libnccl2` and NVIDIA's wheels
//! install, and it panics when the library is missing. Ten functions of `nccl.h` are all
//! streamlab calls, so they are declared here, found by [`candidates`], and a missing
//! library is a one-line [`Error::NotRun`] naming what to install.
//!
//! NVLink SHARP (NVLS, collectives offloaded to the NVSwitch through NVLink multicast) is turned
//! off for this process (`NCCL_NVLS_ENABLE=0`) before the library is opened: the shared GPU
//! hosts streamlab is developed and measured on require multicast off.
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::OnceLock;

use bytemuck::Pod;
use libloading::Library;

use crate::runtime::context::Context;
use crate::runtime::cupti::python_sites;
use crate::runtime::driver;
use crate::runtime::error::{Error, Result};
use crate::runtime::memory::DeviceView;
use crate::runtime::op::{Op, OpKind};
use crate::runtime::stream::{Observer, Stream};
use crate::t;
use crate::text::Text;

/// `ncclUniqueId`: what every rank needs to find the others (128 opaque bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct UniqueId {
    internal: [c_char; 128],
}

impl UniqueId {
    /// The id as 256 hex digits, to pass through a file, a pipe or a socket.
    pub fn to_hex(&self) -> String {
        self.internal.iter().map(|b| format!("{:02x}", *b as u8)).collect()
    }

    /// Reads [`UniqueId::to_hex`]'s text back.
    pub fn from_hex(text: &str) -> Result<UniqueId> {
        let text = text.trim();
        let bad =
            || Error::InvalidInput(t!("error.runtime.nccl_bad_id", text = format!("{text:.40}")));
        if text.len() != 256 || !text.is_ascii() {
            return Err(bad());
        }
        let mut internal = [0 as c_char; 128];
        for (i, byte) in internal.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())? as c_char;
        }
        Ok(UniqueId { internal })
    }
}

type Comm = *mut c_void;
type Status = c_int;
/// `ncclFloat32` and `ncclSum` in `nccl.h`.
const FLOAT32: c_int = 7;
const SUM: c_int = 0;

struct Api {
    version: unsafe extern "C" fn(*mut c_int) -> Status,
    unique_id: unsafe extern "C" fn(*mut UniqueId) -> Status,
    init_rank: unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> Status,
    init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> Status,
    destroy: unsafe extern "C" fn(Comm) -> Status,
    group_start: unsafe extern "C" fn() -> Status,
    group_end: unsafe extern "C" fn() -> Status,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        cudarc::driver::sys::CUstream,
    ) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    last_error: unsafe extern "C" fn(Comm) -> *const c_char,
    path: String,
    _lib: Library,
}

/// Where NCCL is looked for, in order: `$STREAMLAB_NCCL` (a file), the loader's path under
/// the names installs use (`libnccl.so.2` first), then NVIDIA's `nvidia-nccl-cu*` wheels in
/// the environment streamlab is installed in (pip), the usual Python folders and PyTorch's venv.
pub fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        std::env::var_os("STREAMLAB_NCCL").map(PathBuf::from).into_iter().collect();
    out.extend(["libnccl.so.2", "libnccl.so"].iter().map(PathBuf::from));
    for site in python_sites() {
        out.push(site.join("nvidia/nccl/lib/libnccl.so.2"));
    }
    out
}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, Text>> = OnceLock::new();
    API.get_or_init(|| {
        // Before the library reads its settings: never NVLink multicast (see the module doc).
        std::env::set_var("NCCL_NVLS_ENABLE", "0");
        for path in candidates() {
            // SAFETY: opening NCCL runs its initialisers, which have no preconditions.
            let Ok(lib) = (unsafe { Library::new(&path) }) else { continue };
            // SAFETY: each type is the function's C signature from nccl.h (2.x).
            let api = unsafe {
                (|| -> std::result::Result<Api, libloading::Error> {
                    Ok(Api {
                        version: *lib.get(b"ncclGetVersion\0")?,
                        unique_id: *lib.get(b"ncclGetUniqueId\0")?,
                        init_rank: *lib.get(b"ncclCommInitRank\0")?,
                        init_all: *lib.get(b"ncclCommInitAll\0")?,
                        destroy: *lib.get(b"ncclCommDestroy\0")?,
                        group_start: *lib.get(b"ncclGroupStart\0")?,
                        group_end: *lib.get(b"ncclGroupEnd\0")?,
                        all_reduce: *lib.get(b"ncclAllReduce\0")?,
                        error_string: *lib.get(b"ncclGetErrorString\0")?,
                        last_error: *lib.get(b"ncclGetLastError\0")?,
                        path: path.display().to_string(),
                        _lib: lib,
                    })
                })()
            };
            let path = path.display().to_string();
            return api.map_err(|e| t!("error.runtime.nccl_unusable", path, why = e.to_string()));
        }
        // What to do when NCCL is missing, in one line.
        Err(t!("error.runtime.nccl_not_found"))
    })
    .as_ref()
    .map_err(Text::clone)
    .map_err(Error::NotRun)
}

/// Turns an NCCL status into a `Result`, with NCCL's words for it (and the communicator's
/// last error, which says more).
fn check(api: &Api, status: Status, op: &str, stream: Option<&Stream>, comm: Comm) -> Result<()> {
    // NCCL sets the device itself (cudaSetDevice): our idea of the current context is stale.
    Context::forget_current();
    if status == 0 {
        return Ok(());
    }
    // SAFETY: both return static NUL-terminated strings; a null communicator is allowed.
    let (what, last) =
        unsafe { (CStr::from_ptr((api.error_string)(status)), (api.last_error)(comm)) };
    let mut message = format!("{} ({status})", what.to_string_lossy());
    if !last.is_null() {
        // SAFETY: checked non-null; NCCL owns the string.
        let last = unsafe { CStr::from_ptr(last) }.to_string_lossy();
        if !last.is_empty() {
            message.push_str(&format!(": {last}"));
        }
    }
    Err(Error::Nccl { op: op.into(), stream: stream.map(|s| s.name().to_string()), message })
}

/// The NCCL this process opened: its version ("2.28.3") and file, or why it cannot run.
pub fn version() -> Result<(String, String)> {
    let api = api()?;
    let mut v = 0;
    // SAFETY: valid out-pointer.
    check(api, unsafe { (api.version)(&mut v) }, "ncclGetVersion", None, std::ptr::null_mut())?;
    Ok((format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100), api.path.clone()))
}

/// A new id for a group of ranks to meet by (`ncclGetUniqueId`; rank 0 makes it).
pub fn unique_id() -> Result<UniqueId> {
    let api = api()?;
    let mut id = UniqueId { internal: [0; 128] };
    // SAFETY: valid out-pointer to a 128-byte `ncclUniqueId`.
    check(api, unsafe { (api.unique_id)(&mut id) }, "ncclGetUniqueId", None, std::ptr::null_mut())?;
    Ok(id)
}

/// One rank's membership of an NCCL communicator, on one GPU.
pub struct Communicator {
    raw: Comm,
    rank: usize,
    size: usize,
    context: Context,
}

impl Communicator {
    /// One communicator per GPU, all in this process (`ncclCommInitAll`): rank i is
    /// `contexts[i]`'s GPU.
    pub fn all(contexts: &[&Context]) -> Result<Vec<Communicator>> {
        let api = api()?;
        let devices: Vec<c_int> = contexts.iter().map(|c| c.ordinal() as c_int).collect();
        let mut raw = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: `raw` has room for one communicator per device in `devices`.
        let status =
            unsafe { (api.init_all)(raw.as_mut_ptr(), devices.len() as c_int, devices.as_ptr()) };
        check(api, status, "ncclCommInitAll", None, std::ptr::null_mut())?;
        let size = raw.len();
        Ok(raw
            .into_iter()
            .zip(contexts)
            .enumerate()
            .map(|(rank, (raw, c))| Communicator { raw, rank, size, context: (*c).clone() })
            .collect())
    }

    /// This process's rank of `size`, on `context`'s GPU (`ncclCommInitRank`). Returns when
    /// every rank has joined, or fails after `wait`: a partner that never starts (or died
    /// before joining) would otherwise hold this rank in NCCL forever.
    pub fn join(
        context: &Context,
        id: &UniqueId,
        rank: usize,
        size: usize,
        wait: std::time::Duration,
    ) -> Result<Communicator> {
        let api = api()?;
        context.bind()?;
        // ncclCommInitRank blocks until the others come: it runs on a thread of its own, so
        // this one can give up. The raw handles cross as integers (Context is not Send); the
        // context stays retained by `context`, or forever when this rank gives up (below).
        let raw_context = context.as_raw() as usize;
        let id = *id;
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: the caller retains the context while it waits, and leaks a reference
            // when it stops waiting, so the handle outlives this thread.
            let bound = unsafe { driver::ctx_set_current(raw_context as _) };
            let mut raw: Comm = std::ptr::null_mut();
            let status = if bound.is_ok() {
                // SAFETY: valid out-pointer; the id is passed by value as nccl.h declares;
                // the rank's context is current on this thread, so NCCL finds its device.
                unsafe { (api.init_rank)(&mut raw, size as c_int, id, rank as c_int) }
            } else {
                // ncclUnhandledCudaError.
                1
            };
            let _ = sender.send((status, raw as usize));
        });
        match receiver.recv_timeout(wait) {
            Ok((status, raw)) => {
                check(api, status, "ncclCommInitRank", None, std::ptr::null_mut())?;
                Ok(Communicator { raw: raw as Comm, rank, size, context: context.clone() })
            }
            Err(_) => {
                // The thread is still inside NCCL with this context current: keep the
                // context alive until the process ends.
                std::mem::forget(context.clone());
                Err(Error::Nccl {
                    op: "ncclCommInitRank".into(),
                    stream: None,
                    message: format!(
                        "rank {rank} of {size} waited {} s for the other ranks to join and gave up (STREAMLAB_RENDEZVOUS_TIMEOUT sets the wait)",
                        wait.as_secs_f64()
                    ),
                })
            }
        }
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Enqueues `recv = sum over ranks of send` on `stream` (`ncclAllReduce`, ncclSum). Every
    /// rank must call it, in the same order as every other collective.
    pub fn all_reduce_sum<T: Pod>(
        &self,
        send: DeviceView<'_, T>,
        recv: DeviceView<'_, T>,
        stream: &Stream,
    ) -> Result<()> {
        let api = api()?;
        if std::mem::size_of::<T>() != 4 || send.len() != recv.len() {
            return Err(Error::Internal(format!(
                "ncclAllReduce on stream \"{}\": f32 buffers of equal length only ({} and {})",
                stream.name(),
                send.len(),
                recv.len()
            )));
        }
        let op =
            Op { kind: OpKind::Collective, label: "all-reduce", bytes: send.bytes(), launch: None };
        note_grouped(stream);
        stream.enqueue(op, || {
            // SAFETY: both views are live device memory of `send.len()` f32s on this
            // communicator's GPU; the stream belongs to that GPU's context.
            let status = unsafe {
                (api.all_reduce)(
                    send.device_ptr() as *const c_void,
                    recv.device_ptr() as *mut c_void,
                    send.len(),
                    FLOAT32,
                    SUM,
                    self.raw,
                    stream.as_raw(),
                )
            };
            check(api, status, "ncclAllReduce", Some(stream), self.raw)
        })
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        if let Ok(api) = api() {
            // SAFETY: we own the communicator; its work was waited for by whoever synchronized.
            unsafe { (api.destroy)(self.raw) };
            Context::forget_current();
        }
    }
}

thread_local! {
    /// This thread's open [`group`]s (NCCL's groups nest, and only the outermost end enqueues),
    /// and the streams collectives were issued on inside them.
    static GROUP: RefCell<(usize, Vec<Stream>)> = const { RefCell::new((0, Vec::new())) };
}

/// Whether this thread is inside [`group`]: a collective issued now is not enqueued on its
/// stream until the outermost group ends (NCCL docs, "Group Calls": inside a group, stream
/// operations such as `ncclAllReduce` may return before the operation is enqueued).
pub fn in_group() -> bool {
    GROUP.with(|g| g.borrow().0 > 0)
}

/// Notes `stream` as waiting for the open group's end, if a group is open and something
/// observes the stream (only observers are told of the end: an unobserved run, such as every
/// timed one, notes and allocates nothing).
fn note_grouped(stream: &Stream) {
    if !stream.is_observed() {
        return;
    }
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.0 > 0 && !g.1.iter().any(|s| s.as_raw() == stream.as_raw()) {
            g.1.push(stream.handle());
        }
    });
}

fn open_group() {
    GROUP.with(|g| g.borrow_mut().0 += 1);
}

/// Closes the innermost group: the streams noted in the group, if it was the outermost.
fn close_group() -> Vec<Stream> {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        g.0 = g.0.saturating_sub(1);
        if g.0 == 0 {
            std::mem::take(&mut g.1)
        } else {
            Vec::new()
        }
    })
}

/// The observers attached to `streams`, each once, in the streams' order.
fn observers_of(streams: &[Stream]) -> Vec<Rc<dyn Observer>> {
    let mut out: Vec<Rc<dyn Observer>> = Vec::new();
    for o in streams.iter().filter_map(Stream::observer) {
        if !out.iter().any(|seen| std::ptr::addr_eq(Rc::as_ptr(seen), Rc::as_ptr(&o))) {
            out.push(o);
        }
    }
    out
}

/// Runs `end` once, inside every observer's [`Observer::group_end`] (the first outermost).
fn end_observed(observers: &[Rc<dyn Observer>], end: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    match observers.split_first() {
        None => end(),
        Some((first, rest)) => first.group_end(&mut || end_observed(rest, end)),
    }
}

/// Runs `issue` between `ncclGroupStart` and `ncclGroupEnd`: one thread driving several GPUs
/// must group the collectives of one step, or the first would wait for ranks not yet issued.
///
/// NCCL enqueues the group's collectives in `ncclGroupEnd`, so the observers of the streams
/// they were issued on are called around it ([`Observer::group_end`]), once the outermost
/// group ends.
pub fn group<R>(issue: impl FnOnce() -> Result<R>) -> Result<R> {
    let api = api()?;
    // SAFETY: no arguments.
    check(api, unsafe { (api.group_start)() }, "ncclGroupStart", None, std::ptr::null_mut())?;
    open_group();
    let result = issue();
    let observers = observers_of(&close_group());
    let mut end_group = || {
        // SAFETY: balances the ncclGroupStart above, whatever `issue` returned.
        let status = unsafe { (api.group_end)() };
        check(api, status, "ncclGroupEnd", None, std::ptr::null_mut())
    };
    let end = end_observed(&observers, &mut end_group);
    let value = result?;
    end?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ids_survive_hex() {
        let mut id = UniqueId { internal: [0; 128] };
        for (i, b) in id.internal.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8 as c_char;
        }
        let text = id.to_hex();
        assert_eq!(text.len(), 256);
        assert!(UniqueId::from_hex(&text).ok() == Some(id));
        assert!(UniqueId::from_hex("abc").is_err());
        assert!(UniqueId::from_hex(&"zz".repeat(128)).is_err());
    }

    #[test]
    fn nccl_is_found_or_missing_in_one_line_that_says_what_to_install() {
        match version() {
            Ok((v, path)) => assert!(v.starts_with("2.") && !path.is_empty(), "{v} {path}"),
            Err(e) => {
                assert_eq!(e.exit_code(), 3);
                let line = e.to_string();
                assert!(line.contains("apt install libnccl2") && !line.contains('\n'), "{line}");
            }
        }
        assert_eq!(std::env::var("NCCL_NVLS_ENABLE").as_deref(), Ok("0"));
    }

    /// Notes the order in which group ends were bracketed.
    struct Bracket {
        name: &'static str,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl Observer for Bracket {
        fn observe(
            &self,
            _stream: &Stream,
            _op: &Op<'_>,
            enqueue: &mut dyn FnMut() -> Result<()>,
        ) -> Result<()> {
            enqueue()
        }

        fn group_end(&self, end: &mut dyn FnMut() -> Result<()>) -> Result<()> {
            self.log.borrow_mut().push(format!("{} before", self.name));
            end()?;
            self.log.borrow_mut().push(format!("{} after", self.name));
            Ok(())
        }
    }

    #[test]
    fn the_group_end_runs_once_inside_every_observer() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let observers: Vec<Rc<dyn Observer>> = ["a", "b"]
            .into_iter()
            .map(|name| Rc::new(Bracket { name, log: Rc::clone(&log) }) as Rc<dyn Observer>)
            .collect();
        let mut ends = 0;
        end_observed(&observers, &mut || {
            ends += 1;
            log.borrow_mut().push("ncclGroupEnd".into());
            Ok(())
        })
        .unwrap();
        assert_eq!(ends, 1);
        assert_eq!(*log.borrow(), ["a before", "b before", "ncclGroupEnd", "b after", "a after"]);
        let mut bare = 0;
        end_observed(&[], &mut || {
            bare += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(bare, 1);
    }

    #[test]
    fn only_the_outermost_group_end_hands_back_its_streams() {
        assert!(!in_group());
        open_group();
        open_group();
        assert!(in_group());
        assert!(close_group().is_empty());
        assert!(in_group(), "the outer group is still open");
        close_group();
        assert!(!in_group());
        // An unbalanced close does not wrap around.
        close_group();
        assert!(!in_group());
    }

    #[test]
    fn libnccl_so_2_is_looked_for_first_on_the_loader_path() {
        let names: Vec<String> = candidates().iter().map(|p| p.display().to_string()).collect();
        let first = names.iter().position(|n| n == "libnccl.so.2").expect("libnccl.so.2 listed");
        let bare = names.iter().position(|n| n == "libnccl.so").expect("libnccl.so listed");
        assert!(first < bare, "{names:?}");
    }
}
