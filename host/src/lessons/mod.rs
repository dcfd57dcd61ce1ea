//! The lessons, one file per technique, in the order `streamlab run all` runs them. Each
//! implements [`Lesson`](crate::lab::Lesson); the lab does the rest. Lessons never import
//! each other: what two of them share lives in the lab or the runtime.
//!
//! Adding a lesson: write its file, and add one line to the list below.
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
    compute_transfer::ComputeTransfer,
    prefetch::Prefetch,
    mixed_precision::MixedPrecision,
    stream_ordered_alloc::StreamOrderedAlloc,
    stream_sweep::StreamSweep,
    launch_order::LaunchOrder,
    graph::GraphDag,
}

/// The lesson named `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    LESSONS.iter().find(|l| l.name == name)
}
