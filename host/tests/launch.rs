//! `streamlab launch`: one process per GPU, and ranks started as a job across machines starts
//! them. The flag checks and the launcher under faults (stand-in ranks) run everywhere; the
//! runs need a GPU and NCCL (ignored otherwise). One GPU is enough for a one-rank launch and
//! for the one-GPU refusals; the two-rank comparisons need two GPUs (`two_gpus_*`,
//! `two_nodes_*`), and where fewer are visible they say so in a line and pass
//! ([`common::has_gpus`]).
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use nix::sys::prctl::set_child_subreaper;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

mod common;
use common::{has_gpus, streamlab, streamlab_in, text};

#[test]
fn launch_refuses_what_it_cannot_run_in_one_line() {
    for (args, expected) in [
        (&["launch", "--gpus", "2", "run", "overlap"][..], "`overlap` is not one of them"),
        (&["launch", "--gpus", "0", "run", "allreduce-overlap"], "whole number from 1 to 64"),
        (
            &["launch", "--gpus", "2", "run", "allreduce-overlap", "--device", "1"],
            "launch sets --device",
        ),
        (&["launch", "--gpus", "2", "allreduce-overlap"], "launch takes `run LESSON [flags]`"),
        // Refused before any rank starts: not "no CUDA device" (3) on a machine without one.
        (
            &["launch", "--gpus", "2", "run", "allreduce-overlap", "--recorded"],
            "--recorded shows a run recorded on a real GPU, which needs no launch",
        ),
    ] {
        let o = streamlab(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// The result digest a run printed in its JSON checks.
fn digest(o: &Output) -> String {
    let out = text(&o.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let checks = report["checks"].as_array().expect("checks");
    let c = checks
        .iter()
        .find(|c| c["name"].as_str().unwrap_or("").starts_with("result digest"))
        .expect("digest check");
    assert_eq!(c["verdict"], "passed", "{c}");
    c["detail"].as_str().expect("detail").to_string()
}

const FLAGS: [&str; 8] =
    ["--elements", "1048576", "--buckets", "4", "--iters", "20", "--reps", "1"];

/// `streamlab <pre> --json <FLAGS>`: its exit code and output.
fn run_json(pre: &[&str]) -> (Option<i32>, Output) {
    let args: Vec<&str> =
        pre.iter().chain(["--json"].iter()).chain(FLAGS.iter()).copied().collect();
    let o = streamlab(&args);
    (o.status.code(), o)
}

#[test]
#[ignore = "needs a CUDA GPU and NCCL"]
fn one_rank_alone_runs_on_any_gpu() {
    // NCCL with a one-rank communicator: the rank code path, the rendezvous and the launcher.
    let (code, one) = run_json(&["launch", "--gpus", "1", "run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&one.stderr));
    assert!(digest(&one).starts_with("fnv1a64:"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_gpu_lessons_say_so_in_one_line_on_one_gpu() {
    // One GPU visible to the process, whatever the machine has.
    for args in [
        &["run", "p2p"][..],
        &["run", "pipeline-parallel"],
        &["launch", "--gpus", "2", "run", "allreduce-overlap"],
    ] {
        let o = streamlab_in(&[("CUDA_VISIBLE_DEVICES", "0")], args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("needs 2 GPUs, found 1"), "{args:?}: {err}");
    }
    // `run all` lists them as not run and still exits 0 (at the smallest repeat count).
    let o = streamlab_in(&[("CUDA_VISIBLE_DEVICES", "0")], &["run", "all", "--reps", "1"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for lesson in ["p2p", "allreduce-overlap", "pipeline-parallel"] {
        assert!(out.contains(&format!("== {lesson}: not run: needs 2 GPUs, found 1")), "{lesson}");
    }
}

#[test]
#[ignore = "needs two CUDA GPUs and NCCL"]
fn two_gpus_two_ranks_give_the_bits_of_one_process() {
    if !has_gpus(2) {
        return;
    }
    let (code, two) = run_json(&["launch", "--gpus", "2", "run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&two.stderr));
    let (code, alone) = run_json(&["run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&alone.stderr));
    assert_eq!(digest(&two), digest(&alone), "two processes and one process summed differently");
}

/// A connection to `addr`, tried until something listens there (`within` at most).
fn connect_when_listening(addr: &str, within: Duration) -> TcpStream {
    let until = Instant::now() + within;
    loop {
        match TcpStream::connect(addr) {
            Ok(peer) => return peer,
            Err(e) if Instant::now() > until => panic!("nothing listened at {addr}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// What rank 0 answers a stranger that connects to `addr` and says `line`.
fn rank_0_answers(addr: &str, line: &str) -> String {
    let mut peer = TcpStream::connect(addr).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    peer.write_all(line.as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(&peer).read_line(&mut answer).unwrap();
    answer
}

#[test]
#[ignore = "needs two CUDA GPUs and NCCL"]
fn two_gpus_two_ranks_over_tcp_meet_past_strangers() {
    if !has_gpus(2) {
        return;
    }
    // Rank 0 and rank 1 started by hand, as across machines; strangers reach rank 0 first.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let bin =
        std::env::var_os("STREAMLAB_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_streamlab").into());
    let rank = |r: usize| {
        Command::new(&bin)
            .args(["run", "allreduce-overlap", "--json", "--device", &r.to_string()])
            .args(FLAGS)
            .env("RANK", r.to_string())
            .env("WORLD_SIZE", "2")
            .env("STREAMLAB_RENDEZVOUS", format!("tcp:{addr}"))
            .env("STREAMLAB_RENDEZVOUS_TOKEN", "two-gpus-over-tcp")
            .env("STREAMLAB_RENDEZVOUS_TIMEOUT", "120")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a rank")
    };
    let rank_0 = rank(0);
    // Kept open and silent until the run is over: rank 0 must serve rank 1 meanwhile.
    let silent = connect_when_listening(&addr, Duration::from_secs(120));
    assert_eq!(rank_0_answers(&addr, "hello, rank 0\n"), "refused garbled\n");
    let wrong = "streamlab-rendezvous 1 world=2 rank=1 token=another-run\n";
    assert_eq!(rank_0_answers(&addr, wrong), "refused wrong-token\n");
    let rank_1 = rank(1);
    let (zero, one) = (rank_0.wait_with_output().unwrap(), rank_1.wait_with_output().unwrap());
    drop(silent);
    assert_eq!(zero.status.code(), Some(0), "rank 0: {}", text(&zero.stderr));
    assert_eq!(one.status.code(), Some(0), "rank 1: {}", text(&one.stderr));
    let (code, alone) = run_json(&["run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&alone.stderr));
    assert_eq!(
        digest(&zero),
        digest(&alone),
        "two ranks over TCP and one process summed differently"
    );
}

/// The NCCL settings that keep two processes on one host off NVLink, PCIe peer copies and
/// shared memory: NCCL's socket transport over the loopback interface, what two machines
/// without InfiniBand use between them.
const SOCKETS_ONLY: [(&str, &str); 4] = [
    ("NCCL_P2P_DISABLE", "1"),
    ("NCCL_SHM_DISABLE", "1"),
    ("NCCL_NET", "Socket"),
    ("NCCL_SOCKET_IFNAME", "lo"),
];

/// A `MASTER_PORT` whose port above it, where rank 0 listens, was free a moment ago.
fn free_master_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let above = listener.local_addr().unwrap().port();
    above.checked_sub(1).expect("port 0 is never given")
}

/// Two "nodes" on one host: two `streamlab run allreduce-overlap` processes started as a
/// two-machine job starts them (RANK 0 and 1, WORLD_SIZE 2, MASTER_ADDR and MASTER_PORT, each
/// process seeing one GPU as its LOCAL_RANK 0), with NCCL on its socket transport. Their
/// sums are the NVLink run's bit for bit (the launcher's two ranks on the same two GPUs), and
/// NCCL's own log says the ranks talked through NET/Socket.
#[test]
#[ignore = "needs two CUDA GPUs and NCCL"]
fn two_nodes_over_sockets_give_the_bits_of_nvlink() {
    if !has_gpus(2) {
        return;
    }
    let (code, nvlink) = run_json(&["launch", "--gpus", "2", "run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&nvlink.stderr));
    let want = digest(&nvlink);

    // The two GPUs this process sees, one to a "node".
    let visible: Vec<String> = match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(list) if !list.trim().is_empty() => {
            list.split(',').map(|d| d.trim().to_string()).collect()
        }
        _ => vec!["0".into(), "1".into()],
    };
    let logs = std::env::temp_dir().join(format!("streamlab-two-nodes-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    let port = free_master_port().to_string();
    // The same run token in both (the TCP rendezvous asks rank 0's peers for it, issue 30).
    let token = format!("two-nodes-{}", std::process::id());
    let bin =
        std::env::var_os("STREAMLAB_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_streamlab").into());
    let args: Vec<&str> =
        ["run", "allreduce-overlap", "--json"].iter().chain(FLAGS.iter()).copied().collect();
    let nodes: Vec<Child> = (0..2)
        .map(|rank| {
            let mut node = Command::new(&bin);
            node.args(&args)
                .env_remove("STREAMLAB_RENDEZVOUS")
                .envs([
                    ("RANK", rank.to_string()),
                    ("WORLD_SIZE", "2".into()),
                    ("LOCAL_RANK", "0".into()),
                    ("MASTER_ADDR", "127.0.0.1".into()),
                    ("MASTER_PORT", port.clone()),
                    ("STREAMLAB_RENDEZVOUS_TOKEN", token.clone()),
                    ("STREAMLAB_RENDEZVOUS_TIMEOUT", "120".into()),
                    ("CUDA_VISIBLE_DEVICES", visible[rank].clone()),
                    ("NCCL_DEBUG", "INFO".into()),
                    (
                        "NCCL_DEBUG_FILE",
                        logs.join(format!("nccl-rank{rank}.%p.log")).display().to_string(),
                    ),
                ])
                .envs(SOCKETS_ONLY)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            node.spawn().expect("start a node")
        })
        .collect();
    // Both read at once (a full pipe would stall a rank, and its partner with it), and
    // both stopped if they outlive the rendezvous timeout by far.
    let pids: Vec<i32> = nodes.iter().map(|n| n.id() as i32).collect();
    let (done, finished) = channel();
    for (rank, node) in nodes.into_iter().enumerate() {
        let done = done.clone();
        std::thread::spawn(move || {
            let _ = done.send((rank, node.wait_with_output()));
        });
    }
    let mut outputs: Vec<Option<Output>> = vec![None, None];
    for _ in 0..2 {
        let Ok((rank, output)) = finished.recv_timeout(Duration::from_secs(600)) else {
            pids.iter().for_each(|&p| {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            });
            panic!("the two nodes did not end within 600 s");
        };
        outputs[rank] = Some(output.expect("wait for a node"));
    }
    for (rank, o) in outputs.iter().flatten().enumerate() {
        assert_eq!(o.status.code(), Some(0), "rank {rank}: {}", text(&o.stderr));
        assert_eq!(digest(o), want, "rank {rank} over sockets summed otherwise than NVLink");
    }
    // NCCL's own account of its transport: sockets, and neither peer copies nor shared memory.
    let mut said = String::new();
    for entry in std::fs::read_dir(&logs).unwrap().flatten() {
        said.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    std::fs::remove_dir_all(&logs).unwrap();
    assert!(said.contains("NET/Socket"), "NCCL's log names no socket transport:\n{said}");
    for other in ["via P2P", "via SHM"] {
        assert!(!said.contains(other), "NCCL used {other}:\n{said}");
    }
}

// The launcher under faults, with stand-in ranks (sh scripts, through the test-only
// STREAMLAB_LAUNCH_RANK_PROGRAM): no GPU needed.

/// A stand-in rank program in a folder of its own: `body` after a line that says the rank is
/// up, with its arguments, its pid and its launcher's pid.
fn stand_in(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("streamlab-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rank");
    let script = format!(
        "#!/bin/sh\necho \"up $RANK of $WORLD_SIZE: $* pid $$ launcher $STREAMLAB_LAUNCHER_PID\" >&2\n{body}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `streamlab launch --gpus N run allreduce-overlap FLAGS` with `program` as its ranks, stderr
/// piped and read line by line into the returned channel.
fn launch_stand_ins(program: &Path, gpus: usize, flags: &[&str]) -> (Child, Receiver<String>) {
    let bin =
        std::env::var_os("STREAMLAB_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_streamlab").into());
    let mut child = Command::new(bin)
        .args(["launch", "--gpus", &gpus.to_string(), "run", "allreduce-overlap"])
        .args(flags)
        .env("STREAMLAB_LAUNCH_RANK_PROGRAM", program)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start streamlab launch");
    let (send, lines) = channel();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    (child, lines)
}

/// Lines from `lines` until `done` says they are enough, `within` at most.
fn read_until(
    lines: &Receiver<String>,
    within: Duration,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let until = Instant::now() + within;
    let mut seen = Vec::new();
    while !done(&seen) {
        let left = until.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("not all lines came within {within:?}: {seen:?}"),
        }
    }
    seen
}

/// The lines still to come from an ended launcher (its stderr closes when it exits).
fn rest_of(lines: &Receiver<String>) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(5);
    let mut rest = Vec::new();
    while let Ok(line) = lines.recv_timeout(until.saturating_duration_since(Instant::now())) {
        rest.push(line);
    }
    rest
}

/// The exit code of `child`, which must end within `within`.
fn exit_within(child: &mut Child, within: Duration) -> Option<i32> {
    let until = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("streamlab launch did not end within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn launch_names_the_failing_rank_with_its_error_line_and_stops_the_others() {
    let program = stand_in(
        "fails",
        "if [ \"$RANK\" = 1 ]; then sleep 0.2; echo 'streamlab: x: something broke' >&2; exit 4; fi\nexec sleep 30",
    );
    let (mut launcher, lines) = launch_stand_ins(&program, 2, &[]);
    let code = exit_within(&mut launcher, Duration::from_secs(10));
    let said = rest_of(&lines);
    let pid = launcher.id();
    assert_eq!(code, Some(4), "{said:?}");
    // Each rank got its rank, world, --device and the launcher's pid; rank 1's lines say so.
    assert!(
        said.iter().any(|l| l.starts_with("up 0 of 2: run allreduce-overlap --device 0 pid ")
            && l.ends_with(&format!("launcher {pid}"))),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|l| l.starts_with("rank 1: up 1 of 2: run allreduce-overlap --device 1 pid ")),
        "{said:?}"
    );
    let launcher_lines: Vec<&String> =
        said.iter().filter(|l| l.starts_with("streamlab launch: ")).collect();
    assert_eq!(
        launcher_lines,
        [
            "streamlab launch: rank 1 (GPU 1) exited 4: x: something broke",
            "streamlab launch: rank 0 (GPU 0) stopped (SIGTERM) after rank 1 failed",
        ],
        "{said:?}"
    );
    assert!(
        !said.iter().any(|l| l.contains("rank 1: streamlab:")),
        "the error line was forwarded too: {said:?}"
    );
    std::fs::remove_dir_all(program.parent().unwrap()).unwrap();
}

#[test]
fn the_launchers_rendezvous_folder_is_readable_by_its_user_alone() {
    // The NCCL id in it lets a process join the ranks' communicator.
    let program = stand_in(
        "private",
        "id=${STREAMLAB_RENDEZVOUS#file:}\necho \"folder $(stat -c %a \"$(dirname \"$id\")\")\" >&2",
    );
    let (mut launcher, lines) = launch_stand_ins(&program, 2, &[]);
    let code = exit_within(&mut launcher, Duration::from_secs(10));
    let said = rest_of(&lines);
    assert_eq!(code, Some(0), "{said:?}");
    assert!(said.iter().any(|l| l == "folder 700"), "{said:?}");
    assert!(said.iter().any(|l| l == "rank 1: folder 700"), "{said:?}");
    std::fs::remove_dir_all(program.parent().unwrap()).unwrap();
}

#[test]
fn sigterm_on_launch_stops_every_rank_and_exits_143() {
    let program = stand_in("sigterm", "exec sleep 30");
    let (mut launcher, lines) = launch_stand_ins(&program, 2, &[]);
    let both_up = |seen: &[String]| seen.iter().filter(|l| l.contains("up ")).count() == 2;
    let up = read_until(&lines, Duration::from_secs(10), both_up);
    let rank_pids: Vec<i32> = up
        .iter()
        .filter_map(|l| l.split(" pid ").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(rank_pids.len(), 2, "{up:?}");
    kill(Pid::from_raw(launcher.id() as i32), Signal::SIGTERM).unwrap();
    let code = exit_within(&mut launcher, Duration::from_secs(10));
    let said = rest_of(&lines);
    assert_eq!(code, Some(143), "{said:?}");
    assert_eq!(
        said,
        [
            "streamlab launch: got SIGTERM: stopping the ranks",
            "streamlab launch: rank 0 (GPU 0) stopped (SIGTERM) after the launcher got SIGTERM",
            "streamlab launch: rank 1 (GPU 1) stopped (SIGTERM) after the launcher got SIGTERM",
        ]
    );
    // The ranks are gone (reaped by the launcher), and so is the launcher's folder.
    for pid in rank_pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "rank pid {pid} still there");
    }
    let scratch = std::env::temp_dir().join(format!("streamlab-launch-{}", launcher.id()));
    assert!(!scratch.exists(), "{} left behind", scratch.display());
    std::fs::remove_dir_all(program.parent().unwrap()).unwrap();
}

const STAND_IN: &str = "STREAMLAB_TEST_STAND_IN";

#[test]
#[ignore = "a stand-in rank that a_rank_stops_when_its_launcher_is_gone starts; does nothing alone"]
fn stand_in_rank_watching_its_launcher() {
    if std::env::var_os(STAND_IN).is_none() {
        return;
    }
    // What `streamlab run` does first in a rank of `streamlab launch`.
    streamlab::lab::ddp::launcher::watch_launcher(Some(1));
    std::thread::sleep(Duration::from_secs(20));
}

/// Whether this process ignores SIGHUP (as under nohup), from the SigIgn mask of
/// /proc/self/status: signal N is bit N - 1.
fn sighup_ignored() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).unwrap().trim();
    u64::from_str_radix(mask, 16).unwrap() & 1 == 1
}

#[test]
fn a_rank_stops_when_its_launcher_is_gone() {
    // Orphans of this test's children come to this process, so that it can read the
    // stand-in rank's exit code once its "launcher" (an sh) has died of SIGKILL.
    set_child_subreaper(true).unwrap();
    let err = std::env::temp_dir().join(format!("streamlab-test-gone-{}.err", std::process::id()));
    let launcher = Command::new("sh")
        .args([
            "-c",
            "STREAMLAB_LAUNCHER_PID=$$ \"$0\" --exact stand_in_rank_watching_its_launcher --ignored --nocapture >/dev/null 2>\"$1\" & echo $!; sleep 0.5; kill -9 $$",
        ])
        .arg(std::env::current_exe().unwrap())
        .arg(&err)
        .env(STAND_IN, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let sh = launcher.id();
    let out = launcher.wait_with_output().unwrap();
    let gone = Instant::now();
    assert_eq!(out.status.signal(), Some(9));
    let rank: i32 = text(&out.stdout).trim().parse().unwrap();
    let status = loop {
        match waitpid(Pid::from_raw(rank), Some(WaitPidFlag::WNOHANG)).unwrap() {
            WaitStatus::StillAlive if gone.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other,
        }
    };
    let took = gone.elapsed();
    let said = std::fs::read_to_string(&err).unwrap_or_default();
    let _ = std::fs::remove_file(&err);
    // Ended by SIGHUP, as a closed terminal ends a program: 129 as a shell reports it. Under
    // nohup (SIGHUP ignored, and so for the stand-in too) the rank falls back on SIGKILL.
    let ending = if sighup_ignored() { Signal::SIGKILL } else { Signal::SIGHUP };
    assert_eq!(status, WaitStatus::Signaled(Pid::from_raw(rank), ending, false), "{said}");
    assert!(took < Duration::from_secs(1), "noticed after {took:?}");
    assert!(
        said.contains(&format!("streamlab: rank 1: the launcher (pid {sh}) is gone: stopping")),
        "{said}"
    );
}

#[test]
fn real_ranks_that_refuse_the_same_flag_say_it_once() {
    // streamlab itself as the ranks (through the stand-in hook, so no GPU check first): each
    // rank refuses --buckets 0 with the same error line and exit 2.
    let bin =
        std::env::var_os("STREAMLAB_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_streamlab").into());
    let (mut launcher, lines) = launch_stand_ins(Path::new(&bin), 3, &["--buckets", "0"]);
    let code = exit_within(&mut launcher, Duration::from_secs(10));
    let said = rest_of(&lines);
    assert_eq!(code, Some(2), "{said:?}");
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].starts_with("streamlab launch: rank ")
            && said[0].contains(
                " exited 2: allreduce-overlap: invalid value '0' for '--buckets <BUCKETS>'"
            ),
        "{said:?}"
    );
    assert!(
        said[1].starts_with("streamlab launch: ranks ") && said[1].ends_with(" also exited 2"),
        "{said:?}"
    );
}
