//! The generator's own checks: its files parse, hold what it says, keep their ids
//! consistent, and `streamlab trace`'s analysis finds what was planted where today's
//! analysis can see it.
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use streamlab::runtime::cupti::trace_file::{Line, MarkerPhase};
use streamlab::trace::capture::analysis::{analyse, Analysis};
use streamlab::trace::inspect::findings::{Finding, Rule, Thresholds};
use streamlab::trace::inspect::overlap::WindowReport;
use streamlab::trace::inspect::windows::Part;
use streamlab::trace::read::names::kernel_name;

use super::*;

/// A fresh folder for one test's case, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        // Tests run at once: each folder has a number of its own.
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir()
            .join(format!("streamlab-trace-gen-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn written(case: &Case) -> (Scratch, Planted) {
    let scratch = Scratch::new(case.name());
    let planted = case.write(&scratch.0).unwrap_or_else(|e| panic!("{}: {e}", case.name()));
    (scratch, planted)
}

fn analysed(planted: &Planted) -> Analysis {
    analyse(&planted.dir, &Thresholds::DEFAULT).unwrap_or_else(|e| panic!("{e}"))
}

/// The whole-run window of `pid` (device 0 unless said).
fn whole_run(a: &Analysis, pid: u32, device: u32) -> &WindowReport {
    let found =
        a.report.windows.iter().find(|w| {
            (w.window.process, w.window.device, w.window.part) == (pid, device, Part::Whole)
        });
    found.unwrap_or_else(|| panic!("no whole-run window for pid {pid}"))
}

/// The window's finding of `rule`, shown or folded (under 1% of the window).
fn finding(w: &WindowReport, rule: Rule) -> &Finding {
    let folded = w.folded.iter().flat_map(|f| &f.findings);
    let found = w.findings.iter().chain(folded).find(|f| f.rule == rule);
    found.unwrap_or_else(|| panic!("no {rule:?} in {:?} or {:?}", w.findings, w.folded))
}

fn assert_ms(actual: f64, expected_ns: u64) {
    let expected = expected_ns as f64 / 1e6;
    assert!((actual - expected).abs() < 1e-6, "{actual} ms, expected {expected} ms");
}

/// A process file's records counted by kind, as [`Counts`] counts them.
fn counted(lines: &[Line]) -> Counts {
    let mut c = Counts { lines: lines.len() as u64, ..Counts::default() };
    for line in lines {
        match line {
            Line::Kernel { .. } => c.kernels += 1,
            Line::Copy { src, dst, .. } => {
                c.copies += 1;
                let pageable = streamlab::runtime::cupti::trace_file::Memory::Pageable;
                if *src == pageable || *dst == pageable {
                    c.pageable_copies += 1;
                }
            }
            Line::Memset { .. } => c.memsets += 1,
            Line::Api { .. } => c.calls += 1,
            Line::Sync { .. } => c.syncs += 1,
            Line::Marker { .. } => c.markers += 1,
            _ => continue,
        }
        c.records += 1;
    }
    c
}

/// Checks one process file's ids and order: Process first, Exit last; each GPU record and
/// wait has an Api line of its correlation that began no later; correlation ids increase
/// with the calls' starts; GPU work runs on the legacy stream or a stream the file created;
/// every range pushed is popped (ends after starts, by id).
fn assert_consistent(pid: u32, lines: &[Line]) {
    assert!(matches!(lines.first(), Some(Line::Process { format: 2, .. })), "pid {pid}");
    assert!(matches!(lines.last(), Some(Line::Exit { .. })), "pid {pid}");
    let mut calls: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut last_call = (0u64, 0u32);
    let mut streams = vec![];
    let mut null_stream = None;
    for line in lines {
        match line {
            Line::Api { start, end, correlation, .. } => {
                assert!(start <= end, "pid {pid}: call {correlation} ends before it starts");
                assert!(
                    (*start, *correlation) > last_call,
                    "pid {pid}: correlation {correlation} out of order"
                );
                last_call = (*start, *correlation);
                assert!(calls.insert(*correlation, (*start, *end)).is_none());
            }
            Line::Stream { stream, .. } => streams.push(*stream),
            Line::Context { null_stream: n, .. } => null_stream = Some(*n),
            _ => {}
        }
    }
    let mut open: BTreeMap<u32, u64> = BTreeMap::new();
    for line in lines {
        let (stream, start, correlation) = match line {
            Line::Kernel { stream, start, correlation, .. }
            | Line::Copy { stream, start, correlation, .. }
            | Line::Memset { stream, start, correlation, .. } => {
                (Some(*stream), *start, *correlation)
            }
            Line::Sync { start, correlation, .. } => (None, *start, *correlation),
            Line::Marker { phase: MarkerPhase::Start, id, time, .. } => {
                open.insert(*id, *time);
                continue;
            }
            Line::Marker { phase: MarkerPhase::End, id, time, .. } => {
                let start =
                    open.remove(id).unwrap_or_else(|| panic!("pid {pid}: end {id} unopened"));
                assert!(start <= *time, "pid {pid}: range {id} ends before it starts");
                continue;
            }
            _ => continue,
        };
        let call = calls.get(&correlation);
        let (call_start, _) =
            *call.unwrap_or_else(|| panic!("pid {pid}: {correlation} has no call"));
        assert!(call_start <= start, "pid {pid}: work {correlation} before its call");
        if let Some(s) = stream {
            assert!(Some(s) == null_stream || streams.contains(&s), "pid {pid}: stream {s}");
        }
    }
    assert!(open.is_empty(), "pid {pid}: ranges left open: {open:?}");
}

#[test]
fn every_case_writes_lines_that_parse_with_consistent_ids_and_the_counts_asked() {
    for case in Case::all(3_001) {
        let (_scratch, planted) = written(&case);
        let files = parse_folder(&planted.dir).unwrap_or_else(|e| panic!("{e}"));
        let pids: Vec<u32> = files.iter().map(|(pid, _)| *pid).collect();
        assert_eq!(pids, planted.pids, "{}", case.name());
        let mut total = Counts::default();
        for (pid, lines) in &files {
            assert_consistent(*pid, lines);
            total += counted(lines);
        }
        assert_eq!(total, planted.counts, "{}", case.name());
        assert_eq!(planted.counts.records, 3_001, "{}", case.name());
        // The reader takes every record and skips no line.
        let capture = analysed(&planted).capture;
        assert_eq!(capture.records(), 3_001, "{}", case.name());
        assert_eq!(
            (capture.skipped(), capture.processes.len()),
            (0, pids.len()),
            "{}",
            case.name()
        );
    }
}

#[test]
fn a_folder_is_generated_once_for_the_same_parameters() {
    let scratch = Scratch::new("generated");
    let case = Case::named("mix", 500).unwrap();
    let (dir, fresh) = generated(&scratch.0, &case).unwrap();
    assert!(fresh && dir.ends_with("mix-500"), "{dir:?}");
    assert_eq!(generated(&scratch.0, &case).unwrap(), (dir.clone(), false));
    let mut other = Mix::new(500);
    other.alloc_every = 3;
    assert_eq!(generated(&scratch.0, &Case::Mix(other)).unwrap(), (dir, true));
}

#[test]
fn small_kernels_leave_a_launch_gap_between_every_two() {
    let (_scratch, planted) = written(&Case::named("small_kernels", 2_000).unwrap());
    // 3 µs gaps, longer around a step's marks and after a synchronization, none long
    // enough to be an idle gap: each is a launch gap.
    assert_eq!(planted.kernel_gaps, planted.counts.kernels - 1, "{planted:?}");
    let mean_ns = planted.kernel_gap_ns / planted.kernel_gaps;
    assert!((3_000..3_500).contains(&mean_ns), "{planted:?}");
    assert!(planted.longest_kernel_gap_ns < 100_000, "{planted:?}");
    let [(name, steps)] = &planted.range_names[..] else { panic!("{planted:?}") };
    assert_eq!((name.as_str(), planted.counts.syncs), ("step", steps / 2));
    let a = analysed(&planted);
    let gaps = finding(whole_run(&a, planted.pids[0], 0), Rule::LaunchGaps);
    assert_eq!(gaps.count as u64, planted.kernel_gaps);
    assert_ms(gaps.cost_ms, planted.kernel_gap_ns);
}

#[test]
fn many_streams_keep_each_copy_engine_busy_for_the_copies_summed() {
    let (_scratch, planted) = written(&Case::named("many_streams", 2_000).unwrap());
    assert_eq!(planted.counts.copies, 2 * planted.counts.kernels);
    let a = analysed(&planted);
    let w = whole_run(&a, planted.pids[0], 0);
    assert_ms(w.figures.busy.copy_in_ms, planted.copy_in_ns);
    assert_ms(w.figures.busy.copy_out_ms, planted.copy_out_ns);
    assert!(w.findings.iter().all(|f| f.rule != Rule::PageableCopy), "{:?}", w.findings);
}

#[test]
fn many_ranges_get_a_window_for_each_of_the_first_20_names() {
    let (_scratch, planted) = written(&Case::named("many_ranges", 6_000).unwrap());
    let names = &planted.range_names;
    assert_eq!(names.len(), 3 + 24, "{names:?}");
    assert_eq!(names[3], ("layer 00".to_string(), 1));
    let marked: u64 = names.iter().map(|(_, n)| n).sum();
    assert_eq!(marked, planted.counts.kernels / 2);
    let a = analysed(&planted);
    let windows: Vec<(String, u64)> = a
        .report
        .windows
        .iter()
        .filter_map(|w| Some((w.window.range.clone()?, w.window.occurrences as u64)))
        .collect();
    assert_eq!(windows, names[..20]);
    assert_eq!(a.report.range_names_left_out, names.len() - 20);
}

#[test]
fn many_processes_name_the_rank_planted_late() {
    let (_scratch, planted) = written(&Case::named("many_processes", 8 * 12 * 25).unwrap());
    let late = planted.late.clone().unwrap();
    assert_eq!(late.collectives, [3, 13, 23]);
    // 300 µs late, plus the 1 µs a rank the late rank's host starts behind rank 0's.
    assert_eq!(late.spreads_ns, [305_000; 3]);
    assert_eq!(late.largest_in_step_ns, 7_000);
    let a = analysed(&planted);
    assert_eq!(a.capture.processes.len(), 8);
    let [f] = &a.report.across_windows[..] else {
        panic!("{:?}", a.report.across_windows);
    };
    assert_eq!((f.rule, f.count), (Rule::LateRank, 3));
    assert_ms(f.cost_ms, late.spreads_ns.iter().sum());
    assert!(f.example.stream.contains(&format!("process {}", late.pid)), "{:?}", f.example);
}

#[test]
fn cpu_ahead_runs_each_steps_work_after_its_range_closed() {
    let case = CpuAhead::new(2_000);
    let (_scratch, planted) = written(&Case::CpuAhead(case.clone()));
    let steps = &planted.steps;
    assert!(steps.len() > 2 * case.ahead as usize, "{steps:?}");
    let busy = case.kernels_per_step * case.kernel_ns + (case.kernels_per_step - 1) * 1_000;
    for (i, s) in steps.iter().enumerate().skip(case.ahead as usize) {
        // Its range opened once the step `ahead` back had run; its work queued behind the
        // step before, and started more than a step's GPU time after its range closed,
        // once the next step's range had closed too.
        assert!(s.range_start > steps[i - case.ahead as usize].gpu_end, "step {i}");
        assert_eq!(s.gpu_start, steps[i - 1].gpu_end + 1_000, "step {i}");
        assert_eq!(s.gpu_end - s.gpu_start, busy, "step {i}");
        assert!(s.gpu_start > s.range_end + busy, "step {i}");
        if let Some(next) = steps.get(i + 1) {
            assert!(s.gpu_start > next.range_end, "step {i}");
        }
    }
    // The planted times agree with the files: each kernel belongs to the step whose range
    // holds its launch call.
    let files = parse_folder(&planted.dir).unwrap();
    let lines = &files[0].1;
    let calls: HashMap<u32, u64> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Api { correlation, start, .. } => Some((*correlation, *start)),
            _ => None,
        })
        .collect();
    let mut from_files = vec![(u64::MAX, 0u64); steps.len()];
    for line in lines {
        if let Line::Kernel { start, end, correlation, .. } = line {
            let launched = calls[correlation];
            let step =
                steps.iter().position(|s| s.range_start <= launched && launched <= s.range_end);
            let step =
                step.unwrap_or_else(|| panic!("kernel {correlation} launched outside a step"));
            let (first, last) = &mut from_files[step];
            (*first, *last) = ((*first).min(*start), (*last).max(*end));
        }
    }
    let planted_times: Vec<(u64, u64)> = steps.iter().map(|s| (s.gpu_start, s.gpu_end)).collect();
    assert_eq!(from_files, planted_times);
    let a = analysed(&planted);
    let step = a.report.windows.iter().find(|w| w.window.range.as_deref() == Some("step"));
    assert_eq!(step.map(|w| w.window.occurrences), Some(steps.len()));
}

#[test]
fn a_training_step_mix_shows_its_pageable_copies_and_allocations_between_work() {
    for (raw, shown) in MIX_KERNELS {
        assert_eq!(kernel_name(raw), shown, "{raw}");
    }
    let (_scratch, planted) = written(&Case::named("mix", 5_000).unwrap());
    let steps = planted.range_names[0].1;
    // Two pageable copies a step (the labels in, the loss out); a cudaMalloc and cudaFree
    // every 10 steps, all between work but the first allocation (before any) and the last
    // free where no step follows it.
    assert_eq!(planted.counts.pageable_copies, 2 * steps);
    let allocs = 2 * steps.div_ceil(10);
    let last_free_alone = u64::from((steps - 1) % 10 == 0);
    assert_eq!(planted.allocs_between_work, allocs - 1 - last_free_alone, "{steps} steps");
    let a = analysed(&planted);
    let w = whole_run(&a, planted.pids[0], 0);
    assert_eq!(finding(w, Rule::PageableCopy).count as u64, planted.counts.pageable_copies);
    assert_eq!(finding(w, Rule::AllocBetweenWork).count as u64, planted.allocs_between_work);
    let p = &a.capture.processes[0];
    let labels: Vec<&str> = p.gpu.label.iter().map(|&l| p.names.get(l)).collect();
    for (_, shown) in MIX_KERNELS {
        assert!(labels.contains(&shown), "{shown}");
    }
}
