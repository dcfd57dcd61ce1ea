//! What a lesson run hands back: its figures, its checks and what they mean, printable as
//! text for a learner or as JSON for a script.
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
}

impl Check {
    pub fn passed(&self) -> bool {
        self.verdict != Verdict::Failed
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub lesson: String,
    pub title: String,
    pub device: String,
    pub parameters: Map<String, Value>,
    pub figures: Vec<Figure>,
    pub checks: Vec<Check>,
    pub interpretation: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<String>,
    /// Anything else a script may want (per-K rows, per-kernel stamps, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub details: Map<String, Value>,
}

impl Report {
    pub fn new(lesson: &str, title: &str, device: &str) -> Report {
        Report {
            lesson: lesson.into(),
            title: title.into(),
            device: device.into(),
            parameters: Map::new(),
            figures: Vec::new(),
            checks: Vec::new(),
            interpretation: Vec::new(),
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

    pub fn explain(&mut self, line: impl Into<String>) -> &mut Self {
        self.interpretation.push(line.into());
        self
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

    /// The learner-facing text form.
    pub fn to_text(&self) -> String {
        let mut out = format!("== {} — {}\n", self.lesson, self.title);
        out.push_str(&format!("device: {}\n", self.device));
        if !self.parameters.is_empty() {
            let params: Vec<String> =
                self.parameters.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("parameters: {}\n", params.join(", ")));
        }
        let width = self.figures.iter().map(|f| f.name.len()).max().unwrap_or(0);
        for f in &self.figures {
            out.push_str(&format!(
                "  {:<width$}  {:>12} {}\n",
                f.name,
                format_value(f.value),
                f.unit
            ));
        }
        if let Some(t) = &self.timeline {
            out.push_str(t);
        }
        for c in &self.checks {
            let mark = match c.verdict {
                Verdict::Passed => "ok  ",
                Verdict::Failed => "FAIL",
                Verdict::NotAsserted => "--  ",
            };
            out.push_str(&format!("  [{mark}] {}: {}\n", c.name, c.detail));
        }
        for line in &self.interpretation {
            out.push_str(&format!("  > {line}\n"));
        }
        out
    }
}

fn format_value(v: f64) -> String {
    if v == 0.0 || (v.abs() >= 0.01 && v.abs() < 1e7) {
        format!("{v:.3}")
    } else {
        format!("{v:.3e}")
    }
}
