//! A rank's process as the launcher ([`crate::lab::ddp::launcher`]) sees it: started with its
//! stderr through a pipe that a thread of its own reads, forwarding each line as it comes
//! (`rank N: ` before it for N > 0) and holding back a `streamlab: ` line until another
//! follows it, since a rank's last such line says why it failed
//! ([`crate::lab::ddp::rank_endings`] names the rank with it).
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::t;
use crate::text::Text;

/// Where the launcher's lines and the ranks' forwarded lines go: stderr, or a test's list.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// A rank's process, its stderr read by a thread of its own.
pub struct RankProcess {
    pub rank: usize,
    pub gpu: usize,
    pub(super) child: Child,
    stderr: Arc<Mutex<Held>>,
}

/// What a rank's stderr reader keeps: the `streamlab: ` line not yet known to be its last,
/// and whether the pipe has closed.
#[derive(Default)]
struct Held {
    line: Option<String>,
    closed: bool,
}

fn lock(held: &Mutex<Held>) -> MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RankProcess {
    /// Starts `command` as rank `rank` on GPU `gpu`, its stderr through a pipe to `say`.
    pub fn start(
        rank: usize,
        gpu: usize,
        mut command: Command,
        say: &Say,
    ) -> std::io::Result<RankProcess> {
        let mut child = command.stderr(Stdio::piped()).spawn()?;
        let stderr = Arc::new(Mutex::new(Held::default()));
        match child.stderr.take() {
            Some(pipe) => {
                let (held, say) = (Arc::clone(&stderr), Arc::clone(say));
                std::thread::spawn(move || forward(pipe, rank, &held, &say));
            }
            None => lock(&stderr).closed = true,
        }
        Ok(RankProcess { rank, gpu, child, stderr })
    }

    /// The rank's last `streamlab: ` line, once its stderr has closed. Waits a little at most:
    /// a process the rank started may hold the pipe open after the rank has ended.
    pub(super) fn kept_line(&self) -> Option<String> {
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            let held = lock(&self.stderr);
            if held.closed || Instant::now() >= until {
                return held.line.clone();
            }
            drop(held);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `rank 2 (GPU 2)`.
    pub(super) fn name(&self) -> Text {
        t!("error.ddp.rank_name", rank = self.rank, gpu = self.gpu)
    }
}

/// Forwards a rank's stderr line by line, holding back a `streamlab: ` line until another
/// follows it: only the last one is the error line `fail` prints.
fn forward(pipe: impl Read, rank: usize, held: &Mutex<Held>, say: &Say) {
    let prefix = if rank == 0 { String::new() } else { format!("rank {rank}: ") };
    let mut reader = BufReader::new(pipe);
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&bytes).trim_end_matches(['\n', '\r']).to_string();
        let mut h = lock(held);
        if let Some(earlier) = h.line.take() {
            say(&format!("{prefix}{earlier}"));
        }
        if line.starts_with("streamlab: ") {
            h.line = Some(line);
        } else {
            say(&format!("{prefix}{line}"));
        }
    }
    lock(held).closed = true;
}
