//! The plots' tests: lines, bars, the legend, markers and marks.
use super::*;
use crate::lab::record::picture::tests::texts;

fn save(name: &str, svg: &str) {
    // To look at them: STREAMLAB_PICTURES=dir cargo test -p streamlab --lib lab::plot
    if let Some(dir) = std::env::var_os("STREAMLAB_PICTURES") {
        std::fs::write(std::path::Path::new(&dir).join(name), svg).unwrap();
    }
}

#[test]
fn a_sweep_draws_measured_and_bound_on_log_axes() {
    let ks = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
    let measured = [5.01, 3.6, 3.1, 2.9, 2.95, 3.2, 3.9];
    let plot = Plot::Lines {
        title: "stream-sweep: time against K".into(),
        x_label: "streams K".into(),
        y_label: "time (ms)".into(),
        log_x: true,
        log_y: true,
        series: vec![
            Series {
                name: "measured".into(),
                points: ks.iter().copied().zip(measured).collect(),
                model: false,
                marks: false,
            },
            Series {
                name: "bound T(K)".into(),
                points: ks.iter().map(|k| (*k, 2.5 + 2.5 / k)).collect(),
                model: true,
                marks: false,
            },
        ],
    };
    let svg = svg(&plot, "NVIDIA H200, test").unwrap();
    save("sweep-test.svg", &svg);
    let t = texts(&svg);
    for want in
        ["stream-sweep: time against K", "measured", "bound T(K)", "streams K", "NVIDIA H200, test"]
    {
        assert!(t.iter().any(|x| x == want), "{want} missing in {t:?}");
    }
    // A marker per measured point, and the legend's.
    assert_eq!(svg.matches("<circle").count(), 7 + 1);
}

/// The y of the first `<text>` reading `want`.
fn text_y(svg: &str, want: &str) -> f64 {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let node =
        doc.descendants().find(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(want));
    node.and_then(|n| n.attribute("y")).unwrap_or_else(|| panic!("{want}")).parse().unwrap()
}

/// The legend covered data in two of the pictures of 2026-11-23 (a bar, the graph's
/// lines) and showed a dashed bound as a solid line: it now sits under the axes, each
/// entry drawn the way its series is.
#[test]
fn the_legend_sits_under_the_axes_and_draws_a_bound_dashed() {
    let plot = Plot::lines(
        "stream-sweep",
        "streams K",
        "ms",
        true,
        vec![
            Series::measured("measured", vec![(1.0, 4.0), (2.0, 2.7)]),
            Series::model("bound T(K)", vec![(1.0, 3.9), (2.0, 2.6)]),
            Series::marks("best K", vec![(2.0, 2.7)]),
        ],
    );
    let kinds: Vec<Swatch> = legend(&plot).into_iter().map(|(s, _)| s).collect();
    let first = Swatch::Line(PALETTE[0], Marker::Circle);
    assert_eq!(kinds, [first, Swatch::Dashed(PALETTE[1]), Swatch::Marks]);
    let svg = svg(&plot, "footer").unwrap();
    let axis = text_y(&svg, "streams K");
    for entry in ["measured", "bound T(K)", "best K"] {
        assert!(text_y(&svg, entry) > axis, "{entry} is above the x axis's label");
    }
    let bars = Plot::bars("b", "GB/s", vec![Bar::new("host to device", "pinned", 55.0)]);
    let svg = super::svg(&bars, "footer").unwrap();
    assert!(text_y(&svg, "pinned") > text_y(&svg, "host to device"), "under the axis");
}

#[test]
fn bars_are_grouped_and_labelled() {
    let bar =
        |group: &str, name: &str, value| Bar { group: group.into(), name: name.into(), value };
    let plot = Plot::Bars {
        title: "pinned vs pageable".into(),
        y_label: "GB/s".into(),
        bars: vec![
            bar("host to device", "pinned", 55.5),
            bar("host to device", "pageable", 10.3),
            bar("device to host", "pinned", 55.3),
            bar("device to host", "pageable", 19.7),
        ],
    };
    let svg = svg(&plot, "NVIDIA H200, test").unwrap();
    save("bars-test.svg", &svg);
    let t = texts(&svg);
    for want in ["host to device", "device to host", "pinned", "pageable", "55.5", "19.7"] {
        assert!(t.iter().any(|x| x == want), "{want} missing in {t:?}");
    }
}

/// A recorded run's footer also names the command: it wraps instead of running off.
#[test]
fn a_long_footer_wraps() {
    let plot = Plot::Bars { title: "t".into(), y_label: "GB/s".into(), bars: Vec::new() };
    let footer = "streamlab run stream-sweep --elements 16777216 --iters 100 --streams 64 on NVIDIA H200; recorded on NVIDIA H200 on 2026-11-23; command: streamlab run stream-sweep --timeline";
    let t = texts(&svg(&plot, footer).unwrap());
    let lines = wrapped(footer, fits(SIZE.0, FOOTER_SIZE));
    assert!(lines.len() >= 2, "{lines:?}");
    for line in &lines {
        assert!(t.iter().any(|x| x == line), "{line} missing in {t:?}");
    }
}

#[test]
fn ticks_are_round_numbers() {
    assert_eq!(ticks(0.0, 6.0, false, &[]), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(ticks(2.0, 6.3, true, &[]), [2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(ticks(0.8, 130.0, true, &[]), [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
    assert_eq!(ticks(0.8, 80.0, true, &[1.0, 8.0, 64.0]), [1.0, 8.0, 64.0]);
    assert!(ticks(0.0, 4.0, true, &[]).is_empty());
    assert_eq!(tick_text(&2.5), "2.5");
    assert_eq!(tick_text(&64.0), "64");
    assert_eq!(tick_text(&(0.1 + 0.2)), "0.3");
}

#[test]
fn plots_survive_json() {
    let plot = Plot::Bars {
        title: "t".into(),
        y_label: "GB/s".into(),
        bars: vec![Bar { group: "g".into(), name: "n".into(), value: 1.5 }],
    };
    let back: Plot = serde_json::from_value(serde_json::to_value(&plot).unwrap()).unwrap();
    assert_eq!(back, plot);
}

/// The filled polygons of `svg` with `corners` corners: (fill colour, leftmost x).
fn polygons(svg: &str, corners: usize) -> Vec<(String, i32)> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("polygon"))
        .filter_map(|n| {
            let xs: Vec<i32> = n
                .attribute("points")?
                .split_whitespace()
                .filter_map(|p| p.split(',').next()?.parse().ok())
                .collect();
            let (fill, left) = (n.attribute("fill")?, *xs.iter().min()?);
            (xs.len() == corners).then(|| (fill.to_owned(), left))
        })
        .collect()
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The graph's plot of 2026-11-23 hid a line and a mark: its 64 and 256 kernels' lines ran
/// together, and their marks at 1M covered each other. Each measured line now has a marker of
/// its own, and each mark its line's colour, moved aside where it would cover another.
#[test]
fn lines_that_run_together_and_their_marks_stay_apart() {
    let low = vec![(1024.0, 0.30), (1048576.0, 0.835)];
    let close = vec![(1024.0, 0.31), (1048576.0, 0.838)];
    let plot = Plot::lines(
        "graph",
        "elements per node",
        "graph time / streams time",
        true,
        vec![
            Series::measured("16 kernels per side", vec![(1024.0, 0.33), (1048576.0, 0.92)]),
            Series::measured("64 kernels per side", low.clone()),
            Series::measured("256 kernels per side", close.clone()),
            Series::model("break-even", vec![(1024.0, 1.0), (1048576.0, 1.0)]),
            Series::marks("wins", vec![low[1], close[1]]),
        ],
    );
    let kinds: Vec<Swatch> = legend(&plot).into_iter().map(|(s, _)| s).collect();
    let line = |i: usize, m| Swatch::Line(PALETTE[i], m);
    let (circle, square, diamond) = (Marker::Circle, Marker::Square, Marker::Diamond);
    let dashed = Swatch::Dashed(PALETTE[3]);
    assert_eq!(kinds, [line(0, circle), line(1, square), line(2, diamond), dashed, Swatch::Marks]);
    let svg = svg(&plot, "footer").unwrap();
    // Two triangles, one in each line's colour, side by side: neither covers the other.
    let triangles = polygons(&svg, 3);
    assert_eq!(triangles.len(), 2, "{triangles:?}");
    assert_eq!((&triangles[0].0, &triangles[1].0), (&hex(PALETTE[1]), &hex(PALETTE[2])));
    assert!(triangles[1].1 - triangles[0].1 >= MARK_SIZE, "{triangles:?}");
    // The third line's diamonds (4 corners): its two points and its legend's.
    let diamonds = polygons(&svg, 4).into_iter().filter(|(fill, _)| *fill == hex(PALETTE[2]));
    assert_eq!(diamonds.count(), 3);
    // Without the move the two marks would have covered each other.
    assert_eq!(spread(&[(640, 420), (641, 419), (300, 420)], MARK_SIZE), [0, MARK_SIZE + 2, 0]);
    assert_eq!(spread(&[(640, 420), (640, 420), (640, 420)], 9), [0, 11, 22]);
}

/// The first measured line keeps its filled circles: pictures with one line do not change.
#[test]
fn the_markers_go_round_from_filled_circles() {
    assert_eq!(Marker::nth(0), Marker::Circle);
    assert_eq!(Marker::nth(4), Marker::RingSquare);
    assert_eq!(Marker::nth(6), Marker::Circle);
}
