//! The overlap report: per window, each engine class's busy time, the copy time that ran
//! under compute, the window's length against a bound, and the findings; across windows, the
//! collectives that waited for a late rank. A pure function of the records and the
//! [`Thresholds`]; [`OverlapReport::to_text`] renders it in the catalogs' words.
use serde::Serialize;

use crate::lab::record::intervals::{length, overlap};
use crate::lab::record::span::Span;
use crate::lab::text::{fixed, Lang, Text};
use crate::t;
use crate::trace::inspect::engines::{busy, Engine};
use crate::trace::inspect::findings::{Finding, Thresholds};
use crate::trace::inspect::ranks::late_rank;
use crate::trace::inspect::rules::find;
use crate::trace::inspect::windows::{window_records, windows, Records, Window};

/// The time each engine class was busy: the union of its spans (spans that run at once count
/// once).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Busy {
    pub compute_ms: f64,
    pub copy_in_ms: f64,
    pub copy_out_ms: f64,
    pub device_copy_ms: f64,
    pub collective_ms: f64,
}

impl Busy {
    pub fn of(&self, engine: Engine) -> f64 {
        match engine {
            Engine::Compute => self.compute_ms,
            Engine::CopyIn => self.copy_in_ms,
            Engine::CopyOut => self.copy_out_ms,
            Engine::DeviceCopy => self.device_copy_ms,
            Engine::Collective => self.collective_ms,
        }
    }
}

/// The report of one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowReport {
    pub window: Window,
    /// The window's first and last instant.
    pub start_ms: f64,
    pub end_ms: f64,
    /// How long the window lasted: a whole run's first span's start to its last span's end
    /// (host functions included: they hold their stream), or a range's time summed over its
    /// occurrences.
    pub span_ms: f64,
    pub busy: Busy,
    /// The union of all copies (in, out, device and peer).
    pub copy_ms: f64,
    /// The time copies and compute ran at once: the intersection of the two unions. It is
    /// both "copy time under compute" and "compute time under copies"; the fractions differ.
    pub copy_and_compute_ms: f64,
    /// `copy_and_compute_ms / copy_ms` (None without copies).
    pub copy_under_compute: Option<f64>,
    /// `copy_and_compute_ms / compute_ms` (None without compute).
    pub compute_under_copy: Option<f64>,
    /// The bound: the busiest engine class's time. With perfect overlap every class runs at
    /// once, each on its own engine, so the window is at least this long.
    pub bound_ms: f64,
    /// The busiest class (the first in [`Engine::ALL`]'s order on a tie); None when no span
    /// ran on an engine.
    pub bound_engine: Option<Engine>,
    /// `span_ms / bound_ms` (None when the bound is 0).
    pub measured_over_bound: Option<f64>,
    pub findings: Vec<Finding>,
}

/// The report of a recording: the thresholds it used, one report per window, and the findings
/// across windows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverlapReport {
    pub thresholds: Thresholds,
    pub windows: Vec<WindowReport>,
    /// Found across windows (collectives that waited for a late rank).
    pub across_windows: Vec<Finding>,
    /// NVTX range names left without a window of their own (past the cap per process).
    pub range_names_left_out: usize,
    /// Whether host calls were recorded (the launch-gap rule reads them).
    pub host_calls_recorded: bool,
}

/// The overlap report of `records`: every process's whole run on each device, then its NVTX
/// ranges ([`windows`]).
pub fn overlap_report(records: &Records, thresholds: &Thresholds) -> OverlapReport {
    let (list, range_names_left_out) = windows(records);
    let windows = list
        .into_iter()
        .map(|window| {
            let held = window_records(records, &window);
            let spans: Vec<&Span> = held.span_refs();
            let mut report = window_report(window, &spans);
            report.findings = find(&held, thresholds);
            report
        })
        .collect();
    OverlapReport {
        thresholds: *thresholds,
        windows,
        across_windows: late_rank(records.spans, thresholds).into_iter().collect(),
        range_names_left_out,
        host_calls_recorded: records.host_calls_recorded,
    }
}

fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| part / whole)
}

fn window_report(window: Window, spans: &[&Span]) -> WindowReport {
    let start_ms = window.intervals.first().map_or(0.0, |i| i.0);
    let end_ms = window.intervals.last().map_or(0.0, |i| i.1);
    let class = |engine: Engine| length(&busy(spans, |e| e == engine));
    let busy_times = Busy {
        compute_ms: class(Engine::Compute),
        copy_in_ms: class(Engine::CopyIn),
        copy_out_ms: class(Engine::CopyOut),
        device_copy_ms: class(Engine::DeviceCopy),
        collective_ms: class(Engine::Collective),
    };
    let copies = busy(spans, Engine::is_copy);
    let compute = busy(spans, |e| e == Engine::Compute);
    let copy_ms = length(&copies);
    let copy_and_compute_ms = overlap(&copies, &compute);
    let mut bound_ms = 0.0;
    let mut bound_engine = None;
    for engine in Engine::ALL {
        if busy_times.of(engine) > bound_ms {
            bound_ms = busy_times.of(engine);
            bound_engine = Some(engine);
        }
    }
    let span_ms = window.length_ms();
    WindowReport {
        window,
        start_ms,
        end_ms,
        span_ms,
        copy_ms,
        copy_and_compute_ms,
        copy_under_compute: ratio(copy_and_compute_ms, copy_ms),
        compute_under_copy: ratio(copy_and_compute_ms, busy_times.compute_ms),
        bound_ms,
        bound_engine,
        measured_over_bound: ratio(span_ms, bound_ms),
        busy: busy_times,
        findings: Vec::new(),
    }
}

fn percent(fraction: Option<f64>) -> String {
    fraction.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0))
}

fn engine_name(engine: Engine, lang: Lang) -> String {
    Text::message(&format!("inspect.engine.{}", engine_key(engine)), Vec::new()).render(lang)
}

fn engine_key(engine: Engine) -> &'static str {
    match engine {
        Engine::Compute => "compute",
        Engine::CopyIn => "copy_in",
        Engine::CopyOut => "copy_out",
        Engine::DeviceCopy => "device_copy",
        Engine::Collective => "collective",
    }
}

impl WindowReport {
    /// The bound's formula with this window's numbers.
    pub fn bound_formula(&self, lang: Lang) -> String {
        let terms: Vec<String> = Engine::ALL
            .iter()
            .map(|e| format!("{} {:.3}", engine_name(*e, lang), self.busy.of(*e)))
            .collect();
        let busiest = match self.bound_engine {
            Some(e) => engine_name(e, lang),
            None => t!("inspect.no_engine").render(lang),
        };
        t!("inspect.bound", terms = terms.join(", "), ms = fixed(self.bound_ms, 3), busiest)
            .render(lang)
    }

    /// What the window is, in words: its process, device and range.
    pub fn title(&self, lang: Lang) -> String {
        let w = &self.window;
        let mut name = String::new();
        if w.process != 0 {
            name += &t!("inspect.process", pid = w.process).render(lang);
            name += " · ";
        }
        name += &t!("inspect.gpu", device = w.device).render(lang);
        if let Some(range) = &w.range {
            name += " · ";
            name += &t!("inspect.range", range = range.clone(), n = w.occurrences).render(lang);
        }
        name
    }

    /// The window as text.
    pub fn to_text(&self, lang: Lang) -> String {
        let line = |text: Text| text.render(lang) + "\n";
        let mut out = line(t!(
            "inspect.window",
            name = self.title(lang),
            ms = fixed(self.span_ms, 3),
            from = fixed(self.start_ms, 3),
            to = fixed(self.end_ms, 3)
        ));
        out += &format!("  {}", line(t!("inspect.busy")));
        for engine in Engine::ALL {
            let name = crate::lab::text::pad(&engine_name(engine, lang), 24);
            out += &format!("    {name}{:>10.3} ms\n", self.busy.of(engine));
        }
        out += &format!(
            "  {}",
            line(t!(
                "inspect.copies_under",
                ms = fixed(self.copy_and_compute_ms, 3),
                of_copy = percent(self.copy_under_compute),
                copy_ms = fixed(self.copy_ms, 3),
                of_compute = percent(self.compute_under_copy)
            ))
        );
        out += &format!("  {}\n", self.bound_formula(lang));
        out += &format!("    {}", line(t!("inspect.bound_why")));
        let over = self.measured_over_bound.map_or("-".to_string(), |r| format!("{r:.2}x"));
        out += &format!("  {}", line(t!("inspect.over", x = over)));
        if self.findings.is_empty() {
            out += &format!("  {}", line(t!("inspect.findings_none")));
        }
        for f in &self.findings {
            out += &finding_text(f, lang);
        }
        out
    }
}

fn finding_text(f: &Finding, lang: Lang) -> String {
    let key = f.rule.key();
    let seen = Text::message(&format!("inspect.seen.{key}"), Vec::new());
    let cost = Text::message(&format!("inspect.cost.{key}"), Vec::new());
    let head = t!("inspect.finding", seen, n = f.count, ms = fixed(f.cost_ms, 3), cost);
    let example = t!(
        "inspect.example",
        label = f.example.label.clone(),
        stream = f.example.stream.clone(),
        at = fixed(f.example.start_ms, 3)
    );
    let lesson = t!("inspect.lesson", lesson = f.lesson.to_string());
    format!("  {}\n    {}\n    {}\n", head.render(lang), example.render(lang), lesson.render(lang))
}

impl OverlapReport {
    /// The report as text: the thresholds it used, then each window, then what was found
    /// across them.
    pub fn to_text(&self, lang: Lang) -> String {
        let t = &self.thresholds;
        let mut out = t!(
            "inspect.header",
            idle = t.idle_gap_ms.to_string(),
            launch = t.launch_gap_ms.to_string(),
            b2b = t.back_to_back_ms.to_string(),
            small = t.small_kernel_ms.to_string(),
            many = t.many_small_kernels,
            late = t.late_rank_ms.to_string()
        )
        .render(lang);
        out += "\n";
        if !self.host_calls_recorded {
            out += &t!("inspect.no_host_calls").render(lang);
            out += "\n";
        }
        if self.windows.is_empty() {
            out += &t!("inspect.none").render(lang);
            out += "\n";
        }
        for window in &self.windows {
            out += &window.to_text(lang);
        }
        if self.range_names_left_out > 0 {
            out += &t!(
                "inspect.ranges_left_out",
                n = self.range_names_left_out,
                max = crate::trace::inspect::windows::MAX_RANGE_NAMES
            )
            .render(lang);
            out += "\n";
        }
        for f in &self.across_windows {
            out += &t!("inspect.across").render(lang);
            out += "\n";
            out += &finding_text(f, lang);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::span::Work;
    use crate::trace::inspect::findings::Rule;

    fn span(stream: &str, kind: Work, start_ms: f64, end_ms: f64) -> Span {
        Span::new(stream, kind, kind.role(), start_ms, end_ms)
    }

    fn report(spans: &[Span]) -> OverlapReport {
        overlap_report(&Records { spans, ..Default::default() }, &Thresholds::DEFAULT)
    }

    #[test]
    fn two_overlapping_copies_count_once() {
        let spans = [
            span("a", Work::CopyToDevice, 0.0, 2.0),
            span("b", Work::CopyToDevice, 1.0, 3.0),
            span("a", Work::Kernel, 3.0, 4.0),
        ];
        let w = &report(&spans).windows[0];
        assert_eq!(w.busy.copy_in_ms, 3.0);
        assert_eq!(w.busy.compute_ms, 1.0);
        assert_eq!((w.copy_ms, w.copy_and_compute_ms), (3.0, 0.0));
        assert_eq!((w.span_ms, w.bound_ms, w.bound_engine), (4.0, 3.0, Some(Engine::CopyIn)));
        assert_eq!(w.measured_over_bound, Some(4.0 / 3.0));
    }

    #[test]
    fn a_copy_fully_under_a_kernel() {
        let spans = [
            span("k", Work::Kernel, 0.0, 4.0),
            span("c", Work::CopyToHost, 1.0, 2.0),
            span("c", Work::Memset, 2.5, 3.0),
        ];
        let w = &report(&spans).windows[0];
        // The memset is compute, inside the kernel's time: compute stays 4 ms.
        assert_eq!((w.busy.compute_ms, w.busy.copy_out_ms), (4.0, 1.0));
        assert_eq!(w.copy_and_compute_ms, 1.0);
        assert_eq!((w.copy_under_compute, w.compute_under_copy), (Some(1.0), Some(0.25)));
        assert_eq!((w.bound_ms, w.measured_over_bound), (4.0, Some(1.0)));
        let text = w.to_text(Lang::En);
        assert!(text.contains("100% of the copy time"), "{text}");
        assert!(text.contains("25% of the compute time"), "{text}");
        assert!(text.contains("measured over bound: 1.00x"), "{text}");
        assert!(text.contains("= 4.000 ms (compute)"), "{text}");
    }

    #[test]
    fn one_window_per_device_and_each_finds_its_own() {
        let mut pageable = span("s", Work::CopyToDevice, 0.0, 1.0);
        pageable.memory = "pageable".into();
        pageable.device = 1;
        let spans = [span("s", Work::Kernel, 0.0, 1.0), pageable];
        let r = report(&spans);
        let devices: Vec<u32> = r.windows.iter().map(|w| w.window.device).collect();
        assert_eq!(devices, [0, 1]);
        assert!(r.windows[0].findings.is_empty());
        let rules: Vec<Rule> = r.windows[1].findings.iter().map(|f| f.rule).collect();
        assert_eq!(rules, [Rule::PageableCopy]);
        let text = r.to_text(Lang::En);
        assert!(text.contains("lesson: streamlab run pinned-vs-pageable"), "{text}");
        assert!(text.contains("e.g. copy-in on s at 0.000 ms"), "{text}");
        let zh = r.to_text(Lang::Zh);
        assert!(zh.contains("对应课程：streamlab run pinned-vs-pageable"), "{zh}");
        assert!(zh.contains("从可分页主机内存拷入或拷出"), "{zh}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["windows"][1]["findings"][0]["rule"], "pageable_copy");
        assert_eq!(json["thresholds"]["idle_gap_ms"], 0.1);
    }

    #[test]
    fn the_text_states_the_thresholds_and_the_bound_formula() {
        let spans = [span("a", Work::Kernel, 0.0, 2.0), span("b", Work::CopyToDevice, 0.0, 1.0)];
        let text = report(&spans).to_text(Lang::En);
        assert!(text.contains("idle gap > 0.1 ms"), "{text}");
        assert!(text.contains("small kernel <= 0.01 ms; many = 100 or more"), "{text}");
        assert!(text.contains("late rank > 0.05 ms"), "{text}");
        assert!(
            text.contains(
                "bound = max(compute 2.000, copy in 1.000, copy out 0.000, \
                 device and peer copies 0.000, collectives 0.000) = 2.000 ms (compute)"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_empty_input_has_no_windows() {
        let r = report(&[]);
        assert!(r.windows.is_empty());
        assert!(
            r.to_text(Lang::En).contains("no device spans recorded"),
            "{}",
            r.to_text(Lang::En)
        );
        // Host functions alone: a window, but no engine ran, so no bound.
        let w = &report(&[span("s", Work::HostFn, 1.0, 2.0)]).windows[0];
        assert_eq!((w.span_ms, w.bound_ms, w.bound_engine), (1.0, 0.0, None));
        assert_eq!((w.measured_over_bound, w.copy_under_compute), (None, None));
    }

    #[test]
    fn a_range_window_lasts_its_occurrences_and_finds_what_happened_inside() {
        use crate::trace::inspect::host::Range;
        // One stream alternates copy and kernel in the range "phase 1" (twice), and runs a
        // copy under a kernel in "phase 2".
        let spans = [
            span("s", Work::CopyToDevice, 0.0, 1.0),
            span("s", Work::Kernel, 1.0, 2.0),
            span("s", Work::CopyToDevice, 10.0, 11.0),
            span("s", Work::Kernel, 11.0, 12.0),
            span("a", Work::Kernel, 20.0, 22.0),
            span("b", Work::CopyToDevice, 20.5, 21.5),
        ];
        let range = |name: &str, start_ms: f64, end_ms: f64| Range {
            process: 0,
            thread: 1,
            name: name.into(),
            start_ms,
            end_ms,
            depth: 0,
        };
        let ranges = [
            range("phase 1", 0.0, 2.0),
            range("phase 1", 10.0, 12.0),
            range("phase 2", 20.0, 22.0),
        ];
        let records = Records { spans: &spans, ranges: &ranges, ..Default::default() };
        let r = overlap_report(&records, &Thresholds::DEFAULT);
        let names: Vec<Option<&str>> =
            r.windows.iter().map(|w| w.window.range.as_deref()).collect();
        assert_eq!(names, [None, Some("phase 1"), Some("phase 2")]);
        let one = &r.windows[1];
        assert_eq!((one.span_ms, one.bound_ms, one.window.occurrences), (4.0, 2.0, 2));
        assert_eq!(one.measured_over_bound, Some(2.0));
        let rules: Vec<Rule> = one.findings.iter().map(|f| f.rule).collect();
        assert_eq!(rules, [Rule::CopyKernelOneStream]);
        let two = &r.windows[2];
        assert_eq!((two.span_ms, two.copy_under_compute), (2.0, Some(1.0)));
        assert!(two.findings.is_empty(), "{:?}", two.findings);
        let text = r.to_text(Lang::En);
        assert!(
            text.contains("GPU 0 · NVTX range \"phase 1\" (marked 2 times): 4.000 ms"),
            "{text}"
        );
    }
}
