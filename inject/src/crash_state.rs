//! Whether a fatal signal is being handled, and locks taken with that in mind: the state
//! the signal handler (`signals.rs`) sets and the recorder's writers (`watch.rs`,
//! `buffers.rs`) read, a floor below both.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crate::lock;

/// The longest the handler waits for one of the recorder's locks.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// A fatal signal is being handled: locks are waited for at most [`LOCK_WAIT`], the flush
/// thread stops.
static CRASHING: AtomicBool = AtomicBool::new(false);

/// Marks a crash as being handled; `false` when one already was (a second thread faulted).
pub fn begin() -> bool {
    CRASHING.swap(true, Ordering::AcqRel)
}

/// Whether a fatal signal is being handled.
pub fn crashing() -> bool {
    CRASHING.load(Ordering::Acquire)
}

/// `mutex`, locked: at once as usual, or, while a crash is handled, within [`LOCK_WAIT`]
/// (`None` past it: the lock is held by a thread that may never let go, this one included).
pub fn hold<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    if !crashing() {
        return Some(lock(mutex));
    }
    let start = Instant::now();
    loop {
        match mutex.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if start.elapsed() >= LOCK_WAIT => return None,
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn while_a_crash_is_handled_a_lock_held_forever_is_given_up() {
        let mutex = Mutex::new(7);
        assert_eq!(hold(&mutex).map(|g| *g), Some(7));
        let held = lock(&mutex);
        CRASHING.store(true, Ordering::Release);
        // This very thread holds it: waiting would never end.
        let given_up = hold(&mutex).is_none();
        CRASHING.store(false, Ordering::Release);
        assert!(given_up);
        drop(held);
    }
}
