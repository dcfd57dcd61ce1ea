//! The catalogs' templates: cut into literal text and `{holes}` ([`pieces`]), filled in,
//! and matched against English text: which template a line or a label is, and what its
//! holes hold ([`best_match`]). Rendering a label in Chinese matches it against
//! [`zh::LABELS`]; reading a report's English lines back into messages (`Text::recover`, in
//! `read_back.rs`) matches them against [`en::MESSAGES`]. Nothing here builds a `Text`, so
//! both of those can use it.
use crate::text::en;
use crate::text::zh;

/// A template's pieces: literal text and `{name}` holes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Piece<'a> {
    Literal(&'a str),
    Hole(&'a str),
}

/// `template` cut into its pieces.
pub fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else { break };
        let name = &rest[open + 1..close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(Piece::Literal(&rest[..=open]));
            rest = &rest[open + 1..];
            continue;
        }
        if open > 0 {
            out.push(Piece::Literal(&rest[..open]));
        }
        out.push(Piece::Hole(name));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Literal(rest));
    }
    out
}

/// The names of a template's holes, sorted.
pub fn holes(template: &str) -> Vec<&str> {
    let mut names: Vec<&str> = pieces(template)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Hole(n) => Some(n),
            Piece::Literal(_) => None,
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// `template` with each hole replaced by `arg(name)` (left as `{name}` when it has none).
pub(super) fn fill(template: &str, arg: impl Fn(&str) -> Option<String>) -> String {
    pieces(template)
        .into_iter()
        .map(|p| match p {
            Piece::Literal(s) => s.to_string(),
            Piece::Hole(n) => arg(n).unwrap_or_else(|| format!("{{{n}}}")),
        })
        .collect()
}

/// What a hole may hold: anything in a message; in a label, a number unless the hole's name
/// starts with `name` (a nested label), so that `"{n} streams"` never swallows
/// `"legacy streams"`.
#[derive(Clone, Copy)]
pub(super) enum Holes {
    Anything,
    LabelHoles,
}

impl Holes {
    fn accept(self, hole: &str, value: &str) -> bool {
        match self {
            Holes::Anything => true,
            Holes::LabelHoles => {
                hole.starts_with("name")
                    || (value.bytes().any(|b| b.is_ascii_digit())
                        && value.bytes().all(|b| b.is_ascii_digit() || b"., +-x%".contains(&b)))
            }
        }
    }
}

/// Every way `text` is `pattern` filled in: the holes' values, each accepted by `holes`
/// (a label's are never empty), the shortest first.
fn captures<'t>(pattern: &[Piece<'_>], text: &'t str, holes: Holes) -> Vec<Vec<&'t str>> {
    match pattern.split_first() {
        None if text.is_empty() => vec![Vec::new()],
        None => Vec::new(),
        Some((Piece::Literal(l), rest)) => {
            text.strip_prefix(l).map_or_else(Vec::new, |t| captures(rest, t, holes))
        }
        Some((Piece::Hole(hole), rest)) => {
            let ends: Vec<usize> = match rest.first() {
                None => vec![text.len()],
                Some(Piece::Literal(l)) => text.match_indices(l).map(|(i, _)| i).collect(),
                Some(Piece::Hole(_)) => return Vec::new(),
            };
            let may_be_empty = matches!(holes, Holes::Anything);
            let ends = ends.into_iter().filter(|&end| end > 0 || may_be_empty);
            ends.filter(|&end| holes.accept(hole, &text[..end]))
                .flat_map(|end| {
                    captures(rest, &text[end..], holes).into_iter().map(move |mut found| {
                        found.insert(0, &text[..end]);
                        found
                    })
                })
                .collect()
        }
    }
}

/// Whether a hole's value reads as one thing: a number, a message or a label of the catalogs.
fn reads_whole(value: &str) -> bool {
    let numeric = value.bytes().any(|b| b.is_ascii_digit())
        && value.bytes().all(|b| b.is_ascii_digit() || b"., +-x%e".contains(&b));
    numeric
        || best_match(recoverable(), value, Holes::Anything).is_some()
        || best_match(label_patterns(), value, Holes::LabelHoles).is_some()
}

/// The way `text` fills `pattern` whose holes read best (the most of them [`reads_whole`];
/// the shortest first among equals).
fn capture<'t>(pattern: &[Piece<'_>], text: &'t str, holes: Holes) -> Option<Vec<&'t str>> {
    let mut all = captures(pattern, text, holes);
    if all.len() > 1 {
        let score = |c: &Vec<&str>| c.iter().filter(|v| reads_whole(v)).count();
        let most = all.iter().map(score).max().unwrap_or(0);
        all.retain(|c| score(c) == most);
    }
    all.into_iter().next()
}

/// A pattern's key and its holes' names and values.
type Match<'p, 't> = (&'p str, Vec<(&'p str, &'t str)>);

/// The best match of `text` among `patterns`: the one with the most literal text.
pub(super) fn best_match<'p, 't>(
    patterns: impl Iterator<Item = (&'p str, &'p str)>,
    text: &'t str,
    holes: Holes,
) -> Option<Match<'p, 't>> {
    let mut best: Option<(usize, Match<'p, 't>)> = None;
    for (key, pattern) in patterns {
        let pieces = pieces(pattern);
        let literal: usize = pieces
            .iter()
            .map(|p| match p {
                Piece::Literal(l) => l.len(),
                Piece::Hole(_) => 0,
            })
            .sum();
        if literal == 0 || best.as_ref().is_some_and(|b| b.0 >= literal) {
            continue;
        }
        if let Some(values) = capture(&pieces, text, holes) {
            let names = pieces.iter().filter_map(|p| match p {
                Piece::Hole(n) => Some(*n),
                Piece::Literal(_) => None,
            });
            best = Some((literal, (key, names.zip(values).collect())));
        }
    }
    best.map(|(_, found)| found)
}

/// The English messages a line of a report can be: all but the report's own frame
/// (`report.check` would read any "a: b" as a check line), the trace recorder's
/// sentences (`trace.file.`, parts of a line, read back only by `Text::recover_among`), and
/// the command line's own lines and the picture's words (`run.`, `output.`, `picture.`),
/// never in a report, whose loose templates ("{flag} wrote {path}") would read a lesson's
/// own English line as theirs, nor the errors (`error.`).
pub(super) fn recoverable() -> impl Iterator<Item = (&'static str, &'static str)> {
    let part = |key: &str| {
        let parts = ["report.", "trace.file.", "run.", "output.", "picture.", "error."];
        parts.iter().any(|p| key.starts_with(p))
    };
    en::MESSAGES.iter().copied().filter(move |(key, _)| !part(key))
}

/// [`zh::LABELS`]' English patterns, as [`best_match`] takes them.
pub(super) fn label_patterns() -> impl Iterator<Item = (&'static str, &'static str)> {
    zh::LABELS.iter().map(|(en, _)| (*en, *en))
}
