//! `diff`'s comparison on real reports: the analysis run on the reader's testdata folders,
//! written as `--json` writes it, then edited where a test wants a change.
use serde_json::{json, Value};

use crate::trace::capture::analysis::analyse;
use crate::trace::capture::diff::{compare, Diff, FindingSide, Found, ProcessMatch, ReportFile};
use crate::trace::capture::summary::TraceReport;
use crate::trace::inspect::findings::Thresholds;
use crate::trace::inspect::windows::Part;
use crate::trace::read::reader_tests::testdata;

/// The JSON report of the testdata folder `name`, as `streamlab report DIR --json` writes it.
pub(crate) fn report_json(name: &str) -> Value {
    let analysis = analyse(&testdata(name), &Thresholds::DEFAULT).unwrap();
    let command = vec!["prog".to_string()];
    let report = TraceReport::new(&command, None, &[], &analysis.capture, &analysis.report, None);
    serde_json::to_value(&report).unwrap()
}

pub(crate) fn parsed(report: &Value) -> ReportFile {
    serde_json::from_value(report.clone()).unwrap()
}

/// "one-process" after a fix: another pid, the whole run's window half as long and its
/// pageable copies gone, an idle gap found in the range's window, and a window on GPU 1.
pub(crate) fn changed() -> Value {
    let mut b = report_json("one-process");
    b["processes"][0]["pid"] = json!(5151);
    let windows = b["overlap"]["windows"].as_array_mut().unwrap();
    for w in windows.iter_mut() {
        w["window"]["process"] = json!(5151);
    }
    windows[0]["span_ms"] = json!(1.8);
    let findings = windows[0]["findings"].as_array_mut().unwrap();
    findings.retain(|f| f["rule"] != "pageable_copy");
    let mut idle = windows[1]["findings"][0].clone();
    idle["rule"] = json!("idle_gap");
    idle["count"] = json!(2);
    idle["cost_ms"] = json!(0.25);
    windows[1]["findings"].as_array_mut().unwrap().push(idle);
    let mut other = windows[0].clone();
    other["window"]["device"] = json!(1);
    windows.push(other);
    b
}

/// Every figure and finding of `diff` whose change is not zero, as (window, name, delta).
fn changes(diff: &Diff) -> Vec<(usize, String, f64)> {
    let mut found = Vec::new();
    for (i, w) in diff.windows.iter().enumerate() {
        for f in &w.figures {
            if let Some(d) = f.delta.filter(|d| *d != 0.0) {
                found.push((i, f.key.to_string(), d));
            }
        }
        for f in &w.findings {
            if let Some(d) = f.count_delta.filter(|d| *d != 0) {
                found.push((i, format!("{} count", f.rule), d as f64));
            }
            if let Some(d) = f.cost_delta_ms.filter(|d| *d != 0.0) {
                found.push((i, format!("{} cost", f.rule), d));
            }
        }
    }
    found
}

#[test]
fn a_report_diffed_with_itself_has_every_delta_zero_and_every_ratio_one() {
    let (mut ratios, mut findings) = (0, 0);
    for name in ["one-process", "two-processes", "killed", "no-exit"] {
        let report = parsed(&report_json(name));
        let diff = compare(&report, &report);
        assert!(diff.same_thresholds);
        assert_eq!(diff.windows.len(), report.overlap.windows.len(), "{name}");
        for (p, process) in diff.processes.iter().zip(&report.processes) {
            assert_eq!((p.a_pid, p.b_pid), (Some(process.pid), Some(process.pid)), "{name}");
        }
        for w in &diff.windows {
            assert_eq!(w.found, Found::Both, "{name}: {w:?}");
            assert_eq!(w.a_pid, w.b_pid);
            for f in &w.figures {
                assert_eq!(f.a, f.b, "{name}: {}", f.key);
                assert_eq!(f.delta, f.a.map(|_| 0.0), "{name}: {}", f.key);
                let is_time = f.key.ends_with("_ms");
                if is_time && f.a.is_some_and(|a| a > 0.0) {
                    assert_eq!(f.ratio, Some(1.0), "{name}: {}", f.key);
                    ratios += 1;
                } else {
                    assert_eq!(f.ratio, None, "{name}: {}", f.key);
                }
            }
            for f in &w.findings {
                assert_eq!(f.a, f.b, "{name}: {}", f.rule);
                assert_eq!((f.count_delta, f.cost_delta_ms), (Some(0), Some(0.0)));
                assert_eq!(f.cost_ratio, Some(1.0), "{name}: {}", f.rule);
                findings += 1;
            }
        }
        assert!(changes(&diff).is_empty(), "{name}: {:?}", changes(&diff));
    }
    // The testdata have times and findings to compare: the loops above checked something.
    assert!(ratios >= 20 && findings >= 5, "{ratios} ratios, {findings} findings");
}

#[test]
fn a_changed_report_shows_exactly_its_changes() {
    let (a, b) = (parsed(&report_json("one-process")), parsed(&changed()));
    let diff = compare(&a, &b);
    assert_eq!(
        diff.processes,
        [ProcessMatch { position: 1, a_pid: Some(4242), b_pid: Some(5151) }]
    );
    let windows: Vec<_> =
        diff.windows.iter().map(|w| (w.found, w.device, w.part, w.range.as_deref())).collect();
    assert_eq!(
        windows,
        [
            (Found::Both, 0, Part::Whole, None),
            (Found::Both, 0, Part::Range, Some("epoch")),
            (Found::OnlyB, 1, Part::Whole, None),
        ]
    );
    assert_eq!((diff.windows[0].a_pid, diff.windows[0].b_pid), (Some(4242), Some(5151)));
    assert_eq!(
        changes(&diff),
        [
            (0, "span_ms".to_string(), -1.8),
            (0, "pageable_copy count".to_string(), -1.0),
            (0, "pageable_copy cost".to_string(), -1.0),
            (1, "idle_gap count".to_string(), 2.0),
            (1, "idle_gap cost".to_string(), 0.25),
        ]
    );
    let span = &diff.windows[0].figures.iter().find(|f| f.key == "span_ms").unwrap();
    assert_eq!((span.a, span.b, span.ratio), (Some(3.6), Some(1.8), Some(0.5)));
    // A rule one side lacks is absent there, with no ratio; the others are compared.
    let gone = &diff.windows[0].findings[0];
    let side = FindingSide { count: 1, cost_ms: 1.0, folded: false };
    assert_eq!((gone.rule.as_str(), gone.a, gone.b), ("pageable_copy", Some(side), None));
    assert_eq!(gone.cost_ratio, None);
    let rules: Vec<&str> = diff.windows[1].findings.iter().map(|f| f.rule.as_str()).collect();
    assert_eq!(rules, ["pageable_copy", "legacy_default_stream", "idle_gap"]);
    let new = &diff.windows[1].findings[2];
    assert_eq!((new.a, new.b.map(|s| s.count)), (None, Some(2)));
    // A window only in B: its own figures, nothing to subtract from.
    let only = &diff.windows[2];
    assert_eq!((only.a_pid, only.b_pid), (None, Some(5151)));
    assert!(only.figures.iter().all(|f| f.a.is_none() && f.delta.is_none() && f.b.is_some()));
    assert!(only.findings.iter().all(|f| f.a.is_none() && f.count_delta.is_none()));
    assert_eq!(only.findings.len(), 1, "{:?}", only.findings);
}

#[test]
fn processes_are_matched_by_position_not_by_pid() {
    let a = report_json("two-processes");
    let mut b = a.clone();
    // Other pids in B; its second process gone, with its window.
    b["processes"][0]["pid"] = json!(300);
    b["processes"].as_array_mut().unwrap().truncate(1);
    let windows = b["overlap"]["windows"].as_array_mut().unwrap();
    windows.retain(|w| w["window"]["process"] == 100);
    windows[0]["window"]["process"] = json!(300);
    let diff = compare(&parsed(&a), &parsed(&b));
    assert_eq!(
        diff.processes,
        [
            ProcessMatch { position: 1, a_pid: Some(100), b_pid: Some(300) },
            ProcessMatch { position: 2, a_pid: Some(200), b_pid: None },
        ]
    );
    let windows: Vec<_> =
        diff.windows.iter().map(|w| (w.process, w.device, w.found, w.a_pid, w.b_pid)).collect();
    assert_eq!(
        windows,
        [(1, 0, Found::Both, Some(100), Some(300)), (2, 1, Found::OnlyA, Some(200), None)]
    );
    assert!(changes(&diff).is_empty(), "{:?}", changes(&diff));
}

#[test]
fn a_finding_folded_in_one_report_only_is_still_compared_by_rule() {
    let a = report_json("one-process");
    let mut b = a.clone();
    let window = &mut b["overlap"]["windows"][0];
    let moved = window["findings"].as_array_mut().unwrap().remove(1);
    window["folded"] = json!({"findings": [moved], "count": 1, "cost_ms": 1.0});
    // Other thresholds are said.
    b["overlap"]["thresholds"]["idle_gap_ms"] = json!(1.0);
    let diff = compare(&parsed(&a), &parsed(&b));
    assert!(!diff.same_thresholds);
    assert!(changes(&diff).is_empty(), "{:?}", changes(&diff));
    let f = &diff.windows[0].findings[1];
    assert_eq!(f.rule, "legacy_default_stream");
    assert_eq!((f.a.unwrap().folded, f.b.unwrap().folded), (false, true));
    assert_eq!(f.cost_ratio, Some(1.0));
}

#[test]
fn a_report_without_its_optional_fields_still_reads() {
    let mut report = report_json("no-exit");
    for key in ["across_windows", "thresholds"] {
        report["overlap"].as_object_mut().unwrap().remove(key);
    }
    let optional =
        ["measured_over_bound", "copy_under_compute", "findings", "folded", "ran_during"];
    for w in report["overlap"]["windows"].as_array_mut().unwrap() {
        let w = w.as_object_mut().unwrap();
        for key in optional {
            w.remove(key);
        }
        w["window"].as_object_mut().unwrap().remove("occurrences");
    }
    let read = parsed(&report);
    assert_eq!(read.overlap.windows[1].window.occurrences, 1);
    let diff = compare(&read, &parsed(&report_json("no-exit")));
    // The range "halfway" ran during its occurrence in B only: its row compares nothing.
    let during = diff.windows[1].figures.iter().find(|f| f.key == "ran_during.span_ms").unwrap();
    assert_eq!((during.a, during.delta), (None, None));
    assert!(during.b.is_some());
}

#[test]
fn ranks_that_started_in_the_other_order_are_matched_by_their_gpus() {
    // A: a launcher with no window, then the rank on GPU 0 (100), then the one on GPU 1 (200).
    let mut a = report_json("two-processes");
    let launcher = json!({"pid": 50});
    a["processes"].as_array_mut().unwrap().insert(0, launcher);
    // B: other pids, and the rank on GPU 1 started before the one on GPU 0, as torchrun's
    // ranks may.
    let mut b = a.clone();
    let pids = [(50, 60), (100, 101), (200, 201)];
    for p in b["processes"].as_array_mut().unwrap() {
        let pid = p["pid"].as_u64().unwrap();
        p["pid"] = json!(pids.iter().find(|(a, _)| *a == pid).unwrap().1);
    }
    b["processes"].as_array_mut().unwrap().swap(1, 2);
    for w in b["overlap"]["windows"].as_array_mut().unwrap() {
        let pid = w["window"]["process"].as_u64().unwrap();
        w["window"]["process"] = json!(pids.iter().find(|(a, _)| *a == pid).unwrap().1);
    }
    let diff = compare(&parsed(&a), &parsed(&b));
    assert_eq!(
        diff.processes,
        [
            ProcessMatch { position: 1, a_pid: Some(50), b_pid: Some(60) },
            ProcessMatch { position: 2, a_pid: Some(100), b_pid: Some(101) },
            ProcessMatch { position: 3, a_pid: Some(200), b_pid: Some(201) },
        ]
    );
    assert!(!diff.windows.is_empty());
    for w in &diff.windows {
        assert_eq!(w.found, Found::Both, "{w:?}");
        assert_eq!(w.b_pid, w.a_pid.map(|pid| pid + 1), "{w:?}");
    }
    assert!(changes(&diff).is_empty(), "{:?}", changes(&diff));
    // Matched by start order alone, rank 0 of A would meet rank 1 of B and no window would match.
    let by_order = |r: &Value| -> Vec<u64> {
        r["processes"].as_array().unwrap().iter().map(|p| p["pid"].as_u64().unwrap()).collect()
    };
    assert_eq!((by_order(&a)[1], by_order(&b)[1]), (100, 201));
}

#[test]
fn the_collectives_under_compute_are_compared() {
    let a = report_json("one-process");
    let whole = &a["overlap"]["windows"][0];
    let comm = &whole["comm"];
    assert!(comm["collective_ms"].as_f64().unwrap() > 0.0, "the testdata's NCCL kernel: {whole}");
    let mut b = a.clone();
    b["overlap"]["windows"][0]["comm"]["hidden_share"] = json!(0.75);
    b["overlap"]["windows"][0]["comm"]["exposed_ms"] = json!(0.1);
    let diff = compare(&parsed(&a), &parsed(&b));
    let figure = |key: &str| diff.windows[0].figures.iter().find(|f| f.key == key).cloned();
    let (share, exposed) =
        (figure("comm.hidden_share").unwrap(), figure("comm.exposed_ms").unwrap());
    let (a_share, a_exposed) =
        (comm["hidden_share"].as_f64(), comm["exposed_ms"].as_f64().unwrap());
    assert_eq!((share.a, share.b, share.ratio), (a_share, Some(0.75), None));
    assert_eq!((exposed.a, exposed.b), (Some(a_exposed), Some(0.1)));
    assert_eq!(exposed.delta, Some(0.1 - a_exposed));
    assert_eq!(exposed.ratio, (a_exposed > 0.0).then(|| 0.1 / a_exposed));
    // A window without collectives in either report has no such rows.
    let mut quiet = a.clone();
    for w in quiet["overlap"]["windows"].as_array_mut().unwrap() {
        w.as_object_mut().unwrap().remove("comm");
    }
    let diff = compare(&parsed(&quiet), &parsed(&quiet));
    assert!(diff.windows.iter().all(|w| w.figures.iter().all(|f| !f.key.starts_with("comm."))));
}
