//! How the ranks meet ([`RankEnv::share_id`]): through a file, or over TCP, where rank 0 hands
//! NCCL's unique id to the other ranks of its own run, and to no one else.
//!
//! A rank connects to rank 0 and sends one line, its greeting (its world size, its rank and
//! the run token); rank 0 answers with the id, or refuses, and closes the connection (the
//! lines are in [`crate::lab::ddp::handshake`]). Rank 0 serves until every rank has been
//! answered or its timeout has passed; a rank tries again until rank 0 answers or its timeout
//! has passed, and stops at once when refused.
//!
//! Strangers (a port scan, a health check, a rank of another run) never hold the real ranks
//! up: rank 0 accepts and reads without blocking, in one loop with a deadline. It closes a
//! connection that sends no line within [`GREETING_WITHIN`] (silent), sends a line that is
//! not a greeting or is longer than [`LINE_CAP`] (garbled), or greets with another run token,
//! another world size or a rank already answered; it counts them, and a rank 0 that times out
//! names them in its error line.
//!
//! The run token keeps out whatever is not a rank of this run; it is not encryption: the token
//! and the id cross the network in clear.
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::lab::ddp::handshake::{
    answer, judge, rank_0_gave_up, seconds, who, Greeting, Refusal, Strangers,
};
use crate::lab::ddp::ranks::{RankEnv, Rendezvous};
use crate::runtime::error::io_text;
use crate::runtime::nccl::UniqueId;
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::Text;

/// How long rank 0 waits for a connection's greeting before closing it as silent: a rank
/// sends its greeting as soon as it has connected.
pub const GREETING_WITHIN: Duration = Duration::from_secs(5);
/// The longest line rank 0 reads (a greeting is under 320 bytes): a longer one is garbled.
pub const LINE_CAP: usize = 512;
/// The most connections rank 0 keeps waiting for a greeting at once. Under a flood the oldest
/// is closed as silent; a real rank whose connection closes without an answer tries again.
const MAX_WAITING: usize = 256;
/// The most connections rank 0 accepts between two looks at the lines that came.
const ACCEPT_AT_ONCE: usize = 64;
/// How often rank 0 looks for new connections and lines.
const POLL: Duration = Duration::from_millis(10);
/// The longest answer a rank reads from rank 0 (`id ` and 256 hex digits, or a refusal).
const ANSWER_CAP: u64 = 1024;

impl RankEnv {
    /// The error when rank 0's id did not come through the file `path` within the timeout.
    fn waited_too_long(&self, path: &str) -> Error {
        let (who, path, s) = (who(self), path.to_string(), seconds(self.timeout));
        Error::NotRun(t!("error.ddp.file_id_late", who, path, s))
    }

    /// The id all ranks share: rank 0 makes it with `make` and publishes it (over TCP it
    /// returns once every rank has it); the others wait for it, [`RankEnv::timeout`] at most.
    pub fn share_id(&self, make: impl FnOnce() -> Result<UniqueId>) -> Result<UniqueId> {
        let wait = self.timeout;
        let writing = |path: &std::path::Path, e: std::io::Error| {
            let (path, why) = (path.display().to_string(), io_text(&e));
            Error::InvalidInput(t!("error.ddp.writing", path, why))
        };
        match (&self.rendezvous, self.rank) {
            (Rendezvous::File(path), 0) => {
                let id = make()?;
                let partial = path.with_extension("partial");
                std::fs::write(&partial, id.to_hex()).map_err(|e| writing(&partial, e))?;
                // A rename is atomic: a reader never sees half an id.
                std::fs::rename(&partial, path).map_err(|e| writing(path, e))?;
                Ok(id)
            }
            (Rendezvous::File(path), _) => {
                let start = Instant::now();
                loop {
                    if let Ok(text) = std::fs::read_to_string(path) {
                        return UniqueId::from_hex(&text);
                    }
                    if start.elapsed() > wait {
                        return Err(self.waited_too_long(&path.display().to_string()));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            (Rendezvous::Tcp(addr), 0) => {
                let listener = TcpListener::bind(addr).map_err(|e| {
                    let (addr, why) = (addr.clone(), io_text(&e));
                    Error::InvalidInput(t!("error.ddp.listening", addr, why))
                })?;
                let id = make()?;
                // Rank 0 joins NCCL's communicator only once every rank has the id: the
                // others join it meanwhile, and wait there for rank 0.
                serve(self, listener, addr, &id)?;
                Ok(id)
            }
            (Rendezvous::Tcp(addr), _) => ask(self, addr),
        }
    }
}

/// A connection rank 0 has accepted and not yet heard a whole line from.
struct Caller {
    stream: TcpStream,
    heard: Vec<u8>,
    since: Instant,
}

/// What a caller has said so far.
enum Heard {
    NotYet,
    Line(String),
    /// Closed (or broken) before a whole line.
    Closed,
    TooLong,
}

impl Caller {
    /// Reads what has come, without waiting.
    fn listen(&mut self) -> Heard {
        let mut chunk = [0u8; 256];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Heard::Closed,
                Ok(n) => {
                    self.heard.extend_from_slice(&chunk[..n]);
                    if let Some(end) = self.heard.iter().position(|&b| b == b'\n') {
                        if end > LINE_CAP {
                            return Heard::TooLong;
                        }
                        return Heard::Line(String::from_utf8_lossy(&self.heard[..end]).into());
                    }
                    if self.heard.len() > LINE_CAP {
                        return Heard::TooLong;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Heard::NotYet,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Heard::Closed,
            }
        }
    }

    /// Silent when it sent nothing, garbled when it sent part of a line.
    fn unfinished(&self) -> Refusal {
        if self.heard.is_empty() {
            Refusal::Silent
        } else {
            Refusal::Garbled
        }
    }

    /// Sends `line` and closes; whether it was sent.
    fn say(self, line: &str) -> bool {
        let mut stream = self.stream;
        let ready = stream.set_nonblocking(false).is_ok()
            && stream.set_write_timeout(Some(Duration::from_secs(1))).is_ok();
        ready && stream.write_all(line.as_bytes()).is_ok()
    }
}

/// Rank 0's side: answers the other ranks' greetings on `listener` (bound to `addr`) with
/// `id`, until every rank has been answered (then the strangers turned away are returned), or
/// `env.timeout` has passed (an error naming the ranks it waited for and the strangers).
pub fn serve(env: &RankEnv, listener: TcpListener, addr: &str, id: &UniqueId) -> Result<Strangers> {
    listener.set_nonblocking(true).map_err(|e| {
        let (addr, why) = (addr.to_string(), e.to_string());
        Error::InvalidInput(t!("error.ddp.listening", addr, why))
    })?;
    let deadline = Instant::now() + env.timeout;
    let answer = format!("id {}\n", id.to_hex());
    let mut waiting: Vec<usize> = (1..env.world).collect();
    let mut callers: Vec<Caller> = Vec::new();
    let mut strangers = Strangers::default();
    while !waiting.is_empty() {
        if Instant::now() >= deadline {
            for caller in &callers {
                strangers.note(caller.unfinished());
            }
            return Err(rank_0_gave_up(env, addr, &waiting, &strangers));
        }
        accept_new(&listener, &mut callers, &mut strangers);
        for mut caller in std::mem::take(&mut callers) {
            match caller.listen() {
                Heard::NotYet if caller.since.elapsed() < GREETING_WITHIN => callers.push(caller),
                Heard::NotYet | Heard::Closed => strangers.note(caller.unfinished()),
                // Closed without an answer: with the rest of the line unread, the answer
                // might not arrive anyway (the close resets the connection).
                Heard::TooLong => strangers.note(Refusal::Garbled),
                Heard::Line(line) => match judge(env, &waiting, &line) {
                    Ok(rank) => {
                        if caller.say(&answer) {
                            waiting.retain(|&r| r != rank);
                        }
                    }
                    Err(why) => {
                        strangers.note(why);
                        caller.say(&format!("refused {}\n", why.word()));
                    }
                },
            }
        }
        std::thread::sleep(POLL);
    }
    for caller in &callers {
        strangers.note(caller.unfinished());
    }
    Ok(strangers)
}

/// Takes the connections waiting on `listener`, without blocking.
fn accept_new(listener: &TcpListener, callers: &mut Vec<Caller>, strangers: &mut Strangers) {
    for _ in 0..ACCEPT_AT_ONCE {
        // WouldBlock when none is waiting; any other error (out of file descriptors, a
        // connection reset before it was accepted) is tried again at the next look.
        let Ok((stream, _)) = listener.accept() else { return };
        if stream.set_nonblocking(true).is_err() {
            strangers.note(Refusal::Silent);
            continue;
        }
        if callers.len() >= MAX_WAITING {
            let oldest = callers.remove(0);
            strangers.note(oldest.unfinished());
        }
        callers.push(Caller { stream, heard: Vec::new(), since: Instant::now() });
    }
}

/// What one try at reaching rank 0 came to.
enum Try {
    Id(UniqueId),
    /// No id yet: what was found, for the error line once the time is up.
    Again(Text),
}

/// A rank's side: greets rank 0 at `addr` until it answers, `env.timeout` at most. Trying
/// again while nothing listens (rank 0 not up yet), what listens says nothing or closes
/// without an answer; a refusal, or an answer that is not rank 0's, ends it at once.
pub fn ask(env: &RankEnv, addr: &str) -> Result<UniqueId> {
    let greeting = Greeting::of(env).line();
    let deadline = Instant::now() + env.timeout;
    loop {
        let found = match try_once(env, addr, &greeting, deadline)? {
            Try::Id(id) => return Ok(id),
            Try::Again(found) => found,
        };
        if Instant::now() >= deadline {
            let (who, s, addr) = (who(env), seconds(env.timeout), addr.to_string());
            return Err(Error::NotRun(t!("error.ddp.tcp_id_late", who, s, addr, found)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One try: connect, greet, read the answer, each bounded by `deadline`, so that a peer that
/// accepts and never answers (another program, a rank 0 that hung) cannot hold this rank.
fn try_once(env: &RankEnv, addr: &str, greeting: &str, deadline: Instant) -> Result<Try> {
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let targets = addr.to_socket_addrs().map_err(|e| {
        let (addr, why) = (addr.to_string(), e.to_string());
        Error::InvalidInput(t!("error.ddp.bad_address", addr, why))
    })?;
    for target in targets {
        let Ok(mut peer) = TcpStream::connect_timeout(&target, left().min(Duration::from_secs(5)))
        else {
            continue;
        };
        let io = |e: std::io::Error| {
            let (addr, why) = (addr.to_string(), io_text(&e));
            Error::InvalidInput(t!("error.ddp.talking", addr, why))
        };
        peer.set_read_timeout(Some(left())).map_err(io)?;
        peer.set_write_timeout(Some(left())).map_err(io)?;
        if peer.write_all(greeting.as_bytes()).is_err() {
            return Ok(Try::Again(t!("error.ddp.closed_without_answer")));
        }
        let mut line = Vec::new();
        let read = BufReader::new((&peer).take(ANSWER_CAP)).read_until(b'\n', &mut line);
        return match read {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Ok(Try::Again(t!("error.ddp.said_nothing")))
            }
            Err(_) => Ok(Try::Again(t!("error.ddp.closed_without_answer"))),
            Ok(_) if line.is_empty() => Ok(Try::Again(t!("error.ddp.closed_without_answer"))),
            Ok(_) => answer(env, addr, &String::from_utf8_lossy(&line)).map(Try::Id),
        };
    }
    Ok(Try::Again(t!("error.ddp.nothing_listened")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::ddp::ranks::{RunToken, DEFAULT_TIMEOUT, TOKEN_VAR};

    /// Rank `rank` of `world` meeting at `addr`, with `token` (from its variable), waiting
    /// `timeout` at most.
    fn at(
        rank: usize,
        world: usize,
        addr: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> RankEnv {
        RankEnv {
            rank,
            world,
            local_rank: None,
            source: "torchrun/launch",
            rendezvous: Rendezvous::Tcp(addr.into()),
            timeout,
            token: token.map(|t| RunToken::new(t, TOKEN_VAR).unwrap()),
        }
    }

    fn the_id() -> UniqueId {
        UniqueId::from_hex(&"5c".repeat(128)).unwrap()
    }

    /// Rank 0 of `world` serving on a port of 127.0.0.1 from a thread of its own: the address,
    /// and the thread.
    fn rank_0(
        world: usize,
        token: Option<&str>,
        timeout: Duration,
    ) -> (String, std::thread::JoinHandle<Result<Strangers>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let env = at(0, world, &addr, token, timeout);
        let served = addr.clone();
        (addr, std::thread::spawn(move || serve(&env, listener, &served, &the_id())))
    }

    /// What a stranger that connects to `addr` and sends `said` gets back: rank 0's line, or
    /// None when rank 0 closed the connection without one.
    fn stranger_says(addr: &str, said: &[u8]) -> Option<String> {
        let mut peer = TcpStream::connect(addr).unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        peer.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        // Rank 0 may close a long line's connection before all of it is sent.
        let _ = peer.write_all(said);
        let mut line = String::new();
        match BufReader::new(&peer).read_line(&mut line) {
            Ok(_) => (!line.is_empty()).then_some(line),
            Err(e) => {
                let waited = matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut);
                assert!(!waited, "rank 0 kept a stranger waiting");
                None
            }
        }
    }

    #[test]
    fn silent_and_garbled_strangers_before_the_ranks_do_not_keep_them_from_meeting() {
        // The ranks wait less than rank 0 gives a silent connection to greet: a rank 0 that
        // waited on the silent connection before serving the others would fail here.
        let wait = Duration::from_secs(3);
        assert!(wait < GREETING_WITHIN);
        let (addr, server) = rank_0(3, Some("run-1"), wait);
        let silent = TcpStream::connect(&addr).unwrap();
        assert_eq!(stranger_says(&addr, b"hello, rank 0\n").as_deref(), Some("refused garbled\n"));
        // A 100 KB "greeting" is read no further than the cap, and closed.
        assert_eq!(stranger_says(&addr, &[b'x'; 100_000]), None);
        let ranks = [1, 2].map(|rank| {
            let (env, addr) = (at(rank, 3, &addr, Some("run-1"), wait), addr.clone());
            std::thread::spawn(move || ask(&env, &addr))
        });
        for rank in ranks {
            let Ok(id) = rank.join().unwrap() else { panic!("a rank got no id") };
            assert!(id == the_id());
        }
        let strangers = server.join().unwrap().unwrap();
        assert_eq!(strangers, Strangers { silent: 1, garbled: 2, ..Strangers::default() });
        drop(silent);
    }

    /// The error of a rank refused or given up, as a line.
    fn refused(env: &RankEnv, addr: &str) -> String {
        let Err(e) = ask(env, addr) else { panic!("rank {} got an id", env.rank) };
        assert_eq!(e.exit_code(), 3, "{e}");
        e.to_string()
    }

    #[test]
    fn a_wrong_or_missing_run_token_is_refused_and_the_run_still_meets() {
        let wait = Duration::from_secs(10);
        let (addr, server) = rank_0(2, Some("run-2"), wait);
        let wrong = refused(&at(1, 2, &addr, Some("run-1"), wait), &addr);
        assert!(wrong.contains(" refused the greeting: wrong run token (this rank's is from STREAMLAB_RENDEZVOUS_TOKEN; set STREAMLAB_RENDEZVOUS_TOKEN to the same value on every rank)"), "{wrong}");
        assert!(!wrong.contains("run-1") && !wrong.contains("run-2"), "{wrong}");
        let missing = refused(&at(1, 2, &addr, None, wait), &addr);
        assert!(missing.contains("rank 0 has a run token and this rank none"), "{missing}");
        let Ok(id) = ask(&at(1, 2, &addr, Some("run-2"), wait), &addr) else { panic!("no id") };
        assert!(id == the_id());
        let strangers = server.join().unwrap().unwrap();
        assert_eq!(strangers, Strangers { token: 2, ..Strangers::default() });
    }

    #[test]
    fn a_rank_answered_already_and_another_world_size_are_refused() {
        let wait = Duration::from_secs(10);
        let (addr, server) = rank_0(3, None, wait);
        assert!(ask(&at(1, 3, &addr, None, wait), &addr).is_ok());
        let again = refused(&at(1, 3, &addr, None, wait), &addr);
        assert!(again.contains(" refused the greeting: rank 0 has answered a rank 1 already (of another run? set STREAMLAB_RENDEZVOUS_TOKEN"), "{again}");
        let other = refused(&at(2, 4, &addr, None, wait), &addr);
        assert!(other.contains("rank 0's world size is 3, this rank's 4"), "{other}");
        assert!(ask(&at(2, 3, &addr, None, wait), &addr).is_ok());
        let strangers = server.join().unwrap().unwrap();
        assert_eq!(strangers, Strangers { world: 1, answered: 1, ..Strangers::default() });
    }

    #[test]
    fn a_rank_0_that_times_out_names_the_ranks_it_waited_for_and_the_strangers() {
        let wait = Duration::from_secs(2);
        let (addr, server) = rank_0(4, Some("run-4"), wait);
        let silent = TcpStream::connect(&addr).unwrap();
        let tls = b"\x16\x03\x01\x02\x00 not a greeting\n";
        assert_eq!(stranger_says(&addr, tls).as_deref(), Some("refused garbled\n"));
        refused(&at(2, 4, &addr, Some("run-3"), wait), &addr);
        assert!(ask(&at(1, 4, &addr, Some("run-4"), wait), &addr).is_ok());
        let e = server.join().unwrap().unwrap_err();
        assert_eq!(e.exit_code(), 3, "{e}");
        assert_eq!(
            e.to_string(),
            format!("rank 0 of 4 (torchrun/launch) waited 2 s at {addr} for ranks 2, 3 to ask for the NCCL id; turned away 3 strangers: 1 silent, 1 garbled, 1 with a wrong run token (STREAMLAB_RENDEZVOUS_TIMEOUT sets the wait)")
        );
        drop(silent);
    }

    #[test]
    fn a_rank_gives_up_on_a_peer_that_accepts_and_never_answers() {
        // Something listens on the port (another program, a rank 0 that hung) and says
        // nothing: the rank must give up in time, not wait in read forever.
        let quiet = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = quiet.local_addr().unwrap().to_string();
        let held = std::thread::spawn(move || {
            let kept: Vec<TcpStream> = quiet.incoming().take(1).flatten().collect();
            std::thread::sleep(Duration::from_secs(3));
            drop(kept);
        });
        let e = refused(&at(1, 2, &addr, None, Duration::from_millis(300)), &addr);
        assert_eq!(e, format!("rank 1 of 2 (torchrun/launch) waited 0.3 s for rank 0's NCCL id at {addr}: what listened there said nothing (STREAMLAB_RENDEZVOUS_TIMEOUT sets the wait)"));
        held.join().unwrap();
        // Nothing listens there now.
        let e = refused(&at(1, 2, &addr, None, Duration::from_millis(300)), &addr);
        assert!(
            e.ends_with(&format!(
                "at {addr}: nothing listened there (STREAMLAB_RENDEZVOUS_TIMEOUT sets the wait)"
            )),
            "{e}"
        );
    }

    #[test]
    fn a_rank_stops_at_once_when_what_answers_is_not_rank_0() {
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = other.local_addr().unwrap().to_string();
        let answers = std::thread::spawn(move || {
            let (mut peer, _) = other.accept().unwrap();
            let mut greeting = String::new();
            BufReader::new(&peer).read_line(&mut greeting).unwrap();
            peer.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n").unwrap();
            greeting
        });
        let e = refused(&at(3, 4, &addr, Some("run-5"), Duration::from_secs(60)), &addr);
        assert!(e.contains(&format!("what answers at {addr} is not a streamlab rank 0 (it said \"HTTP/1.0 400 Bad Request\")")), "{e}");
        assert_eq!(answers.join().unwrap(), "streamlab-rendezvous 1 world=4 rank=3 token=run-5\n");
    }

    #[test]
    fn share_id_over_tcp_hands_rank_0s_id_to_the_others() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let env = |rank| at(rank, 3, &addr, Some("run-6"), Duration::from_secs(10));
        let made = std::thread::spawn({
            let rank_0 = env(0);
            move || rank_0.share_id(|| Ok(the_id())).map(|id| id == the_id())
        });
        for rank in [1, 2] {
            let Ok(id) = env(rank).share_id(|| panic!("only rank 0 makes it")) else {
                panic!("rank {rank} got no id")
            };
            assert!(id == the_id());
        }
        assert!(made.join().unwrap().unwrap());
    }

    #[test]
    fn a_file_rendezvous_hands_rank_0s_id_to_rank_1() {
        let dir = std::env::temp_dir().join(format!("streamlab-rendezvous-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("id");
        let at = |rank| RankEnv {
            rendezvous: Rendezvous::File(path.clone()),
            ..at(rank, 2, "", None, DEFAULT_TIMEOUT)
        };
        let id = UniqueId::from_hex(&"ab".repeat(128)).unwrap();
        let reader = std::thread::spawn({
            let r1 = at(1);
            move || r1.share_id(|| panic!("rank 1 never makes the id"))
        });
        assert!(at(0).share_id(|| Ok(id)).unwrap() == id);
        assert!(reader.join().unwrap().unwrap() == id);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
