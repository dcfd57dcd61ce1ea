//! GPU tests of the pinned-vs-pageable lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
//!
//! The lesson only copies, so its CPU reference is the input itself, and the strongest
//! comparison with it is bit for bit, which the round-trip test makes.
use streamlab::lab::Lesson;
use streamlab::lessons::pinned_vs_pageable::{PinnedVsPageable, KINDS};
use testkit::spans::{
    copy_call_held_the_host_into_the_copy, copy_call_returned_before_the_copy_ended,
};
use testkit::{accepted, gpu, refuses, run_lesson, run_recorded, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_pageable_and_registered_copies_round_trip_bit_for_bit() {
    let gpu = gpu();
    for n in [1usize, 4097, 3_000_001] {
        let n_flag = n.to_string();
        let mut p: PinnedVsPageable = set_up(&gpu, &["--elements", &n_flag], n as u64).unwrap();
        for v in 0..KINDS.len() {
            p.version(&gpu, v).unwrap();
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let memories = ["pinned", "pageable", "registered"];
        for (memory, (input, output)) in memories.iter().zip(p.round_trips().unwrap()) {
            assert_eq!(bits(&output), bits(&input), "n={n}, {memory}");
        }
        assert!(p.registered_are_page_locked(), "n={n}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_pageable_copy_holds_the_host_a_pinned_one_does_not() {
    let gpu = gpu();
    let n = 8usize << 20;
    let o = run_recorded::<PinnedVsPageable>(&gpu, &["--elements", &n.to_string()], 3);
    let text = o.report.to_text();
    // Recorded versions 0, 1 and 4: H2D from pageable, from pinned, then from registered memory. The pageable
    // call returned only once the copy engine was under way (the driver stages the data
    // through a pinned buffer of its own, chunk by chunk); the pinned call returned before
    // its copy ended. The bandwidths and how long each call held the host are
    // scripts/perf-check.sh's.
    let [pageable, pinned, registered] = [&o.recordings[0], &o.recordings[1], &o.recordings[2]];
    assert!(copy_call_held_the_host_into_the_copy(pageable), "{:?}\n{text}", pageable.host);
    assert!(copy_call_returned_before_the_copy_ended(pinned), "{:?}\n{text}", pinned.host);
    // A Vec registered in place: its call only enqueued, as the pinned one did.
    let registered_host = &registered.host;
    assert!(copy_call_returned_before_the_copy_ended(registered), "{registered_host:?}\n{text}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_report_passes() {
    let gpu = gpu();
    let o = run_lesson::<PinnedVsPageable>(&gpu, &["--elements", "4194304"], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
}

/// Four bytes: neither bandwidth nor asynchrony is claimed.
#[test]
#[ignore = "needs a CUDA GPU"]
fn four_bytes_make_no_claim() {
    let gpu = gpu();
    let o = run_lesson::<PinnedVsPageable>(&gpu, &["--elements", "1"], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    let told = o.report.interpretation.join("\n");
    assert!(!told.contains("faster"), "{text}");
    assert!(!told.contains("not asynchronous"), "{text}");
}

/// (flags, what the refusal must mention). Every size in range fits the time budget (the
/// plan's only other refusal is host memory, which depends on the machine), so these are
/// refused as the flags parse, before any run could see them.
const HOSTILE: &[(&[&str], &str)] = &[
    (&["--elements", "0"], "--elements"),
    // 2^62: at 4 bytes an element, a 64-bit byte count wraps to 0.
    (&["--elements", "4611686018427387904"], "--elements"),
];

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<PinnedVsPageable, _>(HOSTILE);
}

#[test]
fn the_default_and_the_smallest_size_pass_the_checks() {
    accepted::<PinnedVsPageable>(&[]);
    accepted::<PinnedVsPageable>(&["--elements", "1"]);
}
