//! How fast `streamlab trace` analyses a trace folder: `trace::capture::analysis::analyse`
//! (read every recorder file, then the overlap report) on folders that `testkit::trace_gen`
//! writes, one group per worst case: `small_kernels` (launch gaps while the host launches),
//! `many_streams`, `many_ranges` (NVTX windows), `many_processes` (ranks and a late one),
//! `cpu_ahead` (work that runs steps after its range) and `mix` (a training step). Needs no
//! GPU.
//!
//! Two modes.
//!
//! **Criterion** (the default): each group times `analyse` on a folder of [`GROUP_RECORDS`]
//! records, generated once before the group, outside the timed part; the throughput is in
//! records (elements) per second.
//!
//! ```text
//! cargo bench --bench trace_analysis
//! cargo bench --bench trace_analysis -- --warm-up-time 1 --measurement-time 3   # quicker
//! cargo bench --bench trace_analysis -- many_ranges                             # one group
//! ```
//!
//! **Scale**: records/s and peak memory at sizes criterion is not made for, each size in a
//! fresh process, so that its peak is its own: this binary runs itself again with
//! `TRACE_ANALYSIS_CHILD` naming the folder; the child runs `analyse` once and reads its
//! peak resident memory (`VmHWM`) from /proc/self/status. One line per case and size:
//! records, seconds, records/s, peak MiB, and the seconds the analysis ran on a CPU (its
//! thread's time in /proc/self/schedstat: on a machine shared with other work, the steadier
//! figure). A child still running after the time limit is killed ("did not finish in N s",
//! with its peak memory so far), and the larger sizes of its case are not run.
//!
//! ```text
//! TRACE_ANALYSIS_SCALE=1M,10M cargo bench --bench trace_analysis
//! TRACE_ANALYSIS_SCALE=10k,50k,250k,1M TRACE_ANALYSIS_CASES=small_kernels,mix \
//!     TRACE_ANALYSIS_LIMIT_S=300 TRACE_ANALYSIS_RUNS=2 nice -n 10 cargo bench --bench trace_analysis
//! ```
//!
//! - `TRACE_ANALYSIS_SCALE`: the sizes, in records (`10k`, `1M`, `2500000`); scale mode runs
//!   instead of criterion only when it is set.
//! - `TRACE_ANALYSIS_CASES`: the cases to run (default: all six).
//! - `TRACE_ANALYSIS_LIMIT_S`: the time limit of one child, s (default 600).
//! - `TRACE_ANALYSIS_RUNS`: how many children measure each size, one after the other
//!   (default 1).
//! - `TRACE_ANALYSIS_DIR`: where the folders go (default `<target>/trace-analysis`). Each is
//!   `<case>-<records>/`, reused while its `parameters.txt` matches the generator's
//!   parameters. The files take about 150 B a record: some 1.5 GB for a case at 10M records
//!   (`rm -r target/trace-analysis` when done).
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use streamlab::trace::capture::analysis::{analyse, Analysis};
use streamlab::trace::inspect::findings::Thresholds;
use testkit::bench::fail;
use testkit::trace_gen::{generated, Case};

const BENCH: &str = "trace_analysis";
/// The records of each criterion group: sized so that the quadratic analysis of main at
/// 7dd9c8a takes at most seconds.
const GROUP_RECORDS: u64 = 20_000;
const CHILD: &str = "TRACE_ANALYSIS_CHILD";
/// What a child prints, then its records, wall and CPU seconds, and peak KiB.
const CHILD_SAYS: &str = "trace_analysis child:";

fn main() {
    let outcome = match std::env::var(CHILD) {
        Ok(dir) => child(Path::new(&dir)),
        Err(_) => {
            let root = match std::env::var("TRACE_ANALYSIS_DIR") {
                Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
                _ => target_dir().join("trace-analysis"),
            };
            match std::env::var("TRACE_ANALYSIS_SCALE") {
                Ok(sizes) if !sizes.is_empty() => scale(&root, &sizes),
                _ => groups(&root),
            }
        }
    };
    if let Err(e) = outcome {
        fail(BENCH, streamlab::Error::InvalidInput(e.into()));
    }
}

/// Cargo's target folder: this binary is `<target>/<profile>/deps/trace_analysis-<hash>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let target = exe.as_deref().and_then(|e| e.parent()?.parent()?.parent());
    target.map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"), Path::to_path_buf)
}

/// `case`'s folder under `root`, generated unless already there; says so when it writes.
fn folder(root: &Path, case: &Case) -> Result<PathBuf, String> {
    let began = Instant::now();
    let (dir, fresh) =
        generated(root, case).map_err(|e| format!("generating {}: {e}", case.name()))?;
    if fresh {
        let secs = began.elapsed().as_secs_f64();
        println!("{BENCH}: generated {} in {secs:.1} s", dir.display());
    }
    Ok(dir)
}

/// `analyse` on `dir`, which must hold `records` records.
fn analysed(dir: &Path, records: u64) -> Result<Analysis, String> {
    let analysis = analyse(dir, &Thresholds::DEFAULT)?;
    match analysis.capture.records() {
        read if read == records => Ok(analysis),
        read => Err(format!("{}: read {read} records of {records}", dir.display())),
    }
}

/// One group per case: `analyse` on its folder.
fn groups(root: &Path) -> Result<(), String> {
    let mut c = Criterion::default().configure_from_args();
    for case in Case::all(GROUP_RECORDS) {
        let dir = folder(root, &case)?;
        let mut group = c.benchmark_group(case.name());
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .throughput(Throughput::Elements(case.records()));
        let id = BenchmarkId::new("analyse", format!("{} records", label(case.records())));
        group.bench_function(id, |b| {
            b.iter(|| {
                analysed(&dir, case.records())
                    .unwrap_or_else(|e| fail(BENCH, streamlab::Error::Verification(e.into())))
            })
        });
        group.finish();
    }
    c.final_summary();
    Ok(())
}

/// The child: one analysis of `dir`, then its records, wall and CPU seconds, and peak
/// resident KiB.
fn child(dir: &Path) -> Result<(), String> {
    let cpu_before = cpu_ns()?;
    let began = Instant::now();
    let analysis = analyse(dir, &Thresholds::DEFAULT)?;
    let secs = began.elapsed().as_secs_f64();
    let cpu_secs = cpu_ns()?.saturating_sub(cpu_before) as f64 / 1e9;
    let peak_kib = peak_kib("/proc/self/status")?;
    println!("{CHILD_SAYS} {} {secs} {cpu_secs} {peak_kib}", analysis.capture.records());
    Ok(())
}

/// The time this process's main thread (the analysis's) has run on a CPU, ns.
fn cpu_ns() -> Result<u64, String> {
    let stat = std::fs::read_to_string("/proc/self/schedstat")
        .map_err(|e| format!("reading /proc/self/schedstat: {e}"))?;
    let first = stat.split_whitespace().next().and_then(|n| n.parse().ok());
    first.ok_or_else(|| format!("reading /proc/self/schedstat: {stat:?}"))
}

/// The peak resident memory (`VmHWM`) in a process's `status` file, KiB.
fn peak_kib(status: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(status).map_err(|e| format!("reading {status}: {e}"))?;
    let line = text.lines().find_map(|l| l.strip_prefix("VmHWM:"));
    let kib = line.and_then(|l| l.trim().strip_suffix("kB")).and_then(|n| n.trim().parse().ok());
    kib.ok_or_else(|| format!("reading {status}: no VmHWM line"))
}

/// `10k`, `1M`, `2500000`: records.
fn records(size: &str) -> Option<u64> {
    let size = size.trim();
    let (number, unit) = match size.char_indices().last()? {
        (i, 'k' | 'K') => (&size[..i], 1_000),
        (i, 'm' | 'M') => (&size[..i], 1_000_000),
        _ => (size, 1),
    };
    number.parse::<u64>().ok().filter(|n| *n > 0).map(|n| n * unit)
}

/// `records` as a size is written: `10k`, `1M`, `2500000`.
fn label(records: u64) -> String {
    if records.is_multiple_of(1_000_000) {
        format!("{}M", records / 1_000_000)
    } else if records.is_multiple_of(1_000) {
        format!("{}k", records / 1_000)
    } else {
        records.to_string()
    }
}

/// The whole number of 1 or more in the environment variable `name`, else `default`.
fn setting(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => {
            v.parse().ok().filter(|n| *n > 0).ok_or(format!("{name}={v}: expected 1 or more"))
        }
        _ => Ok(default),
    }
}

/// What one child measured.
struct Measured {
    records: u64,
    secs: f64,
    cpu_secs: f64,
    peak_kib: u64,
}

/// How a child ended.
enum Outcome {
    Done(Measured),
    /// Killed at the time limit; its peak so far, KiB, where it could be read.
    TimedOut(Option<u64>),
}

/// Scale mode: every case at every size of `sizes`, each in fresh children.
fn scale(root: &Path, sizes: &str) -> Result<(), String> {
    let sizes = sizes
        .split(',')
        .map(|s| records(s).ok_or(format!("TRACE_ANALYSIS_SCALE: {s:?} is no size (10k, 1M)")))
        .collect::<Result<Vec<u64>, String>>()?;
    let names = std::env::var("TRACE_ANALYSIS_CASES").unwrap_or_default();
    let mut cases = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let known = Case::NAMES.join(", ");
        let name = Case::NAMES.iter().find(|n| **n == name);
        cases.push(*name.ok_or(format!("TRACE_ANALYSIS_CASES: cases are {known}"))?);
    }
    if cases.is_empty() {
        cases = Case::NAMES.to_vec();
    }
    let limit = setting("TRACE_ANALYSIS_LIMIT_S", 600)?;
    let runs = setting("TRACE_ANALYSIS_RUNS", 1)?;
    println!("{BENCH}: one analyse per child process, {runs} a size, limit {limit} s");
    for name in cases {
        for &size in &sizes {
            let case = Case::named(name, size).ok_or(format!("no case {name}"))?;
            let dir = folder(root, &case)?;
            let shown = format!("{name:<15}{:>6} records", label(size));
            let mut finished = true;
            for _ in 0..runs {
                let m = match measure(&dir, Duration::from_secs(limit))? {
                    Outcome::Done(m) => m,
                    Outcome::TimedOut(peak_kib) => {
                        let peak = peak_kib.map_or(String::new(), |kib| {
                            format!(" (peak so far {:.1} MiB)", kib as f64 / 1024.0)
                        });
                        println!("{shown}  did not finish in {limit} s{peak}");
                        finished = false;
                        break;
                    }
                };
                if m.records != size {
                    return Err(format!("{}: read {} records of {size}", dir.display(), m.records));
                }
                let per_s = m.records as f64 / m.secs;
                let mib = m.peak_kib as f64 / 1024.0;
                let (secs, cpu) = (m.secs, m.cpu_secs);
                println!(
                    "{shown}  {secs:>9.3} s  {per_s:>10.0} records/s  peak {mib:>8.1} MiB  \
                     ({cpu:.3} s on a CPU)"
                );
            }
            // A larger size of a case that ran past the limit would only run past it too.
            if !finished {
                break;
            }
        }
    }
    Ok(())
}

/// Runs one child on `dir`, killed if it runs past `limit`.
fn measure(dir: &Path, limit: Duration) -> Result<Outcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let mut child = Command::new(exe)
        .env(CHILD, dir)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting a child: {e}"))?;
    let began = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| format!("waiting for a child: {e}"))? {
            Some(status) => break status,
            None if began.elapsed() >= limit => {
                let peak_kib = peak_kib(&format!("/proc/{}/status", child.id())).ok();
                // The child this function started, and only it.
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Outcome::TimedOut(peak_kib));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout.read_to_string(&mut out).map_err(|e| format!("reading a child: {e}"))?;
    }
    let said = out.lines().find_map(|l| l.strip_prefix(CHILD_SAYS)).unwrap_or_default();
    let numbers: Vec<&str> = said.split_whitespace().collect();
    let measured = match numbers[..] {
        [records, secs, cpu_secs, peak_kib] if status.success() => Some(Measured {
            records: records.parse().map_err(|_| said.to_string())?,
            secs: secs.parse().map_err(|_| said.to_string())?,
            cpu_secs: cpu_secs.parse().map_err(|_| said.to_string())?,
            peak_kib: peak_kib.parse().map_err(|_| said.to_string())?,
        }),
        _ => None,
    };
    let failed = || format!("the child on {} ended with {status}: {out:?}", dir.display());
    measured.map(Outcome::Done).ok_or_else(failed)
}
