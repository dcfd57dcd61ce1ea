//! Which records are kept: the capture window (`--capture-range`, `--delay`, `--duration`)
//! and, when sampling, which occurrence of the sampled range each kept record belongs to
//! (its slice). Decided a flush at a time, from the records alone: no CUPTI callback of the
//! recorder's own (a program's own profiler would conflict with one).
//!
//! At the end of each flush cycle, [`Gate::settle`] takes the records received since, with
//! `until`, the time read just before that flush (every marker before it has arrived by
//! then), and decides in this order:
//! 1. NVTX markers before `until`, in time order: they open and close the window and start
//!    the occurrences. A start or an instant is kept by its time; a range's end with its
//!    start (a range kept is kept whole at both ends).
//! 2. Host calls and synchronizations that started before `until`, by their start. The
//!    correlation ids of the calls kept are noted: correlation ids increase within a
//!    process, so the lowest and highest of the kept calls say which work they launched
//!    (the window opens once, so one such span; one per slice when sampling). The calls left
//!    out are remembered (the last [`REJECTED_GENERATION`] to 2× that many).
//! 3. GPU work (kernels, copies, peer copies, memsets): with the call of its correlation id,
//!    kept or not, so work launched inside the window and run after it closed is kept, and
//!    work launched before it opened is not. Work whose call was never seen (its kind not
//!    recorded, or a call off the list) falls back to its own start.
//!
//! What cannot be decided yet waits for the next cycle: markers and calls from `until` on
//! (a marker of another thread before them may still come), and work whose call waits. At
//! exit (`last`) everything is decided.
//!
//! The window: it opens at the first start, at or after the delay, of a range named as the
//! capture range in a domain of the program's own (the default one, or one it made; not a
//! library's: [`trace_file::LIBRARY_DOMAINS`]); without a capture range, when the delay has
//! passed. It closes when `count` ranges of that name have ended, or when the duration has
//! passed after the delay, whichever comes first; it never opens again. Without a capture
//! range, a delay or a duration it is always open and nothing waits.
//!
//! The slices, when sampling: occurrence `n` of the sampled range (the capture range, or the
//! name of the first top-level range of the program's domains seen) starts slice `n`, which
//! runs until the next occurrence starts; slice 0 is what came before the first.
use std::collections::{HashMap, HashSet};

use streamlab_cupti::trace_file::{self, Keep, Line, MarkerPhase};

/// Calls left out are remembered in two generations of this many: a kernel runs long after
/// its launch only by so much.
pub const REJECTED_GENERATION: usize = 1 << 18;

/// What the window and the slices are, in CUPTI time.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// When the delay passes: the program's start plus the delay.
    pub opens: u64,
    pub delay_ms: u64,
    /// When the duration passes, if one was given.
    pub closes: Option<u64>,
    pub duration_ms: Option<u64>,
    pub range: Option<String>,
    /// Ranges of that name that end before the window closes (0: none closes it).
    pub count: u64,
    /// Whether records are sliced by the occurrences of a range.
    pub sample: bool,
}

impl Plan {
    /// The plan for `keep`, where the program started at CUPTI time `started`.
    pub fn new(keep: &Keep, started: u64, sample: bool) -> Plan {
        let opens = started.saturating_add(keep.delay_ms.saturating_mul(1_000_000));
        Plan {
            opens,
            delay_ms: keep.delay_ms,
            closes: keep.duration_ms.map(|ms| opens.saturating_add(ms.saturating_mul(1_000_000))),
            duration_ms: keep.duration_ms,
            range: keep.capture_range.clone(),
            count: keep.capture_count,
            sample,
        }
    }

    /// No window at all: every record is inside.
    fn always_open(&self) -> bool {
        self.range.is_none() && self.delay_ms == 0 && self.closes.is_none()
    }
}

/// The CUPTI time the program started: `started_mono` (its CLOCK_MONOTONIC start, from the
/// trace command) carried onto CUPTI's clock by how long ago it was at `mono_now`, when CUPTI
/// read `cupti_now`; without one, or one in the future, `cupti_now`.
pub fn program_start(cupti_now: u64, mono_now: u64, started_mono: Option<u64>) -> u64 {
    match started_mono {
        Some(started) if started <= mono_now => cupti_now.saturating_sub(mono_now - started),
        _ => cupti_now,
    }
}

/// What one settling decided.
#[derive(Debug, Default)]
pub struct Settled {
    /// The records kept, each with its slice (0 where not sampling).
    pub kept: Vec<(Line, u64)>,
    /// How many were outside the window.
    pub outside: u64,
    /// `Gate` lines, in time order.
    pub gates: Vec<Line>,
    /// The occurrences of the sampled range that started, by number.
    pub started: Vec<u64>,
}

/// The correlation ids of the calls of each slice: the lowest and the highest.
#[derive(Debug, Default)]
struct CallSpans {
    /// (lowest, highest, slice), in slice order.
    spans: Vec<(u32, u32, u64)>,
}

impl CallSpans {
    fn note(&mut self, slice: u64, correlation: u32) {
        let at = self.spans.partition_point(|s| s.2 < slice);
        match self.spans.get_mut(at) {
            Some(span) if span.2 == slice => {
                span.0 = span.0.min(correlation);
                span.1 = span.1.max(correlation);
            }
            _ => self.spans.insert(at, (correlation, correlation, slice)),
        }
    }

    /// The slice whose calls' span holds `correlation`.
    fn find(&self, correlation: u32) -> Option<u64> {
        let at = self.spans.partition_point(|s| s.0 <= correlation);
        let span = self.spans.get(at.checked_sub(1)?)?;
        (correlation <= span.1).then_some(span.2)
    }
}

/// The calls left out, by correlation id.
#[derive(Debug, Default)]
struct Rejected {
    now: HashSet<u32>,
    before: HashSet<u32>,
}

impl Rejected {
    fn insert(&mut self, correlation: u32) {
        if self.now.len() >= REJECTED_GENERATION {
            self.before = std::mem::take(&mut self.now);
        }
        self.now.insert(correlation);
    }

    fn contains(&self, correlation: u32) -> bool {
        self.now.contains(&correlation) || self.before.contains(&correlation)
    }
}

/// A range started and not yet ended.
#[derive(Debug)]
struct Open {
    thread: u64,
    /// In a domain of the program's.
    program: bool,
    /// An occurrence of the capture range, counted.
    capture: bool,
    /// Where its start went: its end goes there too.
    place: Option<u64>,
}

/// Where a record goes: `None` outside the window, else its slice.
type Place = Option<u64>;

#[derive(Debug)]
pub struct Gate {
    plan: Plan,
    opened: Option<u64>,
    closed: Option<u64>,
    /// Occurrences of the capture range started and ended inside the window.
    capture_ended: u64,
    /// The sampled range's name, once known; its occurrences' start times.
    sampled: Option<String>,
    starts: Vec<u64>,
    /// The calls kept: the lowest and highest correlation (slice 0: the window's one span).
    kept_calls: CallSpans,
    slice_calls: CallSpans,
    rejected: Rejected,
    ranges: HashMap<u32, Open>,
    /// Ranges of the program's domains open on each thread (top-level: none).
    depth: HashMap<u64, u32>,
    /// Records received and not yet decided.
    waiting: Vec<Line>,
}

enum Role {
    Marker(u64),
    Host { start: u64, correlation: u32, call: bool },
    Gpu { start: u64, correlation: u32 },
}

fn role(line: &Line) -> Option<Role> {
    Some(match line {
        Line::Marker { time, .. } => Role::Marker(*time),
        Line::Api { start, correlation, .. } => {
            Role::Host { start: *start, correlation: *correlation, call: true }
        }
        Line::Sync { start, correlation, .. } => {
            Role::Host { start: *start, correlation: *correlation, call: false }
        }
        Line::Kernel { start, correlation, .. }
        | Line::Copy { start, correlation, .. }
        | Line::Peer { start, correlation, .. }
        | Line::Memset { start, correlation, .. } => {
            Role::Gpu { start: *start, correlation: *correlation }
        }
        _ => return None,
    })
}

impl Gate {
    pub fn new(plan: Plan) -> Gate {
        Gate {
            sampled: if plan.sample { plan.range.clone() } else { None },
            plan,
            opened: None,
            closed: None,
            capture_ended: 0,
            starts: Vec::new(),
            kept_calls: CallSpans::default(),
            slice_calls: CallSpans::default(),
            rejected: Rejected::default(),
            ranges: HashMap::new(),
            depth: HashMap::new(),
            waiting: Vec::new(),
        }
    }

    /// Whether every record is kept as it comes, in slice 0: nothing to decide or wait for.
    pub fn passes_all(&self) -> bool {
        self.plan.always_open() && !self.plan.sample
    }

    /// The window was asked for and never opened.
    pub fn never_opened(&self) -> bool {
        !self.plan.always_open() && self.opened.is_none()
    }

    /// The name of the range sampled, once known.
    pub fn sampled_range(&self) -> Option<&str> {
        self.sampled.as_deref()
    }

    /// Records to decide at the next [`settle`](Self::settle).
    pub fn receive(&mut self, records: impl IntoIterator<Item = Line>) {
        self.waiting.extend(records);
    }

    fn inside(&self, time: u64) -> bool {
        self.plan.always_open()
            || (self.opened.is_some_and(|o| o <= time) && self.closed.is_none_or(|c| time < c))
    }

    fn slice_at(&self, time: u64) -> u64 {
        self.starts.partition_point(|&s| s <= time) as u64
    }

    fn place_at(&self, time: u64) -> Place {
        self.inside(time).then(|| self.slice_at(time))
    }

    fn gate_line(gates: &mut Vec<Line>, time: u64, open: bool, why: String) {
        gates.push(Line::Gate { time, open, why });
    }

    /// The delay and the duration, as far as `time`.
    fn advance(&mut self, time: u64, gates: &mut Vec<Line>) {
        let plan = &self.plan;
        if plan.range.is_none() && self.opened.is_none() && plan.opens <= time {
            self.opened = Some(plan.opens);
            if plan.delay_ms > 0 {
                let why = format!("delay of {} ms passed", plan.delay_ms);
                Self::gate_line(gates, plan.opens, true, why);
            }
        }
        if let (Some(_), None, Some(closes)) = (self.opened, self.closed, plan.closes) {
            if closes <= time {
                self.closed = Some(closes);
                let why = format!("duration of {} ms passed", plan.duration_ms.unwrap_or(0));
                Self::gate_line(gates, closes, false, why);
            }
        }
    }

    /// A marker's effect on the window and the slices, and where it goes.
    fn marker(&mut self, line: &Line, out: &mut Settled) -> Place {
        let Line::Marker { phase, id, thread, time, name, domain } = line else { return None };
        let time = *time;
        match phase {
            MarkerPhase::Instant => self.place_at(time),
            MarkerPhase::Start => {
                let program = !trace_file::library_domain(domain);
                let top_level = program && self.depth.get(thread).is_none_or(|&d| d == 0);
                if program {
                    *self.depth.entry(*thread).or_default() += 1;
                }
                let capture = program
                    && self.plan.range.as_deref() == Some(name.as_str())
                    && self.closed.is_none()
                    && self.plan.opens <= time
                    && self.plan.closes.is_none_or(|c| time < c);
                if capture && self.opened.is_none() {
                    self.opened = Some(time);
                    let why = format!(r#"capture range "{name}" #1 started"#);
                    Self::gate_line(&mut out.gates, time, true, why);
                }
                if self.plan.sample && program {
                    if self.sampled.is_none() && top_level {
                        self.sampled = Some(name.clone());
                    }
                    let later = self.starts.last().is_none_or(|&s| s <= time);
                    if self.sampled.as_deref() == Some(name) && self.inside(time) && later {
                        self.starts.push(time);
                        out.started.push(self.starts.len() as u64);
                    }
                }
                let place = self.place_at(time);
                self.ranges.insert(*id, Open { thread: *thread, program, capture, place });
                place
            }
            MarkerPhase::End => {
                let Some(open) = self.ranges.remove(id) else { return self.place_at(time) };
                if open.program {
                    if let Some(depth) = self.depth.get_mut(&open.thread) {
                        *depth = depth.saturating_sub(1);
                    }
                }
                if open.capture {
                    self.capture_ended += 1;
                    let count = self.plan.count;
                    if count > 0 && self.capture_ended == count && self.closed.is_none() {
                        self.closed = Some(time);
                        let range = self.plan.range.as_deref().unwrap_or_default();
                        let why = format!(r#"capture range "{range}": {count} ended"#);
                        Self::gate_line(&mut out.gates, time, false, why);
                    }
                }
                open.place
            }
        }
    }

    /// Decides the records received so far (see the module's doc): those from `until` on
    /// wait, unless this is the `last` settling.
    pub fn settle(&mut self, until: u64, last: bool) -> Settled {
        let mut out = Settled::default();
        let records = std::mem::take(&mut self.waiting);
        if self.passes_all() {
            out.kept = records.into_iter().map(|l| (l, 0)).collect();
            return out;
        }
        let waits = |time: u64| !last && time >= until;
        let (mut markers, mut host, mut gpu) = (Vec::new(), Vec::new(), Vec::new());
        for line in records {
            match role(&line) {
                Some(Role::Marker(time)) => markers.push((time, line)),
                Some(Role::Host { start, correlation, call }) => {
                    host.push((start, correlation, call, line))
                }
                Some(Role::Gpu { start, correlation }) => gpu.push((start, correlation, line)),
                None => out.kept.push((line, 0)),
            }
        }
        let emit = |out: &mut Settled, line: Line, place: Place| match place {
            Some(slice) => out.kept.push((line, slice)),
            None => out.outside += 1,
        };
        markers.sort_by_key(|(time, _)| *time);
        for (time, line) in markers {
            if waits(time) {
                self.waiting.push(line);
                continue;
            }
            self.advance(time, &mut out.gates);
            let place = self.marker(&line, &mut out);
            emit(&mut out, line, place);
        }
        self.advance(until, &mut out.gates);
        let mut waiting_calls = HashSet::new();
        for (start, correlation, call, line) in host {
            if waits(start) {
                if call {
                    waiting_calls.insert(correlation);
                }
                self.waiting.push(line);
                continue;
            }
            let place = self.place_at(start);
            if call {
                match place {
                    Some(slice) => {
                        self.kept_calls.note(0, correlation);
                        self.slice_calls.note(slice, correlation);
                    }
                    None => self.rejected.insert(correlation),
                }
            }
            emit(&mut out, line, place);
        }
        for (start, correlation, line) in gpu {
            match self.gpu_place(start, correlation, &waiting_calls, waits(start)) {
                Some(place) => emit(&mut out, line, place),
                None => self.waiting.push(line),
            }
        }
        out
    }

    /// Where GPU work goes: with its call, or by its own start where its call was never
    /// seen; `None` while it must wait.
    fn gpu_place(
        &self,
        start: u64,
        correlation: u32,
        waiting_calls: &HashSet<u32>,
        start_waits: bool,
    ) -> Option<Place> {
        let seen = correlation != 0;
        let kept_call = seen && self.kept_calls.find(correlation).is_some();
        let inside = if self.plan.always_open() || kept_call {
            Some(true)
        } else if seen && self.rejected.contains(correlation) {
            Some(false)
        } else {
            None
        };
        if inside == Some(false) {
            return Some(None);
        }
        let slice = match self.plan.sample {
            false => Some(0),
            true if seen => self.slice_calls.find(correlation),
            true => None,
        };
        if let (Some(true), Some(slice)) = (inside, slice) {
            return Some(Some(slice));
        }
        if (seen && waiting_calls.contains(&correlation)) || start_waits {
            return None;
        }
        Some(match inside {
            Some(true) => Some(self.slice_at(start)),
            _ => self.place_at(start),
        })
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
