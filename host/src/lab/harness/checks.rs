//! The checks a lesson records: bit for bit between versions, `approx` against the CPU, and
//! the claims of the technique. A failed check does not stop the run: it is printed, and the
//! exit code says so (5).
use crate::lab::harness::data::{ensure_bitwise_equal, ensure_close_to_reference};
use crate::lab::record::report::{Check, Verdict};
use crate::runtime::Result;
use crate::t;
use crate::text::Text;

/// Whether kernels run one at a time because a tool serializes them: compute-sanitizer
/// (found through the injection library it sets) or `STREAMLAB_SERIALIZED=1`.
pub fn serialized() -> bool {
    if std::env::var("STREAMLAB_SERIALIZED").is_ok_and(|v| v == "1") {
        return true;
    }
    std::env::vars().any(|(key, value)| {
        key.starts_with("NV_SANITIZER")
            || (key.starts_with("CUDA_INJECTION")
                && value.to_ascii_lowercase().contains("sanitizer"))
    })
}

/// The checks of one run.
#[derive(Debug)]
pub struct Checks {
    pub items: Vec<Check>,
    serialized: bool,
}

impl Default for Checks {
    fn default() -> Checks {
        Checks::new(serialized())
    }
}

impl Checks {
    /// `serialized`: concurrency checks are not asserted (see [`serialized`]).
    pub fn new(serialized: bool) -> Checks {
        Checks { items: Vec::new(), serialized }
    }

    /// Records a check: `Ok(detail)` passes, `Err(e)` fails with the error's text. The name
    /// is the check's id (English); the detail a message (`t!`) or a `String`.
    pub fn record<T: Into<Text>>(&mut self, name: &str, outcome: Result<T>) {
        let (verdict, text) = match outcome {
            Ok(detail) => (Verdict::Passed, detail.into()),
            // The error's sentence: its English is the detail, and `--lang` renders it.
            Err(e) => (Verdict::Failed, e.text()),
        };
        self.push(name, verdict, text);
    }

    fn push(&mut self, name: &str, verdict: Verdict, text: Text) {
        let detail = text.en();
        let text = matches!(text, Text::Message { .. }).then_some(text);
        self.items.push(Check { name: name.into(), verdict, detail, text, claim: false });
    }

    /// `a` and `b` identical bit for bit.
    pub fn bitwise(&mut self, name: &str, a: &[f32], b: &[f32]) {
        let outcome = ensure_bitwise_equal(name, a, b).map(|()| t!("check.bitwise", n = a.len()));
        self.record(name, outcome);
    }

    /// `gpu` within tolerance of `reference(i)` at up to `samples` evenly spread indices.
    pub fn approx(
        &mut self,
        name: &str,
        gpu: &[f32],
        samples: usize,
        reference: impl Fn(usize) -> f32,
    ) {
        let outcome =
            ensure_close_to_reference(name, gpu, samples, reference).map(|n| t!("check.approx", n));
        self.record(name, outcome);
    }

    /// A claim that holds only when kernels or copies really run at the same time. Under a
    /// tool that serializes them it is reported, not asserted.
    pub fn concurrency<T: Into<Text>>(&mut self, name: &str, outcome: Result<T>) {
        if self.serialized {
            let detail = match outcome {
                Ok(d) => d.into(),
                Err(e) => e.text(),
            };
            // A lesson may already say why it did not assert: say it once.
            let why = match detail {
                Text::Message { key, mut args } if key == "check.not_asserted" => {
                    args.remove("why").unwrap_or_else(|| Text::Plain(String::new()))
                }
                Text::Plain(d) => {
                    Text::Plain(d.strip_prefix("not asserted: ").unwrap_or(&d).into())
                }
                other => other,
            };
            self.push(name, Verdict::NotAsserted, t!("check.serialized", why));
        } else {
            self.record(name, outcome);
        }
        if let Some(last) = self.items.last_mut() {
            last.claim = true;
        }
    }

    /// A claim the lesson reports but does not assert, because CUDA promises neither outcome
    /// or the run could not ask it: `why` says which, and what was seen. Counted as not
    /// asserted, never as passed.
    pub fn not_asserted(&mut self, name: &str, why: Text) {
        self.push(name, Verdict::NotAsserted, t!("check.not_asserted", why));
    }

    pub fn passed(&self) -> bool {
        self.items.iter().all(Check::passed)
    }

    /// The verdict of the check named `name`, if there is one.
    pub fn verdict(&self, name: &str) -> Option<Verdict> {
        self.items.iter().find(|c| c.name == name).map(|c| c.verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Error;

    #[test]
    fn failures_are_kept_and_concurrency_is_not_asserted_when_serialized() {
        let mut c = Checks::new(false);
        c.bitwise("same", &[1.0, 2.0], &[1.0, 2.0]);
        c.bitwise("differs", &[1.0], &[1.5]);
        c.concurrency("overlap", Err::<String, _>(Error::Verification("no overlap".into())));
        assert_eq!(c.verdict("same"), Some(Verdict::Passed));
        assert_eq!(c.verdict("differs"), Some(Verdict::Failed));
        // A failure's detail is the error's sentence: English, and Chinese under --lang zh.
        assert!(c.items[1].detail.starts_with("verification failed: differs: 1 of 1"));
        let zh = c.items[1].detail_in(crate::text::Lang::Zh);
        assert!(crate::text::has_chinese(&zh), "{zh}");
        assert_eq!(c.verdict("overlap"), Some(Verdict::Failed));
        assert!(!c.passed());

        let mut s = Checks::new(true);
        s.concurrency("overlap", Err::<String, _>(Error::Verification("no overlap".into())));
        s.bitwise("same", &[1.0], &[1.0]);
        assert_eq!(s.verdict("overlap"), Some(Verdict::NotAsserted));
        assert!(s.items[0].detail.contains("serialized by compute-sanitizer"));
        assert!(s.passed());
        assert!(s.items[0].claim && !s.items[1].claim);

        // Reported, not asserted, in or out of a serializing tool: never a pass.
        for serialized in [false, true] {
            let mut c = Checks::new(serialized);
            c.not_asserted("may wait", Text::Plain("CUDA promises neither".into()));
            assert_eq!(c.verdict("may wait"), Some(Verdict::NotAsserted));
            assert_eq!(c.items[0].detail, "not asserted: CUDA promises neither");
            assert!(c.passed());
        }
    }
}
