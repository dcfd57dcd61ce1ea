//! Turning CUPTI's records into a [`Recording`]'s parts: each activity record becomes a
//! device span named by the operation that enqueued it (the observer's [`OpNote`] whose op
//! tag the driver call of the same correlation id carries), each traced driver call a host
//! span, and each event record the flows to the waits it releases. The recorder
//! ([`crate::lab::record::recorder`]) notes the operations and collects the records; this
//! file only reads them, so its tests run on made-up records, without a GPU.
//!
//! [`Recording`]: crate::lab::record::span::Recording
use std::collections::HashMap;

use crate::lab::record::drawing::{LEGACY_STREAM, SYNCHRONOUS_CALLS};
use crate::lab::record::nccl_groups::{group_of, grouped};
use crate::lab::record::span::{Flow, HostSpan, HostWork, Span, Track, Work};
use crate::lab::record::timeline::OpNote;
use crate::runtime::cupti::{self, ApiCall, Collected, CopyKind, MemoryKind};

const WAITS: [&str; 3] = ["cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize"];

fn thread_name(n: u64) -> String {
    if n <= 1 {
        "main thread".into()
    } else {
        format!("host thread {n}")
    }
}

/// A device span with what is needed to place flows: when its operation was issued.
struct Placed {
    span: Span,
    issued_ns: Option<u64>,
}

/// Joins CUPTI's records and calls with the observer's notes: device spans in the order the
/// lesson issued them (records no note names come last), host spans, and flows. `groups`
/// are the NCCL groups' collectives (see [`grouped`]); `runs` host functions' (tag, start,
/// end) stamps; `handles` the observed streams' raw handles.
pub fn resolve(
    collected: &Collected,
    ops: &[OpNote],
    groups: &[Vec<u64>],
    runs: &[(u64, u64, u64)],
    handles: &[(usize, String)],
) -> (Vec<Span>, Vec<HostSpan>, Vec<Flow>) {
    let calls = &collected.calls;
    let by_correlation: HashMap<u32, &ApiCall> = calls.iter().map(|c| (c.correlation, c)).collect();
    let grouped = grouped(collected, ops, groups);
    // The operation that enqueued a record: a grouped collective's, or its call's tag (a
    // group's own tag names no single operation).
    let tag_of = |a: &cupti::Activity| {
        grouped.get(&a.correlation).copied().or_else(|| {
            by_correlation
                .get(&a.correlation)
                .and_then(|c| c.tag)
                .filter(|t| group_of(*t).is_none())
        })
    };
    let issued: HashMap<u64, u64> =
        calls.iter().filter_map(|c| c.tag.map(|t| (t, c.start_ns))).collect();
    let origin = collected
        .activities
        .iter()
        .map(|a| a.start_ns)
        .chain(calls.iter().map(|c| c.start_ns))
        .chain(runs.iter().map(|r| r.1))
        .min()
        .unwrap_or(0);
    let ms = |ns: u64| ns.saturating_sub(origin) as f64 / 1e6;
    let note = |tag: Option<u64>| tag.and_then(|t| ops.get(t as usize));

    // CUPTI's stream ids, named by the notes of operations that ran on them.
    let mut stream_names: HashMap<u32, String> = HashMap::new();
    for a in &collected.activities {
        if let Some(n) = note(tag_of(a)) {
            stream_names.entry(a.stream).or_insert_with(|| n.stream.clone());
        }
    }
    // A stream no operation named, on which a synchronous copy or memset ran, is the
    // legacy default stream (only it runs them).
    for a in &collected.activities {
        let call = by_correlation.get(&a.correlation).map(|c| c.function);
        if call.is_some_and(|f| SYNCHRONOUS_CALLS.contains(&f)) {
            stream_names.entry(a.stream).or_insert_with(|| LEGACY_STREAM.into());
        }
    }

    let mut placed: Vec<(Option<u64>, Placed)> = Vec::new();
    for a in &collected.activities {
        let tag = tag_of(a);
        let n = note(tag);
        let (kind, own_label, memory) = describe(&a.work);
        // An NCCL collective runs as a kernel of NCCL's.
        let kind = match n {
            Some(n) if n.kind == Work::Collective && kind == Work::Kernel => Work::Collective,
            _ => kind,
        };
        let mut span = Span::new(
            &n.map(|n| n.stream.clone())
                .or_else(|| stream_names.get(&a.stream).cloned())
                .unwrap_or_else(|| format!("stream {}", a.stream)),
            kind,
            &match n {
                Some(n) if n.kind != Work::Graph => n.label.clone(),
                _ => own_label,
            },
            ms(a.start_ns),
            ms(a.end_ns),
        );
        span.name = match n {
            Some(n) if n.kind == Work::Graph && !n.name.is_empty() => {
                format!("{} {}", n.name, kind.role())
            }
            Some(n) if n.kind != Work::Graph => n.name.clone(),
            _ => String::new(),
        };
        span.device = a.device;
        span.bytes = a.bytes;
        span.memory = memory.into();
        if let cupti::Work::Kernel { grid, block, .. } = &a.work {
            span.grid = Some(*grid);
            span.block = Some(*block);
        }
        // A grouped collective was issued when NCCL launched it, in ncclGroupEnd.
        let issued_ns = match grouped.contains_key(&a.correlation) {
            true => by_correlation.get(&a.correlation).map(|c| c.start_ns),
            false => tag.and_then(|t| issued.get(&t).copied()),
        };
        placed.push((tag, Placed { span, issued_ns }));
    }
    let mut host = Vec::new();
    for (tag, start, end) in runs {
        let Some(n) = note(Some(*tag)) else { continue };
        let mut span = Span::new(&n.stream, Work::HostFn, &n.label, ms(*start), ms(*end));
        span.name = n.name.clone();
        span.device = n.device;
        host.push(HostSpan {
            thread: "host functions (driver thread)".into(),
            kind: HostWork::HostFn,
            name: span.title().to_owned(),
            start_ms: span.start_ms,
            end_ms: span.end_ms,
        });
        placed.push((Some(*tag), Placed { span, issued_ns: issued.get(tag).copied() }));
    }
    // Issue order; within one operation (a graph), start order; unnamed records last.
    placed.sort_by(|(a, x), (b, y)| {
        let key = |t: &Option<u64>| t.unwrap_or(u64::MAX);
        key(a).cmp(&key(b)).then(x.span.start_ms.total_cmp(&y.span.start_ms))
    });

    for c in calls {
        let what = match c.tag.and_then(group_of) {
            Some(_) => Some("ncclGroupEnd".to_string()),
            None => {
                note(c.tag)
                    .map(|n| if n.name.is_empty() { n.label.clone() } else { n.name.clone() })
            }
        };
        host.push(HostSpan {
            thread: thread_name(c.thread),
            kind: if WAITS.contains(&c.function) { HostWork::Wait } else { HostWork::Issue },
            name: match what {
                Some(w) => format!("{} ({w})", c.function),
                None => c.function.to_string(),
            },
            start_ms: ms(c.start_ns),
            end_ms: ms(c.end_ns.max(c.start_ns)),
        });
    }
    host.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));

    let flows = flows(calls, &placed, handles, &ms);
    let spans = placed.into_iter().map(|(_, p)| p.span).collect();
    (spans, host, flows)
}

/// A record's kind, its own label (for records no note names) and its host memory kind.
fn describe(work: &cupti::Work) -> (Work, String, &'static str) {
    let memory = |m: MemoryKind| match m {
        MemoryKind::Pinned => "pinned",
        MemoryKind::Pageable => "pageable",
        _ => "",
    };
    match work {
        cupti::Work::Kernel { name, .. } => (Work::Kernel, name.clone(), ""),
        cupti::Work::Copy { kind, src, dst } => match kind {
            CopyKind::HostToDevice => (Work::CopyToDevice, "memcpy HtoD".into(), memory(*src)),
            CopyKind::DeviceToHost => (Work::CopyToHost, "memcpy DtoH".into(), memory(*dst)),
            CopyKind::PeerToPeer => (Work::CopyPeer, "memcpy PtoP".into(), ""),
            CopyKind::DeviceToDevice => (Work::CopyOnDevice, "memcpy DtoD".into(), ""),
            CopyKind::HostToHost => (Work::CopyOnDevice, "memcpy HtoH".into(), ""),
            CopyKind::Other(k) => (Work::CopyOnDevice, format!("memcpy kind {k}"), ""),
        },
        cupti::Work::Peer { src_device, dst_device } => {
            (Work::CopyPeer, format!("memcpy peer GPU{src_device} to GPU{dst_device}"), "")
        }
        cupti::Work::Memset => (Work::Memset, "memset".into(), ""),
    }
}

/// Arrows from each event record to the waits it releases: from the end of the last
/// operation issued on the recording stream before the record (or the record call itself)
/// to the start of the first operation issued on the waiting stream after the wait (or the
/// wait call), and to the end of a host's `cuEventSynchronize` on it.
fn flows(
    calls: &[ApiCall],
    placed: &[(Option<u64>, Placed)],
    handles: &[(usize, String)],
    ms: &dyn Fn(u64) -> f64,
) -> Vec<Flow> {
    let stream_of = |raw: usize| handles.iter().find(|(h, _)| *h == raw).map(|(_, n)| n);
    let mut events: Vec<usize> = Vec::new();
    let mut flows = Vec::new();
    for wait in calls {
        let host_wait = wait.function == "cuEventSynchronize";
        if wait.function != "cuStreamWaitEvent" && !host_wait {
            continue;
        }
        let Some(record) = calls
            .iter()
            .filter(|c| {
                c.function.starts_with("cuEventRecord")
                    && c.event == wait.event
                    && c.start_ns < wait.start_ns
            })
            .max_by_key(|c| c.start_ns)
        else {
            continue;
        };
        let Some(recorder) = stream_of(record.stream) else {
            continue;
        };
        let number = match events.iter().position(|e| *e == wait.event) {
            Some(i) => i + 1,
            None => {
                events.push(wait.event);
                events.len()
            }
        };
        let before = placed
            .iter()
            .filter(|(_, p)| {
                p.span.stream == *recorder && p.issued_ns.is_some_and(|t| t < record.start_ns)
            })
            .max_by_key(|(_, p)| p.issued_ns);
        let (from, from_ms) = match before {
            Some((_, p)) => (
                Track::Stream { device: p.span.device, stream: p.span.stream.clone() },
                p.span.end_ms,
            ),
            None => (Track::Host { thread: thread_name(record.thread) }, ms(record.start_ns)),
        };
        let (to, to_ms) = if host_wait {
            (Track::Host { thread: thread_name(wait.thread) }, ms(wait.end_ns.max(wait.start_ns)))
        } else {
            let Some(waiter) = stream_of(wait.stream) else {
                continue;
            };
            let after = placed
                .iter()
                .filter(|(_, p)| {
                    p.span.stream == *waiter && p.issued_ns.is_some_and(|t| t > wait.start_ns)
                })
                .min_by_key(|(_, p)| p.issued_ns);
            match after {
                Some((_, p)) => (
                    Track::Stream { device: p.span.device, stream: p.span.stream.clone() },
                    p.span.start_ms,
                ),
                None => (Track::Host { thread: thread_name(wait.thread) }, ms(wait.start_ns)),
            }
        };
        flows.push(Flow { name: format!("event {number}"), from, from_ms, to, to_ms });
    }
    flows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::cupti::{Activity, Work as Raw};

    use crate::lab::record::nccl_groups::group_tag;
    fn call(function: &'static str, correlation: u32, at: u64, tag: Option<u64>) -> ApiCall {
        ApiCall {
            function,
            correlation,
            start_ns: at,
            end_ns: at + 2_000,
            tag,
            thread: 1,
            stream: 0,
            event: 0,
        }
    }

    fn copy(kind: CopyKind, correlation: u32, stream: u32, start: u64, end: u64) -> Activity {
        Activity {
            work: Raw::Copy { kind, src: MemoryKind::Pinned, dst: MemoryKind::Pinned },
            start_ns: start,
            end_ns: end,
            device: 0,
            stream,
            correlation,
            bytes: 1 << 20,
        }
    }

    fn note(stream: &str, kind: Work, label: &str, name: &str) -> OpNote {
        OpNote {
            stream: stream.into(),
            device: 0,
            kind,
            label: label.into(),
            name: name.into(),
            bytes: 1 << 20,
        }
    }

    /// Stream A copies in and runs a kernel, records event E; stream B waits on E and copies
    /// out; the host synchronizes on E.
    fn scene() -> (Collected, Vec<OpNote>, Vec<(usize, String)>) {
        let ops = vec![
            note("A", Work::CopyToDevice, "copy to device", "chunk 0 copy-in"),
            note("A", Work::Kernel, "compute", "chunk 0 kernel"),
            note("B", Work::CopyToHost, "copy to host", ""),
        ];
        let mut record = call("cuEventRecord", 4, 30_000, None);
        (record.event, record.stream) = (0xE, 0xA);
        let mut wait = call("cuStreamWaitEvent", 5, 31_000, None);
        (wait.event, wait.stream) = (0xE, 0xB);
        let mut sync = call("cuEventSynchronize", 7, 40_000, None);
        sync.event = 0xE;
        sync.end_ns = 900_000;
        let calls = vec![
            call("cuMemcpyHtoDAsync_v2", 1, 10_000, Some(0)),
            call("cuLaunchKernel", 2, 20_000, Some(1)),
            record,
            wait,
            call("cuMemcpyDtoHAsync_v2", 6, 32_000, Some(2)),
            sync,
        ];
        let kernel = Activity {
            work: Raw::Kernel {
                name: "compute_kernel".into(),
                grid: [64, 1, 1],
                block: [256, 1, 1],
            },
            start_ns: 300_000,
            end_ns: 600_000,
            device: 0,
            stream: 11,
            correlation: 2,
            bytes: 0,
        };
        let collected = Collected {
            activities: vec![
                copy(CopyKind::HostToDevice, 1, 11, 100_000, 200_000),
                kernel,
                copy(CopyKind::DeviceToHost, 6, 12, 700_000, 800_000),
                copy(CopyKind::HostToDevice, 99, 11, 850_000, 860_000),
            ],
            calls,
            ..Collected::default()
        };
        let handles = vec![(0xA, "A".to_string()), (0xB, "B".to_string())];
        (collected, ops, handles)
    }

    #[test]
    fn records_are_named_by_the_operation_that_enqueued_them() {
        let (collected, ops, handles) = scene();
        let (spans, host, _) = resolve(&collected, &ops, &[], &[], &handles);
        let titles: Vec<(&str, &str)> =
            spans.iter().map(|s| (s.stream.as_str(), s.title())).collect();
        assert_eq!(
            titles,
            [
                ("A", "chunk 0 copy-in"),
                ("A", "chunk 0 kernel"),
                ("B", "copy to host"),
                // Not issued through an observed stream: named by its stream id's owner.
                ("A", "memcpy HtoD"),
            ]
        );
        // Times are ms from the first call: 10 us.
        assert!((spans[0].start_ms - 0.09).abs() < 1e-12);
        assert_eq!(spans[1].grid, Some([64, 1, 1]));
        assert_eq!(spans[0].memory, "pinned");
        let waits: Vec<&str> =
            host.iter().filter(|h| h.kind == HostWork::Wait).map(|h| h.name.as_str()).collect();
        assert_eq!(waits, ["cuEventSynchronize"]);
        assert!(host.iter().any(|h| h.name == "cuLaunchKernel (chunk 0 kernel)"));
    }

    /// launch-order's synchronous copies ran on a stream no operation named: the legacy
    /// default stream, named so instead of "stream 7".
    #[test]
    fn a_synchronous_copy_names_the_legacy_stream() {
        let (mut collected, ops, handles) = scene();
        collected.calls.push(call("cuMemcpyDtoH_v2", 20, 880_000, None));
        collected.calls.push(call("cuMemcpyDtoHAsync_v2", 21, 890_000, None));
        collected.activities.push(copy(CopyKind::DeviceToHost, 20, 7, 881_000, 882_000));
        collected.activities.push(copy(CopyKind::DeviceToHost, 21, 9, 891_000, 892_000));
        let (spans, _, _) = resolve(&collected, &ops, &[], &[], &handles);
        let streams: Vec<&str> = spans.iter().map(|s| s.stream.as_str()).collect();
        assert_eq!(streams[4..], [LEGACY_STREAM, "stream 9"], "{streams:?}");
    }

    #[test]
    fn flows_go_from_the_record_to_the_waits_it_releases() {
        let (collected, ops, handles) = scene();
        let (spans, _, flows) = resolve(&collected, &ops, &[], &[], &handles);
        assert_eq!(flows.len(), 2, "{flows:?}");
        let kernel_end = spans[1].end_ms;
        assert_eq!(flows[0].name, "event 1");
        assert_eq!(flows[0].from, Track::Stream { device: 0, stream: "A".into() });
        assert_eq!(flows[0].from_ms, kernel_end);
        assert_eq!(flows[0].to, Track::Stream { device: 0, stream: "B".into() });
        assert_eq!(flows[0].to_ms, spans[2].start_ms);
        assert_eq!(flows[1].to, Track::Host { thread: "main thread".into() });
        assert!((flows[1].to_ms - 0.89).abs() < 1e-12);
    }

    fn kernel(name: &str, correlation: u32, device: u32, stream: u32, start: u64) -> Activity {
        Activity {
            work: Raw::Kernel { name: name.into(), grid: [8, 1, 1], block: [512, 1, 1] },
            start_ns: start,
            end_ns: start + 50_000,
            device,
            stream,
            correlation,
            bytes: 0,
        }
    }

    fn on(device: u32, mut n: OpNote) -> OpNote {
        n.device = device;
        n
    }

    /// Two GPUs: a backward kernel on GPU 0, then one group with bucket 0's all-reduce on
    /// each GPU's comm stream, which NCCL launches in ncclGroupEnd (correlations 2 and 3, on
    /// CUPTI streams no other operation used).
    fn two_gpus() -> (Collected, Vec<OpNote>, Vec<Vec<u64>>) {
        let ops = vec![
            note("compute", Work::Kernel, "compute", "bucket 0 kernel"),
            note("comm", Work::Collective, "all-reduce", "bucket 0 all-reduce"),
            on(1, note("comm", Work::Collective, "all-reduce", "bucket 0 all-reduce")),
        ];
        let nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        let mut record = call("cuEventRecord", 9, 51_000, Some(group_tag(0)));
        (record.event, record.stream) = (0xF, 0xC);
        let collected = Collected {
            activities: vec![
                kernel("compute", 1, 0, 11, 100_000),
                kernel(nccl, 2, 0, 13, 200_000),
                kernel(nccl, 3, 1, 21, 210_000),
            ],
            calls: vec![
                call("cuLaunchKernel", 1, 10_000, Some(0)),
                call("cuLaunchKernelEx", 2, 50_000, Some(group_tag(0))),
                record,
                call("cuLaunchKernelEx", 3, 52_000, Some(group_tag(0))),
            ],
            ..Collected::default()
        };
        (collected, ops, vec![vec![1, 2]])
    }

    #[test]
    fn kernels_nccl_launches_at_the_group_end_are_the_grouped_all_reduces() {
        let (collected, ops, groups) = two_gpus();
        let (spans, host, _) = resolve(&collected, &ops, &groups, &[], &[]);
        let seen: Vec<(u32, &str, Work, &str)> =
            spans.iter().map(|s| (s.device, s.stream.as_str(), s.kind, s.title())).collect();
        assert_eq!(
            seen,
            [
                (0, "compute", Work::Kernel, "bucket 0 kernel"),
                (0, "comm", Work::Collective, "bucket 0 all-reduce"),
                (1, "comm", Work::Collective, "bucket 0 all-reduce"),
            ]
        );
        assert_eq!(spans[1].label, "all-reduce");
        assert!(host.iter().any(|h| h.name == "cuLaunchKernelEx (ncclGroupEnd)"), "{host:?}");
        // Without the group's collectives, the same records are anonymous kernels.
        let (spans, _, _) = resolve(&collected, &ops, &[], &[], &[]);
        assert_eq!((spans[1].stream.as_str(), spans[1].kind), ("stream 13", Work::Kernel));
    }

    #[test]
    fn a_collective_split_into_several_launches_keeps_its_name() {
        let (mut collected, ops, _) = two_gpus();
        let nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        collected.activities.push(kernel(nccl, 4, 0, 13, 260_000));
        collected.calls.push(call("cuLaunchKernelEx", 4, 53_000, Some(group_tag(0))));
        let named = grouped(&collected, &ops, &[vec![1, 2]]);
        assert_eq!(named.get(&2), Some(&1));
        assert_eq!(named.get(&3), Some(&2));
        assert_eq!(named.get(&4), Some(&1), "a second kernel on GPU 0 is still GPU 0's all-reduce");
        assert_eq!(named.get(&1), None, "a kernel launched outside any group is not taken");
    }

    #[test]
    fn untraced_nccl_kernels_go_to_the_collectives_in_start_and_issue_order() {
        let (mut collected, mut ops, _) = two_gpus();
        ops.push(note("comm", Work::Collective, "all-reduce", "bucket 1 all-reduce"));
        ops.push(on(1, note("comm", Work::Collective, "all-reduce", "bucket 1 all-reduce")));
        let nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        // CUPTI saw no launch in either group end but one, on a thread without the tag;
        // GPU 1's second kernel started first.
        collected.calls.retain(|c| c.correlation <= 2);
        collected.calls[1].tag = None;
        collected.activities.extend([
            kernel(nccl, 5, 0, 13, 400_000),
            kernel(nccl, 6, 1, 21, 150_000),
            kernel("someone_elses_kernel", 7, 0, 13, 120_000),
        ]);
        collected.activities[2].start_ns = 420_000;
        let named = grouped(&collected, &ops, &[vec![1, 2], vec![3, 4]]);
        let mut pairs: Vec<(u32, u64)> = named.into_iter().collect();
        pairs.sort_unstable();
        assert_eq!(pairs, [(2, 1), (3, 4), (5, 3), (6, 2)]);
    }

    #[test]
    fn host_functions_appear_when_they_ran() {
        let (collected, mut ops, handles) = scene();
        ops.push(note("B", Work::HostFn, "host function", "notify"));
        let (spans, host, _) = resolve(&collected, &ops, &[], &[(3, 820_000, 830_000)], &handles);
        let f = spans.iter().find(|s| s.kind == Work::HostFn).unwrap();
        assert_eq!((f.stream.as_str(), f.title()), ("B", "notify"));
        assert!((f.ms() - 0.01).abs() < 1e-12);
        assert!(host.iter().any(|h| h.kind == HostWork::HostFn && h.name == "notify"));
    }
}
