//! The overlap report: per window, each engine class's busy time, the copy time that ran
//! under compute, the window's span against a bound, and the findings. A pure function of
//! the spans and the [`Thresholds`]; [`OverlapReport::to_text`] renders it for a terminal.
use serde::Serialize;

use crate::lab::inspect::engines::{busy, Engine};
use crate::lab::inspect::findings::{find, Finding, Thresholds};
use crate::lab::inspect::intervals::{length, overlap};
use crate::lab::record::span::Span;

/// What a window covers. For now one device's spans, the whole recording. The hook for NVTX:
/// when the recorder brings the program's ranges, a window becomes one range on one device
/// (`range` its name), and its spans those of the device that start inside the range; the
/// arithmetic below is the same.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub device: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
}

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
    /// The first span's start to the last span's end (host functions included: they hold
    /// their stream).
    pub start_ms: f64,
    pub end_ms: f64,
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

/// The report of a recording: the thresholds it used and one report per window, in device
/// order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverlapReport {
    pub thresholds: Thresholds,
    pub windows: Vec<WindowReport>,
}

/// The overlap report of `spans`, one window per device.
pub fn overlap_report(spans: &[Span], thresholds: &Thresholds) -> OverlapReport {
    let mut devices: Vec<u32> = spans.iter().map(|s| s.device).collect();
    devices.sort_unstable();
    devices.dedup();
    let windows = devices
        .into_iter()
        .map(|device| {
            let in_window: Vec<&Span> = spans.iter().filter(|s| s.device == device).collect();
            window_report(Window { device, range: None }, &in_window, thresholds)
        })
        .collect();
    OverlapReport { thresholds: *thresholds, windows }
}

fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| part / whole)
}

fn window_report(window: Window, spans: &[&Span], thresholds: &Thresholds) -> WindowReport {
    let start_ms = spans.iter().map(|s| s.start_ms).fold(f64::INFINITY, f64::min);
    let end_ms = spans.iter().map(|s| s.end_ms).fold(f64::NEG_INFINITY, f64::max);
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
    let span_ms = end_ms - start_ms;
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
        findings: find(spans, thresholds),
    }
}

// The words below are English only, kept here until `streamlab trace` comes: the command brings
// them into the catalogs (lab/text), with their Chinese.

fn percent(fraction: Option<f64>) -> String {
    fraction.map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0))
}

impl WindowReport {
    /// The bound's formula with this window's numbers.
    pub fn bound_formula(&self) -> String {
        let terms: Vec<String> =
            Engine::ALL.iter().map(|e| format!("{} {:.3}", e.name(), self.busy.of(*e))).collect();
        let busiest = self.bound_engine.map_or("no engine ran".to_string(), |e| e.name().into());
        format!("bound = max({}) = {:.3} ms ({busiest})", terms.join(", "), self.bound_ms)
    }

    /// The window as text.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let name = match &self.window.range {
            Some(range) => format!("GPU {} · {range}", self.window.device),
            None => format!("GPU {}", self.window.device),
        };
        out += &format!(
            "{name}: {:.3} ms, from {:.3} to {:.3} ms\n",
            self.span_ms, self.start_ms, self.end_ms
        );
        out += "  busy (each class's spans, overlapping ones counted once):\n";
        for engine in Engine::ALL {
            out += &format!("    {:<24}{:>10.3} ms\n", engine.name(), self.busy.of(engine));
        }
        out += &format!(
            "  copies under compute: {:.3} ms, {} of the copy time ({:.3} ms) and {} of the \
             compute time: the same time, seen from each side\n",
            self.copy_and_compute_ms,
            percent(self.copy_under_compute),
            self.copy_ms,
            percent(self.compute_under_copy)
        );
        out += &format!("  {}\n", self.bound_formula());
        out += "    (with perfect overlap every class runs at once, so the window lasts at least \
                the busiest one's time)\n";
        let over = self.measured_over_bound.map_or("-".to_string(), |r| format!("{r:.2}x"));
        out += &format!("  measured over bound: {over}\n");
        if self.findings.is_empty() {
            out += "  findings: none\n";
        }
        for f in &self.findings {
            out += &format!(
                "  finding: {}: {} time(s), {:.3} ms ({})\n    e.g. {} on stream {} at {:.3} ms\n    \
                 lesson: streamlab {}\n",
                f.rule.seen(),
                f.count,
                f.cost_ms,
                f.rule.cost_is(),
                f.example.label,
                f.example.stream,
                f.example.start_ms,
                f.lesson
            );
        }
        out
    }
}

impl OverlapReport {
    /// The report as text: the thresholds it used, then each window.
    pub fn to_text(&self) -> String {
        let t = &self.thresholds;
        let mut out = format!(
            "overlap report (thresholds: idle gap > {} ms; back to back <= {} ms; small kernel \
             <= {} ms; many = {} or more)\n",
            t.idle_gap_ms, t.back_to_back_ms, t.small_kernel_ms, t.many_small_kernels
        );
        if self.windows.is_empty() {
            out += "no device spans recorded: nothing to report\n";
        }
        for window in &self.windows {
            out += &window.to_text();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::inspect::findings::Rule;
    use crate::lab::record::span::Work;

    fn span(stream: &str, kind: Work, start_ms: f64, end_ms: f64) -> Span {
        Span::new(stream, kind, kind.role(), start_ms, end_ms)
    }

    fn report(spans: &[Span]) -> OverlapReport {
        overlap_report(spans, &Thresholds::DEFAULT)
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
        let text = w.to_text();
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
        let text = r.to_text();
        assert!(text.contains("lesson: streamlab run pinned-vs-pageable"), "{text}");
        assert!(text.contains("e.g. copy-in on stream s at 0.000 ms"), "{text}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["windows"][1]["findings"][0]["rule"], "pageable_copy");
        assert_eq!(json["thresholds"]["idle_gap_ms"], 0.1);
    }

    #[test]
    fn the_text_states_the_thresholds_and_the_bound_formula() {
        let spans = [span("a", Work::Kernel, 0.0, 2.0), span("b", Work::CopyToDevice, 0.0, 1.0)];
        let text = report(&spans).to_text();
        assert!(text.contains("idle gap > 0.1 ms"), "{text}");
        assert!(text.contains("small kernel <= 0.01 ms; many = 100 or more"), "{text}");
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
        assert!(r.to_text().contains("no device spans recorded"), "{}", r.to_text());
        // Host functions alone: a window, but no engine ran, so no bound.
        let w = &report(&[span("s", Work::HostFn, 1.0, 2.0)]).windows[0];
        assert_eq!((w.span_ms, w.bound_ms, w.bound_engine), (1.0, 0.0, None));
        assert_eq!((w.measured_over_bound, w.copy_under_compute), (None, None));
    }
}
