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

/// The marker of a measured line: a line's place among the measured ones picks it, so that
/// lines that run together (the graph lesson's 64 and 256 kernels per side) stay apart where
/// their markers do. The hollow ones are larger: one drawn over a filled one leaves it seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Circle,
    Square,
    Diamond,
    RingCircle,
    RingSquare,
    RingDiamond,
}

impl Marker {
    /// The marker of the `n`th measured line (0 is the first).
    fn nth(n: usize) -> Marker {
        use Marker::*;
        [Circle, Square, Diamond, RingCircle, RingSquare, RingDiamond][n % 6]
    }
}

/// Draws `marker` in `colour` at each of `points` on `$chart`; the first line's circles are
/// drawn as they always were.
macro_rules! draw_markers {
    ($chart:expr, $points:expr, $marker:expr, $colour:expr) => {{
        let (points, colour): (&[(f64, f64)], RGBColor) = ($points, $colour);
        let (fill, ring) = (colour.filled(), colour.stroke_width(2));
        let at = |p: &(f64, f64)| EmptyElement::at(*p);
        match $marker {
            Marker::Circle => {
                $chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, fill))).map(drop)
            }
            Marker::Square => $chart
                .draw_series(
                    points.iter().map(|p| at(p) + Rectangle::new([(-4, -4), (4, 4)], fill)),
                )
                .map(drop),
            Marker::Diamond => $chart
                .draw_series(points.iter().map(|p| at(p) + Polygon::new(diamond(5), fill)))
                .map(drop),
            Marker::RingCircle => $chart
                .draw_series(points.iter().map(|p| at(p) + Circle::new((0, 0), 6, ring)))
                .map(drop),
            Marker::RingSquare => $chart
                .draw_series(points.iter().map(|p| at(p) + PathElement::new(ring_square(7), ring)))
                .map(drop),
            Marker::RingDiamond => $chart
                .draw_series(points.iter().map(|p| at(p) + PathElement::new(ring_diamond(8), ring)))
                .map(drop),
        }
        .map_err(err)
    }};
}

/// A diamond's corners, `r` pixels from its centre.
fn diamond(r: i32) -> Vec<(i32, i32)> {
    vec![(0, -r), (r, 0), (0, r), (-r, 0)]
}

/// A diamond's outline, closed.
fn ring_diamond(r: i32) -> Vec<(i32, i32)> {
    let mut corners = diamond(r);
    corners.push((0, -r));
    corners
}

/// A square's outline, closed, `r` pixels from its centre to a side (an SVG rectangle's outline
/// would be drawn 1 pixel wide, whatever the style says).
fn ring_square(r: i32) -> Vec<(i32, i32)> {
    vec![(-r, -r), (r, -r), (r, r), (-r, r), (-r, -r)]
}

/// A triangle marker's outline, as plotters draws the filled one of `size` at (`dx`, 0).
fn triangle_outline(dx: i32, size: i32) -> Vec<(i32, i32)> {
    let corner = |deg: f64| {
        let rad = deg.to_radians();
        (
            (rad.cos() * f64::from(size)).ceil() as i32 + dx,
            (rad.sin() * f64::from(size)).ceil() as i32,
        )
    };
    vec![corner(-90.0), corner(-210.0), corner(-330.0), corner(-90.0)]
}

/// How far right to move each of `marks` (their pixels, in order), so that none covers one
/// drawn before it: a mark within `size` of one already placed moves right by a mark's width
/// until it is clear.
fn spread(marks: &[(i32, i32)], size: i32) -> Vec<i32> {
    let mut placed: Vec<(i32, i32)> = Vec::new();
    marks
        .iter()
        .map(|&(x, y)| {
            let mut dx = 0;
            while placed
                .iter()
                .any(|&(px, py)| (px - (x + dx)).abs() < size && (py - y).abs() < size)
            {
                dx += size + 2;
            }
            placed.push((x + dx, y));
            dx
        })
        .collect()
}

/// How a legend entry shows its series or bars.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Swatch {
    /// A measured line with its markers.
    Line(RGBColor, Marker),
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
                    (false, false) => Swatch::Line(colour, Marker::nth(measured_before(series, i))),
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
            Swatch::Line(c, marker) => {
                area.draw(&PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(2)))
                    .map_err(err)?;
                let centre = EmptyElement::at((x + 12, y));
                let (fill, ring) = (c.filled(), c.stroke_width(2));
                match marker {
                    Marker::Circle => area.draw(&Circle::new((x + 12, y), 4, fill)),
                    Marker::Square => {
                        area.draw(&(centre + Rectangle::new([(-4, -4), (4, 4)], fill)))
                    }
                    Marker::Diamond => area.draw(&(centre + Polygon::new(diamond(5), fill))),
                    Marker::RingCircle => area.draw(&(centre + Circle::new((0, 0), 6, ring))),
                    Marker::RingSquare => {
                        area.draw(&(centre + PathElement::new(ring_square(7), ring)))
                    }
                    Marker::RingDiamond => {
                        area.draw(&(centre + PathElement::new(ring_diamond(8), ring)))
                    }
                }
                .map_err(err)?;
            }
            Swatch::Dashed(c) => {
                for dash in [x, x + 10, x + 20] {
                    let piece = PathElement::new(vec![(dash, y), (dash + 5, y)], c.stroke_width(2));
                    area.draw(&piece).map_err(err)?;
                }
            }
            // Marks take the colour of the line they sit on: the swatch is the outline alone.
            Swatch::Marks => area
                .draw(
                    &(EmptyElement::at((x + 12, y))
                        + PathElement::new(triangle_outline(0, 7), BLACK.stroke_width(1))),
                )
                .map_err(err)?,
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
                    // Each mark in the colour of the measured line it sits on (black if none),
                    // outlined in black; marks that would cover each other are moved apart.
                    let pixels: Vec<(i32, i32)> =
                        points.iter().map(|p| chart.backend_coord(p)).collect();
                    let moved = spread(&pixels, MARK_SIZE);
                    for (p, dx) in points.iter().zip(moved) {
                        let fill =
                            line_of(series, *p).map_or(BLACK, |j| PALETTE[j % PALETTE.len()]);
                        let mark = EmptyElement::at(*p)
                            + TriangleMarker::new((dx, 0), MARK_SIZE, fill.filled())
                            + PathElement::new(
                                triangle_outline(dx, MARK_SIZE),
                                BLACK.stroke_width(1),
                            );
                        chart.draw_series(std::iter::once(mark)).map_err(err)?;
                    }
                    continue;
                }
                let drawn = if s.model {
                    chart.draw_series(DashedLineSeries::new(points.clone(), 6, 4, style))
                } else {
                    chart.draw_series(LineSeries::new(points.clone(), style))
                };
                drawn.map_err(err)?;
                if !s.model {
                    let marker = Marker::nth(measured_before(series, i));
                    draw_markers!(chart, &points, marker, colour)?;
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

/// A mark's size in pixels (plotters' triangle marker: centre to corner).
const MARK_SIZE: i32 = 9;

/// How many measured lines (neither a bound nor marks) come before series `i`.
fn measured_before(series: &[Series], i: usize) -> usize {
    series[..i].iter().filter(|s| !s.model && !s.marks).count()
}

/// The index of the measured line that has point `p`, if one has.
fn line_of(series: &[Series], p: (f64, f64)) -> Option<usize> {
    series.iter().position(|s| !s.model && !s.marks && s.points.contains(&p))
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

// The tests, in a file of their own to keep this one short; a child module still, so that
// they see the private drawing helpers.
#[cfg(test)]
#[path = "plot_tests.rs"]
mod tests;
