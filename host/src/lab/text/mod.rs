//! The words a learner reads after a run, in English and in Chinese, kept in one place per
//! language: [`en`] and [`zh`]. A lesson never writes a sentence itself; it names one and
//! passes its arguments, with the numbers already formatted:
//!
//! ```text
//! r.explain(t!("overlap.serial", ms = fixed(one.time.median, 3)));
//! ```
//!
//! The line is kept as a [`Text`] (its key and arguments) and rendered when it is printed, in
//! the language `--lang` picked ([`Lang`]). The report's JSON keeps the English rendering in
//! its old fields, so scripts and tests see the same ids and lines as before, and the keys
//! beside them.
//!
//! Names that are ids in JSON (check names, figure names, version names, lesson summaries)
//! stay English in the lesson; [`zh::LABELS`] translates them for display, with `{x}` holes
//! for the parts that vary (`"{k} streams"`).
pub mod en;
pub mod zh;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The language of the text a learner reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    /// The values `--lang` takes.
    pub const NAMES: [&'static str; 2] = ["en", "zh"];

    /// `en` or `zh`.
    pub fn parse(name: &str) -> Option<Lang> {
        match name {
            "en" => Some(Lang::En),
            "zh" => Some(Lang::Zh),
            _ => None,
        }
    }

    /// The language of a locale's settings, in POSIX order: the first of `LC_ALL`,
    /// `LC_MESSAGES` and `LANG` that is set and not empty decides; Chinese when it starts
    /// with `zh` (`zh_CN.UTF-8`, `zh_TW`), else English (`C`, `en_US.UTF-8`, unset).
    pub fn from_locale(
        lc_all: Option<&str>,
        lc_messages: Option<&str>,
        lang: Option<&str>,
    ) -> Lang {
        let first = [lc_all, lc_messages, lang].into_iter().flatten().find(|v| !v.is_empty());
        match first {
            Some(v) if v.to_ascii_lowercase().starts_with("zh") => Lang::Zh,
            _ => Lang::En,
        }
    }

    /// [`Lang::from_locale`] of this process's environment.
    pub fn from_env() -> Lang {
        let var = |name| std::env::var(name).ok();
        let (all, messages, lang) = (var("LC_ALL"), var("LC_MESSAGES"), var("LANG"));
        Lang::from_locale(all.as_deref(), messages.as_deref(), lang.as_deref())
    }

    fn messages(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Lang::En => en::MESSAGES,
            Lang::Zh => zh::MESSAGES,
        }
    }
}

/// A line or a part of one, kept so that it can be rendered in any language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Text {
    /// A sentence of the catalogs: its key and its arguments by name.
    Message {
        key: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        args: BTreeMap<String, Text>,
    },
    /// An English name that is an id (a version, a stage), translated by [`zh::LABELS`].
    Label { label: String },
    /// Shown as it is in every language: a number, a flag, a path.
    Plain(String),
    /// Items shown one after the other, separated by commas.
    List(Vec<Text>),
}

impl Text {
    /// What [`t!`](crate::t) builds.
    pub fn message(key: &str, args: Vec<(&str, Text)>) -> Text {
        let args = args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        Text::Message { key: key.into(), args }
    }

    /// An id shown translated where [`zh::LABELS`] has it.
    pub fn label(english: impl Into<String>) -> Text {
        Text::Label { label: english.into() }
    }

    /// The text in `lang`. A key missing from `lang` falls back to English, then to the key.
    pub fn render(&self, lang: Lang) -> String {
        match self {
            Text::Plain(s) => s.clone(),
            Text::Label { label: l } => label(lang, l),
            Text::List(items) => {
                items.iter().map(|i| i.render(lang)).collect::<Vec<_>>().join(", ")
            }
            Text::Message { key, args } => {
                let template = find(lang.messages(), key)
                    .or_else(|| find(en::MESSAGES, key))
                    .unwrap_or(key.as_str());
                fill(template, |name| args.get(name).map(|a| a.render(lang)))
            }
        }
    }

    /// The key of a message.
    pub fn key(&self) -> Option<&str> {
        match self {
            Text::Message { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The text in English: what the JSON report and the tests read.
    pub fn en(&self) -> String {
        self.render(Lang::En)
    }

    /// Whether a catalog holds this text (a message, or a label `zh` translates), as
    /// opposed to English passed through untranslated.
    pub fn is_translated(&self) -> bool {
        match self {
            Text::Plain(_) => false,
            Text::List(items) => items.iter().all(Text::is_translated),
            Text::Label { label: l } => label(Lang::Zh, l) != *l,
            Text::Message { key, .. } => find(zh::MESSAGES, key).is_some(),
        }
    }

    /// The message `english` is a rendering of, found by matching it against every English
    /// template (its arguments recovered the same way, else as labels); `Plain` when none
    /// matches. This renders reports that kept only their English lines (runs recorded
    /// before the keys were stored) in another language.
    pub fn recover(english: &str) -> Text {
        recover(english, true)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::Plain(s)
    }
}

/// A `&'static str` is a name in the program (a stage, a version, a literal): a label,
/// translated where [`zh::LABELS`] has it. Text made at run time comes as a `String`.
impl From<&'static str> for Text {
    fn from(s: &'static str) -> Text {
        Text::label(s)
    }
}

impl From<&String> for Text {
    fn from(s: &String) -> Text {
        Text::Plain(s.clone())
    }
}

macro_rules! plain_from_display {
    ($($t:ty),*) => {$(
        impl From<$t> for Text {
            fn from(v: $t) -> Text {
                Text::Plain(v.to_string())
            }
        }
    )*};
}
plain_from_display!(usize, u32, u64, i32, i64);

/// What [`t!`](crate::t) takes as an argument, by reference (so one value can fill holes in
/// several messages): a [`Text`], a `String` (plain), a `&'static str` (a label), an integer.
pub trait Arg {
    fn arg(&self) -> Text;
}

impl Arg for Text {
    fn arg(&self) -> Text {
        self.clone()
    }
}

impl Arg for String {
    fn arg(&self) -> Text {
        Text::Plain(self.clone())
    }
}

impl Arg for &'static str {
    fn arg(&self) -> Text {
        Text::label(*self)
    }
}

macro_rules! plain_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn arg(&self) -> Text {
                Text::Plain(self.to_string())
            }
        }
    )*};
}
plain_arg!(usize, u32, u64, i32, i64);

/// `value` with `decimals` digits after the point: how a lesson formats a figure it passes.
pub fn fixed(value: f64, decimals: usize) -> Text {
    Text::Plain(format!("{value:.decimals$}"))
}

/// A message of the catalogs: `t!("key", name = value, other)` where each value is an
/// [`Arg`] (a `String` or an integer is shown as it is; `other` alone means `other = other`).
#[macro_export]
macro_rules! t {
    ($key:literal $(, $name:ident $(= $value:expr)?)* $(,)?) => {
        $crate::lab::text::Text::message(
            $key,
            vec![$((stringify!($name), $crate::t!(@arg $name $(= $value)?))),*],
        )
    };
    (@arg $name:ident = $value:expr) => {
        $crate::lab::text::Arg::arg(&$value)
    };
    (@arg $name:ident) => {
        $crate::lab::text::Arg::arg(&$name)
    };
}

fn find(catalog: &'static [(&'static str, &'static str)], key: &str) -> Option<&'static str> {
    catalog.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

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
fn fill(template: &str, arg: impl Fn(&str) -> Option<String>) -> String {
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
enum Holes {
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

/// The best match of `text` among `patterns`: the one with the most literal text.
fn best_match<'p, 't>(
    patterns: impl Iterator<Item = (&'p str, &'p str)>,
    text: &'t str,
    holes: Holes,
) -> Option<(&'p str, Vec<(&'p str, &'t str)>)> {
    let mut best: Option<(usize, &str, Vec<(&str, &str)>)> = None;
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
            best = Some((literal, key, names.zip(values).collect()));
        }
    }
    best.map(|(_, key, args)| (key, args))
}

/// The English messages a line of a report can be: all but the report's own frame
/// (`report.check` would read any "a: b" as a check line).
fn recoverable() -> impl Iterator<Item = (&'static str, &'static str)> {
    en::MESSAGES.iter().copied().filter(|(key, _)| !key.starts_with("report."))
}

/// [`zh::LABELS`]' English patterns, as [`best_match`] takes them.
fn label_patterns() -> impl Iterator<Item = (&'static str, &'static str)> {
    zh::LABELS.iter().map(|(en, _)| (*en, *en))
}

fn recover(english: &str, whole_line: bool) -> Text {
    let messages = recoverable;
    // An argument that is a name (a version, a stage) stays one.
    if !whole_line && best_match(label_patterns(), english, Holes::LabelHoles).is_some() {
        return Text::label(english);
    }
    // A list of messages ("prepared 0 (2.16), enqueued 0 (2.19)") before one message.
    let items: Vec<&str> = english.split(", ").collect();
    let all_items = items.iter().all(|i| best_match(messages(), i, Holes::Anything).is_some());
    if !whole_line && items.len() > 1 && all_items {
        return Text::List(items.into_iter().map(|i| recover(i, false)).collect());
    }
    match best_match(messages(), english, Holes::Anything) {
        Some((key, args)) => Text::Message {
            key: key.into(),
            args: args.into_iter().map(|(n, v)| (n.to_string(), recover(v, false))).collect(),
        },
        None if whole_line => Text::Plain(english.into()),
        None => Text::label(english),
    }
}

/// `english` (a check, figure or version name, a unit, a summary) in `lang`: the
/// [`zh::LABELS`] entry it matches, its holes translated the same way; else unchanged.
pub fn label(lang: Lang, english: &str) -> String {
    if lang == Lang::En {
        return english.into();
    }
    match best_match(label_patterns(), english, Holes::LabelHoles) {
        Some((pattern, args)) => {
            let zh = find(zh::LABELS, pattern).unwrap_or(pattern);
            fill(zh, |name| args.iter().find(|(n, _)| *n == name).map(|(_, v)| label(lang, v)))
        }
        None => english.into(),
    }
}

/// Columns a terminal gives `s`: two for each wide (CJK, full-width) character.
pub fn width(s: &str) -> usize {
    s.chars()
        .map(|c| {
            let wide = matches!(c as u32,
                0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF
                | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6);
            if wide {
                2
            } else {
                1
            }
        })
        .sum()
}

/// `s` padded with spaces to `columns` terminal columns.
pub fn pad(s: &str, columns: usize) -> String {
    format!("{s}{}", " ".repeat(columns.saturating_sub(width(s))))
}
