//! True per-stream timelines on the GPU: the overlap lesson with 8 streams, recorded by
//! CUPTI through the harness (as `--trace` and `--svg` do). GPU tests; the format tests
//! that need no GPU are the unit tests of `lab::trace`, `lab::picture` and `lab::plot`.
use streamlab::lab::harness::{args_from, run};
use streamlab::lab::record::output::OutputFile;
use streamlab::lab::record::span::{HostWork, Recording, Source, Span, Work};
use streamlab::lab::Settings;
use streamlab::lessons::overlap::Overlap;
use testkit::gpu;

/// One ns, in ms: CUPTI's resolution, the tolerance of every ordering below.
const NS: f64 = 1e-6;

struct Traced {
    recordings: Vec<Recording>,
    cost_percent: f64,
    trace: serde_json::Value,
    svg: String,
}

/// Overlap with 8 streams through the harness, recorded, with the trace and picture written.
fn traced() -> Traced {
    let gpu = gpu();
    let dir = std::env::temp_dir().join(format!("streamlab-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (trace, svg) = (dir.join("overlap.json"), dir.join("overlap.svg"));
    let settings = Settings {
        reps: 5,
        timeline: true,
        trace: Some(OutputFile::checked("--trace", &trace).unwrap()),
        svg: Some(OutputFile::checked("--svg", &svg).unwrap()),
        ..Settings::default()
    };
    let args = args_from::<Overlap>(&["--streams", "8"]).unwrap();
    let o = run::<Overlap>(&gpu, &args, &settings).unwrap_or_else(|e| panic!("overlap: {e}"));
    assert!(o.results_right(), "{}", o.report.to_text());
    println!("{}", o.report.to_text());
    let cost = o.cost.expect("a recorded run measures its cost");
    let out = Traced {
        recordings: o.recordings,
        cost_percent: cost.percent(),
        trace: serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap(),
        svg: std::fs::read_to_string(&svg).unwrap(),
    };
    std::fs::remove_dir_all(dir).unwrap();
    out
}

fn of(r: &Recording, kind: Work) -> Vec<&Span> {
    let mut v: Vec<&Span> = r.spans.iter().filter(|s| s.kind == kind).collect();
    v.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    v
}

fn busy(spans: &[&Span]) -> f64 {
    spans.iter().map(|s| s.ms()).sum()
}

fn assert_within(what: &str, got: f64, want: f64, tolerance: f64) {
    let off = (got / want - 1.0).abs();
    assert!(
        off <= tolerance,
        "{what}: {got:.4} ms against {want:.4} ms ({:.1}% apart, at most {:.0}%)",
        off * 100.0,
        tolerance * 100.0
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cupti_shows_the_pipeline_of_eight_streams() {
    let t = traced();
    let [sync, overlapped] = &t.recordings[..] else {
        panic!("two recorded versions, got {}", t.recordings.len());
    };
    for r in [sync, overlapped] {
        assert!(
            matches!(r.source, Source::Cupti { .. }),
            "{}: CUPTI was not used: {}",
            r.version,
            r.source.describe()
        );
    }

    // The copy engine for host-to-device copies is busy with at most one at a time.
    let ins = of(overlapped, Work::CopyToDevice);
    assert_eq!(ins.len(), 8, "{ins:?}");
    for pair in ins.windows(2) {
        assert!(
            pair[1].start_ms >= pair[0].end_ms - NS,
            "two copy-ins at once: {} and {}",
            pair[0].stream,
            pair[1].stream
        );
    }
    // Chunks of equal size take about equally long on the engine (events made stream 1's
    // copy-in look twice as long: it included queueing).
    let (shortest, longest) =
        ins.iter().fold((f64::MAX, 0f64), |(a, b), s| (a.min(s.ms()), b.max(s.ms())));
    assert!(longest <= shortest * 1.25, "copy-ins from {shortest:.4} to {longest:.4} ms");

    // Each chunk's kernel lies between the end of its copy-in and the start of its copy-out.
    for k in 0..8 {
        let stream = format!("overlap-{k}");
        let on: Vec<&Span> = overlapped.spans.iter().filter(|s| s.stream == stream).collect();
        let one = |kind| {
            let v: Vec<&&Span> = on.iter().filter(|s| s.kind == kind).collect();
            assert_eq!(v.len(), 1, "{stream}: {kind:?} {on:?}");
            *v[0]
        };
        let (copy_in, kernel, copy_out) =
            (one(Work::CopyToDevice), one(Work::Kernel), one(Work::CopyToHost));
        assert!(
            kernel.start_ms >= copy_in.end_ms - NS && kernel.end_ms <= copy_out.start_ms + NS,
            "{stream}: in {:.4}-{:.4}, kernel {:.4}-{:.4}, out {:.4}-{:.4}",
            copy_in.start_ms,
            copy_in.end_ms,
            kernel.start_ms,
            kernel.end_ms,
            copy_out.start_ms,
            copy_out.end_ms
        );
        assert_eq!(copy_in.bytes, copy_out.bytes);
        // The lesson's own names for them, through the correlation ids.
        let names = [&copy_in.name, &kernel.name, &copy_out.name];
        let want = [
            format!("chunk {k} copy-in"),
            format!("chunk {k} kernel"),
            format!("chunk {k} copy-out"),
        ];
        assert!(names.iter().zip(&want).all(|(got, want)| *got == want), "{names:?}");
        assert!(kernel.grid.is_some_and(|g| g[0] > 0), "{kernel:?}");
    }
    // Overlap happened: some copy-in ran while another chunk's kernel did.
    let kernels = of(overlapped, Work::Kernel);
    assert!(
        ins.iter().any(|c| kernels
            .iter()
            .any(|k| k.stream != c.stream && c.start_ms < k.end_ms && k.start_ms < c.end_ms)),
        "no copy-in overlapped a kernel"
    );

    // Busy times agree with the phases the same run timed with events.
    for (kind, part) in [(Work::CopyToDevice, "H"), (Work::Kernel, "C"), (Work::CopyToHost, "D")] {
        let what = format!("one stream, {kind:?} busy time against event phase {part}");
        assert_within(&what, busy(&of(sync, kind)), sync.part(part), 0.05);
    }
    // Nothing stalls between the phases of the recorded run (a fresh CUPTI buffer, faulted
    // in during the run, once put a 2 ms hole before the kernel).
    let phases = [Work::CopyToDevice, Work::Kernel, Work::CopyToHost].map(|k| {
        let v = of(sync, k);
        assert_eq!(v.len(), 1, "one stream, {k:?}: {v:?}");
        v[0]
    });
    for pair in phases.windows(2) {
        let gap = pair[1].start_ms - pair[0].end_ms;
        assert!(
            gap < 0.25,
            "one stream: {gap:.4} ms between {:?} and {:?}",
            pair[0].kind,
            pair[1].kind
        );
    }
    let first = overlapped.spans.iter().map(|s| s.start_ms).fold(f64::MAX, f64::min);
    let last = overlapped.spans.iter().map(|s| s.end_ms).fold(0.0, f64::max);
    assert_within(
        "8 streams, first start to last end against the events' time",
        last - first,
        overlapped.ms,
        0.05,
    );

    // Host side: the synchronize wait, and the fork's arrows to the seven other streams.
    assert!(overlapped.host.iter().any(|h| h.kind == HostWork::Wait));
    assert!(overlapped.flows.len() >= 7, "{:?}", overlapped.flows);

    // What recording cost was measured (whether it met the 2% target is a timing:
    // scripts/perf-check.sh's).
    println!("recording cost: {:+.2}%", t.cost_percent);
    assert!(t.cost_percent.is_finite(), "{:+.2}%", t.cost_percent);

    // The files: a trace with a track per stream, a picture with a row per stream.
    let names: Vec<&str> = t.trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    for k in 0..8 {
        let stream = format!("overlap-{k}");
        assert!(names.contains(&stream.as_str()), "{names:?}");
        assert!(t.svg.contains(&format!(">\n{stream}\n<")), "no row for {stream}");
    }
    assert!(t.trace["metadata"]["timeline"].as_str().unwrap().contains("CUPTI"));
}
