//! Plots for lessons that sweep something, drawn with plotters' SVG backend: lines against a
//! swept value (stream-sweep: time and bound against K, log scale; graph: time per iteration
//! against DAG size) and grouped bars (pinned-vs-pageable: bandwidth by direction).
//!
//! A lesson returns one from [`Lesson::plot`](crate::lab::Lesson::plot); the harness keeps it
//! in the report (`details.plot`, so a recorded run can draw it again) and writes it beside
//! the `--svg` picture as `<name>-plot.svg`.
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::lab::record::picture::{fits, legend_layout, wrapped};

/// One line of a line plot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// A bound or model rather than a measurement: drawn dashed, without markers.
    #[serde(default)]
    pub model: bool,
    /// Points to mark (where something starts or ends), not a line: drawn as big markers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub marks: bool,
}

/// One bar: its group on the x axis ("host to device"), its name within the group ("pinned").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    pub group: String,
    pub name: String,
    pub value: f64,
}

/// What a sweeping lesson wants drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "plot")]
pub enum Plot {
    Lines {
        title: String,
        x_label: String,
        y_label: String,
        log_x: bool,
        log_y: bool,
        series: Vec<Series>,
    },
    Bars {
        title: String,
        y_label: String,
        bars: Vec<Bar>,
    },
}

impl Series {
    /// A measured line: solid, a marker at each point.
    pub fn measured(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, model: false, marks: false }
    }

    /// A bound or model: dashed, without markers.
    pub fn model(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, model: true, marks: false }
    }

    /// Marked points, not joined by a line (a crossover, say).
    pub fn marks(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, model: false, marks: true }
    }
}

impl Bar {
    pub fn new(group: &str, name: &str, value: f64) -> Bar {
        Bar { group: group.into(), name: name.into(), value }
    }
}

impl Plot {
    /// Lines against a swept x (on a log axis if `log_x`), on a linear y axis.
    pub fn lines(
        title: &str,
        x_label: &str,
        y_label: &str,
        log_x: bool,
        series: Vec<Series>,
    ) -> Plot {
        let (title, x_label, y_label) = (title.into(), x_label.into(), y_label.into());
        Plot::Lines { title, x_label, y_label, log_x, log_y: false, series }
    }

    /// Grouped bars, in the order of `bars` (groups and names as they first appear).
    pub fn bars(title: &str, y_label: &str, bars: Vec<Bar>) -> Plot {
        Plot::Bars { title: title.into(), y_label: y_label.into(), bars }
    }
}

const SIZE: (u32, u32) = (900, 520);
/// The footer's font size.
const FOOTER_SIZE: u32 = 14;
const PALETTE: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing the plot: {e}")
}

/// The span of `values`, widened a little (and kept positive for a log axis).
fn range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        return (if log { 1.0 } else { 0.0 }, 1.0);
    }
    if log {
        (lo / 1.25, hi * 1.25)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
        ((lo - pad).min(if lo >= 0.0 { 0.0 } else { lo - pad }), hi + pad)
    }
}

/// `plot` as SVG text, `footer` (which GPU and run) under it.
pub fn svg(plot: &Plot, footer: &str) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        // The footer wraps (a recorded run's names its command too); the plot keeps its size.
        let footer = wrapped(footer, fits(SIZE.0, FOOTER_SIZE));
        let footer_height = 10 + 18 * footer.len().max(1) as u32;
        let (area, bottom) = root.split_vertically(SIZE.1 - footer_height);
        let style =
            TextStyle::from(("sans-serif", FOOTER_SIZE).into_font()).color(&RGBColor(80, 80, 80));
        for (i, line) in footer.iter().enumerate() {
            bottom.draw_text(line, &style, (14, 6 + 18 * i as i32)).map_err(err)?;
        }
        // The legend goes under the axes, never over the data.
        let entries = legend(plot);
        let places = legend_layout(entries.iter().map(|e| e.1.as_str()), 32, (LEGEND_LEFT, SIZE.0));
        let legend_height = 12 + 24 * (places.last().map_or(0, |p| p.1) as u32 + 1);
        let (area, legend_area) = area.split_vertically(area.dim_in_pixel().1 - legend_height);
        draw_legend(&legend_area, &entries, &places)?;
        match plot {
            Plot::Lines { title, x_label, y_label, log_x, log_y, series } => {
                lines(&area, title, x_label, y_label, (*log_x, *log_y), series)?
            }
            Plot::Bars { title, y_label, bars } => grouped_bars(&area, title, y_label, bars)?,
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// How a legend entry shows its series or bars.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Swatch {
    /// A measured line with its markers.
    Line(RGBColor),
    /// A bound or model: dashed, as it is drawn.
    Dashed(RGBColor),
    /// Marked points.
    Marks,
    Bar(RGBColor),
}

/// The legend's entries: each series (or each bar name) in its colour and its style.
fn legend(plot: &Plot) -> Vec<(Swatch, String)> {
    match plot {
        Plot::Lines { series, .. } => series
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let colour = PALETTE[i % PALETTE.len()];
                let swatch = match (s.marks, s.model) {
                    (true, _) => Swatch::Marks,
                    (false, true) => Swatch::Dashed(colour),
                    (false, false) => Swatch::Line(colour),
                };
                (swatch, s.name.clone())
            })
            .collect(),
        Plot::Bars { bars, .. } => {
            let mut names: Vec<&str> = Vec::new();
            for b in bars {
                if !names.contains(&b.name.as_str()) {
                    names.push(&b.name);
                }
            }
            let bar = |(n, name): (usize, &&str)| {
                (Swatch::Bar(PALETTE[n % PALETTE.len()]), name.to_string())
            };
            names.iter().enumerate().map(bar).collect()
        }
    }
}

/// Where the legend starts: under the plot's y axis.
const LEGEND_LEFT: i32 = 84;

fn draw_legend(
    area: &Area<'_>,
    entries: &[(Swatch, String)],
    places: &[(i32, i32)],
) -> Result<(), String> {
    let font = TextStyle::from(("sans-serif", 14).into_font()).color(&BLACK).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Left,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    for ((swatch, words), &(x, line)) in entries.iter().zip(places) {
        let y = 14 + 24 * line;
        match *swatch {
            Swatch::Line(c) => {
                area.draw(&PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(2)))
                    .map_err(err)?;
                area.draw(&Circle::new((x + 12, y), 4, c.filled())).map_err(err)?;
            }
            Swatch::Dashed(c) => {
                for dash in [x, x + 10, x + 20] {
                    let piece = PathElement::new(vec![(dash, y), (dash + 5, y)], c.stroke_width(2));
                    area.draw(&piece).map_err(err)?;
                }
            }
            Swatch::Marks => {
                area.draw(&TriangleMarker::new((x + 12, y), 7, BLACK.filled())).map_err(err)?
            }
            Swatch::Bar(c) => area
                .draw(&Rectangle::new([(x + 5, y - 7), (x + 19, y + 7)], c.filled()))
                .map_err(err)?,
        }
        area.draw_text(words, &font, (x + 32, y)).map_err(err)?;
    }
    Ok(())
}

/// Tick values for an axis over `lo..hi`: 1-2-5 steps (per decade on a log axis, with
/// every multiple where that gives fewer than three), or `exact` (a log x axis ticks at the
/// swept values themselves when there are few of them).
fn ticks(lo: f64, hi: f64, log: bool, exact: &[f64]) -> Vec<f64> {
    if log && (2..=12).contains(&exact.len()) {
        return exact.to_vec();
    }
    // No decades down to 0: the loop below would run from 10^i32::MIN.
    if log && lo <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    if log {
        let first = lo.log10().floor() as i32;
        let last = hi.log10().ceil() as i32;
        for multiples in [&[1.0, 2.0, 5.0][..], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]] {
            out = (first..=last)
                .flat_map(|d| multiples.iter().map(move |m| m * 10f64.powi(d)))
                .filter(|v| *v >= lo && *v <= hi)
                .collect();
            if out.len() >= 3 {
                break;
            }
        }
    } else {
        let raw = (hi - lo) / 6.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step =
            [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(raw);
        let mut v = (lo / step).ceil() * step;
        while v <= hi + step * 1e-9 {
            out.push(v);
            v += step;
        }
    }
    out
}

/// A tick's text: at most six significant digits, no trailing zeros.
fn tick_text(v: &f64) -> String {
    if *v == 0.0 {
        return "0".into();
    }
    let digits = (5 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let text = format!("{v:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

fn lines(
    area: &Area<'_>,
    title: &str,
    x_label: &str,
    y_label: &str,
    (log_x, log_y): (bool, bool),
    series: &[Series],
) -> Result<(), String> {
    let xs = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), log_x);
    let ys = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), log_y);
    let mut swept: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    swept.sort_by(f64::total_cmp);
    swept.dedup();
    // Linear axes tick where plotters puts round numbers; log axes where `ticks` says.
    // Built only for an axis that is log: a linear axis's range may start at 0.
    let log_x_axis = || (xs.0..xs.1).log_scale().with_key_points(ticks(xs.0, xs.1, true, &swept));
    let log_y_axis = || (ys.0..ys.1).log_scale().with_key_points(ticks(ys.0, ys.1, true, &[]));
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(70);
    // Four axis kinds: plotters types a chart by its coordinates.
    macro_rules! draw {
        ($x:expr, $y:expr) => {{
            let mut chart = builder.build_cartesian_2d($x, $y).map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .x_label_formatter(&tick_text)
                .y_label_formatter(&tick_text)
                .light_line_style(TRANSPARENT)
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(err)?;
            for (i, s) in series.iter().enumerate() {
                let colour = PALETTE[i % PALETTE.len()];
                let style = colour.stroke_width(if s.model { 1 } else { 2 });
                let points: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| (!log_x || p.0 > 0.0) && (!log_y || p.1 > 0.0))
                    .collect();
                if s.marks {
                    // Black, whatever its place: marks sit on the other lines.
                    let colour = BLACK;
                    let mark = |p: &(f64, f64)| TriangleMarker::new(*p, 9, colour.filled());
                    chart.draw_series(points.iter().map(mark)).map_err(err)?;
                    continue;
                }
                let drawn = if s.model {
                    chart.draw_series(DashedLineSeries::new(points.clone(), 6, 4, style))
                } else {
                    chart.draw_series(LineSeries::new(points.clone(), style))
                };
                drawn.map_err(err)?;
                if !s.model {
                    chart
                        .draw_series(points.iter().map(|p| Circle::new(*p, 4, colour.filled())))
                        .map_err(err)?;
                }
            }
        }};
    }
    match (log_x, log_y) {
        (false, false) => draw!(xs.0..xs.1, ys.0..ys.1),
        (true, false) => draw!(log_x_axis(), ys.0..ys.1),
        (false, true) => draw!(xs.0..xs.1, log_y_axis()),
        (true, true) => draw!(log_x_axis(), log_y_axis()),
    }
    Ok(())
}

fn grouped_bars(area: &Area<'_>, title: &str, y_label: &str, bars: &[Bar]) -> Result<(), String> {
    let mut groups: Vec<&str> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for b in bars {
        if !groups.contains(&b.group.as_str()) {
            groups.push(&b.group);
        }
        if !names.contains(&b.name.as_str()) {
            names.push(&b.name);
        }
    }
    let top = range(bars.iter().map(|b| b.value), false).1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups.len() as f64, 0f64..top)
        .map_err(err)?;
    let group_label = |x: &f64| {
        let i = x.floor() as usize;
        if (x - i as f64 - 0.5).abs() < 1e-9 {
            groups.get(i).map(|g| g.to_string()).unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&group_label)
        .y_desc(y_label)
        .light_line_style(TRANSPARENT)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let width = 0.8 / names.len().max(1) as f64;
    for (n, name) in names.iter().enumerate() {
        let colour = PALETTE[n % PALETTE.len()];
        let rects: Vec<Rectangle<(f64, f64)>> = bars
            .iter()
            .filter(|b| b.name == *name)
            .filter_map(|b| {
                let g = groups.iter().position(|g| *g == b.group)? as f64;
                let x0 = g + 0.1 + n as f64 * width;
                Some(Rectangle::new([(x0, 0.0), (x0 + width * 0.92, b.value)], colour.filled()))
            })
            .collect();
        chart.draw_series(rects).map_err(err)?;
        let values = bars.iter().filter(|b| b.name == *name).filter_map(|b| {
            let g = groups.iter().position(|g| *g == b.group)? as f64;
            let x = g + 0.1 + (n as f64 + 0.46) * width;
            Some(Text::new(
                format!("{:.1}", b.value),
                (x, b.value),
                TextStyle::from(("sans-serif", 13).into_font()).pos(
                    plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Bottom,
                    ),
                ),
            ))
        });
        chart.draw_series(values).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
        for want in [
            "stream-sweep: time against K",
            "measured",
            "bound T(K)",
            "streams K",
            "NVIDIA H200, test",
        ] {
            assert!(t.iter().any(|x| x == want), "{want} missing in {t:?}");
        }
        // A marker per measured point, and the legend's.
        assert_eq!(svg.matches("<circle").count(), 7 + 1);
    }

    /// The y of the first `<text>` reading `want`.
    fn text_y(svg: &str, want: &str) -> f64 {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let node = doc
            .descendants()
            .find(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(want));
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
        assert_eq!(kinds, [Swatch::Line(PALETTE[0]), Swatch::Dashed(PALETTE[1]), Swatch::Marks]);
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
}
