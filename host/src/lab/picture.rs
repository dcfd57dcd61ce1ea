//! `--svg FILE.svg`: the recorded versions as a picture for documents. One panel per version
//! (the version without the technique above the version with it) on the same time scale,
//! one row per stream (per device where there are several), each operation a bar coloured
//! by its kind, a legend, a time axis in ms; the title carries both medians, the speed-up
//! and the lesson's bound, the footer which GPU and run produced it.
//!
//! Drawn with plotters' SVG backend: text stays SVG text (no font files are read), rows and
//! bars are plain rectangles.
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::lab::report::Report;
use crate::lab::span::{rows, Recording, Work};

/// The words around a picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Caption {
    pub title: String,
    pub subtitle: String,
    pub footer: String,
}

const WIDTH: u32 = 1100;
const TITLE: u32 = 64;
const ROW: u32 = 26;
const PANEL: u32 = 74;
const LEGEND: u32 = 34;
const FOOTER: u32 = 24;

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
        .filter(|(k, _)| flags.contains(&k.as_str()))
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

/// The timeline picture of `recordings` (each a panel, same time scale) as SVG text.
pub fn timeline_svg(caption: &Caption, recordings: &[Recording]) -> Result<String, String> {
    let x_max = recordings.iter().map(Recording::end_ms).fold(0.0, f64::max).max(1e-3) * 1.02;
    let label_width = recordings
        .iter()
        .flat_map(|r| rows(&r.spans))
        .map(|(_, s)| s.len() as u32 * 8 + 40)
        .max()
        .unwrap_or(80)
        .clamp(80, 320);
    let devices = recordings.iter().flat_map(|r| r.spans.iter().map(|s| s.device)).any(|d| d != 0);
    let heights: Vec<u32> =
        recordings.iter().map(|r| PANEL + ROW * rows(&r.spans).len().max(1) as u32).collect();
    let height = TITLE + heights.iter().sum::<u32>() + LEGEND + FOOTER;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let font = |size: u32| TextStyle::from(("sans-serif", size).into_font()).color(&BLACK);
        root.draw_text(&caption.title, &font(20), (14, 10)).map_err(err)?;
        root.draw_text(&caption.subtitle, &font(15).color(&RGBColor(80, 80, 80)), (14, 38))
            .map_err(err)?;
        let (_, mut rest) = root.split_vertically(TITLE);
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
                let name = if devices { format!("GPU{device} {stream}") } else { stream.clone() };
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
        let (legend, footer) = rest.split_vertically(LEGEND);
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
        footer
            .draw_text(&caption.footer, &font(14).color(&RGBColor(80, 80, 80)), (14, 4))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::span::{Source, Span};

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

    #[test]
    fn the_svg_is_xml_with_one_row_per_stream() {
        let (report, recordings) = overlap_pair();
        let svg = timeline_svg(&caption(&report, &recordings, "test"), &recordings).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        // The first panel has one row, the second eight: overlap-0 labels both.
        assert_eq!(texts.iter().filter(|t| **t == "overlap-0").count(), 2);
        for k in 1..8 {
            let name = format!("overlap-{k}");
            assert_eq!(texts.iter().filter(|t| **t == name).count(), 1, "{name}");
        }
        assert!(texts.contains(&"8 streams: this run 1.760 ms"), "{texts:?}");
        assert!(texts.contains(&"kernel") && texts.contains(&"time (ms)"));
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
