//! `--svg FILE.svg`: the recorded versions as a picture for documents. One panel per version
//! (the version without the technique above the version with it) on the same time scale,
//! one row per stream (per device where there are several), and the host's row where the
//! lesson's story is the host's; each operation a bar coloured by its kind, a legend, a
//! time axis in ms; the title carries the medians, the speed-up and the lesson's bound, the
//! footer the one command that made the run, on which GPU and when. What each panel holds
//! is decided in [`crate::lab::record::drawing`]; this file renders it.
//!
//! Drawn with plotters' SVG backend: text stays SVG text (no font files are read), rows and
//! bars are plain rectangles.
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::lab::record::drawing::{repeats, short_name, Drawing, Key, Origin, Panel};
use crate::lab::record::report::Report;
use crate::lab::record::span::{Recording, Work};
use crate::t;
use crate::text::{has_chinese, label, Lang, Text};

/// The words around a picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Caption {
    pub title: String,
    pub subtitle: String,
    /// The drawing's note, under the subtitle (empty for none).
    pub note: String,
    pub footer: String,
}

const WIDTH: u32 = 1100;
const ROW: u32 = 26;
const PANEL: u32 = 74;
const LEGEND: u32 = 34;
/// Font sizes and line heights of the title, the subtitle and the footer.
const TITLE_FONT: (u32, u32) = (20, 24);
const SUBTITLE_FONT: (u32, u32) = (15, 19);
const FOOTER_FONT: (u32, u32) = (14, 18);

/// How many characters of text at `size` fit on a line across a picture `width` pixels wide,
/// 14 px margins either side. The SVG backend writes a size-20 font as 16.1 px, about 8.6 px a
/// character in the lessons' titles; 0.48 of the size leaves a margin for wide letters.
pub fn fits(width: u32, size: u32) -> usize {
    (width.saturating_sub(28) as f64 / (size as f64 * 0.48)) as usize
}

/// How wide `text` is, in Latin characters: a Chinese character or full-width mark takes
/// about two.
pub fn width(text: &str) -> usize {
    let mut buf = [0u8; 4];
    text.chars().map(|c| if has_chinese(c.encode_utf8(&mut buf)) { 2 } else { 1 }).sum()
}

/// `text` in lines of at most `width` characters ([`width()`]), broken after ", " or "; "
/// (or Chinese "，" and "；") where it can be (a caption's figures stay whole), else at
/// spaces.
pub fn wrapped(text: &str, line_width: usize) -> Vec<String> {
    let (mut pieces, mut start) = (Vec::new(), 0);
    for (i, c) in text.char_indices() {
        let after = i + c.len_utf8();
        let breaks = match c {
            ',' | ';' => text[after..].starts_with(' '),
            '，' | '；' => true,
            _ => false,
        };
        if breaks {
            let end = if c.is_ascii() { after + 1 } else { after };
            pieces.push(&text[start..end]);
            start = end;
        }
    }
    pieces.push(&text[start..]);
    let mut lines: Vec<String> = Vec::new();
    for piece in pieces.into_iter().flat_map(|p| {
        // A piece too long on its own goes word by word.
        if width(p) > line_width {
            p.split_inclusive(' ').collect::<Vec<_>>()
        } else {
            vec![p]
        }
    }) {
        match lines.last_mut() {
            Some(line) if width(line) + width(piece.trim_end()) <= line_width => {
                line.push_str(piece)
            }
            _ => lines.push(piece.to_string()),
        }
    }
    lines.iter().map(|l| l.trim_end().to_string()).filter(|l| !l.is_empty()).collect()
}

/// The colour of a kind of work (the legend and every bar).
pub fn colour(kind: Work) -> RGBColor {
    match kind {
        Work::CopyToDevice => RGBColor(0x1f, 0x77, 0xb4),
        Work::Kernel => RGBColor(0x2c, 0xa0, 0x2c),
        Work::CopyToHost => RGBColor(0xff, 0x7f, 0x0e),
        Work::CopyOnDevice => RGBColor(0x94, 0x67, 0xbd),
        Work::CopyPeer => RGBColor(0xe3, 0x77, 0xc2),
        Work::Memset => RGBColor(0x7f, 0x7f, 0x7f),
        Work::HostFn => RGBColor(0xd6, 0x27, 0x28),
        Work::Graph => RGBColor(0xbc, 0xbd, 0x22),
        Work::Collective => RGBColor(0x17, 0xbe, 0xcf),
    }
}

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing the SVG: {e}")
}

/// The colour of a bar of kind `key`.
pub fn key_colour(key: Key) -> RGBColor {
    match key {
        Key::Work(w) => colour(w),
        Key::Kernel(i) => KERNEL_COLOURS[i % KERNEL_COLOURS.len()],
        Key::HostCall => RGBColor(0x4d, 0x4d, 0x4d),
        Key::HostWait => RGBColor(0xcf, 0xcf, 0xcf),
        Key::Range => RANGE_COLOUR,
    }
}

/// The kernels a drawing tells apart, in order: the first in the kernel's usual green.
const KERNEL_COLOURS: [RGBColor; 4] = [
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];
/// An NVTX range's bar: sand, apart from every kind of work, dark ink readable on it.
const RANGE_COLOUR: RGBColor = RGBColor(0xe6, 0xd3, 0xa3);
/// The host row's shading of the timed window.
const TIMED_SHADE: RGBColor = RGBColor(0xff, 0xec, 0xb3);
/// How much of its colour an untimed bar keeps.
const FADED: f64 = 0.3;

/// A bar's text as it is drawn: its pixels (from, to, as the bar is drawn), its text's width in
/// pixels (0 for none),
/// and whether its text may run past its end, over pale bars and empty row (a timed wait's
/// call: the wait a version measures is named even when it is too short for its name).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Label {
    pub from: i32,
    pub to: i32,
    pub width: i32,
    pub overflows: bool,
}

/// Where each bar's text of a row starts, if it is written: on its bar, after the text before
/// it, where it fits there; else, where it may overflow, as far right as no dark bar (one
/// not in `pale`) lies under it. A text that fits nowhere is left out.
pub(crate) fn label_starts(labels: &[Label], pale: &[bool]) -> Vec<Option<i32>> {
    let mut free_from = i32::MIN;
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if l.width == 0 {
                return None;
            }
            let x = (l.from + 4).max(free_from);
            let end = x + l.width;
            let fits = end + 4 < l.to;
            // Every later bar under the text must be pale.
            let covers_only_pale = labels[i + 1..]
                .iter()
                .zip(&pale[i + 1..])
                .all(|(b, &pale)| pale || b.from >= end + 4 || b.to <= x);
            let written = fits || (l.overflows && x < l.to && covers_only_pale);
            written.then(|| {
                free_from = end + 8;
                x
            })
        })
        .collect()
}

/// The median of a version, read back from the report's figures.
fn median(report: &Report, version: &str) -> Option<f64> {
    report.value(&format!("{version}, median"))
}

/// The command that runs `report`'s lesson with the flags it was given: only the lesson's
/// own flags (the harness lists them; derived parameters such as bytes are no flags), a
/// switch by its name alone, and nothing for a flag left at "none".
pub fn command_line(report: &Report) -> String {
    let flags: Vec<&str> = report
        .details
        .get("flags")
        .and_then(|f| f.as_array())
        .map(|f| f.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let mut line = format!("streamlab run {}", report.lesson);
    for (k, v) in report.parameters.iter().filter(|(k, _)| flags.contains(&k.as_str())) {
        let flag = format!("--{}", k.replace('_', "-"));
        match v {
            serde_json::Value::Null | serde_json::Value::Bool(false) => continue,
            serde_json::Value::Bool(true) => line.push_str(&format!(" {flag}")),
            serde_json::Value::String(s) if !s.contains(' ') => {
                line.push_str(&format!(" {flag} {s}"))
            }
            v => line.push_str(&format!(" {flag} {v}")),
        }
    }
    line
}

/// A caption from a report, in `lang`: "overlap on NVIDIA H200: one stream 5.010 ms, 8
/// streams 2.901 ms (medians), speed-up 1.73x; bound T(K) 2.884 ms", the recorder, the
/// drawing's note, and the one command that made the run with where and when (`origin`).
/// Names (versions, the bound, the note) are the catalogs' labels, so Chinese where
/// [`crate::text::zh::LABELS`] has them.
pub fn caption(
    report: &Report,
    recordings: &[Recording],
    drawing: &Drawing,
    origin: &Origin,
    lang: Lang,
) -> Caption {
    let name = |english: &str| label(lang, english);
    let [comma, colon, semicolon] = match lang {
        Lang::En => [", ", ": ", "; "],
        Lang::Zh => ["，", "：", "；"],
    };
    let (lesson, device) = (report.lesson.clone(), report.device.clone());
    let mut title = t!("picture.title", lesson, device).render(lang);
    if let Some((what, _)) = drawing.measure {
        title.push_str(&format!("{comma}{}", name(what)));
    }
    let times: Vec<String> = recordings
        .iter()
        .filter_map(|r| {
            let version = name(short_name(drawing, &r.version));
            median(report, &r.version).map(|m| format!("{version} {m:.3} ms"))
        })
        .collect();
    if !times.is_empty() {
        let times = times.join(comma);
        let medians = match repeats(drawing, report) {
            Some((_, what)) => t!("picture.medians_per", times, what = Text::label(what)),
            None => t!("picture.medians", times),
        };
        title.push_str(&format!("{colon}{}", medians.render(lang)));
    }
    if let Some(s) = report.value("speed-up (first / second)") {
        let x = format!("{s:.2}");
        title.push_str(&format!("{comma}{}", t!("picture.speedup", x).render(lang)));
    }
    if let Some(bound) =
        report.figures.iter().find(|f| f.name.to_lowercase().starts_with("bound") && f.unit == "ms")
    {
        title.push_str(&format!("{semicolon}{} {:.3} ms", name(&bound.name), bound.value));
    }
    let subtitle = recordings
        .first()
        .map(|r| t!("picture.subtitle", source = r.source.describe_text()).render(lang))
        .unwrap_or_default();
    Caption {
        title,
        subtitle,
        note: if drawing.note.is_empty() { String::new() } else { name(drawing.note) },
        footer: format!("{}{semicolon}{}", origin.command, origin.provenance.render(lang)),
    }
}

/// `lines` of text at `(size, line height)` from `y` down, at the left margin.
fn write_lines(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    lines: &[String],
    (size, step): (u32, u32),
    colour: &RGBColor,
    y: i32,
) -> Result<(), String> {
    let style = TextStyle::from(("sans-serif", size).into_font()).color(colour);
    for (i, line) in lines.iter().enumerate() {
        area.draw_text(line, &style, (14, y + (i as u32 * step) as i32)).map_err(err)?;
    }
    Ok(())
}

/// One legend entry: its swatch and its words.
enum Swatch {
    Key(Key),
    Faded,
    Timed,
}

/// The legend's entries for `panels`, in `lang`: each kind of bar drawn, then the faded bars
/// and the timed window where there are any.
fn legend(panels: &[Panel], drawing: &Drawing, lang: Lang) -> Vec<(Swatch, String)> {
    let present = |k: Key| panels.iter().any(|p| p.keys().any(|x| x == k));
    let kernels = (0..drawing.kernels.len()).map(Key::Kernel);
    let keys = Work::ALL.into_iter().map(Key::Work).chain(kernels);
    let mut out: Vec<(Swatch, String)> = keys
        .chain([Key::Range, Key::HostCall, Key::HostWait])
        .filter(|k| present(*k))
        .map(|k| (Swatch::Key(k), label(lang, &k.describe(drawing))))
        .collect();
    if panels.iter().any(|p| p.timed.is_some()) {
        out.push((Swatch::Timed, t!("picture.shaded").render(lang)));
    }
    if panels.iter().any(Panel::has_untimed) {
        out.push((Swatch::Faded, t!("picture.faded").render(lang)));
    }
    out
}

/// Where each legend entry goes, given its words after a swatch `swatch` pixels wide: left
/// to right from `left`, in lines across a picture `picture_width` pixels wide: (x, line).
/// The plots lay theirs out the same way.
pub fn legend_layout<'a>(
    words: impl IntoIterator<Item = &'a str>,
    swatch: i32,
    (left, picture_width): (i32, u32),
) -> Vec<(i32, i32)> {
    let (mut x, mut line, mut out) = (left, 0, Vec::new());
    for words in words {
        let entry = swatch + width(words) as i32 * 7 + 24;
        if x > left && x + entry > picture_width as i32 - 14 {
            (x, line) = (left, line + 1);
        }
        out.push((x, line));
        x += entry;
    }
    out
}

/// The timeline picture: the caption, one panel per version (same time scale), the
/// legend, the footer, as SVG text, its own words in English.
pub fn timeline_svg(
    caption: &Caption,
    panels: &[Panel],
    drawing: &Drawing,
) -> Result<String, String> {
    timeline_svg_in(caption, panels, drawing, None, Lang::En)
}

/// [`timeline_svg`] over the time `axis` (from, to, in ms) where one is given: bars are cut
/// at its ends, those outside it left out. Without one, from 0 to the last bar's end.
pub fn timeline_svg_over(
    caption: &Caption,
    panels: &[Panel],
    drawing: &Drawing,
    axis: Option<(f64, f64)>,
) -> Result<String, String> {
    timeline_svg_in(caption, panels, drawing, axis, Lang::En)
}

/// [`timeline_svg_over`] with the picture's own words (the legend, the axis, the panels'
/// headings and the rows' names where the catalogs' labels have them) in `lang`; the caption
/// comes in the language it was made in ([`caption`]).
pub fn timeline_svg_in(
    caption: &Caption,
    panels: &[Panel],
    drawing: &Drawing,
    axis: Option<(f64, f64)>,
    lang: Lang,
) -> Result<String, String> {
    let last = || panels.iter().map(Panel::end_ms).fold(0.0, f64::max);
    let (x_min, x_end) = axis.unwrap_or_else(|| (0.0, last()));
    let x_max = x_min + (x_end - x_min).max(1e-3) * 1.02;
    let cut = |start: f64, end: f64| match axis {
        Some(_) if end < x_min || start > x_max => None,
        Some(_) => Some((start.max(x_min), end.min(x_max))),
        None => Some((start, end)),
    };
    let row_names: Vec<Vec<String>> =
        panels.iter().map(|p| p.rows.iter().map(|r| label(lang, &r.name)).collect()).collect();
    // The widest row name, about 8 pixels a character.
    let label_width = row_names
        .iter()
        .flat_map(|names| names.iter().map(|name| width(name) as u32 * 8 + 40))
        .max()
        .unwrap_or(80)
        .clamp(80, 440);
    let heights: Vec<u32> =
        panels.iter().map(|p| PANEL + ROW * p.rows.len().max(1) as u32).collect();
    let [title, subtitle, note, footer] = [
        (&caption.title, TITLE_FONT),
        (&caption.subtitle, SUBTITLE_FONT),
        (&caption.note, SUBTITLE_FONT),
        (&caption.footer, FOOTER_FONT),
    ]
    // A line break in a caption starts a line of its own.
    .map(|(text, (size, _))| {
        text.lines().flat_map(|l| wrapped(l, fits(WIDTH, size))).collect::<Vec<String>>()
    });
    let entries = legend(panels, drawing, lang);
    let places = legend_layout(entries.iter().map(|e| e.1.as_str()), 22, (14, WIDTH));
    let legend_height = LEGEND + 24 * places.last().map_or(0, |p| p.1) as u32;
    let lines = |l: &[String], (_, step): (u32, u32)| l.len().max(1) as u32 * step;
    let top = 10 + lines(&title, TITLE_FONT) + 4;
    let note_top = top + lines(&subtitle, SUBTITLE_FONT);
    let title_height = note_top + note.len() as u32 * SUBTITLE_FONT.1 + 7;
    let footer_height = 4 + lines(&footer, FOOTER_FONT) + 2;
    let height = title_height + heights.iter().sum::<u32>() + legend_height + footer_height;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let font = |size: u32| TextStyle::from(("sans-serif", size).into_font()).color(&BLACK);
        let grey = RGBColor(80, 80, 80);
        write_lines(&root, &title, TITLE_FONT, &BLACK, 10)?;
        write_lines(&root, &subtitle, SUBTITLE_FONT, &grey, top as i32)?;
        write_lines(&root, &note, SUBTITLE_FONT, &grey, note_top as i32)?;
        let (_, mut rest) = root.split_vertically(title_height);
        let axis_words = t!("picture.axis").render(lang);
        for ((p, h), names) in panels.iter().zip(&heights).zip(&row_names) {
            let (area, below) = rest.split_vertically(*h);
            let n = p.rows.len().max(1) as f64;
            let mut chart = ChartBuilder::on(&area)
                .caption(label(lang, &p.heading), ("sans-serif", 17))
                .margin_left(8)
                .margin_right(28)
                .margin_top(6)
                .x_label_area_size(36)
                .y_label_area_size(label_width)
                .build_cartesian_2d(x_min..x_max, 0f64..n)
                .map_err(err)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .light_line_style(TRANSPARENT)
                .y_labels(0)
                .x_desc(axis_words.as_str())
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(err)?;
            // The timed run, shaded behind every row.
            if let Some((from, to)) = p.timed {
                let (x0, top) = chart.backend_coord(&(from, n));
                let (x1, bottom) = chart.backend_coord(&(to.min(x_max), 0.0));
                root.draw(&Rectangle::new([(x0, top), (x1, bottom)], TIMED_SHADE.filled()))
                    .map_err(err)?;
            }
            let row_style = font(15).pos(Pos::new(HPos::Right, VPos::Center));
            for (i, (row, name)) in p.rows.iter().zip(names).enumerate() {
                let band = n - 1.0 - i as f64;
                let (x, y) = chart.backend_coord(&(x_min, band + 0.5));
                root.draw_text(name, &row_style, (x - 8, y)).map_err(err)?;
                // Each bar's text: a call's name, "(untimed)" after it where it was.
                let texts: Vec<String> = row
                    .bars
                    .iter()
                    .map(|b| match b.untimed {
                        true if !b.text.is_empty() => {
                            t!("picture.untimed", text = b.text.clone()).render(lang)
                        }
                        _ => b.text.clone(),
                    })
                    .collect();
                let (mut labels, mut pale) = (Vec::new(), Vec::new());
                for (b, text) in row.bars.iter().zip(&texts) {
                    let (from, to) = cut(b.start_ms, b.end_ms).map_or((0, 0), |(s, e)| {
                        let (x0, x1) =
                            (chart.backend_coord(&(s, 0.0)).0, chart.backend_coord(&(e, 0.0)).0);
                        (x0, if x1 - x0 > 3 { x1 - 1 } else { x1.max(x0 + 1) })
                    });
                    let wide = match text.is_empty() {
                        true => 0,
                        false => (width(text) as f64 * 6.2) as i32,
                    };
                    let overflows = b.key == Key::HostWait && !b.untimed;
                    labels.push(Label { from, to, width: wide, overflows });
                    pale.push(matches!(b.key, Key::HostWait | Key::Range) || b.untimed);
                }
                let starts = label_starts(&labels, &pale);
                for ((b, text), start) in row.bars.iter().zip(&texts).zip(starts) {
                    let Some((start_ms, end_ms)) = cut(b.start_ms, b.end_ms) else { continue };
                    let (x0, top) = chart.backend_coord(&(start_ms, band + 1.0));
                    let (x1, bottom) = chart.backend_coord(&(end_ms, band));
                    // A pixel's gap after a wide bar keeps back-to-back bars apart.
                    let x1 = if x1 - x0 > 3 { x1 - 1 } else { x1.max(x0 + 1) };
                    let c = key_colour(b.key);
                    let fill = if b.untimed { c.mix(FADED) } else { c.mix(1.0) };
                    let corners = [(x0, top + 4), (x1, bottom - 4)];
                    root.draw(&Rectangle::new(corners, fill.filled())).map_err(err)?;
                    // A wait and a range are pale: an outline keeps them apart from the
                    // background, and a range from the next.
                    if matches!(b.key, Key::HostWait | Key::Range) {
                        let edge =
                            RGBColor(0x80, 0x80, 0x80).mix(if b.untimed { 0.5 } else { 1.0 });
                        root.draw(&Rectangle::new(corners, edge.stroke_width(1))).map_err(err)?;
                    }
                    // A call's name where `label_starts` found it room.
                    if let Some(x) = start {
                        let ink = if b.key == Key::HostCall && !b.untimed { WHITE } else { BLACK };
                        let style = TextStyle::from(("sans-serif", 12).into_font())
                            .color(&ink)
                            .pos(Pos::new(HPos::Left, VPos::Center));
                        root.draw_text(text, &style, (x, (top + bottom) / 2)).map_err(err)?;
                    }
                }
            }
            rest = below;
        }
        let (legend_area, footer_area) = rest.split_vertically(legend_height);
        for ((swatch, words), &(x, line)) in entries.iter().zip(&places) {
            let y = 8 + 24 * line;
            let rect = [(x, y), (x + 16, y + 14)];
            let grey = RGBColor(0x7f, 0x7f, 0x7f);
            match swatch {
                Swatch::Key(k) => legend_area.draw(&Rectangle::new(rect, key_colour(*k).filled())),
                Swatch::Timed => legend_area.draw(&Rectangle::new(rect, TIMED_SHADE.filled())),
                Swatch::Faded => legend_area.draw(&Rectangle::new(rect, grey.mix(FADED).filled())),
            }
            .map_err(err)?;
            legend_area.draw_text(words, &font(15), (x + 22, y)).map_err(err)?;
        }
        write_lines(&footer_area, &footer, FOOTER_FONT, &grey, 4)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

// The tests, in a file of their own to keep this one short; a child module still, so that
// they see the layout's constants.
#[cfg(test)]
#[path = "picture_tests.rs"]
pub(crate) mod tests;
