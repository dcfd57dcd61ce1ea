//! Work issued again and again, call by call on streams or as one CUDA graph: timing rounds
//! of it (wall, GPU and host issue time per round), what building and updating the graph
//! cost, and what those numbers say about where a replay's time goes. The `graph` lesson
//! measures, reports and explains with these.
use std::time::Instant;

use serde::Serialize;

use crate::lab::{Measured, Report, Sample, VersionStats};
use crate::runtime::graph::{NodeCounts, UpdatePath};
use crate::runtime::{Event, Gpu, Result, Stream};
use crate::t;
use crate::text::{fixed, Text};

use super::{EMPTY_BY_STREAM, EMPTY_GRAPH, GRAPH, STREAMS_EVENTS};

/// What a captured graph holds, and the host ms its capture and instantiation took.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Built {
    pub nodes: NodeCounts,
    pub capture_ms: f64,
    pub instantiate_ms: f64,
}

/// The path a change took into an executable graph (`update_from` a re-capture), and the
/// host ms of the re-capture and of the update.
#[derive(Debug, Clone, PartialEq)]
pub struct Updated {
    pub path: UpdatePath,
    pub recapture_ms: f64,
    pub update_ms: f64,
}

/// The two timing events of [`Rounds::run`], made once, outside anything timed.
pub struct Rounds {
    start: Event,
    end: Event,
}

impl Rounds {
    pub fn new(gpu: &Gpu) -> Result<Rounds> {
        Ok(Rounds { start: Event::new(gpu)?, end: Event::new(gpu)? })
    }

    /// `n` rounds of `issue`, each waited for on `on` before the next (work whose output is
    /// needed every time). The sample, per round: wall time (its ms), GPU time between events
    /// on `on` (part "gpu") and host time spent in `issue` (part "issue"), all in ms.
    pub fn run(
        &self,
        n: u32,
        on: &Stream,
        mut issue: impl FnMut() -> Result<()>,
    ) -> Result<Sample> {
        let (mut gpu_ms, mut issue_ms, wall) = (0.0, 0.0, Instant::now());
        for _ in 0..n {
            self.start.record(on)?;
            let t = Instant::now();
            issue()?;
            issue_ms += t.elapsed().as_secs_f64() * 1e3;
            self.end.record(on)?;
            on.synchronize()?;
            gpu_ms += self.end.elapsed_ms(&self.start)?;
        }
        let per = 1.0 / f64::from(n.max(1));
        let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        Ok(Sample::ms(wall_ms * per).part("gpu", gpu_ms * per).part("issue", issue_ms * per))
    }
}

/// Medians of a version measured by [`Rounds::run`], in µs per round or per item of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerRound {
    pub wall_us: f64,
    pub gpu_us: f64,
    pub issue_us: f64,
}

impl PerRound {
    /// `v`'s medians, divided by the `items` each round holds (1 for whole rounds).
    pub fn of(v: &VersionStats, items: usize) -> PerRound {
        let per = 1e3 / items.max(1) as f64;
        PerRound {
            wall_us: v.time.median * per,
            gpu_us: v.part("gpu") * per,
            issue_us: v.part("issue") * per,
        }
    }
}

/// The figures of a graph lesson run and what they mean. `m` holds, in this order, a DAG of
/// `calls` driver calls on 3 streams issued by stream and replayed as a graph
/// ([`Rounds::run`] of whole replays), then `kernels` empty kernels launched by stream and as
/// one graph (one round each). `b` is the DAG's graph; `updated`, its update once it has run.
pub fn interpret(
    m: &Measured,
    (calls, kernels): (usize, usize),
    b: &Built,
    updated: Option<&Updated>,
    r: &mut Report,
) {
    let s = PerRound::of(m.version(STREAMS_EVENTS), 1);
    let g = PerRound::of(m.version(GRAPH), 1);
    let e = PerRound::of(m.version(EMPTY_BY_STREAM), kernels);
    let eg = PerRound::of(m.version(EMPTY_GRAPH), kernels);
    let (by_stream, in_graph) =
        (format!("{kernels} empty kernels by stream"), format!("graph of {kernels} empty kernels"));
    let figures = [
        ("streams+events: GPU time / iteration".to_string(), s.gpu_us),
        ("streams+events: host issue / iteration".into(), s.issue_us),
        ("graph: GPU time / iteration".into(), g.gpu_us),
        ("graph: host issue (cuGraphLaunch) / iteration".into(), g.issue_us),
        ("host issue saved / iteration".into(), s.issue_us - g.issue_us),
        ("capture (once)".into(), b.capture_ms * 1e3),
        ("instantiate (once)".into(), b.instantiate_ms * 1e3),
        (format!("{by_stream}: GPU / kernel"), e.gpu_us),
        (format!("{by_stream}: issue / kernel"), e.issue_us),
        (format!("{in_graph}: GPU / kernel"), eg.gpu_us),
        (format!("{in_graph}: issue / kernel"), eg.issue_us),
    ];
    for (name, us) in figures {
        r.figure(&name, us, "us");
    }
    r.param("graph", b.nodes.to_string()).detail("graph_nodes", b.nodes);
    let (s_issue, g_issue, nodes) = (fixed(s.issue_us, 1), fixed(g.issue_us, 1), nodes(&b.nodes));
    r.explain(t!("graph.replay_calls", calls, s_issue, nodes, g_issue));
    let setup_us = (b.capture_ms + b.instantiate_ms) * 1e3;
    r.explain(explain_wall(s, g, setup_us, (e.gpu_us, eg.gpu_us), kernels));
    let (by_stream, in_graph) = (fixed(e.gpu_us, 2), fixed(eg.gpu_us, 2));
    r.explain(t!("graph.replay_launch_overhead", by_stream, in_graph));
    if let Some(u) = updated {
        let (update_us, instantiate_us) = (u.update_ms * 1e3, b.instantiate_ms * 1e3);
        r.param("update", u.path.to_string());
        r.figure("re-capture with new scale", u.recapture_ms * 1e3, "us");
        r.figure("update of the executable graph", update_us, "us");
        r.explain(explain_update(&u.path, update_us, instantiate_us));
    }
}

/// A graph's nodes, as `NodeCounts` prints them ("6 nodes: 3 kernels, 3 copies").
fn nodes(n: &NodeCounts) -> Text {
    let (total, kernels, copies) = (n.total(), n.kernels, n.memcpys);
    match total - kernels - copies {
        0 => t!("graph.replay_nodes", total, kernels, copies),
        other => t!("graph.replay_nodes_other", total, kernels, copies, other),
    }
}

/// What a DAG's wall times mean, issued by stream (`s`) and replayed as a graph (`g`): every
/// claim in it is the outcome of a comparison of the numbers it states. `setup_us`: capture
/// plus instantiation; `empty`: GPU µs per empty kernel, by stream and in a graph, of the
/// `kernels` empty kernels measured beside.
pub fn explain_wall(
    s: PerRound,
    g: PerRound,
    setup_us: f64,
    empty: (f64, f64),
    kernels: usize,
) -> Text {
    let (s_wall, s_gpu, s_issue) = (s.wall_us, s.gpu_us, s.issue_us);
    let (g_wall, g_gpu, g_issue) = (g.wall_us, g.gpu_us, g.issue_us);
    let saved_us = s_wall - g_wall;
    let us = |v: f64| fixed(v, 1);
    if saved_us > 0.0 {
        let why = if s_issue > s_gpu {
            t!(
                "graph.replay_host_bound",
                s_issue = us(s_issue),
                s_gpu = us(s_gpu),
                g_issue = us(g_issue)
            )
        } else if g_gpu < s_gpu {
            t!("graph.replay_gpu_shorter", g_gpu = us(g_gpu), s_gpu = us(s_gpu))
        } else {
            let [s_issue, g_issue, s_gpu, g_gpu] = [s_issue, g_issue, s_gpu, g_gpu].map(us);
            t!("graph.replay_per_iteration", s_issue, g_issue, s_gpu, g_gpu)
        };
        let replays = fixed((setup_us / saved_us).ceil(), 0);
        let (s_wall, g_wall, setup_us) = (us(s_wall), us(g_wall), fixed(setup_us, 0));
        return t!("graph.replay_faster", s_wall, g_wall, why, setup_us, replays);
    }
    let why = if s_gpu > s_issue {
        t!("graph.replay_gpu_chain", s_gpu = us(s_gpu), s_issue = us(s_issue))
    } else {
        t!("graph.replay_issue_hidden", s_issue = us(s_issue), s_gpu = us(s_gpu))
    };
    let saved = s_issue - g_issue;
    let host = if saved > 0.0 {
        t!("graph.replay_host_saved", saved = us(saved))
    } else {
        t!("graph.replay_host_not_saved", g_issue = us(g_issue), s_issue = us(s_issue))
    };
    let (by_stream, in_graph) = empty;
    let rest = if in_graph < by_stream {
        let (by_stream, in_graph) = (fixed(by_stream, 2), fixed(in_graph, 2));
        t!("graph.replay_host_and_tiny", host, kernels, by_stream, in_graph)
    } else {
        host
    };
    t!("graph.replay_no_gain", g_wall = us(g_wall), s_wall = us(s_wall), why, rest)
}

/// What an update of an executable graph did, following the path the driver took.
pub fn explain_update(path: &UpdatePath, update_us: f64, instantiate_us: f64) -> Text {
    let (update_us, instantiate_us) = (fixed(update_us, 0), fixed(instantiate_us, 0));
    match path {
        UpdatePath::InPlace => t!("graph.replay_in_place", update_us, instantiate_us),
        UpdatePath::Reinstantiated { reason } => {
            t!("graph.replay_reinstantiated", reason = reason.clone(), update_us, instantiate_us)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Measured;

    /// Per-iteration medians (wall, gpu, issue), in µs.
    fn per(wall: f64, gpu: f64, issue: f64) -> PerRound {
        PerRound { wall_us: wall, gpu_us: gpu, issue_us: issue }
    }

    #[test]
    fn per_round_figures_come_from_the_parts_in_us() {
        let sample = Sample::ms(0.2).part("gpu", 0.1).part("issue", 0.05);
        let m = Measured::from_samples(vec!["v".into()], vec![vec![sample]]);
        let one = PerRound::of(m.version(STREAMS_EVENTS), 1);
        assert!((one.wall_us - 200.0).abs() < 1e-9 && (one.gpu_us - 100.0).abs() < 1e-9);
        assert!((one.issue_us - 50.0).abs() < 1e-9);
        assert!((PerRound::of(m.version(STREAMS_EVENTS), 100).gpu_us - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_gpu_bound_dag_is_explained_by_the_numbers_it_states() {
        // As measured on an H200: ~30 us of GPU time against ~12 us of host issue.
        let (s, g) = (per(45.0, 30.0, 12.0), per(46.0, 30.0, 3.5));
        let text = explain_wall(s, g, 100.0, (2.8, 0.52), 100).en();
        assert!(
            text.starts_with("Here the graph does not shorten the iteration (46.0 us against 45.0"),
            "{text}"
        );
        assert!(text.contains("keeps the GPU busy 30.0 us, longer than the 12.0 us"), "{text}");
        assert!(text.contains("host time: 8.5 us"), "{text}");
        assert!(text.contains("(2.80 against 0.52 us"), "{text}");
        // Without a launch-overhead gain, no claim about it.
        let text = explain_wall(s, g, 100.0, (0.5, 0.6), 100).en();
        assert!(!text.contains("empty kernels"), "{text}");
    }

    #[test]
    fn no_gpu_bound_claim_when_the_issue_takes_longer() {
        let text =
            explain_wall(per(30.0, 10.0, 12.0), per(31.0, 10.0, 13.0), 100.0, (2.8, 0.52), 100)
                .en();
        assert!(text.contains("does not shorten"), "{text}");
        assert!(!text.contains("keeps the GPU busy"), "{text}");
        assert!(text.contains("12.0 us, no less than its 10.0 us"), "{text}");
        // The graph issued slower here: no host time saved, and the text says so.
        assert!(text.contains("Nor did it save host time"), "{text}");
        assert!(!text.contains("What the graph saved"), "{text}");
    }

    #[test]
    fn a_wall_time_gain_is_explained_by_what_was_measured() {
        let lo = (2.8, 0.52);
        let text = explain_wall(per(50.0, 10.0, 40.0), per(20.0, 10.0, 4.0), 300.0, lo, 100).en();
        assert!(text.starts_with("Wall time per iteration falls from 50.0 to 20.0 us"), "{text}");
        assert!(text.contains("GPU waits for the host"), "{text}");
        assert!(text.contains("after 10 replays"), "{text}");
        let text = explain_wall(per(50.0, 40.0, 10.0), per(45.0, 30.0, 4.0), 300.0, lo, 100).en();
        assert!(text.contains("GPU time is shorter (30.0 against 40.0"), "{text}");
        assert!(!text.contains("GPU waits"), "{text}");
        let text = explain_wall(per(50.0, 40.0, 10.0), per(45.0, 41.0, 4.0), 300.0, lo, 100).en();
        assert!(!text.contains("GPU waits") && !text.contains("shorter"), "{text}");
        assert!(text.contains("the GPU works 40.0 and 41.0 us"), "{text}");
    }

    /// The graph lesson's four versions: DAG by stream and as a graph (µs per replay), then
    /// 100 empty kernels by stream and as a graph (µs per batch): (wall, gpu, issue).
    fn lesson_run(rows: [(f64, f64, f64); 4]) -> Measured {
        let runs = (rows.iter())
            .map(|&(w, g, i)| vec![Sample::ms(w / 1e3).part("gpu", g / 1e3).part("issue", i / 1e3)])
            .collect();
        let names = ["streams+events", "graph", "by stream", "graph of empties"];
        Measured::from_samples(names.map(String::from).to_vec(), runs)
    }

    #[test]
    fn interpret_reports_per_replay_and_per_kernel_figures_and_the_update_once_it_ran() {
        let m = lesson_run([
            (45.0, 30.0, 12.0),
            (46.0, 30.0, 3.5),
            (300.0, 280.0, 250.0),
            (60.0, 52.0, 5.0),
        ]);
        let nodes = NodeCounts { kernels: 3, memcpys: 3, ..NodeCounts::default() };
        let b = Built { nodes, capture_ms: 0.05, instantiate_ms: 0.1 };
        let mut r = Report::new("graph", "", "");
        interpret(&m, (13, 100), &b, None, &mut r);
        let near = |name: &str, v: f64| {
            let got = r.value(name).unwrap_or_else(|| panic!("no figure {name:?}"));
            assert!((got - v).abs() < 1e-9, "{name}: {got} (expected {v})");
        };
        near("streams+events: host issue / iteration", 12.0);
        near("graph: host issue (cuGraphLaunch) / iteration", 3.5);
        near("host issue saved / iteration", 8.5);
        near("instantiate (once)", 100.0);
        near("100 empty kernels by stream: GPU / kernel", 2.8);
        near("graph of 100 empty kernels: GPU / kernel", 0.52);
        assert!(
            r.interpretation[0].starts_with("Each streams+events iteration makes 13 driver calls")
        );
        assert!(
            r.interpretation[0].contains("6 nodes: 3 kernels, 3 copies"),
            "{:?}",
            r.interpretation
        );
        assert!(r.interpretation[1].starts_with("Here the graph does not shorten"));
        assert!(r.interpretation[2].contains("2.80 us of GPU time launched by stream and 0.52 us"));
        // No update yet: no update figures or line.
        assert_eq!(r.interpretation.len(), 3);
        assert!(r.value("update of the executable graph").is_none());
        let updated = Updated { path: UpdatePath::InPlace, recapture_ms: 0.04, update_ms: 0.012 };
        let mut r = Report::new("graph", "", "");
        interpret(&m, (13, 100), &b, Some(&updated), &mut r);
        assert_eq!(r.value("update of the executable graph"), Some(12.0));
        assert!(r.interpretation[3].contains("in place in 12 us"), "{:?}", r.interpretation);
    }

    #[test]
    fn the_update_text_follows_the_path_taken() {
        let in_place = explain_update(&UpdatePath::InPlace, 12.0, 80.0).en();
        assert!(in_place.contains("patched the executable graph in place in 12 us"), "{in_place}");
        assert!(!in_place.contains("refused"), "{in_place}");
        let reason = "the topology changed".to_string();
        let again = explain_update(&UpdatePath::Reinstantiated { reason }, 70.0, 80.0).en();
        assert!(again.contains("refused") && again.contains("the topology changed"), "{again}");
        assert!(!again.contains("no new instantiation"), "{again}");
    }
}
