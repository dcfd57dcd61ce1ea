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
//! What is recorded is turned into spans by [`resolve`] ([`crate::lab::record::cupti_spans`]),
//! NCCL's kernels given to their collectives by [`grouped`]
//! ([`crate::lab::record::nccl_groups`]); both are re-exported here, where they were first.
//!
//! `STREAMLAB_RECORDER=events` uses the events recorder even where CUPTI is there (to
//! compare the two); `STREAMLAB_RECORDER=cupti-gpu` records the GPU's work with CUPTI and
//! traces no driver calls (to tell what tracing the host costs from what the GPU's records
//! cost). Unset or `cupti` is the default; `run` refuses any other value.
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

pub use crate::lab::record::cupti_spans::resolve;
pub use crate::lab::record::nccl_groups::{group_tag, grouped};
use crate::lab::record::span::{Recording, Source};
use crate::lab::record::timeline::{deferred, events_source, observing, OpNote, Timeline};
use crate::runtime::cupti::{self, Cupti};
use crate::runtime::{DeviceBuffer, Error, Gpu, HostBuffer, Observer, Op, Result, Stream};
use crate::t;
use crate::text::Text;

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
    // Under `streamlab trace` the injected recorder holds CUPTI's buffers for this process;
    // a second client would take them over and leave the trace empty.
    if std::env::var_os(TRACED_BY).is_some() {
        return Err("CUPTI is recording this process for streamlab trace".into());
    }
    // The reason is kept in the recording's source, read by tools: English.
    host_calls_for(std::env::var("STREAMLAB_RECORDER").ok().as_deref()).map_err(|why| why.en())
}

/// Set in a process that `streamlab trace` records (the injected recorder's trace folder).
const TRACED_BY: &str = "STREAMLAB_TRACE_DIR";

fn host_calls_for(value: Option<&str>) -> std::result::Result<bool, Text> {
    match value.unwrap_or("") {
        "" | "cupti" => Ok(true),
        "cupti-gpu" => Ok(false),
        "events" => Err(Text::Plain("STREAMLAB_RECORDER=events".into())),
        other => {
            let (value, names) = (other.to_string(), RECORDERS.join(", "));
            Err(t!("error.record.no_recorder", value, names))
        }
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

/// Records one run of each version in `drawn` (the lesson's `Lesson::drawn`: the first
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
