//! A host thread that works on the GPU beside the main thread: for what depends on which
//! host thread enqueues (the per-thread default stream).
//!
//! | CUDA C++                                          | streamlab                                   |
//! |---------------------------------------------------|---------------------------------------------|
//! | `std::thread t([&] { cudaSetDevice(0); ... })`    | `Worker::spawn(ordinal, \|gpu\| init(gpu))`   |
//! | (the thread's work, its result back to main)      | `worker.run(\|gpu, state\| ...)?.wait()`     |
//!
//! The handles the main thread holds (context, streams, buffers) are reference-counted with
//! `Rc`, so the compiler keeps them on their thread. A worker gets its own instead: its
//! thread retains the same device's primary context (the context the main thread uses) and
//! makes it current there (`cuCtxSetCurrent`), then loads its own copy of the kernels. Its
//! state and everything it makes stay on its thread; jobs are `Send` closures, and their
//! results come back over a channel.
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::runtime::error::{Error, Result};
use crate::runtime::gpu::Gpu;

type Job<S> = Box<dyn FnOnce(&Gpu, &mut S) + Send>;

/// A host thread with its own [`Gpu`] on the same primary context, and a state `S` made
/// there. Dropped, it finishes the job in hand and its thread ends.
pub struct Worker<S> {
    name: String,
    jobs: Option<mpsc::Sender<Job<S>>>,
    thread: Option<JoinHandle<()>>,
}

/// The result of a job, once the worker has run it.
pub struct Reply<R> {
    name: String,
    result: mpsc::Receiver<R>,
}

impl<R> Reply<R> {
    /// Waits for the job to finish and returns what it returned.
    pub fn wait(self) -> Result<R> {
        self.result.recv().map_err(|_| gone(&self.name))
    }
}

fn gone(name: &str) -> Error {
    Error::Internal(format!("host thread \"{name}\" ended before it answered (a job panicked)"))
}

impl<S: 'static> Worker<S> {
    /// Starts a thread named `name` that makes device `ordinal`'s primary context current,
    /// loads the kernels, and makes its state with `init`. Returns once that is done, with
    /// its error if it failed.
    pub fn spawn(
        name: &str,
        ordinal: u32,
        init: impl FnOnce(&Gpu) -> Result<S> + Send + 'static,
    ) -> Result<Worker<S>> {
        let (jobs, queue) = mpsc::channel::<Job<S>>();
        let (ready, started) = mpsc::channel::<Result<()>>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let made = Gpu::new(ordinal).and_then(|gpu| Ok((init(&gpu)?, gpu)));
                let (mut state, gpu) = match made {
                    Ok(made) => made,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                for job in queue {
                    job(&gpu, &mut state);
                }
                // The state goes before the kernels and the context it was made in.
                drop(state);
            })
            .map_err(|e| Error::Internal(format!("could not start host thread \"{name}\": {e}")))?;
        let worker = Worker { name: name.into(), jobs: Some(jobs), thread: Some(thread) };
        started.recv().map_err(|_| gone(name))??;
        Ok(worker)
    }

    /// Hands `job` to the thread, which runs it after the jobs before it; returns at once.
    pub fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce(&Gpu, &mut S) -> R + Send + 'static,
    ) -> Result<Reply<R>> {
        let (answer, result) = mpsc::channel();
        let job: Job<S> = Box::new(move |gpu, state| {
            let _ = answer.send(job(gpu, state));
        });
        let jobs = self.jobs.as_ref().ok_or_else(|| gone(&self.name))?;
        jobs.send(job).map_err(|_| gone(&self.name))?;
        Ok(Reply { name: self.name.clone(), result })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<S> Drop for Worker<S> {
    fn drop(&mut self) {
        // Closing the queue ends the thread's loop.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
