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
pub mod flag_values;
pub mod zh;
// Below the messages: templates cut, filled and matched (`template`); above them, English
// lines read back into messages (`read_back`, which adds `Text::recover`).
mod read_back;
#[cfg(test)]
mod source_tests;
mod template;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::text::template::{best_match, fill, label_patterns, Holes};
pub use crate::text::template::{holes, pieces, Piece};

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

    /// The language `--lang` names among `args` (before a `--`, as `--lang zh` or
    /// `--lang=zh`), else the locale's: for lines said before the flags are parsed (an error
    /// of the command line) or by a process that passes them on (the launcher).
    pub fn named_in(args: &[String]) -> Lang {
        let own: Vec<&str> = args.iter().take_while(|a| *a != "--").map(String::as_str).collect();
        let named = own.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--lang=") {
            Some(value) => Some(value),
            None if *a == "--lang" => own.get(i + 1).copied(),
            None => None,
        });
        Lang::or_locale(named)
    }

    /// The language `name` (a `--lang` value) says, else the locale's.
    pub fn or_locale(name: Option<&str>) -> Lang {
        name.and_then(Lang::parse).unwrap_or_else(Lang::from_env)
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
                let template = message(lang.messages(), key)
                    .or_else(|| message(en::MESSAGES, key))
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
            Text::Label { label: l } => {
                best_match(label_patterns(), l, Holes::LabelHoles).is_some()
            }
            Text::Message { key, .. } => message(zh::MESSAGES, key).is_some(),
        }
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

impl Arg for &Text {
    fn arg(&self) -> Text {
        (*self).clone()
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
        $crate::text::Text::message(
            $key,
            vec![$((stringify!($name), $crate::t!(@arg $name $(= $value)?))),*],
        )
    };
    (@arg $name:ident = $value:expr) => {
        $crate::text::Arg::arg(&$value)
    };
    (@arg $name:ident) => {
        $crate::text::Arg::arg(&$name)
    };
}

fn find(catalog: &'static [(&'static str, &'static str)], key: &str) -> Option<&'static str> {
    catalog.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Key prefixes renamed to the lesson's name (or the lab part's) after runs were recorded
/// with the old ones. The runs embedded from `docs/recorded/` store their messages by key,
/// and `--recorded --json` prints the keys as stored, so the old keys are not rewritten when
/// a run is read: a message is looked up under its new key when it is rendered.
const RENAMED: [(&str, &str); 9] = [
    ("allreduce.", "allreduce_overlap."),
    ("mixed.", "mixed_precision."),
    ("pinned.", "pinned_vs_pageable."),
    ("soa.", "stream_ordered_alloc."),
    ("unified.", "unified_memory."),
    ("graph_sweep.", "graph.sweep_"),
    ("replay.", "graph.replay_"),
    ("race.", "events.race_"),
    ("host_pipeline.", "host_batch_log."),
];

/// The template of the message `key` in `catalog`, under its key or, for a key a recorded
/// run kept from before a rename ([`RENAMED`]), under the key it has now.
fn message(catalog: &'static [(&'static str, &'static str)], key: &str) -> Option<&'static str> {
    find(catalog, key).or_else(|| {
        let (old, new) = RENAMED.iter().find(|(old, _)| key.starts_with(old))?;
        find(catalog, &format!("{new}{}", &key[old.len()..]))
    })
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

/// Whether `s` holds Chinese: a CJK ideograph or Chinese punctuation.
pub fn has_chinese(s: &str) -> bool {
    s.chars().any(|c| matches!(c, '\u{4e00}'..='\u{9fff}' | '\u{3000}'..='\u{303f}' | '\u{ff00}'..='\u{ffef}'))
}

/// The first run of four or more English words in `s` outside `code spans`, if any: what a
/// line rendered in Chinese must not hold (names, units, flags and API calls are one or two
/// words).
pub fn english_sentence(s: &str) -> Option<String> {
    let prose: String = s.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let is_word = |w: &str| w.len() > 1 && w.chars().all(|c| c.is_ascii_alphabetic() || c == '\'');
    let words: Vec<&str> = prose.split(' ').collect();
    let mut run: Vec<&str> = Vec::new();
    for w in words {
        if is_word(w.trim_end_matches([',', '.', ';', ':'])) {
            run.push(w);
            if run.len() >= 4 {
                return Some(run.join(" "));
            }
        } else {
            run.clear();
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::text::has_chinese as has_cjk;

    fn keys(catalog: &[(&str, &str)]) -> Vec<String> {
        let mut k: Vec<String> = catalog.iter().map(|(k, _)| k.to_string()).collect();
        k.sort();
        k
    }

    #[test]
    fn every_key_is_in_both_languages_with_the_same_holes() {
        assert_eq!(keys(en::MESSAGES), keys(zh::MESSAGES), "the two catalogs' keys differ");
        let mut seen = std::collections::BTreeSet::new();
        for (key, english) in en::MESSAGES {
            assert!(seen.insert(key), "{key}: twice in en.rs");
            let chinese = find(zh::MESSAGES, key).unwrap();
            assert_eq!(holes(english), holes(chinese), "{key}: the holes differ");
            assert!(has_cjk(chinese) || chinese == *english, "{key}: not Chinese: {chinese}");
            for template in [english, chinese] {
                let p = pieces(template);
                let adjacent = p.windows(2).any(|w| matches!(w, [Piece::Hole(_), Piece::Hole(_)]));
                assert!(!adjacent, "{key}: two holes side by side cannot be told apart");
                assert!(!template.contains('{') || !holes(template).is_empty(), "{key}: a brace");
            }
        }
        for (english, chinese) in zh::LABELS {
            assert_eq!(holes(english), holes(chinese), "label {english:?}: the holes differ");
            assert!(has_cjk(chinese) || chinese == english, "label {english:?}: {chinese}");
        }
    }

    #[test]
    fn the_checks_above_can_fail() {
        assert_ne!(holes("{a} and {b}"), holes("{a} and {c}"));
        let adjacent = pieces("{a}{b}");
        assert!(matches!(adjacent[..], [Piece::Hole("a"), Piece::Hole("b")]));
        assert!(!has_cjk("plain English") && has_cjk("流"));
    }

    #[test]
    fn a_message_renders_in_each_language_and_falls_back_to_english() {
        let line = t!("overlap.faster", k = 8usize, ms = fixed(2.9074, 3), x = fixed(1.7258, 2));
        assert_eq!(
            line.en(),
            "With 8 streams the copy engines move chunk i+1 in and chunk i-1 out while chunk i computes: 2.907 ms, 1.73x faster."
        );
        let zh = line.render(Lang::Zh);
        assert!(has_cjk(&zh) && zh.contains("2.907") && zh.contains("1.73"), "{zh}");
        // A key only English has is shown in English; an unknown key as itself.
        assert_eq!(Text::message("no.such.key", vec![]).render(Lang::Zh), "no.such.key");
        // Nested messages and labels render in the same language.
        let nested = t!("check.not_asserted", why = t!("launch_order.one_kernel"));
        assert_eq!(nested.en(), "not asserted: one kernel has nothing to overlap");
        assert!(has_cjk(&nested.render(Lang::Zh)));
        assert_eq!(Text::label("8 streams").render(Lang::Zh), "8 个流");
        assert_eq!(Text::label("legacy streams").render(Lang::Zh), "legacy streams");
        assert_eq!(Text::from("4.5".to_string()).render(Lang::Zh), "4.5");
    }

    /// Recorded runs keep the keys they were recorded with: a renamed one renders as its
    /// new key does, in both languages, and the catalogs hold no key under an old prefix.
    #[test]
    fn a_key_from_before_a_rename_renders_as_its_new_key() {
        let old = t!("soa.held", held = fixed(7.613, 3), k = 4usize, sync = fixed(7.626, 3));
        let new = t!(
            "stream_ordered_alloc.held",
            held = fixed(7.613, 3),
            k = 4usize,
            sync = fixed(7.626, 3)
        );
        assert_eq!(old.en(), new.en());
        assert_eq!(old.render(Lang::Zh), new.render(Lang::Zh));
        assert!(old.is_translated());
        for (old, new) in RENAMED {
            assert!(en::MESSAGES.iter().all(|(k, _)| !k.starts_with(old)), "{old} is still a key");
            assert!(en::MESSAGES.iter().any(|(k, _)| k.starts_with(new)), "no key {new}...");
        }
    }

    #[test]
    fn the_locale_decides_unless_the_flag_does() {
        assert_eq!(Lang::from_locale(None, None, None), Lang::En);
        assert_eq!(Lang::from_locale(None, None, Some("zh_CN.UTF-8")), Lang::Zh);
        assert_eq!(Lang::from_locale(None, None, Some("zh_TW")), Lang::Zh);
        assert_eq!(Lang::from_locale(None, None, Some("en_US.UTF-8")), Lang::En);
        // POSIX order: LC_ALL, then LC_MESSAGES, then LANG; an empty value is unset.
        assert_eq!(Lang::from_locale(Some("C"), None, Some("zh_CN.UTF-8")), Lang::En);
        assert_eq!(Lang::from_locale(Some(""), Some("zh_CN"), Some("en_US")), Lang::Zh);
        assert_eq!(Lang::from_locale(None, Some("en_GB"), Some("zh_CN")), Lang::En);
        assert_eq!(Lang::from_locale(Some("zh_HK.UTF-8"), Some("C"), None), Lang::Zh);
        assert_eq!(
            (Lang::parse("zh"), Lang::parse("en"), Lang::parse("xx")),
            (Some(Lang::Zh), Some(Lang::En), None)
        );
    }

    /// `run all --lang zh` printed "未运行：needs 2 GPUs, found 1" on a one-GPU H200.
    #[test]
    fn why_a_lesson_did_not_run_is_translated() {
        let why = t!("error.kit.needs_gpus", n = 2usize, found = 1u32);
        assert_eq!(why.render(Lang::Zh), "需要 2 块 GPU，只找到 1 块");
        assert_eq!(why.render(Lang::En), "needs 2 GPUs, found 1");
        let unknown = Text::label(String::from("NCCL could not be loaded"));
        assert_eq!(unknown.render(Lang::Zh), "NCCL could not be loaded");
    }

    #[test]
    fn display_width_counts_wide_characters_twice() {
        assert_eq!(width("ms"), 2);
        assert_eq!(width("流"), 2);
        assert_eq!(pad("流", 4), "流  ");
    }

    #[test]
    fn an_english_sentence_is_found_outside_code() {
        assert_eq!(
            english_sentence("see the check before it ends").as_deref(),
            Some("see the check before")
        );
        assert_eq!(english_sentence("见 `streamlab run stream-sweep and more`。"), None);
        assert_eq!(english_sentence("H2D 可分页 100%, D2H pinned 0%"), None);
        assert!(english_sentence("the copy engine, reads it.").is_some());
    }
}
