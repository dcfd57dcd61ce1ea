//! Which time `--svg` draws ([`drawn`]). A traced program spends seconds starting (imports,
//! the first allocations, NCCL's set-up) before the part worth looking at, and a picture of
//! the whole run squeezes that part into a sliver at the right. So by default the picture
//! draws the steady state: from the start of the first top-level NVTX range the program
//! marked (the report's "rest" window), else from its first GPU work, to its last GPU work;
//! the caption says how much was left out before and after. `--svg-range` chooses otherwise
//! ([`SvgRange`]): `all` the whole run, `NAME` every occurrence of the NVTX range `NAME`,
//! `NAME:N` its Nth, `NAME:N-M` its Nth to Mth, each drawn to the end of the GPU work
//! launched in it.
//!
//! Only the bounds are computed here, from the columns; the records inside them become spans
//! afterwards ([`crate::trace::capture::recordings::picture_recordings`]).
use std::collections::HashSet;

use crate::runtime::{Error, Result};
use crate::t;
use crate::text::flag_values::BadValue;
use crate::text::Text;
use crate::trace::read::model::{Capture, Ns, Process};

/// What `--svg-range` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SvgRange {
    /// No flag: the steady state.
    #[default]
    Steady,
    /// `all`: the whole run.
    All,
    /// `NAME`, `NAME:N`, `NAME:N-M`: the occurrences `first` to `last` (counted from 1, in
    /// the order they started; every one from `first` on where `last` is `None`) of the NVTX
    /// range `name`, in each process that marked it.
    Range { name: String, first: usize, last: Option<usize> },
}

/// How `--svg-range` is written, for its errors (a sentence of the catalogs).
fn forms() -> Text {
    t!("error.trace.svg_range_forms")
}

impl SvgRange {
    /// `--svg-range`'s value parser: the error line finds its sentence by its type
    /// ([`BadValue`]) and says it in `--lang`'s language.
    pub fn parse(text: &str) -> std::result::Result<SvgRange, BadValue> {
        SvgRange::read(text).map_err(BadValue)
    }

    /// The flag's value read, or why not. A colon followed by anything but digits and `-` is
    /// part of the name (`fwd:layer1` is a range's name), so a name may hold colons.
    pub fn read(text: &str) -> std::result::Result<SvgRange, Text> {
        let whole = |name: &str| SvgRange::Range { name: name.into(), first: 1, last: None };
        if text.is_empty() {
            return Err(t!("error.trace.svg_range_empty", forms = forms()));
        }
        if text == "all" {
            return Ok(SvgRange::All);
        }
        let Some((name, which)) = text.rsplit_once(':') else {
            return Ok(whole(text));
        };
        if !which.chars().all(|c| c.is_ascii_digit() || c == '-') {
            return Ok(whole(text));
        }
        if name.is_empty() || which.is_empty() {
            return Err(t!("error.trace.svg_range_colon", forms = forms()));
        }
        let (a, b) = which.split_once('-').unwrap_or((which, which));
        let number = |s: &str| s.parse::<usize>().ok();
        match (number(a), number(b)) {
            (Some(0), _) | (_, Some(0)) => Err(t!("error.trace.svg_range_from_1")),
            (Some(first), Some(last)) if first <= last => {
                Ok(SvgRange::Range { name: name.into(), first, last: Some(last) })
            }
            (Some(first), Some(last)) => Err(t!("error.trace.svg_range_reversed", first, last)),
            _ => Err(t!("error.trace.svg_range_bad", which = which.to_string(), forms = forms())),
        }
    }

    /// The flag's value as it was written.
    pub fn written(&self) -> String {
        match self {
            SvgRange::Steady => String::new(),
            SvgRange::All => "all".into(),
            SvgRange::Range { name, last: None, .. } => name.clone(),
            SvgRange::Range { name, first, last: Some(last) } if first == last => {
                format!("{name}:{first}")
            }
            SvgRange::Range { name, first, last: Some(last) } => format!("{name}:{first}-{last}"),
        }
    }
}

/// The time a picture draws, on CUPTI's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    pub from: Ns,
    pub to: Ns,
    /// The time axis is cut to it; otherwise the whole run is drawn, from 0.
    pub cropped: bool,
    /// What the caption says about it (empty for the whole run).
    pub words: String,
}

impl Drawn {
    /// The whole run.
    pub fn whole() -> Drawn {
        Drawn { from: 0, to: Ns::MAX, cropped: false, words: String::new() }
    }

    /// Whether a record from `start` to `end` shows in it: it overlaps it, or it is an instant
    /// inside it (one that only touches an end would be a sliver at the edge).
    pub fn shows(&self, start: Ns, end: Ns) -> bool {
        match start == end {
            true => (self.from..=self.to).contains(&start),
            false => end > self.from && start < self.to,
        }
    }
}

/// A duration for a caption: seconds from a second on.
fn duration(ms: f64) -> String {
    if ms >= 1e3 {
        format!("{:.3} s", ms / 1e3)
    } else {
        format!("{ms:.3} ms")
    }
}

/// What `range` draws of `capture`; an error where it names a range, or an occurrence, that
/// the capture does not hold (the report is made all the same; no picture is written).
pub fn drawn(capture: &Capture, range: &SvgRange) -> Result<Drawn> {
    match range {
        SvgRange::All => Ok(Drawn::whole()),
        SvgRange::Steady => Ok(steady(capture)),
        SvgRange::Range { name, first, last } => occurrences(capture, range, name, *first, *last),
    }
}

/// From the first top-level NVTX range (else the first GPU work) to the last GPU work.
fn steady(capture: &Capture) -> Drawn {
    let processes = &capture.processes;
    // GPU work is in order of start.
    let first_work = processes.iter().filter_map(|p| p.gpu.start.first().copied()).min();
    let last_work = processes.iter().filter_map(|p| p.gpu.end.iter().max().copied()).max();
    let (Some(first_work), Some(last_work)) = (first_work, last_work) else {
        return Drawn::whole();
    };
    let first_range = processes
        .iter()
        .flat_map(|p| {
            let top = p.ranges.iter().filter(|r| r.depth == 0 && !r.library);
            top.map(move |r| (r.start, p.names.get(r.name)))
        })
        .min_by_key(|(start, _)| *start)
        // A range that began before any GPU work starts nothing worth cutting; one that began
        // after all of it leaves nothing to draw.
        .filter(|(start, _)| (first_work..last_work).contains(start));
    let from = first_range.map_or(first_work, |(start, _)| start);
    let run_end = processes.iter().map(|p| p.last_ns).max().unwrap_or(last_work);
    let ms = |ns| capture.ms(ns);
    let (before, after) = (ms(from), ms(run_end) - ms(last_work));
    if before <= 0.0 && after <= 0.0 {
        return Drawn::whole();
    }
    let start = match first_range {
        Some((_, name)) => format!("the first NVTX range (\"{name}\", at {:.3} ms)", ms(from)),
        None => format!("the first GPU work (at {:.3} ms)", ms(from)),
    };
    let mut words = format!("drawn from {start} to the last GPU work ({:.3} ms)", ms(last_work));
    let mut left_out = Vec::new();
    if before > 0.0 {
        let what = if first_range.is_some() { "the start-up" } else { "the time before" };
        left_out.push(format!("{what}, {}", duration(before)));
    }
    if after > 0.0 {
        left_out.push(format!("the {} after", duration(after)));
    }
    words.push_str(&format!(
        ": {}, not drawn; --svg-range all draws the whole run",
        left_out.join(", and ")
    ));
    Drawn { from, to: last_work, cropped: true, words }
}

/// The end of the GPU work launched by the calls `p` made from `from` to `until` (0 without
/// any): where a chosen occurrence's picture ends, since the GPU runs behind the CPU.
fn launched_until(p: &Process, from: Ns, until: Ns) -> Ns {
    let calls = &p.calls;
    let (a, b) =
        (calls.start.partition_point(|&t| t < from), calls.start.partition_point(|&t| t <= until));
    // Correlation 0 is CUPTI's "none".
    let made: HashSet<u32> = calls.correlation[a..b].iter().copied().filter(|&c| c != 0).collect();
    if made.is_empty() {
        return 0;
    }
    (0..p.gpu.len())
        .filter(|&i| made.contains(&p.gpu.correlation[i]))
        .map(|i| p.gpu.end[i])
        .max()
        .unwrap_or(0)
}

/// The chosen occurrences of the range `name`, in each process that marked it.
fn occurrences(
    capture: &Capture,
    range: &SvgRange,
    name: &str,
    first: usize,
    last: Option<usize>,
) -> Result<Drawn> {
    let mut window: Option<(Ns, Ns)> = None;
    let mut most = 0;
    for p in &capture.processes {
        let Some(id) = p.names.strings.iter().position(|s| s == name) else {
            continue;
        };
        let marked: Vec<_> = p.ranges.iter().filter(|r| r.name as usize == id).collect();
        most = most.max(marked.len());
        let end = last.unwrap_or(usize::MAX).min(marked.len());
        if first > end {
            continue;
        }
        let chosen = &marked[first - 1..end];
        let from = chosen.iter().map(|r| r.start).min().unwrap_or(0);
        let until = chosen.iter().map(|r| r.end).max().unwrap_or(0);
        let to = until.max(launched_until(p, from, until));
        window = Some(window.map_or((from, to), |(a, b)| (a.min(from), b.max(to))));
    }
    let written = range.written();
    let Some((from, to)) = window else {
        let why = match most {
            0 => {
                let mut names: Vec<&str> = Vec::new();
                for p in &capture.processes {
                    for r in &p.ranges {
                        let n = p.names.get(r.name);
                        if !names.contains(&n) {
                            names.push(n);
                        }
                    }
                }
                let name = name.to_string();
                let shown: Vec<String> = names.iter().take(8).map(|n| format!("\"{n}\"")).collect();
                let ranges = shown.join(", ");
                match names.len() {
                    0 => t!("error.trace.svg_range_none_marked", name),
                    n if n > 8 => {
                        t!("error.trace.svg_range_not_recorded_more", name, ranges, more = n - 8)
                    }
                    _ => t!("error.trace.svg_range_not_recorded", name, ranges),
                }
            }
            1 => t!("error.trace.svg_range_marked_once", name = name.to_string()),
            n => t!("error.trace.svg_range_marked_times", name = name.to_string(), n),
        };
        return Err(Error::InvalidInput(t!(
            "error.trace.svg_range_no_picture",
            range = written,
            why
        )));
    };
    let which = match last {
        None => format!("all {most} occurrences"),
        Some(l) if l == first => format!("occurrence {first} of {most}"),
        Some(l) => format!("occurrences {first} to {} of {most}", l.min(most)),
    };
    let words = format!(
        "drawn: the NVTX range \"{name}\", {which}, from {:.3} to {:.3} ms with the GPU work launched in it; the rest of the run is not drawn (--svg-range all draws it)",
        capture.ms(from),
        capture.ms(to)
    );
    Ok(Drawn { from, to, cropped: true, words })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runtime::cupti::trace_file::Line;
    use crate::trace::inspect::test_lines::{call, capture_of, kernel, range};

    /// A training run on thread 1: a start-up kernel at 100 ms, then three NVTX ranges "step"
    /// from 4,000 ms, 100 ms each, each launching a kernel (correlation 11, 12, 13) that runs
    /// from 50 to 140 ms after its step began, past the step's end; a last call at 5,000 ms.
    pub(crate) fn training_run() -> Vec<Line> {
        let mut lines =
            vec![call("cudaLaunchKernel", 1, 99.0, 99.5, 1), kernel(14, 100.0, 200.0, 1)];
        for step in 1..=3u32 {
            let at = 4000.0 + 100.0 * (step - 1) as f64;
            lines.extend(range(step, "step", 1, at, at + 100.0));
            lines.push(call("cudaLaunchKernel", 1, at + 1.0, at + 1.5, 10 + step));
            lines.push(kernel(14, at + 50.0, at + 140.0, 10 + step));
        }
        lines.push(call("cudaFree", 1, 5000.0, 5000.5, 99));
        lines
    }

    /// The window in ms, and its words.
    fn window(capture: &Capture, range: &SvgRange) -> ((f64, f64), String) {
        let d = drawn(capture, range).unwrap();
        assert!(d.cropped, "{d:?}");
        ((capture.ms(d.from), capture.ms(d.to)), d.words)
    }

    #[test]
    fn by_default_the_picture_starts_at_the_first_range_and_says_what_it_left_out() {
        let capture = capture_of(&training_run());
        let ((from, to), words) = window(&capture, &SvgRange::Steady);
        assert_eq!((from, to), (4000.0, 4340.0));
        assert_eq!(
            words,
            "drawn from the first NVTX range (\"step\", at 4000.000 ms) to the last GPU work (4340.000 ms): the start-up, 4.000 s, and the 660.500 ms after, not drawn; --svg-range all draws the whole run"
        );
        assert_eq!(drawn(&capture, &SvgRange::All).unwrap(), Drawn::whole());
        // Without ranges, from the first GPU work.
        let plain = capture_of(&[
            kernel(14, 100.0, 200.0, 1),
            kernel(14, 300.0, 400.0, 2),
            call("cudaFree", 1, 500.0, 500.5, 3),
        ]);
        let ((from, to), words) = window(&plain, &SvgRange::Steady);
        assert_eq!((from, to), (100.0, 400.0));
        assert!(words.starts_with("drawn from the first GPU work (at 100.000 ms)"), "{words}");
        assert!(words.contains("the time before, 100.000 ms, and the 100.500 ms after"), "{words}");
    }

    #[test]
    fn a_chosen_occurrence_is_drawn_to_the_end_of_the_work_launched_in_it() {
        let capture = capture_of(&training_run());
        let parse = |s: &str| SvgRange::parse(s).unwrap();
        // Step 2 began at 4,100 ms and ended at 4,200; its kernel ran until 4,240.
        let ((from, to), words) = window(&capture, &parse("step:2"));
        assert_eq!((from, to), (4100.0, 4240.0));
        assert!(
            words.starts_with(
                "drawn: the NVTX range \"step\", occurrence 2 of 3, from 4100.000 to 4240.000 ms"
            ),
            "{words}"
        );
        assert_eq!(window(&capture, &parse("step:2-3")).0, (4100.0, 4340.0));
        let ((from, to), words) = window(&capture, &parse("step"));
        assert_eq!((from, to), (4000.0, 4340.0));
        assert!(words.contains("all 3 occurrences"), "{words}");
        // Past the last: as many as there are.
        assert!(window(&capture, &parse("step:2-9")).1.contains("occurrences 2 to 3 of 3"));
        // A range or an occurrence the trace does not hold: one line, and no picture.
        let e = drawn(&capture, &parse("step:4")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--svg-range step:4: \"step\" was marked 3 times in a process at most, so no picture was written"
        );
        let e = drawn(&capture, &parse("eval")).unwrap_err().to_string();
        assert_eq!(
            e,
            "--svg-range eval: no NVTX range \"eval\" was recorded (the ranges: \"step\"), so no picture was written"
        );
    }

    fn chosen(name: &str, first: usize, last: Option<usize>) -> SvgRange {
        SvgRange::Range { name: name.into(), first, last }
    }

    #[test]
    fn the_flag_reads_a_name_its_occurrences_or_all_and_refuses_the_rest() {
        assert_eq!(SvgRange::parse("all"), Ok(SvgRange::All));
        assert_eq!(SvgRange::parse("step"), Ok(chosen("step", 1, None)));
        assert_eq!(SvgRange::parse("step:3"), Ok(chosen("step", 3, Some(3))));
        assert_eq!(SvgRange::parse("step:3-5"), Ok(chosen("step", 3, Some(5))));
        // A colon before anything but an occurrence is the name's.
        assert_eq!(SvgRange::parse("fwd:layer1"), Ok(chosen("fwd:layer1", 1, None)));
        assert_eq!(SvgRange::parse("a:b:2"), Ok(chosen("a:b", 2, Some(2))));
        for (bad, why) in [
            ("", "empty"),
            ("step:0", "counted from 1"),
            ("step:5-3", "5-3: the first occurrence comes after the last"),
            ("step:3-", "3-: write NAME"),
            ("step:-3", "-3: write NAME"),
            ("step:1-2-3", "1-2-3: write NAME"),
            ("step:", "around the colon"),
            (":3", "around the colon"),
        ] {
            let e = SvgRange::read(bad).unwrap_err();
            assert_eq!(SvgRange::parse(bad).map_err(|b| b.0.en()), Err(e.en()));
            let (e, zh) = (e.en(), e.render(crate::text::Lang::Zh));
            assert!(e.contains(why), "{bad}: {e}");
            assert!(crate::text::has_chinese(&zh), "{bad}: {zh}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
        for written in ["all", "step", "step:3", "step:3-5", "fwd:layer1"] {
            assert_eq!(SvgRange::parse(written).unwrap().written(), written);
        }
    }
}
