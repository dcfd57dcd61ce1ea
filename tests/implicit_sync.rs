//! GPU tests of the implicit-sync lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
//!
//! They assert what CUDA documents, as orders: a call returned while stream A's kernel still
//! ran, or after it ended; the legacy default stream's work started after A's kernel ended.
//! What CUDA leaves to the driver (cudaMalloc, cudaFree, cudaHostAlloc) is never asserted,
//! and no duration is.
use streamlab::lab::harness::{args_from, run};
use streamlab::lab::record::drawing::LEGACY_STREAM;
use streamlab::lab::record::report::Verdict;
use streamlab::lab::record::span::{Recording, Work};
use streamlab::lab::{Lesson, Settings};
use streamlab::lessons::implicit_sync::{
    answer, Answer, Call, ImplicitSync, Promise, ASKED, CALLS, LEGACY_GAP_US, MEMSET_AFTER, WAITED,
};
use testkit::spans::{assert_cupti, calls, first_wait, CLOCKS_MS};
use testkit::{gpu, refusal, run_lesson, set_up};

const FLAGS: [&str; 4] = ["--sleep-us", "5000", "--elements", "65536"];

fn index(call: Call) -> usize {
    CALLS.iter().position(|&c| c == call).unwrap()
}

/// Each promised call, driven alone: the host's answer by `cuStreamQuery`, and the GPU's
/// order by the kernels' own stamps.
#[test]
#[ignore = "needs a CUDA GPU"]
fn each_promised_call_does_what_cuda_documents() {
    let gpu = gpu();
    let mut lesson: ImplicitSync = set_up(&gpu, &FLAGS, 0).unwrap();
    for call in CALLS.into_iter().filter(|c| c.promise() != Promise::Either) {
        // Warmed up once, as the harness does: a first cudaMallocAsync grows the pool, and on
        // an H200 that took 10.9 ms, longer than the 5 ms kernel it is asked about.
        lesson.version(&gpu, index(call)).unwrap();
        let s = lesson.version(&gpu, index(call)).unwrap();
        assert_eq!(s.value(ASKED), 1.0, "{call:?}: the kernel had ended before the call: {s:?}");
        let waited = call.promise() == Promise::Waits;
        assert_eq!(s.value(WAITED), if waited { 1.0 } else { 0.0 }, "{call:?}: {s:?}");
    }
    let memset = lesson.version(&gpu, index(Call::Memset)).unwrap();
    assert_eq!(memset.value(MEMSET_AFTER), 1.0, "{memset:?}");
    let legacy = lesson.version(&gpu, index(Call::LegacyLaunch)).unwrap();
    assert!(legacy.value(LEGACY_GAP_US) >= 0.0, "{legacy:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn implicit_sync_lesson_passes_and_asserts_what_is_promised() {
    let gpu = gpu();
    let o = run_lesson::<ImplicitSync>(&gpu, &FLAGS, 3);
    let text = o.report.to_text();
    assert!(o.passed(), "{text}");
    // A check per call, the memset's and the legacy kernel's order, the data.
    assert_eq!(o.checks.len(), CALLS.len() + 3, "{text}");
    for call in CALLS {
        let verdict = o.checks.iter().find(|c| c.name == call.check_name()).map(|c| c.verdict);
        let expected = match call.promise() {
            Promise::Either => Verdict::NotAsserted,
            _ => Verdict::Passed,
        };
        assert_eq!(verdict, Some(expected), "{call:?}\n{text}");
    }
    assert!(o.checks.iter().all(|c| c.verdict != Verdict::Failed), "{text}");
    // What the lesson measured of the others is an answer, whichever it is.
    for call in [Call::Malloc, Call::Free, Call::HostAlloc] {
        assert_ne!(answer(o.measured.version(index(call))), Answer::NotAsked, "{call:?}\n{text}");
    }
}

/// The recorded spans of the call `call`'s version.
fn recording(o: &[Recording], call: Call) -> &Recording {
    o.iter().find(|r| r.version == call.name()).unwrap_or_else(|| panic!("{call:?} not recorded"))
}

/// The end of stream A's kernel in `r`, on CUPTI's clock.
fn kernel_a_end(r: &Recording) -> f64 {
    let kernel = r.spans.iter().find(|s| s.stream == "A (kernel)" && s.kind == Work::Kernel);
    kernel.unwrap_or_else(|| panic!("{}: no kernel on A: {:?}", r.version, r.spans)).end_ms
}

/// The same answers on CUPTI's one clock: the host's call against A's kernel, and the legacy
/// stream's work against it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_recorded_calls_end_where_cuda_says() {
    let gpu = gpu();
    let args = args_from::<ImplicitSync>(&FLAGS).unwrap();
    let settings = Settings { reps: 2, timeline: true, ..Settings::default() };
    let o = run::<ImplicitSync>(&gpu, &args, &settings).unwrap();
    assert_eq!(o.recordings.len(), CALLS.len(), "every version is drawn");
    o.recordings.iter().for_each(assert_cupti);
    let r = &o.recordings;

    // Returned before A's kernel ended: the call on the host's row.
    for (call, function) in [
        (Call::MallocAsync, "cuMemAllocAsync"),
        (Call::PageableCopy, "cuMemcpyHtoDAsync"),
        (Call::Memset, "cuMemsetD8"),
        (Call::LegacyLaunch, "cuLaunchKernel"),
    ] {
        let rec = recording(r, call);
        let issued = calls(rec, function);
        let last = issued.last().unwrap();
        assert!(last.end_ms < kernel_a_end(rec), "{call:?}: {last:?}\n{:?}", rec.spans);
    }
    // The device synchronize returned only after it.
    let sync = recording(r, Call::DeviceSynchronize);
    assert!(first_wait(sync).end_ms >= kernel_a_end(sync) - CLOCKS_MS, "{:?}", sync.host);

    // The legacy stream's memset and kernel started after A's kernel ended.
    for (call, kind) in [(Call::Memset, Work::Memset), (Call::LegacyLaunch, Work::Kernel)] {
        let rec = recording(r, call);
        let on_legacy = rec.spans.iter().find(|s| s.stream == LEGACY_STREAM && s.kind == kind);
        let span = on_legacy.unwrap_or_else(|| panic!("{call:?}: {:?}", rec.spans));
        assert!(span.start_ms >= kernel_a_end(rec) - CLOCKS_MS, "{call:?}: {:?}", rec.spans);
    }
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn flags_outside_their_ranges_are_refused_in_one_line() {
    for sleep in ["999", "1e7", "NaN", "inf", "-1"] {
        let why = refusal::<ImplicitSync>(&["--sleep-us", sleep]);
        assert!(why.contains("--sleep-us") && why.contains("number from 1000 to 1000000"), "{why}");
    }
    for elements in ["0", "268435457", "1.5"] {
        let why = refusal::<ImplicitSync>(&["--elements", elements]);
        assert!(why.contains("--elements") && why.contains("from 1 to 268435456"), "{why}");
    }
    for flags in [&[][..], &["--sleep-us", "1e6", "--elements", "268435456"]] {
        let args = args_from::<ImplicitSync>(flags).unwrap();
        ImplicitSync::plan(&args, &streamlab::lab::WorkModel::H100)
            .and_then(|p| p.admit(None))
            .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
    }
}
