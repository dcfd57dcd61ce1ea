//! Where the graph starts to win: the crossover along a line of the sweep's shapes, the
//! figures and sentences that say it, and the plot that shows it.
use super::sweep::{Copies, Point, Shape, WIN};
use crate::lab::record::plot::{Plot, Series};
use crate::lab::{fixed, t, Report, Text};

/// Along one line of points that differ in one axis (`x` of a point), ascending: the first
/// value from which the graph wins ([`WIN`]) at every larger one (`rising`), or up to which
/// it wins at every smaller one (not `rising`). `None`: it never does.
pub fn crossover(line: &[Point], x: fn(&Shape) -> usize, rising: bool) -> Option<usize> {
    let mut sorted: Vec<&Point> = line.iter().collect();
    sorted.sort_by_key(|p| x(&p.shape));
    if !rising {
        sorted.reverse();
    }
    let losing = sorted.iter().rposition(|p| p.ratio() >= WIN);
    let from = losing.map_or(0, |i| i + 1);
    sorted.get(from).map(|p| x(&p.shape))
}

/// The sweep's figures, and what they say about where the graph wins.
pub fn interpret(points: &[Point], r: &mut Report) {
    for p in points {
        let label = p.shape.label();
        r.figure(&format!("graph / streams, {label}"), p.ratio(), "x");
    }
    let elements: std::collections::BTreeSet<usize> =
        points.iter().map(|p| p.shape.elements).collect();
    if let (1, Some(line)) = (elements.len(), chain_text(points)) {
        r.explain(line);
    } else {
        for copies in [Copies::Memcpy, Copies::Kernels, Copies::None] {
            let mine: Vec<Point> =
                points.iter().filter(|p| p.shape.copies == copies).copied().collect();
            if !mine.is_empty() {
                r.explain(grid_text(copies, &mine));
            }
        }
    }
}

/// Where the graph starts to win along the chain, for points at one size (None: no points).
pub fn chain_text(points: &[Point]) -> Option<Text> {
    let (first, last) = (points.first()?, points.last()?);
    let (n, shortest, longest) = (first.shape.elements, first.shape.chain, last.shape.chain);
    let (first, last) = (fixed(first.ratio(), 2), fixed(last.ratio(), 2));
    Some(match crossover(points, |s| s.chain, true) {
        Some(c) if c == shortest => {
            t!("graph.sweep_chain_always", n, shortest, longest, first, last)
        }
        Some(c) => t!("graph.sweep_chain_from", n, c, shortest, longest, first, last),
        None => t!("graph.sweep_chain_never", n, shortest, longest, first, last),
    })
}

/// "1 kernel", "4 kernels".
fn kernels(c: usize) -> Text {
    if c == 1 {
        t!("graph.sweep_one_kernel")
    } else {
        t!("graph.sweep_kernels", c)
    }
}

/// For each chain length, the largest size at which the graph still wins, with `copies`.
pub fn grid_text(copies: Copies, points: &[Point]) -> Text {
    let chains: std::collections::BTreeSet<usize> = points.iter().map(|p| p.shape.chain).collect();
    let wins = chains
        .iter()
        .map(|&c| {
            let line: Vec<Point> = points.iter().filter(|p| p.shape.chain == c).copied().collect();
            let kernels = kernels(c);
            match crossover(&line, |s| s.elements, false) {
                Some(n) => t!("graph.sweep_up_to", n, kernels),
                None => t!("graph.sweep_no_size", kernels),
            }
        })
        .collect();
    let wins = Text::List(wins);
    let worst =
        points.iter().filter(|p| p.ratio() >= WIN).max_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    let rest = match worst {
        Some(p) if p.ratio() > 1.0 / WIN => {
            let (n, c, loss) =
                (p.shape.elements, p.shape.chain, fixed((p.ratio() - 1.0) * 100.0, 0));
            t!("graph.sweep_loses", loss, n, c)
        }
        Some(_) => t!("graph.sweep_level"),
        None => t!("graph.sweep_wins_everywhere"),
    };
    t!("graph.sweep_grid", copies = copies.phrase(), wins, rest)
}

/// Graph time over streams time against the shape, with the break-even line and a mark
/// where each line starts to win. None with fewer than two points.
pub fn plot(points: &[Point]) -> Option<Plot> {
    let elements: std::collections::BTreeSet<usize> =
        points.iter().map(|p| p.shape.elements).collect();
    let by_chain = elements.len() == 1;
    let mut series = Vec::new();
    let mut marks = Vec::new();
    if by_chain {
        let line: Vec<(f64, f64)> =
            points.iter().map(|p| (p.shape.chain as f64, p.ratio())).collect();
        let n = points.first().map_or(0, |p| p.shape.elements);
        series.push(Series::measured(&format!("{n} elements per node, memcpy"), line));
        if let Some(c) = crossover(points, |s| s.chain, true) {
            marks.extend(
                points.iter().filter(|p| p.shape.chain == c).map(|p| (c as f64, p.ratio())),
            );
        }
    } else {
        let chains: std::collections::BTreeSet<usize> =
            points.iter().map(|p| p.shape.chain).collect();
        for c in chains {
            let line: Vec<Point> = points
                .iter()
                .filter(|p| p.shape.chain == c && p.shape.copies == Copies::Memcpy)
                .copied()
                .collect();
            let xy = line.iter().map(|p| (p.shape.elements as f64, p.ratio())).collect();
            series.push(Series::measured(&format!("{} per side", kernels(c).en()), xy));
            if let Some(n) = crossover(&line, |s| s.elements, false) {
                marks.extend(
                    line.iter().filter(|p| p.shape.elements == n).map(|p| (n as f64, p.ratio())),
                );
            }
        }
    }
    let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    let (lo, hi) = xs.iter().fold((f64::INFINITY, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
    if xs.len() < 2 {
        return None;
    }
    series.push(Series::model("break-even: graph = streams", vec![(lo, 1.0), (hi, 1.0)]));
    let mark = if by_chain {
        "shortest chain from which the graph wins (5%+)"
    } else {
        "largest size up to which the graph wins (5%+)"
    };
    series.push(Series::marks(mark, marks));
    let (title, x_label) = if by_chain {
        ("graph: time per iteration, graph / streams, against the chain", "kernel nodes per side")
    } else {
        (
            "graph: time per iteration, graph / streams (memcpy nodes), against DAG size",
            "elements per node",
        )
    };
    Some(Plot::lines(title, x_label, "graph time / streams time", true, series))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lessons::graph::replay::PerRound;
    use crate::lessons::graph::sweep::{grid_shapes, names};

    fn per(wall_us: f64) -> PerRound {
        PerRound { wall_us, gpu_us: wall_us * 0.9, issue_us: 10.0 }
    }

    /// A point of `shape` whose graph takes `ratio` times the streams' 100 µs.
    fn point(elements: usize, chain: usize, copies: Copies, ratio: f64) -> Point {
        Point {
            shape: Shape { elements, chain, copies },
            streams: per(100.0),
            graph: per(100.0 * ratio),
        }
    }

    #[test]
    fn the_crossover_is_where_the_graph_wins_from_then_on() {
        let line = |ratios: &[f64]| -> Vec<Point> {
            ratios
                .iter()
                .enumerate()
                .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
                .collect()
        };
        let chain = |s: &Shape| s.chain;
        assert_eq!(crossover(&line(&[1.2, 1.05, 0.9, 0.7]), chain, true), Some(4));
        // Within 5% is level, not a win.
        assert_eq!(crossover(&line(&[1.2, 0.97, 0.9]), chain, true), Some(4));
        // A win that does not last is no crossover: the last loss decides.
        assert_eq!(crossover(&line(&[0.9, 1.1, 0.93, 0.8]), chain, true), Some(4));
        assert_eq!(crossover(&line(&[0.9, 0.8]), chain, true), Some(1));
        assert_eq!(crossover(&line(&[1.2, 1.0]), chain, true), None);
        // Along the size the graph wins below a size: the largest size up to which it wins.
        let sizes: Vec<Point> = [0.5, 0.8, 0.94, 0.99, 1.2]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(1024 << (2 * i), 4, Copies::Memcpy, r))
            .collect();
        assert_eq!(crossover(&sizes, |s| s.elements, false), Some(16384));
        assert_eq!(crossover(&sizes[3..], |s| s.elements, false), None);
        assert_eq!(crossover(&sizes[..2], |s| s.elements, false), Some(4096));
    }

    #[test]
    fn the_texts_state_what_the_points_show() {
        let chain: Vec<Point> = [1.2, 1.05, 0.9, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
            .collect();
        let text = chain_text(&chain).unwrap().en();
        assert!(
            text.contains(
                "65536 elements per node: the graph starts to win (5% or more faster) at 4 kernel nodes per side"
            ),
            "{text}"
        );
        assert!(text.contains("from 1.20 to 0.70"), "{text}");
        let never = chain_text(&chain[..2]).unwrap().en();
        assert!(never.contains("not reached") && !never.contains("starts to win"), "{never}");
        let always = chain_text(&chain[2..]).unwrap().en();
        assert!(always.contains("wins at every length"), "{always}");
        let grid = vec![
            point(1024, 1, Copies::None, 0.9),
            point(4096, 1, Copies::None, 1.1),
            point(1024, 4, Copies::None, 1.3),
        ];
        let text = grid_text(Copies::None, &grid).en();
        assert!(text.starts_with("Crossover on this GPU with no copies"), "{text}");
        let wins = "faster) up to 1024 elements per node with 1 kernel per side, at no size with 4";
        assert!(text.contains(wins), "{text}");
        assert!(text.ends_with("loses by up to 30% (1024 elements per node, 4 per side) or the two are level within 5%."), "{text}");
        let level = grid_text(Copies::None, &grid[..1]).en();
        assert!(level.ends_with("and it wins at every shape measured."), "{level}");
        let level = grid_text(Copies::None, &[grid[0], point(4096, 1, Copies::None, 1.02)]).en();
        assert!(
            level.ends_with("elsewhere the two are level within 5%: the GPU's work sets the pace."),
            "{level}"
        );
        let mut r = Report::new("graph", "", "");
        interpret(&chain, &mut r);
        assert_eq!(r.value("graph / streams, 64K x 4 kernels, memcpy"), Some(0.9));
        assert_eq!(r.interpretation, [chain_text(&chain).unwrap().en()]);
        assert!(chain_text(&[]).is_none());
    }

    /// Under `--lang zh` the sweep's lines, check details, figure and version names read
    /// in Chinese, with no English sentence left, for the chain and for the grid.
    #[test]
    fn the_texts_and_names_read_in_chinese() {
        use crate::text::{has_chinese, Lang};
        let chain: Vec<Point> = [1.2, 1.05, 0.9, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
            .collect();
        let mut grid = Vec::new();
        for (k, copies) in [Copies::Memcpy, Copies::Kernels, Copies::None].into_iter().enumerate() {
            for (i, chain) in [1, 4].into_iter().enumerate() {
                grid.push(point(1024 << (2 * i), chain, copies, [0.8, 1.02, 1.3][k]));
            }
        }
        let mut lines = vec![
            t!("graph.sweep_same", count = 120usize),
            t!("graph.sweep_close", count = 120usize),
        ];
        let mut figures = Vec::new();
        for points in [&chain, &chain[..2], &chain[2..], &grid] {
            let mut r = Report::new("graph", "", "");
            interpret(points, &mut r);
            lines.extend(r.messages);
            figures.extend(r.figures.into_iter().map(|f| f.name));
        }
        assert_eq!(lines.len(), 2 + 3 + 3, "{lines:?}");
        let shape_names = names(&grid_shapes());
        let all = shape_names.iter().chain(&figures);
        Report::new("graph", "", "").assert_chinese(&lines, all.clone().map(String::as_str));
        // The holes are filled in Chinese too: no English word of a shape is left.
        for name in all {
            let zh = Text::label(name.clone()).render(Lang::Zh);
            assert!(has_chinese(&zh), "{name}: {zh}");
            assert!(!zh.contains("kernels") && !zh.contains("copies"), "{name}: {zh}");
        }
        let median = Text::label(format!("{}, median", shape_names[1])).render(Lang::Zh);
        assert_eq!(median, "CUDA 图：1K 个元素 x 每侧 1 个内核，memcpy 拷贝，中位数");
    }

    #[test]
    fn the_plot_marks_where_the_graph_starts_to_win() {
        let chain: Vec<Point> = [1.2, 0.9, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
            .collect();
        let Some(Plot::Lines { series, log_x, .. }) = plot(&chain) else { panic!("no plot") };
        assert!(log_x);
        assert_eq!(series.len(), 3);
        assert_eq!(series[0].points, [(1.0, 1.2), (2.0, 0.9), (4.0, 0.7)]);
        assert!(series[1].model && series[1].points == [(1.0, 1.0), (4.0, 1.0)]);
        assert!(series[2].marks && series[2].points == [(2.0, 0.9)]);
        let mut grid = Vec::new();
        for (chain, ratios) in [(1, [0.8, 1.1]), (4, [0.5, 0.9])] {
            for (i, r) in ratios.into_iter().enumerate() {
                grid.push(point(1024 << (2 * i), chain, Copies::Memcpy, r));
                grid.push(point(1024 << (2 * i), chain, Copies::None, r / 2.0));
            }
        }
        let Some(Plot::Lines { series, .. }) = plot(&grid) else { panic!("no plot") };
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1 kernel per side",
                "4 kernels per side",
                "break-even: graph = streams",
                "largest size up to which the graph wins (5%+)"
            ]
        );
        // Memcpy points only; one mark per line that wins somewhere.
        assert_eq!(series[0].points, [(1024.0, 0.8), (4096.0, 1.1)]);
        assert_eq!(series[3].points, [(1024.0, 0.8), (4096.0, 0.9)]);
        let svg = crate::lab::record::plot::svg(&plot(&grid).unwrap(), "test").unwrap();
        assert!(svg.contains("largest size up to which the graph wins (5%+)"));
        assert!(plot(&chain[..1]).is_none());
    }
}
