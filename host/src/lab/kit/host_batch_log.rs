//! The host side of a pipeline of host and GPU work (the `callback` lesson): what the host
//! prepares for each batch, and the log of when it prepared, enqueued, was called back for
//! and consumed each one, with the check and the count read from that log.
use std::time::Instant;

use serde::Serialize;

use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{fixed, Text};

/// Element `j` of batch `batch`: a splitmix64 hash of (seed, batch, j) in [-π, π), what the
/// host "prepares". Deterministic, so every version and the CPU reference see the same data,
/// and costly enough (~1 ns an element) to be real host work.
pub fn batch_value(seed: u64, batch: usize, j: usize) -> f32 {
    let mut z = seed
        ^ (batch as u64).wrapping_mul(0xA24B_AED4_963E_E407)
        ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let bits = (z >> 40) as f32; // 24 random bits: exactly representable
    bits / (1u32 << 24) as f32 * 2.0 * std::f32::consts::PI - std::f32::consts::PI
}

/// The host's preparation of one batch: fills `out` with [`batch_value`]s.
pub fn prepare_batch(seed: u64, batch: usize, out: &mut [f32]) {
    for (j, x) in out.iter_mut().enumerate() {
        *x = batch_value(seed, batch, j);
    }
}

/// One thing that happened on the host side of a pipelined run, in ms since its start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostEvent {
    pub ms: f64,
    /// "prepared i", "enqueued i", "callback i" (stamped on the driver thread) or "consumed i".
    pub what: String,
}

impl HostEvent {
    /// `what` happened to `batch` at `ms`.
    pub fn at(ms: f64, what: &str, batch: usize) -> HostEvent {
        HostEvent { ms, what: format!("{what} {batch}") }
    }

    /// `what` happens to `batch` now, `start` being the run's start.
    pub fn now(start: Instant, what: &str, batch: usize) -> HostEvent {
        HostEvent::at(ms_since(start), what, batch)
    }
}

/// Milliseconds since `start`.
pub fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Checks the order a pipelined run's events must have: every batch was prepared, enqueued,
/// called back and consumed in that order, and the callbacks came in batch order (a stream
/// runs its host functions in the order they were enqueued).
pub fn check_event_order(events: &[HostEvent], batches: usize) -> Result<Text> {
    let at = |what: &str, i: usize| -> Result<f64> {
        let name = format!("{what} {i}");
        events
            .iter()
            .find(|e| e.what == name)
            .map(|e| e.ms)
            .ok_or_else(|| Error::Verification(t!("error.kit.no_event", name)))
    };
    let mut last_callback = f64::NEG_INFINITY;
    for i in 0..batches {
        let (p, e, c, u) =
            (at("prepared", i)?, at("enqueued", i)?, at("callback", i)?, at("consumed", i)?);
        if !(p <= e && e <= c && c <= u) {
            let [p, e, c, u] = [p, e, c, u].map(|ms| fixed(ms, 3));
            return Err(Error::Verification(t!("error.kit.batch_out_of_order", i, p, e, c, u)));
        }
        if c < last_callback {
            let (c, last) = (fixed(c, 3), fixed(last_callback, 3));
            return Err(Error::Verification(t!("error.kit.callback_out_of_order", i, c, last)));
        }
        last_callback = c;
    }
    Ok(t!("host_batch_log.in_order", batches))
}

/// How many batches i+1 were prepared before batch i's host function ran: the host's
/// preparation hidden behind the GPU's work (out of `batches - 1`; batches whose events are
/// missing do not count).
pub fn batches_prepared_ahead(events: &[HostEvent], batches: usize) -> usize {
    let at = |name: String| events.iter().find(|e| e.what == name).map(|e| e.ms);
    (1..batches)
        .filter(|&i| {
            matches!(
                (at(format!("prepared {i}")), at(format!("callback {}", i - 1))),
                (Some(p), Some(c)) if p < c
            )
        })
        .count()
}

/// The first events of a run and what their order says about the overlap, as one line.
pub fn order_line(events: &[HostEvent], batches: usize) -> Text {
    let ahead = batches_prepared_ahead(events, batches);
    let order = Text::List(
        events
            .iter()
            .take(8)
            .map(|e| t!("host_batch_log.event", what = Text::label(&e.what), ms = fixed(e.ms, 2)))
            .collect(),
    );
    let overlapped = if batches == 1 {
        t!("host_batch_log.one_batch")
    } else if ahead == batches - 1 {
        t!("host_batch_log.all_ahead")
    } else if ahead == 0 {
        t!("host_batch_log.none_ahead")
    } else {
        t!("host_batch_log.some_ahead", ahead, of = batches - 1)
    };
    t!("host_batch_log.order", order, overlapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Vec<HostEvent> {
        [
            (1.0, "prepared", 0),
            (1.1, "enqueued", 0),
            (2.0, "prepared", 1),
            (2.1, "enqueued", 1),
            (2.5, "callback", 0),
            (2.6, "consumed", 0),
            (3.5, "callback", 1),
            (3.6, "consumed", 1),
        ]
        .iter()
        .map(|&(ms, what, i)| HostEvent::at(ms, what, i))
        .collect()
    }

    #[test]
    fn batch_values_are_deterministic_distinct_and_in_range() {
        let mut a = vec![0.0; 1000];
        let mut b = vec![0.0; 1000];
        prepare_batch(7, 3, &mut a);
        prepare_batch(7, 3, &mut b);
        assert_eq!(a, b);
        prepare_batch(7, 4, &mut b);
        assert_ne!(a, b, "batches must differ");
        let pi = std::f32::consts::PI;
        assert!(a.iter().all(|x| (-pi..pi).contains(x)));
        assert!(a.iter().any(|&x| x < -1.0) && a.iter().any(|&x| x > 1.0));
    }

    #[test]
    fn event_order_accepts_a_pipeline_and_rejects_disorder() {
        assert!(check_event_order(&good(), 2).is_ok());
        // A callback before its batch was enqueued.
        let mut bad = good();
        bad[4].ms = 1.05;
        assert!(check_event_order(&bad, 2).is_err());
        // Callbacks out of batch order.
        let mut swapped = good();
        swapped[6].ms = 2.4;
        swapped[7].ms = 2.45;
        assert!(check_event_order(&swapped, 2).is_err());
        // A missing event.
        assert!(check_event_order(&good()[..7], 2).is_err());
        // Consumed before its callback rang.
        let mut early = good();
        early[5].ms = 2.4;
        assert!(check_event_order(&early, 2).is_err());
    }

    #[test]
    fn batches_prepared_ahead_count_and_the_order_line_agree() {
        // Batch 1 was prepared (2.0) before batch 0's callback (2.5).
        assert_eq!(batches_prepared_ahead(&good(), 2), 1);
        assert!(order_line(&good(), 2).en().contains("every batch i+1 was prepared"));
        let mut late = good();
        late[2].ms = 2.55;
        assert_eq!(batches_prepared_ahead(&late, 2), 0);
        assert!(order_line(&late, 2).en().contains("no batch was prepared"));
        assert_eq!(batches_prepared_ahead(&good(), 1), 0);
        assert!(order_line(&good()[..2], 1).en().contains("one batch, so no preparation"));
        let line = order_line(&good(), 2).en();
        assert!(line.starts_with("Order of events") && line.contains("prepared 0 (1.00)"));
    }
}
