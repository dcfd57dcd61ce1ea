//! `--svg FILE.svg`: the recorded versions as a picture for documents. One panel per version
//! (the version without the technique above the version with it) on the same time scale,
//! one row per stream (per device where there are several), each operation a bar coloured
//! by its kind, a legend, a time axis in ms; the title carries both medians, the speed-up
//! and the lesson's bound, the footer which GPU and run produced it.
//!
//! Drawn with plotters' SVG backend: text stays SVG text (no font files are read), rows and
//! bars are plain rectangles.
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::lab::record::report::Report;
use crate::lab::record::span::{rows, Recording, Work};

/// The words around a picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Caption {
    pub title: String,
    pub subtitle: String,
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

/// `text` in lines of at most `width` characters, broken after ", " or "; " where it can be
/// (a caption's figures stay whole), else at spaces.
pub fn wrapped(text: &str, width: usize) -> Vec<String> {
    let (mut pieces, mut start) = (Vec::new(), 0);
    for (i, _) in text.match_indices([',', ';']) {
        if text[i + 1..].starts_with(' ') {
            pieces.push(&text[start..i + 2]);
            start = i + 2;
        }
    }
    pieces.push(&text[start..]);
    let mut lines: Vec<String> = Vec::new();
    for piece in pieces.into_iter().flat_map(|p| {
        // A piece too long on its own goes word by word.
        if p.chars().count() > width {
            p.split_inclusive(' ').collect::<Vec<_>>()
        } else {
            vec![p]
        }
    }) {
        match lines.last_mut() {
            Some(line) if line.chars().count() + piece.trim_end().chars().count() <= width => {
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

/// The median of a version, read back from the report's figures.
fn median(report: &Report, version: &str) -> Option<f64> {
    report.value(&format!("{version}, median"))
}

/// A caption from a report: "overlap on NVIDIA H200: one stream 5.010 ms, 8 streams
/// 2.901 ms, 1.73x faster; bound T(K) 2.884 ms". `provenance` ends the footer.
pub fn caption(report: &Report, recordings: &[Recording], provenance: &str) -> Caption {
    let mut title = format!("{} on {}", report.lesson, report.device);
    let times: Vec<String> = recordings
        .iter()
        .filter_map(|r| median(report, &r.version).map(|m| format!("{} {m:.3} ms", r.version)))
        .collect();
    if !times.is_empty() {
        title.push_str(&format!(": {} (medians)", times.join(", ")));
    }
    if let Some(s) = report.value("speed-up (first / second)") {
        title.push_str(&format!(", speed-up {s:.2}x"));
    }
    if let Some(bound) =
        report.figures.iter().find(|f| f.name.to_lowercase().starts_with("bound") && f.unit == "ms")
    {
        title.push_str(&format!("; {} {:.3} ms", bound.name, bound.value));
    }
    let subtitle = recordings
        .first()
        .map(|r| format!("one run of each version; {}", r.source.describe()))
        .unwrap_or_default();
    // Only the lesson's own flags (the harness lists them): a lesson's derived parameters
    // (bytes, cycles, ...) are no flags. A report without the list prints none.
    let flags: Vec<&str> = report
        .details
        .get("flags")
        .and_then(|f| f.as_array())
        .map(|f| f.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let params: Vec<String> = report
        .parameters
        .iter()
        // A flag left to its default of "none" (an Option) was not on the command line.
        .filter(|(k, v)| flags.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| format!("--{} {v}", k.replace('_', "-")))
        .collect();
    Caption {
        title,
        subtitle,
        footer: format!(
            "streamlab run {} {} on {}; {provenance}",
            report.lesson,
            params.join(" "),
            report.device
        ),
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

/// The timeline picture of `recordings` (each a panel, same time scale) as SVG text.
pub fn timeline_svg(caption: &Caption, recordings: &[Recording]) -> Result<String, String> {
    let x_max = recordings.iter().map(Recording::end_ms).fold(0.0, f64::max).max(1e-3) * 1.02;
    let devices = recordings.iter().flat_map(|r| r.spans.iter().map(|s| s.device)).any(|d| d != 0);
    // The widest row name as drawn ("GPU 1 · " and all), about 8 pixels a character.
    let label_width = recordings
        .iter()
        .flat_map(|r| rows(&r.spans))
        .map(|(d, s)| {
            crate::lab::record::span::row_name(d, &s, devices).chars().count() as u32 * 8 + 40
        })
        .max()
        .unwrap_or(80)
        .clamp(80, 440);
    let heights: Vec<u32> =
        recordings.iter().map(|r| PANEL + ROW * rows(&r.spans).len().max(1) as u32).collect();
    let [title, subtitle, footer] = [
        (&caption.title, TITLE_FONT),
        (&caption.subtitle, SUBTITLE_FONT),
        (&caption.footer, FOOTER_FONT),
    ]
    .map(|(text, (size, _))| wrapped(text, fits(WIDTH, size)));
    let lines = |l: &[String], (_, step): (u32, u32)| l.len().max(1) as u32 * step;
    let top = 10 + lines(&title, TITLE_FONT) + 4;
    let title_height = top + lines(&subtitle, SUBTITLE_FONT) + 7;
    let footer_height = 4 + lines(&footer, FOOTER_FONT) + 2;
    let height = title_height + heights.iter().sum::<u32>() + LEGEND + footer_height;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let font = |size: u32| TextStyle::from(("sans-serif", size).into_font()).color(&BLACK);
        let grey = RGBColor(80, 80, 80);
        write_lines(&root, &title, TITLE_FONT, &BLACK, 10)?;
        write_lines(&root, &subtitle, SUBTITLE_FONT, &grey, top as i32)?;
        let (_, mut rest) = root.split_vertically(title_height);
        for (r, h) in recordings.iter().zip(&heights) {
            let (area, below) = rest.split_vertically(*h);
            let rows = rows(&r.spans);
            let n = rows.len().max(1) as f64;
            let mut chart = ChartBuilder::on(&area)
                .caption(format!("{}: this run {:.3} ms", r.version, r.ms), ("sans-serif", 17))
                .margin_left(8)
                .margin_right(28)
                .margin_top(6)
                .x_label_area_size(36)
                .y_label_area_size(label_width)
                .build_cartesian_2d(0f64..x_max, 0f64..n)
                .map_err(err)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .light_line_style(TRANSPARENT)
                .y_labels(0)
                .x_desc("time (ms)")
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(err)?;
            let names = font(15).pos(Pos::new(HPos::Right, VPos::Center));
            for (i, (device, stream)) in rows.iter().enumerate() {
                let band = n - 1.0 - i as f64;
                let (x, y) = chart.backend_coord(&(0.0, band + 0.5));
                let name = crate::lab::record::span::row_name(*device, stream, devices);
                root.draw_text(&name, &names, (x - 8, y)).map_err(err)?;
                for s in r.spans.iter().filter(|s| s.device == *device && s.stream == *stream) {
                    let (x0, top) = chart.backend_coord(&(s.start_ms, band + 1.0));
                    let (x1, bottom) = chart.backend_coord(&(s.end_ms, band));
                    let bar = Rectangle::new(
                        [(x0, top + 4), (x1.max(x0 + 1), bottom - 4)],
                        colour(s.kind).filled(),
                    );
                    root.draw(&bar).map_err(err)?;
                }
            }
            rest = below;
        }
        let (legend, footer_area) = rest.split_vertically(LEGEND);
        let mut x = 14;
        for kind in Work::ALL {
            if !recordings.iter().any(|r| r.spans.iter().any(|s| s.kind == kind)) {
                continue;
            }
            legend
                .draw(&Rectangle::new([(x, 8), (x + 16, 22)], colour(kind).filled()))
                .map_err(err)?;
            legend.draw_text(kind.describe(), &font(15), (x + 22, 8)).map_err(err)?;
            x += 22 + kind.describe().len() as i32 * 7 + 24;
        }
        write_lines(&footer_area, &footer, FOOTER_FONT, &grey, 4)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lab::record::span::{Source, Span};

    /// The text of every `<text>` element of `svg`, trimmed.
    pub(crate) fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).expect("well-formed XML");
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_owned())
            .collect()
    }

    fn recording(version: &str, streams: usize, chunk: f64) -> Recording {
        let mut spans = Vec::new();
        for k in 0..streams {
            let s = format!("overlap-{k}");
            let t = k as f64 * chunk;
            spans.push(Span::new(&s, Work::CopyToDevice, "copy to device", t, t + chunk));
            spans.push(Span::new(&s, Work::Kernel, "compute", t + chunk, t + 3.0 * chunk));
            spans.push(Span::new(
                &s,
                Work::CopyToHost,
                "copy to host",
                t + 3.0 * chunk,
                t + 4.0 * chunk,
            ));
        }
        Recording {
            version: version.into(),
            source: Source::Events { why: "test".into() },
            ms: spans.iter().map(|s| s.end_ms).fold(0.0, f64::max),
            parts: Vec::new(),
            spans,
            host: Vec::new(),
            flows: Vec::new(),
        }
    }

    pub(crate) fn overlap_pair() -> (Report, Vec<Recording>) {
        let recordings = vec![recording("one stream", 1, 1.25), recording("8 streams", 8, 0.16)];
        let mut report = Report::new("overlap", "one stream vs K streams", "NVIDIA H200");
        report
            .param("streams", 8)
            .param("bytes", 67108864) // derived, not a flag: the footer must leave it out
            .detail("flags", ["streams"])
            .figure("one stream, median", 5.01, "ms")
            .figure("8 streams, median", 2.901, "ms")
            .figure("speed-up (first / second)", 1.727, "x")
            .figure("bound T(K)", 2.884, "ms");
        (report, recordings)
    }

    #[test]
    fn the_caption_carries_times_speedup_and_bound() {
        let (report, recordings) = overlap_pair();
        let c = caption(&report, &recordings, "measured 2026-11-23");
        assert_eq!(
            c.title,
            "overlap on NVIDIA H200: one stream 5.010 ms, 8 streams 2.901 ms (medians), speed-up 1.73x; bound T(K) 2.884 ms"
        );
        assert!(c.subtitle.contains("timeline from events"), "{}", c.subtitle);
        assert_eq!(
            c.footer,
            "streamlab run overlap --streams 8 on NVIDIA H200; measured 2026-11-23"
        );
    }

    /// The titles of 12 of the 17 pictures of 2026-11-23 ran past the right edge, hiding the
    /// speed-up and the bound: a caption now wraps, between its figures.
    #[test]
    fn a_long_caption_wraps_between_figures_and_the_picture_grows() {
        let (report, recordings) = overlap_pair();
        let mut c = caption(&report, &recordings, "test");
        let short = timeline_svg(&c, &recordings).unwrap();
        let title = "unified-memory on NVIDIA H200: managed, migrated on demand (page faults) 6.185 ms, managed + cuMemPrefetchAsync on the streams 3.178 ms (medians), speed-up 1.95x; bound 3.001 ms";
        c.title = title.into();
        let svg = timeline_svg(&c, &recordings).unwrap();
        let texts = texts(&svg);
        let lines = wrapped(title, fits(WIDTH, TITLE_FONT.0));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= fits(WIDTH, TITLE_FONT.0)), "{lines:?}");
        assert_eq!(lines.join(" "), title, "nothing lost, broken after a comma");
        assert!(lines[0].ends_with(','), "{lines:?}");
        for line in &lines {
            assert!(texts.contains(line), "{line}: {texts:?}");
        }
        let height = |svg: &str| {
            let doc = roxmltree::Document::parse(svg).unwrap();
            doc.root_element().attribute("height").unwrap().parse::<u32>().unwrap()
        };
        assert_eq!(height(&svg), height(&short) + TITLE_FONT.1);
    }

    #[test]
    fn wrapping_keeps_words_whole_and_short_text_on_one_line() {
        assert_eq!(wrapped("one line", 80), vec!["one line"]);
        assert_eq!(wrapped("a, b; c", 3), vec!["a,", "b;", "c"]);
        assert_eq!(wrapped("a, b; c", 4), vec!["a,", "b; c"]);
        // "1,024" is one figure: only a comma before a space breaks.
        assert_eq!(wrapped("1,024 blocks, 264 a wave", 13), vec!["1,024 blocks,", "264 a wave"]);
        // A piece longer than a line goes word by word.
        assert_eq!(wrapped("alpha beta gamma", 11), vec!["alpha beta", "gamma"]);
        assert_eq!(wrapped("", 10), Vec::<String>::new());
    }

    #[test]
    fn the_svg_is_xml_with_one_row_per_stream() {
        let (report, recordings) = overlap_pair();
        let svg = timeline_svg(&caption(&report, &recordings, "test"), &recordings).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts = texts(&svg);
        // The first panel has one row, the second eight: overlap-0 labels both.
        assert_eq!(texts.iter().filter(|t| **t == "overlap-0").count(), 2);
        for k in 1..8 {
            let name = format!("overlap-{k}");
            assert_eq!(texts.iter().filter(|t| **t == name).count(), 1, "{name}");
        }
        let has = |want: &str| texts.iter().any(|t| t == want);
        assert!(has("8 streams: this run 1.760 ms"), "{texts:?}");
        assert!(has("kernel") && has("time (ms)"));
        // One bar per operation, in the kernel's colour for the 9 kernels.
        let green = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#2CA02C"))
            .count();
        assert_eq!(green, 9 + 1, "nine kernels and the legend's swatch");
        // To look at it: STREAMLAB_PICTURES=dir cargo test -p streamlab --lib lab::picture
        if let Some(dir) = std::env::var_os("STREAMLAB_PICTURES") {
            std::fs::write(std::path::Path::new(&dir).join("overlap-test.svg"), &svg).unwrap();
        }
    }
}
