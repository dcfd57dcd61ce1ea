//! The shapes the GPU tests assert of recorded spans (tests/support/spans.rs), held to the
//! recorded runs in `docs/recorded/`: real CUPTI recordings made on H100s and H200s, embedded in
//! the binary. Each shape must hold for the version the GPU test asserts it of, and, where the
//! GPU test uses it to tell the technique from its absence, fail for the other version: a
//! shape that every run has would assert nothing. No GPU needed.
use streamlab::lab::record::recorded_runs;
use streamlab::lab::record::span::{Recording, Span, Work};
use testkit::spans::{
    any_span, assert_cupti, copy_beside_kernel, copy_call_held_the_host_into_the_copy,
    copy_call_returned_before_the_copy_ended, count, host_free_before_the_kernel_ended, is_kernel,
    issued, off_its_direction_stream, ran_at_once, waited_for,
};

/// Every recorded version of `lesson`, each from CUPTI: at least the one without the
/// technique and the one with it.
fn recordings(lesson: &str) -> Vec<Recording> {
    let run = recorded_runs::find(lesson)
        .unwrap_or_else(|| panic!("no recorded run of {lesson}"))
        .unwrap_or_else(|e| panic!("{lesson}: {e}"));
    let recordings = run.recordings();
    assert!(recordings.len() >= 2, "{lesson}: {} recordings", recordings.len());
    recordings.iter().for_each(assert_cupti);
    recordings
}

/// The first two recorded versions of `lesson`: without the technique, then with it.
fn recorded(lesson: &str) -> [Recording; 2] {
    let mut all = recordings(lesson).into_iter();
    [all.next().unwrap(), all.next().unwrap()]
}

#[test]
fn a_copy_runs_beside_another_streams_kernel_only_with_the_technique() {
    for lesson in ["overlap", "compute-transfer", "prefetch", "stream-sweep"] {
        let [without, with] = recorded(lesson);
        assert!(copy_beside_kernel(&with), "{lesson}: {}", with.version);
        assert!(!copy_beside_kernel(&without), "{lesson}: {}", without.version);
    }
}

#[test]
fn compute_transfers_third_version_splits_the_directions_and_overlaps() {
    let all = recordings("compute-transfer");
    assert_eq!(all.len(), 3, "the picture draws three versions");
    let three = &all[2];
    assert!(copy_beside_kernel(three), "{}", three.version);
    assert_eq!(off_its_direction_stream(three), None, "{}", three.version);
}

#[test]
fn streams_overlap_with_the_pool_and_the_side_stream_only() {
    let [sync, pool] = recorded("stream-ordered-alloc");
    assert!(ran_at_once(&pool, any_span, any_span), "{}", pool.version);
    assert!(!ran_at_once(&sync, any_span, any_span), "{}", sync.version);
    let [one, side] = recorded("mixed-precision");
    assert!(ran_at_once(&side, is_kernel, is_kernel), "{}", side.version);
    assert!(!ran_at_once(&one, is_kernel, is_kernel), "{}", one.version);
}

#[test]
fn the_two_stages_run_at_once_on_their_two_gpus_only_when_pipelined() {
    let on = |device: u32| move |s: &Span| is_kernel(s) && s.device == device;
    let [naive, piped] = recorded("pipeline-parallel");
    assert!(ran_at_once(&piped, on(0), on(1)), "{}", piped.version);
    assert!(!ran_at_once(&naive, on(0), on(1)), "{}", naive.version);
}

#[test]
fn the_staged_path_goes_through_the_host_and_the_peer_copy_does_not() {
    let [staged, peer] = recorded("p2p");
    assert_eq!(count(&staged, Work::CopyPeer), 0, "{:?}", staged.spans);
    assert!(staged.spans.iter().any(|s| s.kind == Work::CopyToHost && s.device == 0));
    assert!(staged.spans.iter().any(|s| s.kind == Work::CopyToDevice && s.device == 1));
    assert!(count(&peer, Work::CopyPeer) > 0, "{:?}", peer.spans);
    assert_eq!(count(&peer, Work::CopyToHost) + count(&peer, Work::CopyToDevice), 0);
}

#[test]
fn each_wait_returns_once_what_it_covers_has_ended() {
    let [device, stream_b] = recorded("sync-methods");
    assert!(waited_for(&device, "A (long)"), "{:?}", device.host);
    assert!(waited_for(&stream_b, "B (short)"), "{:?}", stream_b.host);
    assert!(!waited_for(&stream_b, "A (long)"), "{:?}", stream_b.host);
}

#[test]
fn only_asynchronous_calls_free_the_host_before_the_kernel_ends() {
    let [blocking, asynchronous] = recorded("basics");
    assert!(host_free_before_the_kernel_ended(&asynchronous), "{:?}", asynchronous.host);
    assert!(!host_free_before_the_kernel_ended(&blocking), "{:?}", blocking.host);
}

#[test]
fn a_graph_replay_is_one_call_where_streams_issue_every_node() {
    // Recorded with --iters 20.
    let [streams, graph] = recorded("graph");
    assert_eq!(issued(&graph, "cuGraphLaunch"), 20, "{:?}", graph.host);
    for call in ["cuLaunchKernel", "cuMemcpy", "cuStreamWaitEvent"] {
        assert_eq!(issued(&graph, call), 0, "{call}: {:?}", graph.host);
        assert!(issued(&streams, call) >= 20, "{call}: {:?}", streams.host);
    }
    assert_eq!(issued(&streams, "cuGraphLaunch"), 0, "{:?}", streams.host);
}

#[test]
fn a_pageable_copy_holds_the_host_into_the_copy_and_a_pinned_one_returns_first() {
    let [pageable, pinned] = recorded("pinned-vs-pageable");
    assert!(copy_call_held_the_host_into_the_copy(&pageable), "{:?}", pageable.host);
    assert!(!copy_call_held_the_host_into_the_copy(&pinned), "{:?}", pinned.host);
    assert!(copy_call_returned_before_the_copy_ended(&pinned), "{:?}", pinned.host);
}
