//! The fatal signals: SIGSEGV, SIGABRT, SIGBUS, SIGFPE and SIGILL flush the records before
//! the process dies as it would have (see the crate's doc for what is not
//! async-signal-safe here, and why that is accepted).
//!
//! At start, each signal's action is saved and the recorder's handler installed (with
//! `SA_SIGINFO`, and without `SA_ONSTACK`: the handler formats and writes lines, more than
//! the small alternate stacks threads are given hold). The handler, once per process:
//! 1. arms the watchdog, a thread of the recorder's that sleeps in `read` on a pipe: if the
//!    handler has not disarmed it within [`WATCHDOG`], it restores the default action and
//!    sends the signal to the process, which then dies by it whatever the handler is stuck
//!    in (a lock of malloc's, of CUPTI's);
//! 2. does the exit handler's work with locks it waits for at most [`crash_state::LOCK_WAIT`] each (a
//!    crash inside the recorder's own lock cannot deadlock): the forced flush, the records
//!    decided and written, then `Crashed` in place of `Exit`;
//! 3. disarms the watchdog, restores the saved action, and lets the signal act again: a
//!    fault (a signal the kernel sent, `si_code > 0`) happens again when the handler returns
//!    to the faulting instruction, and the saved handler (Python's faulthandler, Rust's
//!    stack-overflow check) gets it with its own information; any other (`abort`, `kill`,
//!    `raise`) is raised again, delivered as the handler returns. Either way the exit status
//!    stays the signal's (128+N to a shell).
//!
//! A second thread that faults meanwhile waits for the first to finish (at most the
//! watchdog's time), then goes on to the saved action. A child forked without exec inherits
//! the handler but is not the recorder's process: it goes straight to the saved action.
//! Nothing here assumes the signal is fatal beyond this: a program that handles these
//! signals itself to go on (a JVM's null checks) and installed its handler before the
//! recorder's would see its records end with `Crashed` at its first such signal.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::crash_state;
use crate::{watch, RECORDER};

/// The signals handled, in the order their saved actions are kept.
const FATAL: [i32; 5] = [libc::SIGSEGV, libc::SIGABRT, libc::SIGBUS, libc::SIGFPE, libc::SIGILL];
/// The longest the handler may take before the watchdog ends the process.
pub const WATCHDOG: Duration = Duration::from_secs(10);

/// The handling finished (for a second thread that faulted meanwhile).
static CRASH_DONE: AtomicBool = AtomicBool::new(false);
/// Each signal's action before the recorder's.
static SAVED: OnceLock<[libc::sigaction; 5]> = OnceLock::new();
/// The watchdog pipe's writing end (-1: no watchdog).
static WATCHDOG_PIPE: AtomicI32 = AtomicI32::new(-1);

/// Saves each signal's action and installs the handler; starts the watchdog. What cannot
/// be done is left undone (nothing here may fail the program).
pub fn install() {
    if SAVED.get().is_some() {
        return;
    }
    // SAFETY: an all-zero `sigaction` is a valid value of the C struct (SIG_DFL, no flags).
    let mut saved: [libc::sigaction; 5] = unsafe { std::mem::zeroed() };
    for (signal, slot) in FATAL.iter().zip(saved.iter_mut()) {
        // SAFETY: a query (null new action) with a valid out-pointer.
        unsafe { libc::sigaction(*signal, std::ptr::null(), slot) };
    }
    if SAVED.set(saved).is_err() {
        return;
    }
    start_watchdog();
    // SAFETY: as above, zeroed then filled in.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) = on_fatal;
    action.sa_sigaction = handler as *const () as usize;
    action.sa_flags = libc::SA_SIGINFO;
    // SAFETY: a valid `sigset_t` to empty; then each signal gets the same plain action.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    for signal in FATAL {
        // SAFETY: a valid action whose handler has the SA_SIGINFO signature.
        unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
    }
}

/// The watchdog thread: on a signal number from the handler it waits [`WATCHDOG`] for the
/// handler's 0; without it, the process dies by that signal's default action.
fn start_watchdog() {
    let mut ends = [0; 2];
    // SAFETY: a valid array of two descriptors.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [read_end, write_end] = ends;
    let spawned = std::thread::Builder::new().name("streamlab-crash".into()).spawn(move || loop {
        let Some(signal) = read_signal(read_end, None) else { return };
        if signal == 0 {
            continue;
        }
        let millis = WATCHDOG.as_millis() as i32;
        if read_signal(read_end, Some(millis)).is_none() {
            die_by(signal);
        }
    });
    if spawned.is_ok() {
        WATCHDOG_PIPE.store(write_end, Ordering::Release);
    }
}

/// A signal number from the pipe, waiting at most `millis` (forever: `None`); `None` when
/// none came.
fn read_signal(fd: i32, millis: Option<i32>) -> Option<i32> {
    if let Some(millis) = millis {
        let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut poll, 1, millis) } <= 0 {
            return None;
        }
    }
    let mut number = [0u8; 4];
    // SAFETY: reads at most 4 bytes into a 4-byte buffer.
    let read = unsafe { libc::read(fd, number.as_mut_ptr().cast(), 4) };
    (read == 4).then(|| i32::from_ne_bytes(number))
}

/// Tells the watchdog `signal` (0: done). Async-signal-safe: one `write`.
fn tell_watchdog(signal: i32) {
    let fd = WATCHDOG_PIPE.load(Ordering::Acquire);
    if fd >= 0 {
        let bytes = signal.to_ne_bytes();
        // SAFETY: writes 4 bytes from a 4-byte buffer to our pipe.
        unsafe { libc::write(fd, bytes.as_ptr().cast(), 4) };
    }
}

/// The default action for `signal`, then the signal sent to the whole process.
fn die_by(signal: i32) {
    // SAFETY: plain calls with valid arguments; SIG_DFL ends the process for these signals.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
    }
}

/// Puts back `signal`'s action from before the recorder's (the default one if unknown).
fn restore(signal: i32) {
    let saved = SAVED.get().and_then(|all| FATAL.iter().position(|&s| s == signal).map(|i| all[i]));
    match saved {
        // SAFETY: an action the system gave back for this very signal.
        Some(action) => unsafe {
            libc::sigaction(signal, &action, std::ptr::null_mut());
        },
        // SAFETY: a plain call with valid arguments.
        None => unsafe {
            libc::signal(signal, libc::SIG_DFL);
        },
    }
}

/// The handler (see the module's doc).
extern "C" fn on_fatal(signal: i32, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    let ours = RECORDER.get().filter(|r| r.pid == std::process::id());
    if let Some(recorder) = ours {
        if !crash_state::begin() {
            tell_watchdog(signal);
            let _ = catch_unwind(AssertUnwindSafe(|| watch::finish(recorder, Some(signal))));
            CRASH_DONE.store(true, Ordering::Release);
            tell_watchdog(0);
        } else {
            let start = Instant::now();
            while !CRASH_DONE.load(Ordering::Acquire) && start.elapsed() < WATCHDOG {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    restore(signal);
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } > 0;
    let faults_again = from_kernel && signal != libc::SIGABRT;
    if !faults_again {
        // SAFETY: a plain call; the signal is blocked in its handler, so it is delivered as
        // the handler returns.
        unsafe { libc::raise(signal) };
    }
}
