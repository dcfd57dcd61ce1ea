//! Every figure a reader is told is in the record. A number with a unit (ms, µs, GB/s, ×, x,
//! %, 倍) in a README, a guide chapter (both languages) or `docs/ARCHITECTURE.md` must appear in
//! `docs/measurements.md`, as written or as the record's value rounded to the digits the text
//! gives (the record says 0.6606 ms, a chapter may say 0.661 or 0.66 ms), or be covered by
//! [`ALLOWED`], which says why it is no measurement. Signs are not compared, and units only so
//! far as a figure in ms may stand in the record in µs and the other way round (0.0095 ms is
//! 9.5 µs); the record's tables put their units in a heading, so a number is matched alone.
//!
//! What this cannot catch: a figure of two or three significant digits matches any record
//! value that rounds to it, and the record holds thousands of values; a wrong "1.2 ms" may pass.
//! The check is that a precise figure was not made up or left behind by a newer run.
use std::path::Path;

/// Figures that are no measurement, by file (relative to the repository root), figure as
/// written (number and unit), and why. Keep it short: a measured figure belongs in the record.
const ALLOWED: &[(&str, &str, &str)] = &[(
    "docs/guide/zh-CN/src/sleep-streams.md",
    "80%",
    "a threshold of the lesson (MIN_SLEEP_SHARE in sleep_streams.rs), not a measurement",
)];

/// A decimal number as written, without sign and thousands separators: its digits and how many
/// of them follow the point ("4,995.7" -> 49957, 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    digits: u128,
    places: u32,
}

impl Decimal {
    fn parse(text: &str) -> Option<Decimal> {
        let plain: String = text.chars().filter(|c| *c != ',').collect();
        let (whole, fraction) = plain.split_once('.').unwrap_or((&plain, ""));
        let digits = format!("{whole}{fraction}").parse().ok()?;
        Some(Decimal { digits, places: fraction.len() as u32 })
    }

    /// Whether `self`, rounded to `quoted`'s places, is `quoted` (a tie rounds either way), or
    /// `quoted` is `self` with trailing zeros.
    /// The same quantity a thousand times larger (ms -> µs) or smaller (µs -> ms).
    fn times_1000(self) -> Decimal {
        match self.places {
            p if p >= 3 => Decimal { digits: self.digits, places: p - 3 },
            p => Decimal { digits: self.digits * 10u128.pow(3 - p), places: 0 },
        }
    }

    fn over_1000(self) -> Decimal {
        Decimal { digits: self.digits, places: self.places + 3 }
    }

    fn rounds_to(self, quoted: Decimal) -> bool {
        if self.places >= quoted.places {
            let scale = 10u128.pow(self.places - quoted.places);
            let Some(target) = quoted.digits.checked_mul(scale) else { return false };
            2 * self.digits.abs_diff(target) <= scale
        } else {
            let scale = 10u128.pow(quoted.places - self.places);
            self.digits.checked_mul(scale) == Some(quoted.digits)
        }
    }
}

/// The units that make a number a figure. "x" and "ms"/"us" must end a word ("4x4" and
/// "5 msec" are not figures); "×", "%" and "倍" need not.
const UNITS: &[(&str, bool)] = &[
    ("GB/s", true),
    ("ms", true),
    ("µs", true),
    ("μs", true),
    ("us", true),
    ("x", true),
    ("×", false),
    ("%", false),
    ("倍", false),
];

/// A number as it stands in `text` from byte `at`: digits, "," between groups of three digits,
/// one "." followed by digits. None where the number is part of a word or a version ("sm_90",
/// "v1.2", "fnv1a64", "1.2.3").
fn number_at(text: &str, at: usize) -> Option<&str> {
    let before = text[..at].chars().next_back();
    if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
        return None;
    }
    let bytes = text.as_bytes();
    // A "," that separates thousands: three digits follow it, and no fourth.
    let separator = |i: usize| {
        bytes.len() >= i + 4
            && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
            && bytes.get(i + 4).is_none_or(|c| !c.is_ascii_digit())
    };
    let mut end = at;
    let mut point = false;
    while end < bytes.len() {
        let b = bytes[end];
        let digit = b.is_ascii_digit();
        let comma = b == b',' && !point && separator(end);
        let dot = b == b'.' && !point && bytes.get(end + 1).is_some_and(u8::is_ascii_digit);
        if !(digit || comma || dot) {
            break;
        }
        point |= dot;
        end += 1;
    }
    let rest = &text[end..];
    let unit = UNITS.iter().any(|(unit, _)| rest.starts_with(unit));
    let word = rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') && !unit;
    let version = rest.starts_with('.') && rest[1..].starts_with(|c: char| c.is_ascii_digit());
    if word || version {
        return None;
    }
    Some(&text[at..end])
}

/// Every number in `text`, as written.
fn numbers(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < text.len() {
        if text.as_bytes()[at].is_ascii_digit() && text.is_char_boundary(at) {
            if let Some(n) = number_at(text, at) {
                found.push(n);
                at += n.len().max(1);
                continue;
            }
            // Skip the rest of a word or version.
            while at < text.len() && (text.as_bytes()[at].is_ascii_alphanumeric()) {
                at += 1;
            }
            continue;
        }
        at += 1;
    }
    found
}

/// A figure in a text: where, its number and unit, and both as written.
struct Figure {
    line: usize,
    number: String,
    unit: &'static str,
    written: String,
}

/// The figures of `text`.
fn figures(text: &str) -> Vec<Figure> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut at = 0;
        for n in numbers(line) {
            let start = at + line[at..].find(n).unwrap();
            let end = start + n.len();
            at = end;
            let rest = &line[end..];
            let gap = rest.len() - rest.trim_start_matches([' ', '\u{a0}', '\u{202f}']).len();
            let rest = &rest[gap.min(1)..];
            let unit = UNITS.iter().find(|(unit, word)| {
                rest.starts_with(unit)
                    && (!word || !rest[unit.len()..].starts_with(|c: char| c.is_alphanumeric()))
            });
            if let Some((unit, _)) = unit {
                found.push(Figure {
                    line: i + 1,
                    number: n.to_string(),
                    unit,
                    written: format!("{}{}", &line[start..end + gap.min(1)], unit),
                });
            }
        }
    }
    found
}

/// The figures of each (file, text) that the record does not hold and [`ALLOWED`]-like `allowed`
/// does not cover, as "file:line: figure"; and the allowances no figure needed.
fn unrecorded(
    files: &[(String, String)],
    record: &str,
    allowed: &[(&str, &str, &str)],
) -> (Vec<String>, Vec<String>) {
    let recorded: Vec<Decimal> = numbers(record).into_iter().filter_map(Decimal::parse).collect();
    let mut used = vec![false; allowed.len()];
    let mut missing = Vec::new();
    for (file, text) in files {
        for figure in figures(text) {
            let Some(quoted) = Decimal::parse(&figure.number) else { continue };
            let mut forms = vec![quoted];
            match figure.unit {
                "ms" => forms.push(quoted.times_1000()),
                "µs" | "μs" | "us" => forms.push(quoted.over_1000()),
                _ => {}
            }
            if forms.iter().any(|&q| recorded.iter().any(|r| r.rounds_to(q))) {
                continue;
            }
            let allowance = allowed.iter().position(|(f, w, _)| f == file && *w == figure.written);
            if let Some(i) = allowance {
                used[i] = true;
                continue;
            }
            missing.push(format!("{file}:{}: {}", figure.line, figure.written));
        }
    }
    let stale = allowed
        .iter()
        .zip(used)
        .filter(|(_, used)| !used)
        .map(|((file, figure, _), _)| format!("{file}: {figure}"))
        .collect();
    (missing, stale)
}

/// The READMEs, the guide's chapters in both languages, and the architecture notes.
fn quoting_files(root: &Path) -> Vec<(String, String)> {
    let mut paths = vec!["README.md".to_string(), "README.zh-CN.md".to_string()];
    paths.push("docs/ARCHITECTURE.md".to_string());
    paths.push("docs/guide/README.md".to_string());
    for book in ["docs/guide/en/src", "docs/guide/zh-CN/src"] {
        let mut chapters: Vec<String> = std::fs::read_dir(root.join(book))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".md"))
            .map(|name| format!("{book}/{name}"))
            .collect();
        chapters.sort();
        paths.extend(chapters);
    }
    paths
        .into_iter()
        .filter(|p| root.join(p).is_file())
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

#[test]
fn every_quoted_figure_is_in_the_record() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let record = std::fs::read_to_string(root.join("docs/measurements.md")).unwrap();
    let files = quoting_files(root);
    assert!(files.len() > 40, "the READMEs and both books: {}", files.len());
    let (missing, stale) = unrecorded(&files, &record, ALLOWED);
    assert!(
        missing.is_empty(),
        "{} figures are not in docs/measurements.md (quote the record, put the run there, or \
         allow them in tests/figures.rs with a reason):\n{}",
        missing.len(),
        missing.join("\n")
    );
    assert!(stale.is_empty(), "allowed but no longer quoted: take them off ALLOWED: {stale:?}");
}

/// The matcher on made-up text: what it takes for a figure, what it finds in the record, and
/// that it fails both ways.
#[test]
fn the_matcher_finds_figures_and_fails_on_made_up_ones() {
    let text =
        "Took 3.901 ms, 2.19x faster (2.19× in zh: 快 2.19 倍), +0.6% off, 4,995.7 µs early;\n\
                sm_90 at 1980 MHz, 64x64 blocks, fnv1a64 and v1.2.3 are no figures; 16 GB of it.\n\
                Made up: 1.234 ms and 7.7 GB/s; 9.86x; an example of 50 µs; 10.5µs is 0.0105 ms.";
    let found: Vec<String> = figures(text).into_iter().map(|f| f.written).collect();
    assert_eq!(
        found,
        [
            "3.901 ms",
            "2.19x",
            "2.19×",
            "2.19 倍",
            "0.6%",
            "4,995.7 µs",
            "1.234 ms",
            "7.7 GB/s",
            "9.86x",
            "50 µs",
            "10.5µs",
            "0.0105 ms"
        ]
    );
    let record = "| one stream | 3.9014 ms |\n| speed-up | 2.1891 x |\n off by +0.62% \n\
                  later by 4995.712 µs; 9.8566 x; 7.70 GB/s; 0.0105 ms";
    let files = [("docs/guide/en/src/made-up.md".to_string(), text.to_string())];
    let allowed = [
        ("docs/guide/en/src/made-up.md", "50 µs", "an example in prose"),
        ("docs/guide/en/src/made-up.md", "70 µs", "no longer in the text"),
    ];
    let (missing, stale) = unrecorded(&files, record, &allowed);
    assert_eq!(missing, ["docs/guide/en/src/made-up.md:3: 1.234 ms"]);
    assert_eq!(stale, ["docs/guide/en/src/made-up.md: 70 µs"]);
    // Rounding: the record's value may be quoted with fewer digits, never more or otherwise.
    let r = |s| Decimal::parse(s).unwrap();
    assert!(r("0.6606").rounds_to(r("0.661")) && r("0.6606").rounds_to(r("0.66")));
    assert!(r("0.0095").rounds_to(r("0.010")) && r("0.0095").rounds_to(r("0.009")));
    assert!(r("10").rounds_to(r("10.0")) && !r("10").rounds_to(r("10.1")));
    assert!(!r("0.6606").rounds_to(r("0.6607")) && !r("0.66").rounds_to(r("0.661")));
    assert!(r("4,995.712").rounds_to(r("4995.7")) && !r("1.7822").rounds_to(r("1.77")));
}

/// The lessons of `record`'s section "The recorded runs": from its first "### " heading to the
/// next "## " heading.
fn recorded_lessons(record: &str) -> Option<&str> {
    let section = record.find("\n## The recorded runs")?;
    let first = section + record[section..].find("\n### ")? + 1;
    let end = record[first..].find("\n## ").map_or(record.len(), |e| first + e);
    Some(record[first..end].trim_end())
}

/// The first section of the record is what `scripts/recorded-figures.py` prints from
/// `docs/recorded/`: re-recording a lesson without printing it again fails here, so the
/// chapters cannot quote a recording the record does not hold.
#[test]
fn the_recorded_runs_section_is_printed_from_docs_recorded() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let record = std::fs::read_to_string(root.join("docs/measurements.md")).unwrap();
    let section =
        recorded_lessons(&record).expect("docs/measurements.md: no section 'The recorded runs'");
    let printed = match std::process::Command::new("python3")
        .arg(root.join("scripts/recorded-figures.py"))
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        Ok(out) => {
            panic!("scripts/recorded-figures.py failed: {}", String::from_utf8_lossy(&out.stderr))
        }
        Err(e) => {
            // scripts/test.sh installs nothing without python3, so CI always has it.
            eprintln!("not checked: python3 could not be started ({e})");
            return;
        }
    };
    assert!(
        section == printed.trim_end(),
        "docs/measurements.md's section 'The recorded runs' is not what \
         `python3 scripts/recorded-figures.py` prints from docs/recorded/: put its output in place \
         of the lessons of that section"
    );
    // The check can fail: a section that lost a line differs from the printed one.
    let made_up = "intro\n## The recorded runs\ntext\n### a (run 1)\n| x | 1 ms |\n\n## Next\n";
    assert_eq!(recorded_lessons(made_up), Some("### a (run 1)\n| x | 1 ms |"));
    assert_ne!(recorded_lessons(made_up), Some("### a (run 1)"));
}
