//! One process per GPU, as DDP jobs run: which rank this process is, and how the ranks meet.
//!
//! The names are torchrun's: `RANK` and `WORLD_SIZE` (both, or neither), `LOCAL_RANK` (the
//! GPU on this machine; `--device` picks it). The ranks meet through NCCL's unique id, which
//! rank 0 makes and hands to the others, by
//! - `STREAMLAB_RENDEZVOUS=file:/shared/path`: rank 0 writes the id there (`streamlab
//!   launch` uses a file in a folder it owns and removes). Give each run a path of its own:
//!   a rank that finds the previous run's id there joins a communicator that no longer
//!   exists and waits in NCCL;
//! - `STREAMLAB_RENDEZVOUS=tcp:host:port`, or torchrun's `MASTER_ADDR` and `MASTER_PORT`:
//!   rank 0 listens there and sends the id to each rank that connects (across machines).
//!   From `MASTER_PORT` it takes the port above it: under torchrun, `MASTER_PORT` itself is
//!   torchrun's own store, already bound.
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::runtime::nccl::UniqueId;
use crate::runtime::{Error, Result};

/// How long a rank waits for rank 0's id before it gives up.
pub const WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    File(PathBuf),
    Tcp(String),
}

/// This process's place in a multi-process run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankEnv {
    pub rank: usize,
    pub world: usize,
    pub rendezvous: Rendezvous,
}

/// The rank this process is, from `vars` (the environment: see [`from_env`]); None when it
/// runs alone.
pub fn parse(vars: impl Fn(&str) -> Option<String>) -> Result<Option<RankEnv>> {
    let bad = |why: String| Err(Error::InvalidInput(why));
    let number =
        |name: &str| -> Result<Option<usize>> {
            match vars(name) {
                None => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| {
                    Error::InvalidInput(format!("{name}={v:?} is not a whole number"))
                }),
            }
        };
    let (rank, world) = match (number("RANK")?, number("WORLD_SIZE")?) {
        (None, None) => return Ok(None),
        (Some(r), Some(w)) => (r, w),
        _ => return bad("RANK and WORLD_SIZE go together: set both, or neither".into()),
    };
    if world == 0 || rank >= world {
        return bad(format!("RANK={rank} must be below WORLD_SIZE={world}"));
    }
    let rendezvous = match (vars("STREAMLAB_RENDEZVOUS"), vars("MASTER_ADDR"), vars("MASTER_PORT")) {
        (Some(r), _, _) => match r.split_once(':') {
            Some(("file", path)) if !path.is_empty() => Rendezvous::File(path.into()),
            Some(("tcp", addr)) if addr.contains(':') => Rendezvous::Tcp(addr.into()),
            _ => return bad(format!("STREAMLAB_RENDEZVOUS={r:?}: use file:/path or tcp:host:port")),
        },
        (None, Some(host), Some(port)) => {
            let above = port.trim().parse::<u16>().ok().and_then(|p| p.checked_add(1));
            let Some(above) = above else {
                return bad(format!("MASTER_PORT={port:?} must be a port from 0 to 65534 (streamlab listens on the one above it)"));
            };
            Rendezvous::Tcp(format!("{host}:{above}"))
        }
        _ => {
            return bad("RANK is set but not how the ranks meet: set STREAMLAB_RENDEZVOUS=file:/path (or tcp:host:port), or MASTER_ADDR and MASTER_PORT".into())
        }
    };
    Ok(Some(RankEnv { rank, world, rendezvous }))
}

/// [`parse`] of this process's environment.
pub fn from_env() -> Result<Option<RankEnv>> {
    parse(|k| std::env::var(k).ok())
}

/// The file a rank writes for `path` (`--trace`, `--svg`): rank 0, or a process that runs
/// alone, writes `path` itself; rank i > 0 writes `path` tagged `rank<i>`
/// (`t.json` -> `t-rank1.json`), so ranks that share a folder do not overwrite each other.
pub fn own_file(path: &std::path::Path, rank: Option<usize>) -> PathBuf {
    match rank {
        Some(r) if r > 0 => crate::lab::output::tagged(path, &format!("rank{r}")),
        _ => path.to_path_buf(),
    }
}

fn waited_too_long(what: &str, wait: Duration) -> Error {
    Error::NotRun(format!(
        "rank 0's NCCL id did not arrive through {what} within {} s",
        wait.as_secs_f64()
    ))
}

/// One try at reading rank 0's id from `addr`, giving up at `deadline`: None when nothing
/// listens there yet, or what answered closed without an id. Connecting and reading are
/// both bounded, so a peer that accepts and never writes (another program on the port, a
/// rank 0 that died) cannot hold this rank forever.
fn read_id(addr: &str, deadline: Instant) -> Result<Option<UniqueId>> {
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let targets = addr
        .to_socket_addrs()
        .map_err(|e| Error::InvalidInput(format!("rendezvous address {addr}: {e}")))?;
    for target in targets {
        let Ok(peer) = TcpStream::connect_timeout(&target, left().min(Duration::from_secs(5)))
        else {
            continue;
        };
        peer.set_read_timeout(Some(left()))
            .map_err(|e| Error::InvalidInput(format!("reading from {addr}: {e}")))?;
        let mut line = String::new();
        return match BufReader::new(peer).read_line(&mut line) {
            Ok(_) if line.trim().is_empty() => Ok(None),
            Ok(_) => UniqueId::from_hex(&line).map(Some),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(Error::InvalidInput(format!("reading from {addr}: {e}"))),
        };
    }
    Ok(None)
}

impl RankEnv {
    /// The id all ranks share: rank 0 makes it with `make` and publishes it; the others wait
    /// for it.
    pub fn share_id(&self, make: impl FnOnce() -> Result<UniqueId>) -> Result<UniqueId> {
        self.share_id_within(make, WAIT)
    }

    /// [`RankEnv::share_id`], waiting at most `wait` for rank 0's id.
    fn share_id_within(
        &self,
        make: impl FnOnce() -> Result<UniqueId>,
        wait: Duration,
    ) -> Result<UniqueId> {
        let io = |what: &str, e: std::io::Error| Error::InvalidInput(format!("{what}: {e}"));
        match (&self.rendezvous, self.rank) {
            (Rendezvous::File(path), 0) => {
                let id = make()?;
                let partial = path.with_extension("partial");
                std::fs::write(&partial, id.to_hex())
                    .map_err(|e| io(&format!("writing {}", partial.display()), e))?;
                // A rename is atomic: a reader never sees half an id.
                std::fs::rename(&partial, path)
                    .map_err(|e| io(&format!("writing {}", path.display()), e))?;
                Ok(id)
            }
            (Rendezvous::File(path), _) => {
                let start = Instant::now();
                loop {
                    if let Ok(text) = std::fs::read_to_string(path) {
                        return UniqueId::from_hex(&text);
                    }
                    if start.elapsed() > wait {
                        return Err(waited_too_long(&path.display().to_string(), wait));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            (Rendezvous::Tcp(addr), 0) => {
                let listener =
                    TcpListener::bind(addr).map_err(|e| io(&format!("listening on {addr}"), e))?;
                let id = make()?;
                let (others, text) = (self.world - 1, id.to_hex());
                // Serve in the background: this rank goes on to ncclCommInitRank, which
                // returns only when the others have joined.
                std::thread::spawn(move || {
                    for mut peer in listener.incoming().take(others).flatten() {
                        let _ = writeln!(peer, "{text}");
                    }
                });
                Ok(id)
            }
            (Rendezvous::Tcp(addr), _) => {
                let deadline = Instant::now() + wait;
                loop {
                    if let Some(id) = read_id(addr, deadline)? {
                        return Ok(id);
                    }
                    if Instant::now() >= deadline {
                        return Err(waited_too_long(addr, wait));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_above_zero_write_files_of_their_own() {
        let p = std::path::Path::new("out/t.json");
        assert_eq!(own_file(p, None), p);
        assert_eq!(own_file(p, Some(0)), p);
        assert_eq!(own_file(p, Some(3)), std::path::Path::new("out/t-rank3.json"));
    }

    fn env(pairs: &[(&str, &str)]) -> Result<Option<RankEnv>> {
        let map: std::collections::HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        parse(|k| map.get(k).cloned())
    }

    #[test]
    fn ranks_come_from_torchrun_style_variables() {
        assert_eq!(env(&[]).unwrap(), None);
        let file =
            env(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("STREAMLAB_RENDEZVOUS", "file:/tmp/id")]);
        assert_eq!(file.unwrap().unwrap().rendezvous, Rendezvous::File("/tmp/id".into()));
        let tcp = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ]);
        assert_eq!(
            tcp.unwrap().unwrap(),
            RankEnv { rank: 0, world: 4, rendezvous: Rendezvous::Tcp("10.0.0.1:29501".into()) }
        );
        for bad in [
            vec![("RANK", "0")],
            vec![("RANK", "2"), ("WORLD_SIZE", "2"), ("STREAMLAB_RENDEZVOUS", "file:/x")],
            vec![("RANK", "x"), ("WORLD_SIZE", "2")],
            vec![("RANK", "0"), ("WORLD_SIZE", "2")],
            vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("STREAMLAB_RENDEZVOUS", "smoke:signals")],
            vec![
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "a"),
                ("MASTER_PORT", "65535"),
            ],
            vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "a"), ("MASTER_PORT", "http")],
        ] {
            let e = env(&bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_file_rendezvous_hands_rank_0s_id_to_rank_1() {
        let dir = std::env::temp_dir().join(format!("streamlab-ranks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("id");
        let at = |rank| RankEnv { rank, world: 2, rendezvous: Rendezvous::File(path.clone()) };
        let id = UniqueId::from_hex(&"ab".repeat(128)).unwrap();
        let reader = std::thread::spawn({
            let r1 = at(1);
            move || r1.share_id(|| panic!("rank 1 never makes the id"))
        });
        assert!(at(0).share_id(|| Ok(id)).unwrap() == id);
        assert!(reader.join().unwrap().unwrap() == id);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tcp_rendezvous_hands_rank_0s_id_to_the_others() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let at = |rank| RankEnv {
            rank,
            world: 3,
            rendezvous: Rendezvous::Tcp(format!("127.0.0.1:{port}")),
        };
        let id = UniqueId::from_hex(&"5c".repeat(128)).unwrap();
        assert!(at(0).share_id(|| Ok(id)).unwrap() == id);
        for rank in [1, 2] {
            assert!(at(rank).share_id(|| panic!("only rank 0 makes it")).unwrap() == id);
        }
    }

    #[test]
    fn a_tcp_rank_gives_up_on_a_peer_that_accepts_and_never_answers() {
        // Something listens on the port (another program, a rank 0 that hung) and says
        // nothing: the rank must give up in time, not wait in read forever.
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let held = std::thread::spawn(move || {
            let kept: Vec<TcpStream> = silent.incoming().take(1).flatten().collect();
            std::thread::sleep(Duration::from_secs(3));
            drop(kept);
        });
        let r1 = RankEnv { rank: 1, world: 2, rendezvous: Rendezvous::Tcp(addr.clone()) };
        let start = Instant::now();
        let e =
            r1.share_id_within(|| panic!("rank 1 never makes the id"), Duration::from_millis(300));
        assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
        let Err(e) = e else { panic!("an id from a peer that sent none") };
        let e = e.to_string();
        assert!(e.contains(&addr) && e.contains("did not arrive"), "{e}");
        held.join().unwrap();
    }
}
