//! Recording one run of a version: CUPTI's activity records where libcupti can be loaded
//! (the engines' true start and end), else a pair of events around each operation
//! ([`Timeline`], where a span includes queueing). Either way the result is a
//! [`Recording`]: device spans, host spans and flows.
//!
//! With CUPTI, the lab's observer gives each operation a tag and runs its driver call under
//! [`cupti::with_op_tag`]; the CUPTI callback notes the call's correlation id with the tag,
//! and each activity record carries the same correlation id. So a record is named by the
//! lesson's label for the operation ([`crate::lab::record::span::named`]) and by its stream's name.
//! Host functions are stamped on the driver's thread when they run.
//!
//! NCCL collectives issued inside a group are enqueued only in `ncclGroupEnd` (NCCL docs,
//! "Group Calls"): NCCL launches their kernel there, through the driver's `cuLaunchKernelEx`
//! (or `cuLaunchKernel`; NCCL's `src/enqueue.cc`), and that launch gets a correlation id of
//! its own, which the kernel's record carries ("each function invocation is assigned a
//! unique correlation ID that is identical to the correlation ID in the memcpy, memset, or
//! kernel activity record that is associated with this function", CUPTI's
//! `CUpti_ActivityAPI`). So the observer runs `ncclGroupEnd` under a tag of the group, and
//! [`grouped`] gives each kernel launched under it to the group's collective on the kernel's
//! device: the span is then the all-reduce, named and placed on the lesson's stream.
//!
//! `STREAMLAB_RECORDER=events` uses the events recorder even where CUPTI is there (to
//! compare the two); `STREAMLAB_RECORDER=cupti-gpu` records the GPU's work with CUPTI and
//! traces no driver calls (to tell what tracing the host costs from what the GPU's records
//! cost). Unset or `cupti` is the default; `run` refuses any other value.
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::lab::record::span::{Flow, HostSpan, HostWork, Recording, Source, Span, Track, Work};
use crate::lab::record::timeline::{deferred, events_source, observing, OpNote, Timeline};
use crate::runtime::cupti::{self, ApiCall, Collected, CopyKind, Cupti, MemoryKind};
use crate::runtime::{DeviceBuffer, Error, Gpu, HostBuffer, Observer, Op, Result, Stream};

/// The recorder this process will use: CUPTI, or why not.
pub fn cupti_or_why_not() -> std::result::Result<&'static Cupti, String> {
    host_calls_or_why_not()?;
    cupti::load()
}

/// The values `STREAMLAB_RECORDER` takes; unset or empty means `cupti`.
pub const RECORDERS: [&str; 3] = ["cupti", "cupti-gpu", "events"];

/// What `STREAMLAB_RECORDER` asks of CUPTI: whether to trace the driver calls too, or why
/// CUPTI is not to be used (a value that names no recorder says so here too, so a timeline
/// recorded anyway names the typo; `run` refuses it first, see [`check_recorder_setting`]).
fn host_calls_or_why_not() -> std::result::Result<bool, String> {
    host_calls_for(std::env::var("STREAMLAB_RECORDER").ok().as_deref())
}

fn host_calls_for(value: Option<&str>) -> std::result::Result<bool, String> {
    match value.unwrap_or("") {
        "" | "cupti" => Ok(true),
        "cupti-gpu" => Ok(false),
        "events" => Err("STREAMLAB_RECORDER=events".into()),
        other => Err(format!(
            "STREAMLAB_RECORDER={other} names no recorder (one of: {})",
            RECORDERS.join(", ")
        )),
    }
}

/// Refuses a `STREAMLAB_RECORDER` that names no recorder, before anything runs.
pub fn check_recorder_setting() -> Result<()> {
    check_recorder(std::env::var("STREAMLAB_RECORDER").ok().as_deref())
}

fn check_recorder(value: Option<&str>) -> Result<()> {
    match host_calls_for(value) {
        Err(why) if value != Some("events") => Err(Error::InvalidInput(why)),
        _ => Ok(()),
    }
}

/// The recorder for a series of runs: CUPTI turned on once and kept on until the recorder
/// drops (each run then only starts and finishes a session), else events.
pub struct Recorder {
    cupti: std::result::Result<cupti::Enabled, String>,
    primer: Option<(HostBuffer<f32>, DeviceBuffer<f32>)>,
}

/// Elements of the primer's copies.
const PRIMER_ELEMENTS: usize = 256;

impl Recorder {
    /// Turns CUPTI on where it can be used, until the recorder drops. Record a warm-up run
    /// of each version and throw it away before the runs that count.
    pub fn new() -> Recorder {
        let cupti =
            host_calls_or_why_not().and_then(|host_calls| cupti::load()?.enable_with(host_calls));
        Recorder { cupti, primer: None }
    }

    /// Records what `run` does on `streams` (it must have completed its work when it
    /// returns). The recording's `version`, `ms` and `parts` are left for the caller.
    ///
    /// With CUPTI, a tiny copy in, kernel and copy out on the first stream come first,
    /// unrecorded: the first records after a flush make CUPTI take a new buffer, which
    /// delayed the run's first copy by 0.25 ms on an H200 (recording cost +7%; +0.5% with
    /// the primer).
    pub fn record<T>(
        &mut self,
        gpu: &Gpu,
        streams: &[&Stream],
        run: impl FnOnce() -> Result<T>,
    ) -> Result<(T, Recording)> {
        if let (Ok(_), Some(s)) = (&self.cupti, streams.first()) {
            let (host, dev) = match &mut self.primer {
                Some(p) => p,
                primer => primer.insert((
                    HostBuffer::pinned(gpu, PRIMER_ELEMENTS)?,
                    DeviceBuffer::zeroed(gpu, PRIMER_ELEMENTS)?,
                )),
            };
            s.copy_to_device(&*host, &*dev)?;
            gpu.empty(s)?;
            s.copy_to_host(&*dev, &*host)?;
            s.synchronize()?;
        }
        match &mut self.cupti {
            Ok(enabled) => {
                let c = enabled.cupti();
                let session = enabled
                    .start()
                    .map_err(|e| Error::Internal(format!("CUPTI could not start: {e}")))?;
                with_cupti(c, session, streams, run)
            }
            Err(why) => with_events(why.clone(), streams, run),
        }
    }
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::new()
    }
}

/// A version's run as the harness sees it: its time in ms and its named parts.
pub type Timed = (f64, Vec<(String, f64)>);

/// Records one run of each version in `drawn` (the lesson's [`Lesson::drawn`]: the first
/// two, unless it names more; `run(v)` runs version `v`), each after an untimed warm-up run under the same recorder (CUPTI is turned on once for all
/// of them), then measures what recording costs: the second version `rounds` times with
/// the recorder off and on, interleaved (at least 3, at most 10 rounds). Each round turns
/// CUPTI on, warms it up with a run whose figures are thrown away, records, and turns it
/// off for the next run: so the cost is that of recording, not of turning CUPTI on.
pub fn versions(
    gpu: &Gpu,
    streams: &[&Stream],
    names: &[String],
    drawn: &[usize],
    rounds: usize,
    run: &mut dyn FnMut(usize) -> Result<Timed>,
) -> Result<(Vec<Recording>, CostRounds)> {
    let mut recorder = Recorder::new();
    let drawn: Vec<usize> = drawn.iter().copied().filter(|&v| v < names.len()).collect();
    for &v in &drawn {
        recorder.record(gpu, streams, || run(v))?;
    }
    let mut recordings = Vec::new();
    for &v in &drawn {
        let ((ms, parts), mut r) = recorder.record(gpu, streams, || run(v))?;
        (r.version, r.ms, r.parts) = (names[v].clone(), ms, parts);
        recordings.push(r);
    }
    drop(recorder);
    let rounds = rounds.clamp(3, 10);
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let ((off_ms, _), (on_ms, _), _) = off_then_on(gpu, streams, &mut || run(1))?;
        off.push(off_ms);
        on.push(on_ms);
    }
    let recorder = match recordings.last().map(|r| &r.source) {
        Some(Source::Cupti { .. }) => "CUPTI",
        _ => "events",
    };
    let cost = CostRounds {
        version: names.get(1).cloned().unwrap_or_default(),
        recorder: recorder.into(),
        off_ms: off,
        on_ms: on,
    };
    Ok((recordings, cost))
}

/// What recording cost, round by round: the second version's times with the recorder off
/// and on. The harness takes their medians into a [`Cost`](crate::lab::record::output::Cost): the statistics live in its
/// room, which sits above this one.
pub struct CostRounds {
    pub version: String,
    pub recorder: String,
    pub off_ms: Vec<f64>,
    pub on_ms: Vec<f64>,
}

/// One round of measuring what recording costs: `run` with the recorder off, then with it
/// on: CUPTI turned on, a warm-up run recorded and thrown away, then the run that counts, so
/// the cost is that of recording, not of turning CUPTI on. Returns both runs' results and
/// the second one's recording.
pub fn off_then_on<T>(
    gpu: &Gpu,
    streams: &[&Stream],
    run: &mut dyn FnMut() -> Result<T>,
) -> Result<(T, T, Recording)> {
    let off = run()?;
    let mut recorder = Recorder::new();
    recorder.record(gpu, streams, &mut *run)?;
    let (on, recording) = recorder.record(gpu, streams, &mut *run)?;
    Ok((off, on, recording))
}

fn empty(source: Source) -> Recording {
    Recording {
        version: String::new(),
        source,
        ms: f64::NAN,
        parts: Vec::new(),
        spans: Vec::new(),
        host: Vec::new(),
        flows: Vec::new(),
    }
}

fn with_events<T>(
    why: String,
    streams: &[&Stream],
    run: impl FnOnce() -> Result<T>,
) -> Result<(T, Recording)> {
    let mut out = None;
    let spans = Timeline::record(streams, || {
        out = Some(run()?);
        Ok(())
    })?;
    let out = out.ok_or_else(|| Error::Internal("a recorded run returned nothing".into()))?;
    let mut recording = empty(events_source(why, streams));
    recording.spans = spans;
    Ok((out, recording))
}

type Stamp = Arc<Mutex<Option<(u64, u64)>>>;

struct CuptiObserver {
    cupti: &'static Cupti,
    ops: RefCell<Vec<OpNote>>,
    /// Host functions' run stamps, by op tag.
    stamps: RefCell<Vec<(u64, Stamp)>>,
    /// The stamp of the host function being enqueued (between `wrap_host_fn` and `observe`).
    next_stamp: RefCell<Option<Stamp>>,
    /// The tags of the collectives issued in the NCCL group now open.
    grouped: RefCell<Vec<u64>>,
    /// Each ended group's collectives, by group number (see [`group_tag`]).
    groups: RefCell<Vec<Vec<u64>>>,
}

/// The op tag the driver calls of `ncclGroupEnd` number `group` are noted with: apart from
/// the operations' tags (their index in the notes), by its top bit.
pub fn group_tag(group: usize) -> u64 {
    GROUP_TAG | group as u64
}

const GROUP_TAG: u64 = 1 << 63;

/// The group number of a [`group_tag`].
fn group_of(tag: u64) -> Option<usize> {
    (tag & GROUP_TAG != 0).then_some((tag & !GROUP_TAG) as usize)
}

impl Observer for CuptiObserver {
    fn observe(
        &self,
        stream: &Stream,
        op: &Op<'_>,
        enqueue: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let tag = self.ops.borrow().len() as u64;
        self.ops.borrow_mut().push(OpNote::of(stream, op));
        if let Some(stamp) = self.next_stamp.borrow_mut().take() {
            self.stamps.borrow_mut().push((tag, stamp));
        }
        if deferred(op) {
            self.grouped.borrow_mut().push(tag);
        }
        cupti::with_op_tag(tag, enqueue)
    }

    fn group_end(&self, end: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let members = std::mem::take(&mut *self.grouped.borrow_mut());
        let group = {
            let mut groups = self.groups.borrow_mut();
            groups.push(members);
            groups.len() - 1
        };
        cupti::with_op_tag(group_tag(group), end)
    }

    fn wrap_host_fn(
        &self,
        _stream: &Stream,
        f: Box<dyn FnOnce() + Send>,
    ) -> Box<dyn FnOnce() + Send> {
        let stamp: Stamp = Arc::default();
        *self.next_stamp.borrow_mut() = Some(Arc::clone(&stamp));
        let cupti = self.cupti;
        Box::new(move || {
            let start = cupti.now_ns();
            f();
            let end = cupti.now_ns();
            *stamp.lock().unwrap_or_else(|p| p.into_inner()) = Some((start, end));
        })
    }
}

fn with_cupti<T>(
    c: &'static Cupti,
    session: cupti::Session<'_>,
    streams: &[&Stream],
    run: impl FnOnce() -> Result<T>,
) -> Result<(T, Recording)> {
    let observer = Rc::new(CuptiObserver {
        cupti: c,
        ops: RefCell::default(),
        stamps: RefCell::default(),
        next_stamp: RefCell::default(),
        grouped: RefCell::default(),
        groups: RefCell::default(),
    });
    let out = observing(streams, Rc::clone(&observer) as Rc<dyn Observer>, run)?;
    let collected = session
        .finish()
        .map_err(|e| Error::Internal(format!("CUPTI stopped recording badly: {e}")))?;
    let runs: Vec<(u64, u64, u64)> = observer
        .stamps
        .borrow()
        .iter()
        .filter_map(|(tag, s)| {
            let stamp = *s.lock().unwrap_or_else(|p| p.into_inner());
            stamp.map(|(a, b)| (*tag, a, b))
        })
        .collect();
    let handles: Vec<(usize, String)> =
        streams.iter().map(|s| (s.as_raw() as usize, s.name().to_owned())).collect();
    let (ops, groups) = (observer.ops.borrow(), observer.groups.borrow());
    let mut recording =
        empty(Source::Cupti { library: c.path().display().to_string(), version: c.version() });
    (recording.spans, recording.host, recording.flows) =
        resolve(&collected, &ops, &groups, &runs, &handles);
    Ok((out, recording))
}

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

/// The op tags of the kernels NCCL launched in each group's `ncclGroupEnd`, by their
/// records' correlation ids. `groups` holds each group's collectives (their tags, in issue
/// order), by group number ([`group_tag`]). A group's kernels on a device go to its
/// collectives on that device in launch order: the n-th kernel to the n-th collective, and
/// any more to the last (NCCL may split one collective into several launches; when it fuses
/// several into one kernel, the kernel is named by the first).
///
/// Where a collective got no kernel that way (CUPTI saw no launch under the group's tag:
/// none traced, or one made on a thread of NCCL's, where the tag is not set), NCCL's kernels
/// (named `nccl...`) launched by no tagged call are given to such collectives, device by
/// device, in start order and issue order.
pub fn grouped(collected: &Collected, ops: &[OpNote], groups: &[Vec<u64>]) -> HashMap<u32, u64> {
    let launch: HashMap<u32, &ApiCall> =
        collected.calls.iter().map(|c| (c.correlation, c)).collect();
    let kernels =
        || collected.activities.iter().filter(|a| matches!(a.work, cupti::Work::Kernel { .. }));
    let on_device = |members: &[u64], device: u32| -> Vec<u64> {
        let mine = |t: &&u64| ops.get(**t as usize).is_some_and(|n| n.device == device);
        members.iter().filter(mine).copied().collect()
    };
    let mut out = HashMap::new();
    for (g, members) in groups.iter().enumerate() {
        let tag = Some(group_tag(g));
        let mut launched: Vec<(u64, &cupti::Activity)> = kernels()
            .filter_map(|a| {
                launch.get(&a.correlation).filter(|c| c.tag == tag).map(|c| (c.start_ns, a))
            })
            .collect();
        launched.sort_by_key(|(at, a)| (*at, a.correlation));
        let mut count: HashMap<u32, usize> = HashMap::new();
        for (_, a) in launched {
            let mine = on_device(members, a.device);
            let n = count.entry(a.device).or_default();
            if let Some(t) = mine.get(*n).or(mine.last()) {
                out.insert(a.correlation, *t);
            }
            *n += 1;
        }
    }
    let mut waiting: Vec<u64> =
        groups.iter().flatten().filter(|t| !out.values().any(|v| v == *t)).copied().collect();
    waiting.sort_unstable();
    let mut orphans: Vec<&cupti::Activity> = kernels()
        .filter(|a| !launch.get(&a.correlation).is_some_and(|c| c.tag.is_some()))
        .filter(|a| matches!(&a.work, cupti::Work::Kernel { name, .. } if name.starts_with("nccl")))
        .collect();
    orphans.sort_by_key(|a| (a.start_ns, a.correlation));
    let mut devices: Vec<u32> = orphans.iter().map(|a| a.device).collect();
    devices.sort_unstable();
    devices.dedup();
    for device in devices {
        let kernels = orphans.iter().filter(|a| a.device == device);
        for (a, t) in kernels.zip(on_device(&waiting, device)) {
            out.insert(a.correlation, t);
        }
    }
    out
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
    fn the_recorder_setting_is_one_of_three_or_refused() {
        assert_eq!(host_calls_for(None), Ok(true));
        assert_eq!(host_calls_for(Some("")), Ok(true));
        assert_eq!(host_calls_for(Some("cupti")), Ok(true));
        assert_eq!(host_calls_for(Some("cupti-gpu")), Ok(false));
        assert!(host_calls_for(Some("events")).is_err());
        assert!(check_recorder(Some("events")).is_ok());
        assert!(check_recorder(Some("cupti-gpu")).is_ok());
        let typo = check_recorder(Some("evnets")).unwrap_err();
        assert_eq!(typo.exit_code(), 2);
        assert_eq!(
            typo.to_string(),
            "STREAMLAB_RECORDER=evnets names no recorder (one of: cupti, cupti-gpu, events)"
        );
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
    fn group_tags_stay_apart_from_operation_tags() {
        assert_eq!(group_of(group_tag(7)), Some(7));
        assert_eq!(group_of(7), None);
        assert_ne!(group_tag(0), 0);
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
