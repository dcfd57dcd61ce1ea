//! The lessons, one file per technique, in the order `streamlab run all` runs them. Each
//! implements [`Lesson`](crate::lab::Lesson); the lab does the rest. Lessons never import
//! each other: what two of them share lives in the lab or the runtime.
//!
//! Adding a lesson: write its file, and add one line to the list below.
//!
//! Adding a lesson's text: a lesson writes no sentence itself. Each line a learner reads
//! after a run (`explain`, a check's detail, a "not asserted" reason) is a message of the
//! catalogs, `host/src/text/en.rs` and `zh.rs`, under keys `<lesson>.<what>`, with the
//! same `{holes}` in both (a test checks it, and that every key the code names exists):
//!
//! ```text
//! en.rs:  ("overlap.faster", "With {k} streams ...: {ms} ms, {x}x faster."),
//! zh.rs:  ("overlap.faster", "用 {k} 个流时……：{ms} ms，快了 {x} 倍。"),
//! lesson: r.explain(t!("overlap.faster", k, ms = fixed(many, 3), x = fixed(m.speedup(), 2)));
//! ```
//!
//! The lesson formats its numbers (`fixed`, or a `String`); an argument may be another
//! `t!(..)` (a clause that varies) or a `&'static str` name. A check's Ok detail is a `t!`
//! too (`Result<Text>`); errors stay English. Check, figure and version names stay English
//! (they are ids in JSON and in tests): give each its Chinese in `zh::LABELS`, with
//! `{n}` for a number in it. A test renders every embedded recorded run in Chinese.
use crate::lab::{entry, Entry};

macro_rules! lessons {
    ($($module:ident :: $lesson:ident),* $(,)?) => {
        $(pub mod $module;)*
        /// Every lesson, in teaching order.
        pub const LESSONS: &[Entry] = &[$(entry::<$module::$lesson>()),*];
    };
}

lessons! {
    basics::Basics,
    overlap::Overlap,
    sleep_streams::SleepStreams,
    pinned_vs_pageable::PinnedVsPageable,
    default_stream::DefaultStream,
    priority::Priority,
    callback::Callback,
    events::Events,
    sync_methods::SyncMethods,
    implicit_sync::ImplicitSync,
    compute_transfer::ComputeTransfer,
    prefetch::Prefetch,
    unified_memory::UnifiedMemory,
    mixed_precision::MixedPrecision,
    stream_ordered_alloc::StreamOrderedAlloc,
    stream_sweep::StreamSweep,
    launch_order::LaunchOrder,
    graph::GraphDag,
    p2p::P2p,
    allreduce_overlap::AllreduceOverlap,
    pipeline_parallel::PipelineParallel,
}

/// The lesson named `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    LESSONS.iter().find(|l| l.name == name)
}
