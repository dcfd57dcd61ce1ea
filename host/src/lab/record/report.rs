//! What a lesson run hands back: its figures, its checks and what they mean, printable as
//! text for a learner or as JSON for a script.
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::text::{label, pad, width, Lang, Text};

/// The identity of the kernels this binary embeds: a 64-bit FNV-1a digest of every embedded
/// PTX text (`runtime::ptx::embedded()`, one per architecture), one after the other, oldest
/// architecture first, in hex. Two builds share it when they embed the same PTX set (the same
/// kernel source, compiler and architectures); a change to any kernel, or to the set,
/// changes it. A set of one PTX has the digest of that text alone, which is what builds made
/// before PTX per architecture (one PTX, for sm_75) carried. Not a security digest: it tells
/// builds apart, nothing more.
pub fn kernels_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| set_id(crate::runtime::ptx::embedded().iter().map(|p| p.text)))
}

/// The key of `Report::details` that names the PTX the run's GPU loaded (`{arch, choice}`),
/// kept since PTX per architecture.
pub const LOADED_PTX: &str = "ptx";

/// `ptx-<FNV-1a 64 of the texts, one after the other>`.
fn set_id<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    format!("ptx-{:016x}", fnv1a(texts.flat_map(str::bytes)))
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes
        .into_iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Passed,
    Failed,
    /// Not asserted, for a reason given in the detail (a concurrency check under
    /// compute-sanitizer, which serializes kernels).
    NotAsserted,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// The check's id, in English (a label that [`label`] translates for display).
    pub name: String,
    pub verdict: Verdict,
    /// The detail, in English.
    pub detail: String,
    /// The detail as a message, from which `--lang` renders it (absent where the detail is
    /// plain text, or in runs recorded before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// A claim about the technique's speed on this GPU (made with `Checks::concurrency`: a
    /// concurrency that shows up as time), not a result: a lesson fails on it, but a test of
    /// results does not (a slow or shared GPU is no wrong answer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub claim: bool,
}

impl Check {
    pub fn passed(&self) -> bool {
        self.verdict != Verdict::Failed
    }

    /// The detail in `lang`: from its message, else recovered from the English.
    pub fn detail_in(&self, lang: Lang) -> String {
        match (&self.text, lang) {
            (_, Lang::En) => self.detail.clone(),
            (Some(t), _) => t.render(lang),
            (None, _) => Text::recover(&self.detail).render(lang),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub lesson: String,
    pub title: String,
    pub device: String,
    /// Which kernels made the figures: [`kernels_id`] of the binary that ran. Runs recorded
    /// before it was kept have none (`--recorded` says so: [`crate::lab::record::recorded_runs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<String>,
    pub parameters: Map<String, Value>,
    pub figures: Vec<Figure>,
    pub checks: Vec<Check>,
    /// What the numbers mean, in English.
    pub interpretation: Vec<String>,
    /// The same lines as messages (key and arguments), from which `--lang` renders them.
    /// Runs recorded before they were kept have none: their English lines are matched
    /// against the English catalog instead ([`Text::recover`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<String>,
    /// Anything else a script may want (per-K rows, per-kernel stamps, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub details: Map<String, Value>,
}

/// For the lessons' tests of their text.
#[cfg(test)]
impl Report {
    /// Under `--lang zh` every interpretation line and every check detail in `details` reads
    /// in Chinese with no English sentence left, and every figure name and every name in
    /// `names` (versions, the summary) has its Chinese label.
    pub(crate) fn assert_chinese<'a>(
        &self,
        details: &[Text],
        names: impl IntoIterator<Item = &'a str>,
    ) {
        use crate::text::{english_sentence, has_chinese};
        for line in self.messages.iter().chain(details) {
            let zh = line.render(Lang::Zh);
            assert!(has_chinese(&zh) && english_sentence(&zh).is_none(), "{zh}");
        }
        let figures = self.figures.iter().map(|f| f.name.clone());
        for name in figures.chain(names.into_iter().map(str::to_string)) {
            assert!(Text::label(name.clone()).is_translated(), "{name} has no Chinese");
        }
    }
}

impl Report {
    pub fn new(lesson: &str, title: &str, device: &str) -> Report {
        Report {
            lesson: lesson.into(),
            title: title.into(),
            device: device.into(),
            kernels: Some(kernels_id().to_string()),
            parameters: Map::new(),
            figures: Vec::new(),
            checks: Vec::new(),
            interpretation: Vec::new(),
            messages: Vec::new(),
            timeline: None,
            details: Map::new(),
        }
    }

    pub fn param(&mut self, name: &str, value: impl Into<Value>) -> &mut Self {
        self.parameters.insert(name.into(), value.into());
        self
    }

    pub fn figure(&mut self, name: &str, value: f64, unit: &str) -> &mut Self {
        self.figures.push(Figure { name: name.into(), value, unit: unit.into() });
        self
    }

    /// Adds a line of interpretation: a message of the catalogs (`t!`), or a `String`
    /// shown as it is in every language.
    pub fn explain(&mut self, line: impl Into<Text>) -> &mut Self {
        let line = line.into();
        self.interpretation.push(line.en());
        self.messages.push(line);
        self
    }

    /// The interpretation in `lang`, line by line.
    pub fn interpretation_in(&self, lang: Lang) -> Vec<String> {
        if lang == Lang::En {
            return self.interpretation.clone();
        }
        if self.messages.len() == self.interpretation.len() {
            return self.messages.iter().map(|m| m.render(lang)).collect();
        }
        self.interpretation.iter().map(|l| Text::recover(l).render(lang)).collect()
    }

    pub fn detail(&mut self, key: &str, value: impl Serialize) -> &mut Self {
        self.details.insert(key.into(), serde_json::to_value(value).unwrap_or(Value::Null));
        self
    }

    /// The value of a figure by name (tests and benches read figures back).
    pub fn value(&self, name: &str) -> Option<f64> {
        self.figures.iter().find(|f| f.name == name).map(|f| f.value)
    }

    pub fn passed(&self) -> bool {
        self.checks.iter().all(Check::passed)
    }

    /// The learner-facing text form, in English.
    pub fn to_text(&self) -> String {
        self.to_text_in(Lang::En)
    }

    /// The learner-facing text form in `lang`: headings, figure and check names, check
    /// details and interpretation translated; numbers, ids in JSON and the timeline as they are.
    pub fn to_text_in(&self, lang: Lang) -> String {
        let say = |key: &str, args: Vec<(&str, Text)>| Text::message(key, args).render(lang);
        let mut out = format!("== {} — {}\n", self.lesson, label(lang, &self.title));
        out.push_str(&say("report.device", vec![("device", Text::Plain(self.device.clone()))]));
        out.push('\n');
        if !self.parameters.is_empty() {
            let params: Vec<String> =
                self.parameters.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&say("report.parameters", vec![("list", Text::Plain(params.join(", ")))]));
            out.push('\n');
        }
        let names: Vec<String> = self.figures.iter().map(|f| label(lang, &f.name)).collect();
        let columns = names.iter().map(|n| width(n)).max().unwrap_or(0);
        for (f, name) in self.figures.iter().zip(&names) {
            out.push_str(&format!(
                "  {}  {:>12} {}\n",
                pad(name, columns),
                format_value(f.value),
                label(lang, &f.unit)
            ));
        }
        if let Some(t) = &self.timeline {
            out.push_str(&timeline_in(t, lang));
        }
        for c in &self.checks {
            let mark = match c.verdict {
                Verdict::Passed => "ok  ",
                Verdict::Failed => "FAIL",
                Verdict::NotAsserted => "--  ",
            };
            let (name, detail) = (Text::label(&c.name), Text::Plain(c.detail_in(lang)));
            out.push_str(&format!(
                "  [{mark}] {}\n",
                say("report.check", vec![("name", name), ("detail", detail)])
            ));
        }
        for line in self.interpretation_in(lang) {
            out.push_str(&format!("  > {line}\n"));
        }
        out
    }
}

/// The timeline text in `lang`: its headings, legend and cost line translated (matched
/// against the catalog's `timeline.` messages), the drawing as it is.
fn timeline_in(text: &str, lang: Lang) -> String {
    if lang == Lang::En {
        return text.into();
    }
    let line_in = |line: &str| {
        let words = line.trim_start();
        match Text::recover(words) {
            m @ Text::Message { .. } if m.key().is_some_and(|k| k.starts_with("timeline.")) => {
                format!("{}{}", &line[..line.len() - words.len()], m.render(lang))
            }
            _ => line.to_string(),
        }
    };
    text.lines().map(|l| line_in(l) + "\n").collect()
}

fn format_value(v: f64) -> String {
    if v == 0.0 || (v.abs() >= 0.01 && v.abs() < 1e7) {
        format!("{v:.3}")
    } else {
        format!("{v:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::t;
    use crate::text::has_chinese;

    fn report() -> Report {
        let mut r = Report::new(
            "overlap",
            "one stream vs K streams each copying in, computing and copying out its chunk",
            "GPU",
        );
        r.figure("8 streams, median", 2.9, "ms");
        r.explain(t!("overlap.serial", ms = "5.018".to_string()));
        r.explain("A line some lesson wrote itself.".to_string());
        r
    }

    #[test]
    fn json_keeps_english_and_the_keys_beside_it() {
        let json = serde_json::to_value(report()).unwrap();
        assert_eq!(
            json["interpretation"][0],
            "One stream runs H, C and D back to back (5.018 ms): each stage waits for the one before."
        );
        assert_eq!(json["messages"][0]["key"], "overlap.serial");
        assert_eq!(json["messages"][0]["args"]["ms"], "5.018");
        assert_eq!(json["messages"][1], "A line some lesson wrote itself.");
        assert_eq!(json["figures"][0]["name"], "8 streams, median");
        assert_eq!(json["kernels"], kernels_id());
    }

    #[test]
    fn the_kernels_id_is_a_digest_of_every_embedded_ptx() {
        // FNV-1a's published test vectors.
        assert_eq!(fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
        // The set's texts one after the other: a set of one is that text's digest.
        assert_eq!(set_id(["foo", "bar"].into_iter()), set_id(["foobar"].into_iter()));
        assert_eq!(set_id(["foobar"].into_iter()), "ptx-85944171f73967e8");
        let set = crate::runtime::ptx::embedded();
        let all: String = set.iter().map(|p| p.text).collect();
        let id = kernels_id();
        assert_eq!(id, format!("ptx-{:016x}", fnv1a(all.bytes())));
        assert_eq!(id.len(), "ptx-".len() + 16, "{id}");
        // Every architecture counts: the digest of a set of several is none of its members'.
        for p in set.iter().filter(|_| set.len() > 1) {
            assert_ne!(set_id([p.text].into_iter()), id, "{}", p.arch);
        }
    }

    #[test]
    fn text_renders_in_the_language_asked_from_stored_or_recovered_messages() {
        let r = report();
        let en = r.to_text_in(Lang::En);
        assert_eq!(en, r.to_text());
        assert!(en.contains("  > One stream runs H, C and D") && !has_chinese(&en), "{en}");
        let zh = r.to_text_in(Lang::Zh);
        assert!(zh.contains("  8 个流，中位数") && zh.contains("设备：GPU"), "{zh}");
        assert!(zh.contains("  > 单个流把 H、C、D 依次执行（5.018 ms）"), "{zh}");
        // What a lesson wrote itself stays as it was.
        assert!(zh.contains("  > A line some lesson wrote itself."), "{zh}");
        // A report recorded before the keys were kept: the English lines are recognized.
        let mut old = serde_json::to_value(&r).unwrap();
        old.as_object_mut().unwrap().remove("messages");
        let old: Report = serde_json::from_value(old).unwrap();
        assert!(old.messages.is_empty());
        assert_eq!(old.to_text_in(Lang::Zh), zh);
    }
}
