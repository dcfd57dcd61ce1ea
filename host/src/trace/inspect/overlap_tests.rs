//! The report's windows and figures on records written as the recorder writes them: busy
//! time and the bound, windows per process and device, start-up and the rest, ranges with the
//! work they launched and the work that ran during them (the CPU running ahead), late ranks,
//! which ranges were recorded whole, and the text.
use crate::runtime::cupti::trace_file::{Direction, Line, Memory};
use crate::text::Lang;
use crate::trace::inspect::engines::Engine;
use crate::trace::inspect::findings::{Rule, Thresholds};
use crate::trace::inspect::overlap::{overlap_report, overlap_report_of, WindowReport};
use crate::trace::inspect::overlap_text::report_text;
use crate::trace::inspect::test_lines::{
    assert_ms, at, call, capture_of, context, copy, kernel, nccl, range, report_of,
};
use crate::trace::inspect::windows::{Part, MAX_RANGE_NAMES};
use crate::trace::read::reader::capture;
use crate::trace::read::reader_tests::process_of;

fn range_window<'a>(windows: &'a [WindowReport], name: &str) -> &'a WindowReport {
    windows.iter().find(|w| w.window.range.as_deref() == Some(name)).unwrap()
}

#[test]
fn two_overlapping_copies_count_once() {
    let lines = [
        copy(13, Direction::HostToDevice, Memory::Pinned, 0.0, 2.0),
        copy(14, Direction::HostToDevice, Memory::Pinned, 1.0, 3.0),
        kernel(13, 3.0, 4.0, 1),
    ];
    let f = &report_of(&lines).windows[0].figures;
    assert_eq!((f.busy.copy_in_ms, f.busy.compute_ms), (3.0, 1.0));
    assert_eq!((f.copy_ms, f.copy_and_compute_ms), (3.0, 0.0));
    assert_eq!((f.span_ms, f.bound_ms, f.bound_engine), (4.0, 3.0, Some(Engine::CopyIn)));
    assert_eq!(f.measured_over_bound, Some(4.0 / 3.0));
    assert_eq!((f.counts.kernels, f.counts.copies), (1, 2));
}

#[test]
fn a_copy_fully_under_a_kernel() {
    let lines = [
        kernel(13, 0.0, 4.0, 1),
        copy(14, Direction::DeviceToHost, Memory::Pinned, 1.0, 2.0),
        Line::Memset {
            device: 0,
            context: 1,
            stream: 14,
            start: at(2.5),
            end: at(3.0),
            correlation: 0,
            bytes: 64,
        },
    ];
    let report = report_of(&lines);
    let f = &report.windows[0].figures;
    // The memset is compute, inside the kernel's time: compute stays 4 ms.
    assert_eq!((f.busy.compute_ms, f.busy.copy_out_ms), (4.0, 1.0));
    assert_eq!(f.copy_and_compute_ms, 1.0);
    assert_eq!((f.copy_under_compute, f.compute_under_copy), (Some(1.0), Some(0.25)));
    assert_eq!((f.bound_ms, f.measured_over_bound), (4.0, Some(1.0)));
    let text = report_text(&report, Lang::En);
    assert!(text.contains("100% of the copy time"), "{text}");
    assert!(text.contains("25% of the compute time"), "{text}");
    assert!(text.contains("measured over bound: 1.00x"), "{text}");
    assert!(text.contains("= 4.000 ms (compute)"), "{text}");
    assert!(text.contains("1 kernels, 1 copies, 1 memsets, 0 collectives"), "{text}");
}

#[test]
fn one_window_per_process_and_device_and_each_finds_its_own() {
    let mut pageable = copy(13, Direction::HostToDevice, Memory::Pageable, 0.0, 1.0);
    if let Line::Copy { device, .. } = &mut pageable {
        *device = 1;
    }
    let report = report_of(&[kernel(13, 0.0, 1.0, 1), pageable]);
    let devices: Vec<u32> = report.windows.iter().map(|w| w.window.device).collect();
    assert_eq!(devices, [0, 1]);
    assert!(report.windows[0].findings.is_empty());
    let rules: Vec<Rule> = report.windows[1].findings.iter().map(|f| f.rule).collect();
    assert_eq!(rules, [Rule::PageableCopy]);
    let text = report_text(&report, Lang::En);
    assert!(text.contains("lesson: streamlab run pinned-vs-pageable"), "{text}");
    assert!(text.contains("e.g. memcpy HtoD on stream 13 at 0.000 ms"), "{text}");
    let zh = report_text(&report, Lang::Zh);
    assert!(zh.contains("对应课程：streamlab run pinned-vs-pageable"), "{zh}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["windows"][1]["findings"][0]["rule"], "pageable_copy");
    assert_eq!(json["windows"][1]["window"]["part"], "whole");
    assert_eq!(json["thresholds"]["idle_gap_ms"], 0.1);
    // Two processes: a window each, in the order they started.
    let two = capture(vec![
        process_of(5, &[context(), vec![kernel(13, 0.0, 1.0, 1)]].concat()),
        process_of(6, &[context(), vec![kernel(13, 2.0, 3.0, 1)]].concat()),
    ]);
    let report = overlap_report(&two, &Thresholds::DEFAULT);
    let processes: Vec<u32> = report.windows.iter().map(|w| w.window.process).collect();
    assert_eq!(processes, [5, 6]);
}

#[test]
fn the_text_states_the_thresholds_and_the_bound_formula() {
    let lines =
        [kernel(13, 0.0, 2.0, 1), copy(14, Direction::HostToDevice, Memory::Pinned, 0.0, 1.0)];
    let text = report_text(&report_of(&lines), Lang::En);
    assert!(text.contains("idle gap > 0.1 ms"), "{text}");
    assert!(text.contains("small kernel <= 0.01 ms; many = 100 or more"), "{text}");
    assert!(text.contains("late rank > 0.05 ms; CPU ahead > 1 ms"), "{text}");
    assert!(
        text.contains(
            "bound = max(compute 2.000, copy in 1.000, copy out 0.000, \
             device and peer copies 0.000, collectives 0.000) = 2.000 ms (compute)"
        ),
        "{text}"
    );
}

/// The example: a range that launched 200 kernels and returned, and a range that
/// only synchronized, while they ran. The work belongs to the first ("launched in"); the
/// second only saw it run ("ran during").
#[test]
fn work_is_charged_to_the_range_that_launched_it() {
    let mut lines = Vec::new();
    // "launch": 0..1 ms on the host, 200 kernels of 0.2 ms each queued from 0.5 ms on: 40 ms.
    lines.extend(range(1, "launch", 1, 0.0, 1.0));
    for i in 0..200u32 {
        let call_at = 0.002 * f64::from(i);
        lines.push(call("cudaLaunchKernel", 1, call_at, call_at + 0.001, 1000 + i));
        let start = 0.5 + 0.2 * f64::from(i);
        lines.push(kernel(13, start, start + 0.2, 1000 + i));
    }
    // "sync": 1..40.5 ms, the host waits for it all.
    lines.extend(range(2, "sync", 1, 1.0, 40.5));
    lines.push(call("cudaDeviceSynchronize", 1, 1.0, 40.5, 5000));
    let report = report_of(&lines);
    let launch = range_window(&report.windows, "launch");
    assert_eq!(launch.window.part, Part::Range);
    assert_eq!(launch.figures.counts.kernels, 200);
    assert_ms(launch.figures.span_ms, 40.0);
    assert_ms(launch.figures.busy.compute_ms, 40.0);
    // It ran during "launch" only while "launch" was open: 0.5 ms of it.
    let during = &launch.ran_during.as_ref().unwrap().figures;
    assert_ms(during.busy.compute_ms, 0.5);
    assert_ms(during.span_ms, 1.0);
    let charged = launch.projection.unwrap();
    assert_eq!((charged.by_thread, charged.by_process, charged.by_start_time), (200, 0, 0));
    // "sync" launched nothing, and 39.5 ms of the work ran during it.
    let sync = range_window(&report.windows, "sync");
    assert_eq!((sync.figures.counts.kernels, sync.figures.span_ms), (0, 0.0));
    assert_ms(sync.ran_during.as_ref().unwrap().figures.busy.compute_ms, 39.5);
    // No work was launched before the first range: no start-up, and no split.
    let parts: Vec<Part> = report.windows.iter().map(|w| w.window.part).collect();
    assert_eq!(parts, [Part::Whole, Part::Range, Part::Range]);
}

/// The CPU three steps ahead: each step's range launches its work and returns; the work
/// runs three steps later. Each step is charged its own work, and the finding says by how
/// much the CPU ran ahead.
#[test]
fn the_cpu_ahead_of_the_gpu_is_said_and_each_step_keeps_its_work() {
    let mut lines = Vec::new();
    for step in 0..10u32 {
        // The host: step `step` at 10 ms each, 1 ms long; the GPU: its 8 ms of work starts
        // three steps later.
        let host = 10.0 * f64::from(step);
        lines.extend(range(10 + step, "step", 1, host, host + 1.0));
        lines.push(call("cudaLaunchKernel", 1, host + 0.1, host + 0.105, 100 + step));
        let gpu = host + 30.0;
        lines.push(kernel(13, gpu, gpu + 8.0, 100 + step));
    }
    let report = report_of(&lines);
    let step = range_window(&report.windows, "step");
    assert_eq!((step.window.occurrences, step.figures.counts.kernels), (10, 10));
    // Launched in: the 10 kernels, 8 ms each.
    assert_ms(step.figures.span_ms, 80.0);
    // Ran during: only the kernels that happened to run while some step was open.
    assert_ms(step.ran_during.as_ref().unwrap().figures.busy.compute_ms, 7.0);
    let ahead = step.findings.iter().find(|f| f.rule == Rule::CpuAhead).unwrap();
    let a = ahead.ahead.unwrap();
    // Each step's work ends 37 ms after the step: 3.7 steps of 10 ms.
    assert_ms(a.median_ms, 37.0);
    assert_ms(a.max_ms, 37.0);
    assert_eq!(a.steps, Some(3.7));
    assert_eq!(a.launch_call_us, Some(5.0));
    assert_eq!(ahead.count, 10);
    let text = report_text(&report, Lang::En);
    assert!(
        text.contains(
            "the CPU ran ahead of the GPU: the work an occurrence launched ended 37.000 ms after"
        ),
        "{text}"
    );
    assert!(text.contains("(3.7 occurrences later)"), "{text}");
    // Under the threshold, no finding.
    let t = Thresholds { cpu_ahead_ms: 40.0, ..Thresholds::DEFAULT };
    let report = overlap_report(&capture_of(&lines), &t);
    let step = range_window(&report.windows, "step");
    assert!(step.findings.iter().all(|f| f.rule != Rule::CpuAhead), "{:?}", step.findings);
}

/// PyTorch's backward runs on the autograd engine's thread, where no range is open, while
/// the main thread sits in "step": that work is the step's too; work whose call was not
/// recorded goes by its start time.
#[test]
fn work_launched_from_another_thread_belongs_to_the_range_the_process_had_open() {
    let mut lines = range(1, "step", 1, 0.0, 10.0);
    lines.push(call("cudaLaunchKernel", 1, 0.5, 0.6, 1));
    lines.push(kernel(13, 1.0, 2.0, 1));
    // Thread 2, inside the main thread's "step".
    lines.push(call("cudaLaunchKernel", 2, 3.0, 3.1, 2));
    lines.push(kernel(13, 3.5, 4.0, 2));
    // No call recorded: by its start, inside "step".
    lines.push(kernel(13, 5.0, 6.0, 3));
    // After the step, on thread 2: no range anywhere.
    lines.push(call("cudaLaunchKernel", 2, 11.0, 11.1, 4));
    lines.push(kernel(13, 11.5, 12.0, 4));
    let report = report_of(&lines);
    let step = range_window(&report.windows, "step");
    let c = step.projection.unwrap();
    assert_eq!((c.by_thread, c.by_process, c.by_start_time), (1, 1, 1));
    assert_eq!(step.figures.counts.kernels, 3);
    let text = report_text(&report, Lang::En);
    assert!(text.contains("through the launching thread: 1; through the range the process had open (no range on that thread): 1; by start time (its call not recorded): 1"), "{text}");
}

#[test]
fn the_run_is_split_into_start_up_and_the_rest_at_the_first_range() {
    let mut lines = vec![
        call("cudaLaunchKernel", 1, 0.0, 0.1, 1),
        kernel(13, 0.2, 1.0, 1),
        // Launched before the first range, run after it began: still start-up.
        call("cudaLaunchKernel", 1, 1.5, 1.6, 2),
        kernel(13, 2.5, 3.0, 2),
    ];
    lines.extend(range(1, "step", 1, 2.0, 4.0));
    lines.push(call("cudaLaunchKernel", 1, 2.1, 2.2, 3));
    lines.push(kernel(13, 3.0, 3.5, 3));
    let report = report_of(&lines);
    let part = |p: Part| report.windows.iter().find(|w| w.window.part == p).unwrap();
    assert_eq!(part(Part::Whole).figures.counts.kernels, 3);
    let start_up = part(Part::StartUp);
    assert_eq!(start_up.figures.counts.kernels, 2);
    assert_eq!((start_up.start_ms, start_up.end_ms), (0.2, 3.0));
    assert_eq!(part(Part::Rest).figures.counts.kernels, 1);
    let text = report_text(&report, Lang::En);
    assert!(
        text.contains("GPU 0 · start-up (the work launched before the first NVTX range)"),
        "{text}"
    );
    // Without ranges there is nothing to split.
    let report = report_of(&lines[..4]);
    assert_eq!(report.windows.len(), 1);
}

#[test]
fn ranges_of_one_name_fold_into_one_window_and_past_the_cap_names_are_counted() {
    let mut lines = vec![kernel(13, 0.0, 100.0, 1)];
    lines.extend(range(1, "step", 1, 1.0, 2.0));
    lines.extend(range(2, "inner", 1, 1.2, 1.5));
    lines.extend(range(3, "step", 1, 5.0, 6.5));
    let report = report_of(&lines);
    let step = range_window(&report.windows, "step");
    assert_eq!(step.window.occurrences, 2);
    // It launched nothing; the long kernel ran during both occurrences.
    let during = &step.ran_during.as_ref().unwrap().figures;
    assert_eq!((during.span_ms, during.busy.compute_ms), (2.5, 2.5));
    assert!(report.windows.iter().all(|w| w.window.range.as_deref() != Some("inner")));
    let mut many = vec![kernel(13, 0.0, 100.0, 1)];
    for i in 0..MAX_RANGE_NAMES + 3 {
        let from = i as f64;
        many.extend(range(i as u32 + 1, &format!("r{i}"), 1, from, from + 0.5));
    }
    let report = report_of(&many);
    assert_eq!(report.range_names_left_out, 3);
    let ranges = report.windows.iter().filter(|w| w.window.part == Part::Range).count();
    assert_eq!(ranges, MAX_RANGE_NAMES);
}

#[test]
fn a_rank_that_starts_late_is_found_and_ranks_in_step_are_not() {
    let ranks = |late: f64| {
        capture(vec![
            process_of(
                1,
                &[context(), vec![nccl(13, 0.0, 1.0, 1), nccl(13, 2.0, 3.0, 2)]].concat(),
            ),
            process_of(
                2,
                &[context(), vec![nccl(13, 0.01, 1.0, 1), nccl(13, 2.0 + late, 3.0, 2)]].concat(),
            ),
        ])
    };
    let report = overlap_report(&ranks(0.4), &Thresholds::DEFAULT);
    let f = &report.across_windows[0];
    assert_eq!((f.rule, f.count, f.lesson), (Rule::LateRank, 1, "run allreduce-overlap"));
    assert_ms(f.cost_ms, 0.4);
    assert_eq!(
        (f.example.stream.as_str(), f.example.start_ms),
        ("stream 13 (process 2, GPU 0)", 2.4)
    );
    // In step (10 µs apart): nothing.
    let in_step = overlap_report(&ranks(0.0), &Thresholds::DEFAULT);
    assert!(in_step.across_windows.is_empty() && in_step.stragglers.is_empty());
}

/// Two ranks, rank 2 late by 3 ms in every other all-reduce of 40: it is named, with its
/// lateness and the time the other waited. Rank 1 is 60 µs late in a quarter of them: over
/// the late-rank threshold, but too little of the waiting to be named.
#[test]
fn the_late_rank_is_named_with_how_late_it_was() {
    let (mut one, mut two) = (context(), context());
    for i in 0..40u32 {
        let at = 10.0 * f64::from(i);
        let late = if i % 2 == 1 { 3.0 } else { 0.0 };
        let jitter = if i % 4 == 0 { 0.06 } else { 0.0 };
        one.push(nccl(13, at + jitter, at + 4.0, i));
        two.push(nccl(13, at + late, at + 4.0, i));
    }
    let report = overlap_report(
        &capture(vec![process_of(1, &one), process_of(2, &two)]),
        &Thresholds::DEFAULT,
    );
    let [late] = &report.stragglers[..] else { panic!("{:?}", report.stragglers) };
    assert_eq!(
        (late.pid, late.device, late.late_in, late.of, late.matched_by),
        (2, 0, 20, 40, "order")
    );
    assert_ms(late.median_late_ms, 3.0);
    assert_ms(late.others_waited_ms, 60.0);
    let text = report_text(&report, Lang::En);
    assert!(text.contains("the late rank: pid 2 (GPU 0) started last in 20 of 40 collectives, 3.000 ms after the next latest at the median (and last by less in 0 more); the others waited 60.000 ms for it in all"), "{text}");
    assert!(text.contains("collectives matched by order"), "{text}");
}

/// A DDP step's shape: the late rank makes the others wait in the step's first all-reduce
/// (20 ms), then is last by a little in the step's three others (0.2 ms). Its lateness is
/// told over the first ones, the little ones counted apart.
#[test]
fn a_late_ranks_lateness_is_told_over_the_collectives_that_made_the_others_wait() {
    let (mut one, mut two) = (context(), context());
    for step in 0..10u32 {
        let at = 100.0 * f64::from(step);
        let late = step % 2 == 1;
        for bucket in 0..4u32 {
            let start = at + 25.0 * f64::from(bucket);
            let behind = match (late, bucket) {
                (false, _) => 0.0,
                (true, 0) => 20.0,
                (true, _) => 0.2,
            };
            let id = step * 4 + bucket;
            one.push(nccl(13, start, start + 22.0, id));
            two.push(nccl(13, start + behind, start + 22.0, id));
        }
    }
    let report = overlap_report(
        &capture(vec![process_of(1, &one), process_of(2, &two)]),
        &Thresholds::DEFAULT,
    );
    let [late] = &report.stragglers[..] else { panic!("{:?}", report.stragglers) };
    assert_eq!((late.pid, late.late_in, late.also_last_in, late.of), (2, 5, 15, 40));
    assert_ms(late.median_late_ms, 20.0);
    assert_ms(late.others_waited_ms, 103.0);
}

/// Two communicators, a stream each: collectives are matched stream by stream, so rank 2
/// late in one communicator and rank 1 late in the other are each named with their own.
#[test]
fn collectives_are_matched_per_stream_of_each_communicator() {
    let (mut one, mut two) = (context(), context());
    for i in 0..10u32 {
        let at = 10.0 * f64::from(i);
        one.push(nccl(13, at, at + 2.0, 2 * i));
        one.push(nccl(14, at + 5.0, at + 6.0, 2 * i + 1));
        two.push(nccl(13, at + 3.0, at + 4.0, 2 * i));
        two.push(nccl(14, at + 4.0, at + 6.0, 2 * i + 1));
    }
    let report = overlap_report(
        &capture(vec![process_of(1, &one), process_of(2, &two)]),
        &Thresholds::DEFAULT,
    );
    let named: Vec<(u32, usize, usize, f64, f64)> = report
        .stragglers
        .iter()
        .map(|s| (s.pid, s.late_in, s.of, s.median_late_ms, s.others_waited_ms))
        .collect();
    assert_eq!(named, [(2, 10, 20, 3.0, 30.0), (1, 10, 20, 1.0, 10.0)]);
}

/// Collectives under compute: fully hidden, fully exposed, and half way.
#[test]
fn collectives_under_compute_are_measured_as_hidden_and_exposed() {
    let comm_of = |lines: &[Line]| report_of(lines).windows[0].comm.unwrap();
    // Hidden: the all-reduce runs inside a kernel's time.
    let c = comm_of(&[kernel(13, 0.0, 10.0, 1), nccl(14, 2.0, 6.0, 2)]);
    assert_eq!((c.collective_ms, c.hidden_ms, c.exposed_ms, c.hidden_share), (4.0, 4.0, 0.0, 1.0));
    assert_eq!(c.window_if_hidden_ms, 10.0);
    // Exposed: after the kernels, alone.
    let c = comm_of(&[kernel(13, 0.0, 10.0, 1), nccl(14, 10.0, 14.0, 2)]);
    assert_eq!(
        (c.hidden_ms, c.exposed_ms, c.hidden_share, c.window_if_hidden_ms),
        (0.0, 4.0, 0.0, 10.0)
    );
    // Half: 5..12 against a kernel to 10; a copy 10..11 runs beside the exposed part, so
    // hiding the collective would save only the 1 ms it ran alone.
    let c = comm_of(&[
        kernel(13, 0.0, 10.0, 1),
        nccl(14, 5.0, 12.0, 2),
        copy(13, Direction::DeviceToHost, Memory::Pinned, 10.0, 11.0),
    ]);
    assert_eq!((c.collective_ms, c.hidden_ms, c.exposed_ms), (7.0, 5.0, 2.0));
    assert_eq!(c.window_if_hidden_ms, 11.0);
    // Without collectives, nothing is said.
    assert_eq!(report_of(&[kernel(13, 0.0, 1.0, 1)]).windows[0].comm, None);
    let text =
        report_text(&report_of(&[kernel(13, 0.0, 10.0, 1), nccl(14, 10.0, 14.0, 2)]), Lang::En);
    assert!(text.contains("collectives under compute: 0.000 ms of their 4.000 ms (0%), 4.000 ms exposed; with every collective hidden the window would last 10.000 ms"), "{text}");
}

#[test]
fn small_findings_are_folded_into_one_line() {
    // A 1000 ms window with one 0.5 ms pageable copy: under 1% of it.
    let lines = [
        kernel(13, 0.0, 1000.0, 1),
        copy(14, Direction::HostToDevice, Memory::Pageable, 10.0, 10.5),
    ];
    let report = report_of(&lines);
    let whole = &report.windows[0];
    assert!(whole.findings.is_empty(), "{:?}", whole.findings);
    let folded = whole.folded.as_ref().unwrap();
    assert_eq!(
        (folded.findings[0].rule, folded.findings.len(), folded.count),
        (Rule::PageableCopy, 1, 1)
    );
    assert_ms(folded.cost_ms, 0.5);
    let text = report_text(&report, Lang::En);
    assert!(
        text.contains(
            "1 more findings, each under 1% of the window's time: 1 time(s), 0.500 ms in all"
        ),
        "{text}"
    );
    assert!(!text.contains("findings: none"), "{text}");
}

/// `--range NAME` chooses the range windows; a name no process marked is said.
#[test]
fn chosen_ranges_get_windows_and_a_name_not_marked_is_said() {
    let mut lines = vec![kernel(13, 0.0, 100.0, 1)];
    lines.extend(range(1, "load", 1, 0.0, 10.0));
    lines.extend(range(2, "step", 1, 10.0, 20.0));
    lines.extend(range(3, "step", 1, 20.0, 30.0));
    let capture = capture_of(&lines);
    let chosen = ["step".to_string(), "eval".to_string()];
    let report = overlap_report_of(&capture, &Thresholds::DEFAULT, &chosen);
    let ranges: Vec<Option<&str>> = report
        .windows
        .iter()
        .filter(|w| w.window.part == Part::Range)
        .map(|w| w.window.range.as_deref())
        .collect();
    assert_eq!(ranges, [Some("step")]);
    assert_eq!(report.ranges_not_found, ["eval"]);
    let text = report_text(&report, Lang::En);
    assert!(
        text.contains(
            "--range \"eval\": no process marked an NVTX range of that name at the top level"
        ),
        "{text}"
    );
    // Without a choice, both names get a window.
    let all = overlap_report(&capture, &Thresholds::DEFAULT);
    assert_eq!(all.windows.iter().filter(|w| w.window.part == Part::Range).count(), 2);
}
