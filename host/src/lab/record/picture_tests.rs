//! The SVG picture's tests: its caption, its wrapping, its rows and bars.
use super::*;
use crate::lab::record::drawing::panels;
use crate::lab::record::span::{Source, Span};

fn origin(provenance: &str) -> Origin {
    let provenance = Text::Plain(provenance.to_string());
    Origin { command: "streamlab run overlap --streams 8".into(), provenance }
}

/// The picture of `recordings`, drawn plainly.
fn svg_of(c: &Caption, report: &Report, recordings: &[Recording]) -> String {
    let plain = Drawing::PLAIN;
    timeline_svg(c, &panels(recordings, &plain, report), &plain).unwrap()
}

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
    let c =
        caption(&report, &recordings, &Drawing::PLAIN, &origin("measured 2026-11-23"), Lang::En);
    assert_eq!(
        c.title,
        "overlap on NVIDIA H200: one stream 5.010 ms, 8 streams 2.901 ms (medians), speed-up 1.73x; bound T(K) 2.884 ms"
    );
    assert!(c.subtitle.contains("timeline from events"), "{}", c.subtitle);
    assert_eq!(c.footer, "streamlab run overlap --streams 8; measured 2026-11-23");
    assert_eq!(c.footer.matches("streamlab run").count(), 1, "one command");
}

/// The footer's command for a live run: the lesson's own flags as they are typed.
#[test]
fn the_command_line_is_the_flags_as_typed() {
    let (mut report, _) = overlap_pair();
    report
        .param("sweep", true)
        .param("quiet", false)
        .param("format", "bf16")
        .param("gpus", serde_json::Value::Null)
        .detail("flags", ["streams", "sweep", "quiet", "format", "gpus"]);
    let line = command_line(&report);
    assert_eq!(line, "streamlab run overlap --format bf16 --streams 8 --sweep");
}

/// events: both versions' times measure when the consumer finished, said once.
#[test]
fn a_drawing_names_what_the_times_measure_once() {
    const DRAWING: Drawing = Drawing {
        measure: Some((
            "consumer (stream B) finished at",
            &[("consumer finished at, without wait_event", "without wait_event")],
        )),
        ..Drawing::PLAIN
    };
    let mut report = Report::new("events", "t", "NVIDIA H200");
    report.figure("consumer finished at, without wait_event, median", 2.663, "ms");
    let mut r = recording("consumer finished at, without wait_event", 1, 1.0);
    r.ms = 4.255;
    let c = caption(&report, std::slice::from_ref(&r), &DRAWING, &origin("test"), Lang::En);
    assert_eq!(
        c.title,
        "events on NVIDIA H200, consumer (stream B) finished at: without wait_event 2.663 ms (medians)"
    );
    let panel = &panels(std::slice::from_ref(&r), &DRAWING, &report)[0];
    assert_eq!(panel.heading, "without wait_event: this run 4.255 ms");
    // events' picture of 2026-11-23 said "this run 4.255 ms" over a 20 ms producer: where the
    // drawing asks, each heading names what that time measures.
    let named = Drawing { measure_in_headings: true, ..DRAWING };
    let panel = &panels(&[r], &named, &report)[0];
    assert_eq!(
        panel.heading,
        "without wait_event: consumer (stream B) finished at 4.255 ms in this run"
    );
}

/// The titles of 12 of the 17 pictures of 2026-11-23 ran past the right edge, hiding the
/// speed-up and the bound: a caption now wraps, between its figures.
#[test]
fn a_long_caption_wraps_between_figures_and_the_picture_grows() {
    let (report, recordings) = overlap_pair();
    let mut c = caption(&report, &recordings, &Drawing::PLAIN, &origin("test"), Lang::En);
    let short = svg_of(&c, &report, &recordings);
    let title = "unified-memory on NVIDIA H200: managed, migrated on demand (page faults) 6.185 ms, managed + cuMemPrefetchAsync on the streams 3.178 ms (medians), speed-up 1.95x; bound 3.001 ms";
    c.title = title.into();
    let svg = svg_of(&c, &report, &recordings);
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
    let c = caption(&report, &recordings, &Drawing::PLAIN, &origin("test"), Lang::En);
    let svg = svg_of(&c, &report, &recordings);
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

/// sync-methods' picture of 2026-11-23 left the wait it times unnamed: at 1 ms of 10 the bar
/// is narrower than "cuStreamSynchronize". A timed wait's name now runs on over the pale
/// untimed wait after it, whose name moves right; over a dark bar, or for any other bar too
/// short, a name is still left out.
#[test]
fn a_timed_wait_too_short_for_its_name_is_named_past_its_end() {
    let label = |from, to, width, overflows| Label { from, to, width, overflows };
    // A launch too short for its name, the timed wait, the untimed wait after it.
    let row =
        [label(190, 192, 87, false), label(192, 278, 118, true), label(279, 1052, 161, false)];
    let pale = [false, true, true];
    assert_eq!(label_starts(&row, &pale), [None, Some(196), Some(322)]);
    // Not a timed wait: left out, and the next name keeps its place on its bar.
    let mut untimed = row;
    untimed[1].overflows = false;
    assert_eq!(label_starts(&untimed, &pale), [None, None, Some(283)]);
    // A dark bar under where the name would run: left out.
    assert_eq!(label_starts(&row, &[false, true, false]), [None, None, Some(283)]);
    // A name that fits stays on its bar, and the next one where it was.
    let fitting = [label(0, 200, 100, true), label(200, 400, 100, false)];
    assert_eq!(label_starts(&fitting, &[true, true]), [Some(4), Some(204)]);
}
