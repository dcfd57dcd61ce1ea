//! What each call's samples answer, the checks on what CUDA promises, and the lines that
//! explain a run: functions of the measurements alone, so they are tested without a GPU.
use crate::lab::harness::VersionStats;
use crate::lab::{fixed, t, Measured, Report, Text};
use crate::runtime::{Error, Result};

use super::{Call, Promise, ASKED, CALLS, LEGACY_GAP_US, MEMSET_AFTER, SHORT_FRACTION, WAITED};

/// Did the call wait for stream A's kernel, over every repeat of its version?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// It returned after the kernel had ended, in every repeat.
    Waited,
    /// It returned while the kernel still ran, in every repeat.
    Returned,
    /// It waited in some repeats and not in others.
    Mixed,
    /// In some repeat the kernel had ended before the call began: nothing to wait for.
    NotAsked,
}

/// The answer of a version's samples (each a 1 or 0 for [`ASKED`] and [`WAITED`]).
pub fn answer(v: &VersionStats) -> Answer {
    let asked = v.part_stats(ASKED).is_some_and(|s| s.min >= 1.0);
    match v.part_stats(WAITED) {
        Some(_) if !asked => Answer::NotAsked,
        None => Answer::NotAsked,
        Some(w) if w.min >= 1.0 => Answer::Waited,
        Some(w) if w.max <= 0.0 => Answer::Returned,
        Some(_) => Answer::Mixed,
    }
}

fn answer_text(a: Answer) -> Text {
    match a {
        Answer::Waited => t!("implicit_sync.answer_waited"),
        Answer::Returned => t!("implicit_sync.answer_returned"),
        Answer::Mixed => t!("implicit_sync.answer_mixed"),
        Answer::NotAsked => t!("implicit_sync.answer_not_asked"),
    }
}

/// The check of what CUDA promises of `call`'s host side, or `None` where it promises
/// nothing ([`Promise::Either`]) or the run could not ask (stream A's kernel had ended
/// before the call in some repeat).
pub fn check_host(call: Call, v: &VersionStats) -> Option<Result<Text>> {
    let (n, ms) = (v.time.count, fixed(v.time.median, 3));
    let outcome = match (call.promise(), answer(v)) {
        (Promise::Either, _) | (_, Answer::NotAsked) => return None,
        (Promise::Waits, Answer::Waited) => Ok(t!("implicit_sync.waited_check", n, ms)),
        (Promise::Waits, _) => {
            let call = call.name().to_string();
            Err(Error::Verification(t!("error.implicit_sync.returned_early", call)))
        }
        (_, Answer::Returned) => Ok(t!("implicit_sync.returned_check", n, ms)),
        (_, waited) => {
            let call = call.name().to_string();
            Err(Error::Verification(if waited == Answer::Waited {
                t!("error.implicit_sync.waited_in_every_repeat", call)
            } else {
                t!("error.implicit_sync.waited_in_some_repeat", call)
            }))
        }
    };
    Some(outcome)
}

/// Why a call CUDA promises nothing of is not asserted, with what this run saw.
pub fn measured_only(v: &VersionStats) -> Text {
    t!("implicit_sync.measured_only", answer = answer_text(answer(v)))
}

/// Why a promised call could not be asserted in this run.
pub fn not_asked() -> Text {
    t!("implicit_sync.not_asked")
}

/// The memset, aimed at stream A's kernel's stamps, erased both in every repeat: it ran after
/// the kernel wrote its end. On the legacy default stream it must.
pub fn check_memset_after(v: &VersionStats) -> Result<Text> {
    match v.part_stats(MEMSET_AFTER) {
        Some(s) if s.min >= 1.0 => Ok(t!("implicit_sync.memset_after_check", n = s.count)),
        _ => Err(Error::Verification(t!("error.implicit_sync.memset_before"))),
    }
}

/// The legacy default stream's kernel started after stream A's kernel ended, in every repeat
/// (GPU stamps).
pub fn check_legacy_after(v: &VersionStats) -> Result<Text> {
    match v.part_stats(LEGACY_GAP_US) {
        Some(s) if s.min >= 0.0 => {
            Ok(t!("implicit_sync.legacy_after_check", n = s.count, gap = fixed(s.min, 1)))
        }
        Some(s) => {
            let us = fixed(-s.min, 1);
            Err(Error::Verification(t!("error.implicit_sync.legacy_started_early", us)))
        }
        None => Err(Error::Internal("the legacy launch's version has no stamps".into())),
    }
}

fn version(m: &Measured, call: Call) -> &VersionStats {
    let index = CALLS.iter().position(|&c| c == call).unwrap_or_default();
    m.version(index)
}

/// The figures and what they mean, for a kernel of `long_us` on stream A.
pub fn interpret(long_us: f64, m: &Measured, r: &mut Report) {
    let legacy = version(m, Call::LegacyLaunch);
    let gap = legacy.part(LEGACY_GAP_US);
    r.figure("kernel on stream A (nominal)", long_us / 1e3, "ms")
        .figure(
            "kernel on the legacy default stream (nominal)",
            long_us * SHORT_FRACTION / 1e3,
            "ms",
        )
        .figure("legacy kernel: start after stream A's kernel ended", gap, "µs");
    r.explain(t!("implicit_sync.setup", ms = fixed(long_us / 1e3, 3)));
    for (&call, v) in CALLS.iter().zip(&m.versions) {
        let (ms, answer) = (fixed(v.time.median, 3), answer_text(answer(v)));
        r.explain(t!("implicit_sync.answer", call = call.name(), ms, answer));
    }

    let memset = version(m, Call::Memset);
    let after = check_memset_after(memset).is_ok();
    r.explain(match (after, answer(memset)) {
        (true, Answer::Returned) => t!("implicit_sync.memset_two_waits"),
        (true, _) => t!("implicit_sync.memset_after"),
        (false, _) => t!("implicit_sync.memset_not_after"),
    });
    let gap = fixed(gap, 1);
    r.explain(match (check_legacy_after(legacy).is_ok(), answer(legacy)) {
        (true, Answer::Returned) => t!("implicit_sync.legacy_two_waits", gap),
        (true, _) => t!("implicit_sync.legacy_after", gap),
        (false, _) => t!("implicit_sync.legacy_not_after"),
    });

    let maybe: Vec<Call> = CALLS.into_iter().filter(|c| c.promise() == Promise::Either).collect();
    let answers: Vec<Answer> = maybe.iter().map(|&c| answer(version(m, c))).collect();
    let waited: Vec<Text> = maybe
        .iter()
        .zip(&answers)
        .filter(|(_, a)| matches!(a, Answer::Waited | Answer::Mixed))
        .map(|(c, _)| Text::from(c.name()))
        .collect();
    if !waited.is_empty() {
        r.explain(t!("implicit_sync.maybe_waited", calls = Text::List(waited)));
    } else if answers.iter().all(|&a| a == Answer::Returned) {
        r.explain(t!("implicit_sync.maybe_none"));
    }
    r.explain(t!("implicit_sync.pytorch"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;
    use crate::lab::{Lesson, Sample};
    use crate::lessons::implicit_sync::ImplicitSync;

    /// A repeat of `call`: asked, waited (1 or 0), and its own part where it has one.
    fn sample(call: Call, asked: f64, waited: f64, own: f64) -> Sample {
        let s = Sample::ms(if waited > 0.0 { 20.0 } else { 0.01 })
            .part(ASKED, asked)
            .part(WAITED, waited);
        match call {
            Call::Memset => s.part(MEMSET_AFTER, own),
            Call::LegacyLaunch => s.part(LEGACY_GAP_US, own),
            _ => s,
        }
    }

    /// Two repeats of every call: `waited[i]` for call i (both repeats alike), every
    /// repeat asked, the memset after the kernel and the legacy kernel 3 µs after it.
    fn measured(waited: [f64; 8]) -> Measured {
        measured_with(waited, |_, s| s)
    }

    /// `s` with its part `name` set to `value`.
    fn set(mut s: Sample, name: &str, value: f64) -> Sample {
        s.parts.iter_mut().filter(|(n, _)| *n == name).for_each(|p| p.1 = value);
        s
    }

    fn measured_with(waited: [f64; 8], edit: impl Fn(usize, Sample) -> Sample) -> Measured {
        let runs = CALLS
            .iter()
            .zip(waited)
            .map(|(&c, w)| {
                let own = if c == Call::Memset { 1.0 } else { 3.0 };
                (0..2).map(|i| edit(i, sample(c, 1.0, w, own))).collect()
            })
            .collect();
        let names = ImplicitSync::versions(&args_from::<ImplicitSync>(&[]).unwrap());
        Measured::from_samples(names, runs)
    }

    /// What CUDA promises, and what a driver that waits in the three allocations does.
    const EXPECTED: [f64; 8] = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0];

    fn told(m: &Measured) -> String {
        let mut r = Report::new("implicit-sync", "", "");
        interpret(20_000.0, m, &mut r);
        let checks: Vec<Text> = CALLS
            .iter()
            .zip(&m.versions)
            .filter_map(|(&c, v)| check_host(c, v).and_then(|o| o.ok()))
            .chain([measured_only(&m.versions[0]), not_asked()])
            .collect();
        let names = m.versions.iter().map(|v| v.name.as_str());
        let check_names = CALLS.iter().map(|c| c.check_name());
        r.assert_chinese(&checks, names.chain(check_names));
        r.interpretation.join("\n")
    }

    #[test]
    fn promised_calls_are_checked_against_what_cuda_documents() {
        let m = measured(EXPECTED);
        for (&call, v) in CALLS.iter().zip(&m.versions) {
            match (call.promise(), check_host(call, v)) {
                (Promise::Either, outcome) => assert!(outcome.is_none(), "{call:?}: {outcome:?}"),
                (_, Some(Ok(_))) => {}
                (_, outcome) => panic!("{call:?}: {outcome:?}"),
            }
        }
        assert!(check_memset_after(m.version(4)).is_ok());
        let legacy = check_legacy_after(m.version(7)).unwrap().en();
        assert!(legacy.contains("3.0 µs after it") && legacy.contains("all 2 repeats"), "{legacy}");

        // A synchronize that returned early, an allocation on a stream that waited.
        let wrong = measured([0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let e = check_host(Call::MallocAsync, wrong.version(1)).unwrap().unwrap_err();
        assert!(e.to_string().contains("in every repeat"), "{e}");
        let e = check_host(Call::DeviceSynchronize, wrong.version(6)).unwrap().unwrap_err();
        assert!(e.to_string().contains("still ran in some repeat"), "{e}");
    }

    #[test]
    fn a_repeat_that_could_not_ask_is_not_judged() {
        // The kernel had ended before the call in the second repeat (CUDA_LAUNCH_BLOCKING=1).
        let m = measured_with(EXPECTED, |i, s| match i {
            1 => set(set(s, ASKED, 0.0), WAITED, 1.0),
            _ => s,
        });
        assert_eq!(answer(m.version(1)), Answer::NotAsked);
        assert!(check_host(Call::MallocAsync, m.version(1)).is_none());
        // Mixed: waited once, not the other time.
        let mixed = measured_with(EXPECTED, |i, s| match i {
            1 => set(s, WAITED, 1.0),
            _ => s,
        });
        assert_eq!(answer(mixed.version(0)), Answer::Waited);
        assert_eq!(answer(mixed.version(1)), Answer::Mixed);
        let e = check_host(Call::MallocAsync, mixed.version(1)).unwrap().unwrap_err();
        assert!(e.to_string().contains("in some repeat"), "{e}");
    }

    #[test]
    fn the_gpu_side_orders_are_checked_in_every_repeat() {
        // The memset's stamps survived once; the legacy kernel started 5 µs early once.
        let m = measured_with(EXPECTED, |i, s| match i {
            1 => set(set(s, MEMSET_AFTER, 0.0), LEGACY_GAP_US, -5.0),
            _ => s,
        });
        assert!(check_memset_after(m.version(4)).is_err());
        let e = check_legacy_after(m.version(7)).unwrap_err().to_string();
        assert!(e.contains("5.0 µs before"), "{e}");
        let text = told(&m);
        assert!(text.contains("should not allow") && !text.contains("yet its work waited"));
    }

    #[test]
    fn interpretation_follows_the_data() {
        let waits = told(&measured(EXPECTED));
        assert!(
            waits.contains("cudaMalloc: 20.000 ms in the call; it returned only after")
                && waits.contains(
                    "cudaMallocAsync on stream B: 0.010 ms in the call; it returned while"
                )
                && waits.contains("yet its work waited")
                && waits.contains("started 3.0 µs after stream A's ended")
                && waits.contains("Here cudaMalloc, cudaFree, cudaHostAlloc waited"),
            "{waits}"
        );
        let none = told(&measured([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]));
        assert!(none.contains("none of cudaMalloc, cudaFree and cudaHostAlloc"), "{none}");
        assert!(!none.contains("waited for stream A's kernel in at least"), "{none}");
        // A memset that held the host: its work still ran after the kernel, said plainly.
        let held = told(&measured([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]));
        assert!(held.contains("as work on the legacy default stream must"), "{held}");
        assert!(!held.contains("cudaMemset returned at once"), "{held}");
    }
}
