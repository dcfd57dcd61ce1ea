//! Shared by the integration tests (tests/) and the benches (benches/).
//!
//! GPU tests are `#[ignore = "needs a CUDA GPU"]`: on a machine without one, `cargo test`
//! lists them as ignored (never as passed); on a GPU machine run them with
//! `cargo test --release -- --include-ignored`, where [`gpu`] fails loudly if no GPU is there.
//! A test that needs several GPUs takes them from [`gpus`], which skips it with a line where
//! fewer are visible (a pass that scripts/gpu-run.sh counts apart).
//!
//! GPU tests assert behaviour: bits, the order of events, and the shape of the recorded
//! spans ([`spans`]). Never a duration or a ratio of durations: those are
//! scripts/perf-check.sh's, against scripts/perf-targets.tsv.
use std::io::Write;
use std::ops::Deref;
use std::sync::{Mutex, MutexGuard};

pub use streamlab;
use streamlab::lab::harness::{args_from, run};
use streamlab::lab::record::report::Verdict;
use streamlab::lab::{Lesson, Outcome, Settings};
use streamlab::runtime::context::device_count;
use streamlab::Gpu;

/// What the GPU tests assert of recorded spans: shapes and orders, never durations.
pub mod spans;
/// Trace folders made to order, for the trace analysis's tests and bench.
pub mod trace_gen;

/// One GPU test at a time: libtest runs tests on parallel threads, and two tests on one GPU
/// would share its engines (a recorded run would show the other test's work beside its own).
static GPU_LOCK: Mutex<()> = Mutex::new(());

/// The GPU for a test, held exclusively until it is dropped. Derefs to [`Gpu`].
pub struct TestGpu {
    gpu: Gpu,
    // Dropped after `gpu` (field order), so the next test starts on an idle device.
    _exclusive: MutexGuard<'static, ()>,
}

impl Deref for TestGpu {
    type Target = Gpu;
    fn deref(&self) -> &Gpu {
        &self.gpu
    }
}

/// The GPU for a GPU test: device 0, exclusively, or a panic naming why there is none.
pub fn gpu() -> TestGpu {
    // A test that panicked while holding the lock poisons it; the next test may still run.
    let exclusive = GPU_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let gpu =
        Gpu::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and found none: {e}"));
    TestGpu { gpu, _exclusive: exclusive }
}

/// Device 0, exclusively, for a test that needs `n` GPUs, where at least `n` are visible
/// (`CUDA_VISIBLE_DEVICES` counts); else `None`, after one line on stderr,
/// `skipped: <test>: needs <n> GPUs, found <m>`, and the test returns (a pass). The line is
/// written to the file itself, not through `eprintln!`, which libtest captures: it shows in
/// every run's log, where scripts/gpu-run.sh counts such tests apart from the passed ones.
/// With no GPU at all it panics, as [`gpu`] does.
pub fn gpus(n: usize) -> Option<TestGpu> {
    let exclusive = GPU_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let found = device_count()
        .unwrap_or_else(|e| panic!("this test needs {n} CUDA GPUs and found none: {e}"));
    if (found as usize) < n {
        let thread = std::thread::current();
        let test = thread.name().filter(|t| *t != "main").unwrap_or("a test");
        let line = format!("skipped: {test}: needs {n} GPUs, found {found}\n");
        // Nothing to do if stderr is gone: the test passes either way.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        return None;
    }
    let gpu =
        Gpu::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and found none: {e}"));
    Some(TestGpu { gpu, _exclusive: exclusive })
}

/// The GPU for a bench, or `None` after printing "not run: no GPU" (benches have no
/// "ignored" state; they say so instead of reporting a time).
pub fn gpu_for_bench(bench: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            println!("{bench}: not run: no GPU ({e})");
            None
        }
    }
}

/// Runs lesson `L` through the harness with `flags` (as on the command line) and `reps`
/// repeats: the typed outcome, for tests to assert on.
pub fn run_lesson<L: Lesson>(gpu: &Gpu, flags: &[&str], reps: usize) -> Outcome<L> {
    let args = args_from::<L>(flags).unwrap_or_else(|e| panic!("{} {flags:?}: {e}", L::NAME));
    let settings = Settings { reps, ..Settings::default() };
    run::<L>(gpu, &args, &settings).unwrap_or_else(|e| panic!("{} {flags:?}: {e}", L::NAME))
}

/// Runs lesson `L` as [`run_lesson`] does, and records its drawn versions (the first two, or
/// those [`Lesson::drawn`] names) once more as `--timeline` does: the outcome's `recordings`,
/// which [`spans`] reads. Panics unless every recording came from CUPTI (the events recorder's spans include queueing, so their shape
/// says nothing of what ran at once).
pub fn run_recorded<L: Lesson>(gpu: &Gpu, flags: &[&str], reps: usize) -> Outcome<L> {
    let args = args_from::<L>(flags).unwrap_or_else(|e| panic!("{} {flags:?}: {e}", L::NAME));
    let settings = Settings { reps, timeline: true, ..Settings::default() };
    let o =
        run::<L>(gpu, &args, &settings).unwrap_or_else(|e| panic!("{} {flags:?}: {e}", L::NAME));
    let drawn = o.lesson.drawn().len();
    assert_eq!(o.recordings.len(), drawn, "{} {flags:?}: a recording per drawn version", L::NAME);
    for r in &o.recordings {
        spans::assert_cupti(r);
    }
    o
}

/// Lesson `L` set up with `flags`, for tests and benches that drive its versions directly.
pub fn set_up<L: Lesson>(gpu: &Gpu, flags: &[&str], seed: u64) -> streamlab::Result<L> {
    L::setup(gpu, &args_from::<L>(flags)?, seed)
}

/// The refusal `L`'s flag checks give `flags` without a GPU (parse and budget), or a panic
/// naming what was accepted. The message must be one line.
pub fn refusal<L: Lesson>(flags: &[&str]) -> String {
    let checked = args_from::<L>(flags)
        .and_then(|a| L::plan(&a, &streamlab::lab::WorkModel::H100)?.admit(None));
    match checked {
        Err(streamlab::Error::InvalidInput(why)) if !why.en().contains('\n') => why.en(),
        other => panic!("{} {flags:?}: expected a one-line refusal, got {other:?}", L::NAME),
    }
}

/// Checks that `L` refuses each `[flag, value, range]` as it parses, without a GPU, in one
/// line that names both the flag and its range (e.g. "whole number from 1 to 64").
pub fn refuses_out_of_range<L: Lesson>(rows: &[[&str; 3]]) {
    for [flag, value, range] in rows {
        let why = refusal::<L>(&[flag, value]);
        assert!(why.contains(flag) && why.contains(range), "{flag} {value}: {why}");
    }
}

/// Checks that `L` refuses each `(flags, mentions)` case without a GPU, in one line that
/// contains `mentions`, as invalid input (exit 2).
pub fn refuses<'a, L: Lesson, C: std::borrow::Borrow<(&'a [&'a str], &'a str)>>(
    cases: impl IntoIterator<Item = C>,
) {
    for case in cases {
        let (flags, mentions) = *case.borrow();
        let why = refusal::<L>(flags);
        assert!(why.contains(mentions), "{flags:?}: {why} (expected {mentions})");
        assert_eq!(streamlab::Error::InvalidInput(why.into()).exit_code(), 2);
    }
}

/// The refusal the harness gives `flags` on a GPU (with this GPU's work model), or a panic
/// naming what ran instead. The message must be one line.
pub fn run_refusal<L: Lesson>(gpu: &Gpu, flags: &[&str]) -> String {
    let args = args_from::<L>(flags).unwrap_or_else(|e| panic!("{} {flags:?}: {e}", L::NAME));
    match run::<L>(gpu, &args, &Settings::default()) {
        Err(streamlab::Error::InvalidInput(why)) if !why.en().contains('\n') => why.en(),
        Err(e) => panic!("{} {flags:?}: expected a one-line refusal, got {e}", L::NAME),
        Ok(o) => panic!("{} {flags:?}: ran instead of refusing\n{}", L::NAME, o.report.to_text()),
    }
}

/// Checks that a run of `L` on `gpu` (with this GPU's work model) refuses each
/// `(flags, mentions)` case before running, in one line that contains `mentions`: what the
/// plan refuses without a GPU ([`refuses`]), the run refuses too.
pub fn run_refuses<'a, L: Lesson, C: std::borrow::Borrow<(&'a [&'a str], &'a str)>>(
    gpu: &Gpu,
    cases: impl IntoIterator<Item = C>,
) {
    for case in cases {
        let (flags, mentions) = *case.borrow();
        let why = run_refusal::<L>(gpu, flags);
        assert!(why.contains(mentions), "{flags:?}: {why} (expected {mentions})");
    }
}

/// Flags that every batched lesson (compute-transfer, prefetch, callback) parses but its
/// plan refuses, whatever the GPU: more results than `lab::batches` keeps, and one batch of
/// 2^28 elements for 100,000 iterations, over a minute of compute.
pub const BATCHES_REFUSED_BY_PLAN: [(&[&str], &str); 2] = [
    (&["--batches", "1024", "--elements", "100000000"], "--batches 1024 x --elements 100000000"),
    (&["--batches", "1", "--elements", "268435456", "--iters", "100000"], "per repeat"),
];

/// Runs `L` once with `flags` and asserts that its first "bit for bit" check (the version
/// with the technique against the one without) passed.
pub fn assert_bit_for_bit<L: Lesson>(gpu: &Gpu, flags: &[&str]) {
    let o = run_lesson::<L>(gpu, flags, 1);
    let verdict = o.checks.iter().find(|c| c.name.contains("bit for bit")).map(|c| c.verdict);
    assert_eq!(verdict, Some(Verdict::Passed), "{} {flags:?}: {:?}", L::NAME, o.checks);
}

/// Runs `L` once with `flags` and asserts that it made `count` "bit for bit" checks (each
/// version against the baseline) and that every one passed.
pub fn assert_bit_for_bit_checks<L: Lesson>(gpu: &Gpu, flags: &[&str], count: usize) {
    let o = run_lesson::<L>(gpu, flags, 1);
    let bitwise: Vec<_> = o.checks.iter().filter(|c| c.name.contains("bit for bit")).collect();
    assert_eq!(bitwise.len(), count, "{} {flags:?}: {:?}", L::NAME, o.checks);
    let passed = bitwise.iter().all(|c| c.verdict == Verdict::Passed);
    assert!(passed, "{} {flags:?}: {bitwise:?}", L::NAME);
}

/// A run with nothing to overlap (one batch, one stream): it passed its checks, its
/// interpretation opens by saying so (`says`), and no line claims a speed-up.
pub fn assert_nothing_to_overlap<L>(o: &Outcome<L>, says: &str) {
    let r = &o.report;
    assert!(o.passed(), "{}", r.to_text());
    assert!(r.interpretation[0].contains(says), "{}", r.to_text());
    assert!(!r.interpretation.iter().any(|l| l.contains("x faster")), "{}", r.to_text());
}

/// A run that made its claims: every check passed and was asserted. `Outcome::passed` alone
/// also accepts a check that passed with "not asserted: ..." (too little work to judge, or
/// kernels serialized by a tool), so a test that promises the claim asserts this instead.
pub fn assert_every_check_asserted<L>(o: &Outcome<L>) {
    let text = o.report.to_text();
    assert!(!o.checks.is_empty(), "no checks were made\n{text}");
    for c in &o.checks {
        let asserted = c.verdict == Verdict::Passed && !c.detail.starts_with("not asserted");
        assert!(asserted, "{}: {:?}: {}\n{text}", c.name, c.verdict, c.detail);
    }
}

/// Panics unless `L` accepts `flags` without a GPU (parse and budget).
pub fn accepted<L: Lesson>(flags: &[&str]) {
    args_from::<L>(flags)
        .and_then(|a| L::plan(&a, &streamlab::lab::WorkModel::H100)?.admit(None))
        .unwrap_or_else(|e| panic!("{} {flags:?}: {e}", L::NAME));
}

/// Seconds of GPU time as the `Duration` criterion's `iter_custom` wants.
pub fn gpu_duration(total_ms: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(total_ms / 1e3)
}

/// Criterion helpers shared by every bench file.
pub mod bench {
    use std::time::Duration;

    use criterion::measurement::WallTime;
    use criterion::{BenchmarkGroup, BenchmarkId, Criterion};

    /// A group sized for GPU work: 10 samples, 0.5 s warm-up, 2 s of measurement.
    pub fn quick_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        group
    }

    /// Benches `once`, which runs the work once and returns its GPU time in ms (from CUDA
    /// events), through `iter_custom`. The first error is kept in `failure` for the caller
    /// to report after the group.
    pub fn gpu_timed(
        group: &mut BenchmarkGroup<'_, WallTime>,
        id: BenchmarkId,
        failure: &mut Option<streamlab::Error>,
        mut once: impl FnMut() -> streamlab::Result<f64>,
    ) {
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut ms = 0.0;
                for _ in 0..iters {
                    match once() {
                        Ok(t) => ms += t,
                        Err(e) => {
                            failure.get_or_insert(e);
                        }
                    }
                }
                super::gpu_duration(ms)
            })
        });
    }

    /// Runs version `v` of `lesson` once ([`Lesson::version`]).
    ///
    /// [`Lesson::version`]: streamlab::lab::Lesson::version
    pub fn version<L: streamlab::lab::Lesson>(
        lesson: &mut L,
        gpu: &streamlab::Gpu,
        v: usize,
    ) -> streamlab::Result<streamlab::lab::Sample> {
        lesson.version(gpu, v)
    }

    /// Benches each `(v, id)` in `group`: version `v` of `lesson`, timed by the lesson's own
    /// code (its sample's ms). Then finishes the group, and on the first error ends `bench`
    /// (exit 1).
    pub fn versions<L: streamlab::lab::Lesson>(
        mut group: BenchmarkGroup<'_, WallTime>,
        bench: &str,
        lesson: &mut L,
        gpu: &streamlab::Gpu,
        ids: impl IntoIterator<Item = (usize, BenchmarkId)>,
    ) {
        let mut failure = None;
        for (v, id) in ids {
            gpu_timed(&mut group, id, &mut failure, || version(lesson, gpu, v).map(|s| s.ms));
        }
        group.finish();
        if let Some(e) = failure {
            fail(bench, e);
        }
    }

    /// Reports a bench's failure and exits non-zero, so a failed check fails `cargo bench`.
    pub fn fail(bench: &str, e: streamlab::Error) -> ! {
        eprintln!("{bench} bench: {e}");
        std::process::exit(1);
    }

    /// Runs every version of `lesson` once more and its checks, and exits non-zero if one
    /// fails: a bench's results are verified even when a filter skipped its groups.
    pub fn verify<L: streamlab::lab::Lesson>(
        gpu: &streamlab::Gpu,
        lesson: &mut L,
        versions: usize,
    ) {
        let mut runs = Vec::new();
        for v in 0..versions {
            runs.push(version(lesson, gpu, v).unwrap_or_else(|e| fail(L::NAME, e)));
        }
        let measured = streamlab::lab::Measured::from_samples(
            (0..versions).map(|v| format!("version {v}")).collect(),
            runs.into_iter().map(|s| vec![s]).collect(),
        );
        let mut checks = streamlab::lab::Checks::default();
        if let Err(e) = lesson.verify(gpu, &measured, &mut checks) {
            fail(L::NAME, e);
        }
        if let Some(c) = checks.items.iter().find(|c| !c.passed()) {
            fail(
                L::NAME,
                streamlab::Error::Verification(format!("{}: {}", c.name, c.detail).into()),
            );
        }
    }
}
