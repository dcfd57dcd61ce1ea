//! The rules of one window, on records written as the recorder writes them: each rule found
//! with its exact count, cost and example, and not found where its conditions fail.
use crate::runtime::cupti::trace_file::{Direction, Line, Memory};
use crate::trace::inspect::findings::{Example, Finding, Rule, Thresholds};
use crate::trace::inspect::overlap::{overlap_report, OverlapReport};
use crate::trace::inspect::test_lines::{
    assert_ms, call, capture_of, copy, kernel, report_of, wait,
};

/// The whole-run window's finding of `rule`, if any (folded ones included: found at all).
fn found(report: &OverlapReport, rule: Rule) -> Option<Finding> {
    let whole = &report.windows[0];
    whole.findings.iter().find(|f| f.rule == rule).cloned()
}

/// The report, checked to have folded nothing: in these windows every finding is over 1%
/// of the window, so what is tested is the rules, not the folding.
fn unfolded(lines: &[Line], thresholds: &Thresholds) -> OverlapReport {
    let report = overlap_report(&capture_of(lines), thresholds);
    for w in &report.windows {
        assert!(w.folded.is_none(), "{:?}", w.folded);
    }
    report
}

#[test]
fn pageable_copies_are_found_with_their_time() {
    let lines = [
        copy(13, Direction::HostToDevice, Memory::Pinned, 2.0, 3.0),
        copy(13, Direction::HostToDevice, Memory::Pageable, 0.5, 2.0),
        kernel(13, 3.0, 4.0, 1),
        copy(14, Direction::DeviceToHost, Memory::Pageable, 4.0, 4.25),
    ];
    let f = found(&report_of(&lines), Rule::PageableCopy).unwrap();
    assert_eq!((f.count, f.lesson), (2, "run pinned-vs-pageable"));
    assert_ms(f.cost_ms, 1.75);
    assert_eq!(
        f.example,
        Example { stream: "stream 13".into(), label: "memcpy HtoD".into(), start_ms: 0.5 }
    );
    // Pinned only: nothing found.
    let pinned =
        [copy(13, Direction::HostToDevice, Memory::Pinned, 0.5, 2.0), kernel(13, 3.0, 4.0, 1)];
    assert_eq!(found(&report_of(&pinned), Rule::PageableCopy), None);
}

#[test]
fn copy_kernel_copy_on_one_stream_is_flagged_and_the_same_work_on_two_streams_is_not() {
    let chunk = |stream: u32, at: f64| {
        vec![
            copy(stream, Direction::HostToDevice, Memory::Pinned, at, at + 1.0),
            kernel(stream, at + 1.0, at + 2.0, 1),
            copy(stream, Direction::DeviceToHost, Memory::Pinned, at + 2.0, at + 3.0),
        ]
    };
    // Two chunks, one after the other on one stream: four copy-kernel pairs, each alone.
    let one_stream = [chunk(13, 0.0), chunk(13, 3.0)].concat();
    let f = found(&report_of(&one_stream), Rule::CopyKernelOneStream).unwrap();
    assert_eq!((f.count, f.lesson), (4, "run overlap"));
    assert_ms(f.cost_ms, 4.0);
    assert_eq!((f.example.stream.as_str(), f.example.start_ms), ("stream 13", 0.0));
    // The same chunks on two streams, the second a step behind: each copy but the first and
    // the last runs under a kernel, so no pair ran with the other engine idle.
    let two_streams = [chunk(13, 0.0), chunk(14, 1.0)].concat();
    assert_eq!(found(&report_of(&two_streams), Rule::CopyKernelOneStream), None);
    // Not back to back: a kernel 0.5 ms after its copy is not a pair (over 0.05 ms).
    let apart =
        [copy(13, Direction::HostToDevice, Memory::Pinned, 0.0, 1.0), kernel(13, 1.5, 2.5, 1)];
    assert_eq!(found(&report_of(&apart), Rule::CopyKernelOneStream), None);
}

#[test]
fn the_legacy_stream_beside_blocking_streams_is_found_with_the_time_it_ran_alone() {
    // Stream 7 is the legacy stream, 14 blocking, 13 non-blocking.
    let lines = [
        kernel(7, 0.0, 2.0, 1),
        kernel(14, 1.5, 3.0, 2),
        copy(13, Direction::HostToDevice, Memory::Pinned, 3.0, 4.0),
    ];
    let f = found(&report_of(&lines), Rule::LegacyDefaultStream).unwrap();
    assert_eq!((f.count, f.lesson), (1, "run default-stream"));
    assert_ms(f.cost_ms, 1.5);
    assert_eq!(f.example.stream, "legacy default stream");
    // Only the legacy stream; or beside a non-blocking stream only (PyTorch's side streams
    // are): nothing is claimed.
    assert_eq!(found(&report_of(&lines[..1]), Rule::LegacyDefaultStream), None);
    let beside_non_blocking = [kernel(7, 0.0, 2.0, 1), kernel(13, 1.5, 3.0, 2)];
    assert_eq!(found(&report_of(&beside_non_blocking), Rule::LegacyDefaultStream), None);
}

#[test]
fn an_allocation_between_work_is_found_and_one_before_all_work_is_not() {
    let kernels = [kernel(13, 1.0, 2.0, 1), kernel(13, 3.0, 4.0, 2)];
    let before = call("cudaMalloc", 3, 0.0, 0.25, 10);
    let between = call("cudaFree", 3, 2.2, 2.45, 11);
    let launch = call("cudaLaunchKernel", 3, 2.6, 2.85, 12);
    let lines = [kernels.to_vec(), vec![before.clone(), between, launch.clone()]].concat();
    let f = found(&report_of(&lines), Rule::AllocBetweenWork).unwrap();
    assert_eq!((f.count, f.lesson), (1, "run stream-ordered-alloc"));
    assert_ms(f.cost_ms, 0.25);
    assert_eq!(
        f.example,
        Example { stream: "host thread 3".into(), label: "cudaFree".into(), start_ms: 2.2 }
    );
    let none = [kernels.to_vec(), vec![before, launch]].concat();
    assert_eq!(found(&report_of(&none), Rule::AllocBetweenWork), None);
}

#[test]
fn a_gap_after_a_host_wait_is_the_waits_and_one_without_is_unexplained() {
    let work = [
        kernel(14, 0.0, 1.0, 1),
        kernel(14, 1.5, 2.0, 2),
        copy(14, Direction::DeviceToHost, Memory::Pinned, 3.0, 3.5),
    ];
    // The host waited for the first kernel (returned at 1.0), then the device idled 0.5 ms;
    // the second gap (1.0 ms) has no wait near it.
    let lines = [work.to_vec(), wait(0.2, 1.0, 20)].concat();
    let report = unfolded(&lines, &Thresholds::DEFAULT);
    let synced = found(&report, Rule::HostSyncIdle).unwrap();
    assert_eq!((synced.count, synced.lesson), (1, "run sync-methods"));
    assert_ms(synced.cost_ms, 0.5);
    assert_eq!(synced.example.start_ms, 1.5);
    let idle = found(&report, Rule::IdleGap).unwrap();
    assert_eq!((idle.count, idle.lesson), (1, "run events"));
    assert_ms(idle.cost_ms, 1.0);
    // Without the wait, both gaps are unexplained.
    let report = unfolded(&work, &Thresholds::DEFAULT);
    assert!(found(&report, Rule::HostSyncIdle).is_none());
    assert_eq!(found(&report, Rule::IdleGap).unwrap().count, 2);
}

#[test]
fn a_gap_at_the_threshold_is_not_found_and_one_a_nanosecond_over_it_is() {
    // Exactly 0.1 ms: at the threshold. Times are CUPTI's integers: no rounding.
    let at = [kernel(13, 0.0, 2.0, 1), kernel(14, 2.1, 3.0, 2)];
    assert!(found(&report_of(&at), Rule::IdleGap).is_none());
    let over = [kernel(13, 0.0, 2.0, 1), kernel(14, 2.100001, 3.0, 2)];
    let f = found(&report_of(&over), Rule::IdleGap).unwrap();
    assert_eq!(f.count, 1);
    assert_ms(f.cost_ms, 0.100001);
    assert_eq!(f.example.start_ms, 2.100001);
}

/// `n` kernels of `ms` on stream 13, one every 20 µs, each launched by a call.
fn kernels(n: u32, ms: f64) -> Vec<Line> {
    (0..n).map(|i| kernel(13, f64::from(i) * 0.02, f64::from(i) * 0.02 + ms, 100 + i)).collect()
}

#[test]
fn launch_gaps_between_small_kernels_while_the_host_issues() {
    let t = Thresholds::DEFAULT;
    // 5 µs kernels every 20 µs: 15 µs idle between each two, the host launching all along.
    let host = call("cudaLaunchKernel", 1, 0.0, 2.0, 99);
    let lines = [kernels(100, 0.005), vec![host.clone()]].concat();
    let f = found(&unfolded(&lines, &t), Rule::LaunchGaps).unwrap();
    assert_eq!((f.count, f.lesson), (99, "run graph"));
    assert_ms(f.cost_ms, 99.0 * 0.015);
    assert_eq!(f.example.start_ms, 0.02);
    // A kernel on another stream fills 10 µs of the first gap: 10 µs less idle.
    let filled = [lines.clone(), vec![kernel(14, 0.005, 0.015, 98)]].concat();
    let f = found(&unfolded(&filled, &t), Rule::LaunchGaps).unwrap();
    assert_ms(f.cost_ms, 99.0 * 0.015 - 0.01);
    // The host was not inside any call during the gaps (it launched before, then slept): the
    // gaps are not the host's launch latency.
    let early = [kernels(100, 0.005), vec![call("cudaLaunchKernel", 1, -1.0, -0.5, 99)]].concat();
    assert!(found(&unfolded(&early, &t), Rule::LaunchGaps).is_none());
    // One fewer than many, kernels longer than small, or gaps of 1 µs: nothing.
    let few = [kernels(99, 0.005), vec![host.clone()]].concat();
    assert!(found(&unfolded(&few, &t), Rule::LaunchGaps).is_none());
    let long = [kernels(100, 0.015), vec![host.clone()]].concat();
    assert!(found(&report_of(&long), Rule::LaunchGaps).is_none());
    let close = [kernels(100, 0.019), vec![host]].concat();
    assert!(found(&report_of(&close), Rule::LaunchGaps).is_none());
}

#[test]
fn no_work_no_windows_and_a_window_of_no_engine_has_no_bound() {
    let report = report_of(&[]);
    assert!(report.windows.is_empty());
    let text = crate::trace::inspect::overlap_text::report_text(&report, crate::text::Lang::En);
    assert!(text.contains("no device spans recorded"), "{text}");
}

/// A copy whose call blocked the host: `cudaMemcpy`, or an `…Async` copy of pageable memory
/// that returned only after the copy; an asynchronous pinned copy is not one.
#[test]
fn synchronous_copies_are_found_with_the_hosts_time_in_their_calls() {
    let with_call = |mut copy: Line, name: &str, from: f64, to: f64, id: u32| {
        let Line::Copy { correlation, .. } = &mut copy else { unreachable!() };
        *correlation = id;
        vec![call(name, 1, from, to, id), copy]
    };
    let lines = [
        // A blocking copy: the call spans the copy.
        with_call(
            copy(13, Direction::HostToDevice, Memory::Pinned, 1.0, 2.0),
            "cudaMemcpy",
            0.9,
            2.1,
            1,
        ),
        // An async copy from pageable memory that held the host to its end.
        with_call(
            copy(13, Direction::HostToDevice, Memory::Pageable, 3.0, 4.0),
            "cudaMemcpyAsync",
            2.9,
            4.05,
            2,
        ),
        // An async pinned copy: the call returned at once.
        with_call(
            copy(13, Direction::HostToDevice, Memory::Pinned, 5.0, 6.0),
            "cudaMemcpyAsync",
            4.9,
            4.91,
            3,
        ),
        vec![kernel(14, 0.0, 6.0, 4)],
    ]
    .concat();
    let f = found(&report_of(&lines), Rule::SyncCopy).unwrap();
    assert_eq!((f.count, f.lesson), (2, "run basics"));
    assert_ms(f.cost_ms, 1.2 + 1.15);
    assert_eq!(f.example.start_ms, 1.0);
}

/// A `cudaFree` called while a kernel ran: the device drained, then idled until the call
/// returned; the same gap with no call is unexplained.
#[test]
fn an_allocation_that_drained_the_device_is_an_implicit_synchronization() {
    let work = [kernel(13, 0.0, 2.0, 1), kernel(13, 3.2, 4.0, 2)];
    let free = call("cudaFree", 1, 1.5, 3.0, 3);
    let report = report_of(&[work.to_vec(), vec![free]].concat());
    let f = found(&report, Rule::ImplicitSync).unwrap();
    assert_eq!((f.count, f.lesson), (1, "run stream-ordered-alloc"));
    assert_ms(f.cost_ms, 1.2);
    assert!(found(&report, Rule::IdleGap).is_none());
    // A call made while the device was already idle did not drain it.
    let late_free = call("cudaFree", 1, 2.5, 3.0, 3);
    let report = report_of(&[work.to_vec(), vec![late_free]].concat());
    assert!(found(&report, Rule::ImplicitSync).is_none());
    assert_eq!(found(&report, Rule::IdleGap).unwrap().count, 1);
}

#[test]
fn a_windows_tables_group_kernels_and_copies() {
    let named = |name: &str, from: f64, to: f64| {
        let mut line = kernel(13, from, to, 1);
        let Line::Kernel { name: kernel_name, .. } = &mut line else { unreachable!() };
        *kernel_name = name.into();
        line
    };
    let lines = [
        named("gemm", 0.0, 3.0),
        named("gemm", 3.0, 6.0),
        named("relu", 6.0, 7.0),
        copy(14, Direction::HostToDevice, Memory::Pinned, 0.0, 0.5),
        copy(14, Direction::HostToDevice, Memory::Pinned, 1.0, 1.5),
        copy(14, Direction::DeviceToHost, Memory::Pageable, 2.0, 4.0),
    ];
    let t = &report_of(&lines).windows[0].tables;
    let kernels: Vec<(&str, u64, f64)> =
        t.top_kernels.iter().map(|k| (k.name.as_str(), k.count, k.total_ms)).collect();
    assert_eq!(kernels, [("gemm", 2, 6.0), ("relu", 1, 1.0)]);
    assert_eq!(
        (t.top_kernels[0].mean_ms, t.top_kernels[0].share_of_compute),
        (3.0, Some(6.0 / 7.0))
    );
    let copies: Vec<(&str, &str, u64, u64)> =
        t.copies.iter().map(|c| (c.direction, c.memory, c.count, c.bytes)).collect();
    assert_eq!(copies, [("copy_in", "pinned", 2, 2 << 20), ("copy_out", "pageable", 1, 1 << 20)]);
    // 2 MiB in 1 ms: 2.097 GB/s.
    assert!((t.copies[0].gb_per_s - 2.097152).abs() < 1e-9, "{:?}", t.copies[0]);
    // No device line in these records, so no lesson's figure to compare with.
    assert_eq!(t.copies[0].measured, None);
    // On an H100, the GPU pinned-vs-pageable's embedded run was recorded on: its figure.
    let h100 = Line::Device {
        id: 0,
        name: "NVIDIA H100 80GB HBM3".into(),
        compute_capability: [9, 0],
        multiprocessors: 132,
        copy_engines: 3,
    };
    let on_h100 = report_of(&[lines.to_vec(), vec![h100]].concat());
    let measured = on_h100.windows[0].tables.copies[0].measured.clone().unwrap();
    let lesson_and_gpu = (measured.lesson, measured.gpu.as_str());
    assert_eq!(lesson_and_gpu, ("pinned-vs-pageable", "NVIDIA H100 80GB HBM3"));
    // A pinned copy over an H100's PCIe 5 link: tens of GB/s (run 28-F recorded 48.6).
    assert!(measured.gb_per_s > 40.0 && measured.gb_per_s < 64.0, "{measured:?}");
    let text =
        crate::trace::inspect::overlap_text::report_text(&report_of(&lines), crate::text::Lang::En);
    assert!(text.contains("gemm: 2, 6.000 ms, 3.0000 ms, 86%"), "{text}");
    assert!(text.contains("copy in pinned: 2, 2.1 MB, 1.000 ms, 2.1 GB/s"), "{text}");
}
