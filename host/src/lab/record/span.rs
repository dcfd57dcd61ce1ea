//! What a recorded run is made of: device spans (one per kernel, copy, memset, host function
//! on a stream), host spans (the issue of each driver call, synchronize waits, host
//! functions running on the driver's thread) and flows (an event record to the waits it
//! releases). The ASCII timeline, the Perfetto trace and the SVG picture are all drawn
//! from these, whichever recorder made them ([`Source`]).
//!
//! A lesson can name what it enqueues, so a slice reads "chunk 3 copy-in" instead of
//! "copy to device": `named("chunk 3", || { s.copy_to_device(..)?; ... })`.
use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use crate::runtime::OpKind;
use crate::t;
use crate::text::Text;

/// What a device span is, for its colour, its glyph and its Perfetto category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    CopyToDevice,
    Kernel,
    CopyToHost,
    CopyOnDevice,
    CopyPeer,
    Memset,
    HostFn,
    Graph,
    Collective,
}

impl Work {
    pub const ALL: [Work; 9] = [
        Work::CopyToDevice,
        Work::Kernel,
        Work::CopyToHost,
        Work::CopyOnDevice,
        Work::CopyPeer,
        Work::Memset,
        Work::HostFn,
        Work::Graph,
        Work::Collective,
    ];

    /// How a legend names it.
    pub fn describe(self) -> &'static str {
        match self {
            Work::CopyToDevice => "copy-in (host to device)",
            Work::Kernel => "kernel",
            Work::CopyToHost => "copy-out (device to host)",
            Work::CopyOnDevice => "copy on device",
            Work::CopyPeer => "peer copy (device to device)",
            Work::Memset => "memset",
            Work::HostFn => "host function",
            Work::Graph => "graph launch",
            Work::Collective => "all-reduce (NCCL)",
        }
    }

    /// The word a slice name uses after a lesson's name ("chunk 3 copy-in").
    pub fn role(self) -> &'static str {
        match self {
            Work::CopyToDevice => "copy-in",
            Work::Kernel => "kernel",
            Work::CopyToHost => "copy-out",
            Work::CopyOnDevice => "copy on device",
            Work::CopyPeer => "peer copy",
            Work::Memset => "memset",
            Work::HostFn => "host function",
            Work::Graph => "graph",
            Work::Collective => "all-reduce",
        }
    }
}

impl From<OpKind> for Work {
    fn from(kind: OpKind) -> Work {
        match kind {
            OpKind::CopyToDevice => Work::CopyToDevice,
            OpKind::Kernel => Work::Kernel,
            OpKind::CopyToHost => Work::CopyToHost,
            OpKind::CopyOnDevice => Work::CopyOnDevice,
            OpKind::HostFn => Work::HostFn,
            OpKind::Graph => Work::Graph,
            OpKind::CopyPeer => Work::CopyPeer,
            OpKind::Collective => Work::Collective,
        }
    }
}

/// One operation on a stream, in ms since the recorded run's origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub stream: String,
    pub kind: Work,
    /// What the runtime calls it: the kernel's name, "copy to device (pageable)", ...
    pub label: String,
    pub start_ms: f64,
    pub end_ms: f64,
    /// The lesson's name for it ("chunk 3 copy-in"); empty when the lesson gave none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default)]
    pub device: u32,
    /// The process that enqueued it, where a trace holds several (`streamlab trace`); 0 in a
    /// lesson's own recording.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub process: u32,
    /// Bytes moved or set (copies, memsets).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<[u32; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<[u32; 3]>,
    /// The host side of a copy: "pinned" or "pageable" (empty when not known or not a copy).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory: String,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

impl Span {
    /// A span with only the essentials (the rest empty): for tests and simple recorders.
    pub fn new(stream: &str, kind: Work, label: &str, start_ms: f64, end_ms: f64) -> Span {
        Span {
            stream: stream.into(),
            kind,
            label: label.into(),
            start_ms,
            end_ms,
            name: String::new(),
            device: 0,
            process: 0,
            bytes: 0,
            grid: None,
            block: None,
            memory: String::new(),
        }
    }

    /// What a slice is called: the lesson's name, else the runtime's label.
    pub fn title(&self) -> &str {
        if self.name.is_empty() {
            &self.label
        } else {
            &self.name
        }
    }

    pub fn ms(&self) -> f64 {
        self.end_ms - self.start_ms
    }

    /// GB/s for copies and memsets (0 when it moved nothing or took no time).
    pub fn gb_per_s(&self) -> f64 {
        let seconds = self.ms() / 1e3;
        if self.bytes == 0 || seconds <= 0.0 {
            0.0
        } else {
            self.bytes as f64 / seconds / 1e9
        }
    }
}

/// What a host span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostWork {
    /// A driver call that enqueues work or records an event: how long the host spent issuing.
    Issue,
    /// The host blocked until the GPU got somewhere (stream, event or device synchronize).
    Wait,
    /// A host function running on the driver's thread.
    HostFn,
    /// An NVTX range the traced program marked on this thread (`streamlab trace`).
    Range,
}

/// Host-side time, on a host thread's track.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSpan {
    /// "main", "driver thread", ... (a track of the host process).
    pub thread: String,
    pub kind: HostWork,
    pub name: String,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// Where a flow arrow starts or ends.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Track {
    Stream { device: u32, stream: String },
    Host { thread: String },
}

/// An arrow from an event record to a wait it releases (another stream's next operation,
/// or the host's synchronize).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// "event 1", ...: which event.
    pub name: String,
    pub from: Track,
    pub from_ms: f64,
    pub to: Track,
    pub to_ms: f64,
}

/// Which recorder made a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "recorder")]
pub enum Source {
    /// CUPTI activity records: the engines' true start and end.
    Cupti { library: String, version: u32 },
    /// A pair of CUDA events around each operation: a span starts when the stream reaches
    /// the operation, so queueing shows up as work.
    Events { why: String },
    /// Events on several GPUs: each GPU's spans are timed against a reference event of its
    /// own (the driver times events only within one device), and the GPUs are lined up by
    /// when the host recorded those references, so only to within a few microseconds.
    EventsAcrossDevices { why: String },
}

impl Source {
    /// One line for reports, traces and captions.
    pub fn describe(&self) -> String {
        self.describe_text().en()
    }

    /// [`Source::describe`], as a message of the catalogs.
    pub fn describe_text(&self) -> Text {
        match self {
            Source::Cupti { .. } => t!("timeline.cupti"),
            Source::Events { why } => t!("timeline.events", why = why.clone()),
            Source::EventsAcrossDevices { why } => {
                t!("timeline.events_devices", why = why.clone())
            }
        }
    }
}

/// One recorded run of one version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// The version's name ("8 streams").
    pub version: String,
    pub source: Source,
    /// The version's own timing of this run (its `Sample`), and its parts.
    pub ms: f64,
    #[serde(default)]
    pub parts: Vec<(String, f64)>,
    pub spans: Vec<Span>,
    #[serde(default)]
    pub host: Vec<HostSpan>,
    #[serde(default)]
    pub flows: Vec<Flow>,
}

impl Recording {
    /// The end of the last span, device or host.
    pub fn end_ms(&self) -> f64 {
        self.spans
            .iter()
            .map(|s| s.end_ms)
            .chain(self.host.iter().map(|h| h.end_ms))
            .fold(0.0, f64::max)
    }

    /// The named part of the run's sample (NaN when absent).
    pub fn part(&self, name: &str) -> f64 {
        self.parts.iter().find(|(n, _)| n == name).map_or(f64::NAN, |(_, v)| *v)
    }
}

/// The (device, stream) rows of `spans`, in order of first appearance (the order the lesson
/// issued work in).
pub fn rows(spans: &[Span]) -> Vec<(u32, String)> {
    let mut rows: Vec<(u32, String)> = Vec::new();
    for s in spans {
        if !rows.iter().any(|(d, n)| *d == s.device && *n == s.stream) {
            rows.push((s.device, s.stream.clone()));
        }
    }
    rows
}

thread_local! {
    static NAMES: RefCell<Vec<(&'static str, usize)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `what index` naming the operations it enqueues on this thread: a recorded
/// slice then reads "{what} {index} {role}" ("chunk 3 copy-in", "chunk 3 kernel"). Names
/// nest ("graph node 2 chunk 3 copy-in"). Nothing is formatted unless a slice asks for its
/// name, so it costs a push and a pop when nothing is recorded (it runs between launches).
pub fn named<T>(what: &'static str, index: usize, f: impl FnOnce() -> T) -> T {
    NAMES.with(|n| n.borrow_mut().push((what, index)));
    let out = f();
    NAMES.with(|n| n.borrow_mut().pop());
    out
}

/// The slice name for an operation of `kind` enqueued now: the enclosing [`named`] names
/// and the kind's role, or empty outside any.
pub fn current_name(kind: Work) -> String {
    NAMES.with(|n| {
        let n = n.borrow();
        if n.is_empty() {
            return String::new();
        }
        let names: Vec<String> = n.iter().map(|(what, i)| format!("{what} {i}")).collect();
        format!("{} {}", names.join(" "), kind.role())
    })
}

/// A stream's row name in a drawing: its name alone, or "GPU 1 · stage 1" where the
/// drawing holds several GPUs (stream names then leave the GPU out, so it is said once).
pub fn row_name(device: u32, stream: &str, several_gpus: bool) -> String {
    if several_gpus {
        format!("GPU {device} · {stream}")
    } else {
        stream.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_nest_and_end_with_the_role() {
        assert_eq!(current_name(Work::CopyToDevice), "");
        named("chunk", 3, || {
            assert_eq!(current_name(Work::CopyToDevice), "chunk 3 copy-in");
            named("node", 2, || assert_eq!(current_name(Work::Kernel), "chunk 3 node 2 kernel"));
        });
        assert_eq!(current_name(Work::CopyToHost), "");
    }

    #[test]
    fn rows_follow_first_appearance_per_device() {
        let mut b = Span::new("b", Work::Kernel, "k", 0.0, 1.0);
        b.device = 1;
        let spans = [
            Span::new("b", Work::Kernel, "k", 0.0, 1.0),
            Span::new("a", Work::Kernel, "k", 0.0, 1.0),
            b,
            Span::new("b", Work::CopyToHost, "d", 1.0, 2.0),
        ];
        assert_eq!(rows(&spans), [(0, "b".to_string()), (0, "a".into()), (1, "b".into())]);
    }

    #[test]
    fn an_events_recording_of_several_gpus_says_its_alignment_is_approximate() {
        let one = Source::Events { why: "no libcupti".into() }.describe();
        let two = Source::EventsAcrossDevices { why: "no libcupti".into() }.describe();
        assert!(!one.contains("host clock"), "{one}");
        assert!(two.contains("host clock") && two.contains("no libcupti"), "{two}");
        let json = serde_json::to_string(&Source::EventsAcrossDevices { why: "x".into() }).unwrap();
        assert_eq!(json, r#"{"recorder":"events_across_devices","why":"x"}"#);
    }

    #[test]
    fn bandwidth_is_bytes_over_time() {
        let mut s = Span::new("s", Work::CopyToDevice, "copy to device", 1.0, 2.0);
        s.bytes = 50_000_000;
        assert!((s.gb_per_s() - 50.0).abs() < 1e-9);
        s.bytes = 0;
        assert_eq!(s.gb_per_s(), 0.0);
    }
}
