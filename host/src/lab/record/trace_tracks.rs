//! Where each slice of a Perfetto trace ([`crate::lab::record::trace`]) goes: the processes
//! and tracks a trace names, and the (pid, tid) of every recording's slices, for the two
//! layouts a trace can have ([`Layout`]). Process and thread ids are small positive numbers
//! (Perfetto merges tid 0).
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::lab::record::span::{row_name, rows, HostSpan, HostWork, Recording};

const HOST_PID: u64 = 1;
const VERSIONS_TID: u64 = 1;

fn device_pid(device: u32) -> u64 {
    2 + device as u64
}

/// How the recordings share a trace's time axis and tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A lesson's versions: one after the other on the same tracks (a process per device,
    /// and the host's).
    Versions,
    /// A traced program's processes: at once, on one clock, each a Perfetto process of its
    /// own holding its streams ("GPU 0 · stream 7") and its host threads.
    Processes,
}

/// Where the slices go: the metadata events that name the processes and tracks, and the
/// (pid, tid) of each recording's whole-run slice, streams and host threads.
pub struct Tracks {
    layout: Layout,
    pub named: Vec<Value>,
    pub run: Vec<(u64, u64)>,
    streams: BTreeMap<(usize, u32, String), (u64, u64)>,
    threads: BTreeMap<(usize, String), (u64, u64)>,
}

impl Tracks {
    pub fn stream(&self, r: usize, device: u32, stream: &str) -> (u64, u64) {
        let fallback = match self.layout {
            Layout::Versions => (device_pid(device), 1),
            Layout::Processes => (self.run[r].0, 1),
        };
        self.streams.get(&(r, device, stream.to_owned())).copied().unwrap_or(fallback)
    }

    pub fn thread(&self, r: usize, thread: &str) -> (u64, u64) {
        self.threads.get(&(r, thread.to_owned())).copied().unwrap_or(self.run[r])
    }
}

/// The track a host span goes on: its thread's, or for an NVTX range the thread's track of
/// ranges (`main · NVTX`), so that ranges, which enclose the calls made in them, read as a
/// track of their own above the calls.
pub fn host_track(h: &HostSpan) -> String {
    match h.kind {
        HostWork::Range => format!("{} · NVTX", h.thread),
        _ => h.thread.clone(),
    }
}

fn named(name: &str, pid: u64, tid: Option<u64>, args: Value) -> Value {
    let mut e = json!({"ph": "M", "name": name, "pid": pid, "args": args});
    if let Some(t) = tid {
        e["tid"] = json!(t);
    }
    e
}

/// A lesson's tracks: one process per device, one track per stream in the order the lesson
/// issued work (over every version), and the host with its "versions" track and threads.
pub fn version_tracks(device_name: &str, recordings: &[Recording], source_line: &str) -> Tracks {
    let m = named;
    let mut events = Vec::new();
    // Tracks: (device, stream) and host threads, in order of first appearance.
    let mut streams: Vec<(u32, String)> = Vec::new();
    let mut threads: Vec<String> = Vec::new();
    for r in recordings {
        for s in &r.spans {
            if !streams.iter().any(|(d, n)| *d == s.device && *n == s.stream) {
                streams.push((s.device, s.stream.clone()));
            }
        }
        for h in &r.host {
            let track = host_track(h);
            if !threads.contains(&track) {
                threads.push(track);
            }
        }
    }
    let mut devices: Vec<u32> = streams.iter().map(|(d, _)| *d).collect();
    devices.sort_unstable();
    devices.dedup();
    let stream_tid = |device: u32, stream: &str| {
        streams
            .iter()
            .filter(|(d, _)| *d == device)
            .position(|(_, n)| n == stream)
            .map_or(1, |i| i as u64 + 1)
    };
    let thread_tid = |thread: &str| {
        threads.iter().position(|t| t == thread).map_or(VERSIONS_TID, |i| i as u64 + 2)
    };
    for (i, d) in devices.iter().enumerate() {
        let pid = device_pid(*d);
        let name = format!("GPU {d}: {device_name}");
        events.push(m("process_name", pid, None, json!({"name": name})));
        events.push(m("process_sort_index", pid, None, json!({"sort_index": i})));
        events.push(m("process_labels", pid, None, json!({"labels": source_line})));
        for (device, stream) in streams.iter().filter(|(dev, _)| dev == d) {
            let tid = stream_tid(*device, stream);
            events.push(m("thread_name", pid, Some(tid), json!({"name": stream})));
            events.push(m("thread_sort_index", pid, Some(tid), json!({"sort_index": tid})));
        }
    }
    events.push(m("process_name", HOST_PID, None, json!({"name": "host"})));
    events.push(m("process_sort_index", HOST_PID, None, json!({"sort_index": devices.len() + 1})));
    events.push(m("thread_name", HOST_PID, Some(VERSIONS_TID), json!({"name": "versions"})));
    events.push(m(
        "thread_sort_index",
        HOST_PID,
        Some(VERSIONS_TID),
        json!({"sort_index": VERSIONS_TID}),
    ));
    for t in &threads {
        let tid = thread_tid(t);
        events.push(m("thread_name", HOST_PID, Some(tid), json!({"name": t})));
        events.push(m("thread_sort_index", HOST_PID, Some(tid), json!({"sort_index": tid})));
    }
    let mut tracks = Tracks {
        layout: Layout::Versions,
        named: events,
        run: vec![(HOST_PID, VERSIONS_TID); recordings.len()],
        streams: BTreeMap::new(),
        threads: BTreeMap::new(),
    };
    for r in 0..recordings.len() {
        for (d, s) in &streams {
            tracks.streams.insert((r, *d, s.clone()), (device_pid(*d), stream_tid(*d, s)));
        }
        for t in &threads {
            tracks.threads.insert((r, t.clone()), (HOST_PID, thread_tid(t)));
        }
    }
    tracks
}

/// A traced program's tracks: recording i is process i + 1, named by its version, with its
/// whole run on track 1, then its streams (named with their GPU) and its host threads, each
/// thread's NVTX ranges on a track just above its calls ([`host_track`]).
pub fn process_tracks(recordings: &[Recording], source_line: &str) -> Tracks {
    let mut tracks = Tracks {
        layout: Layout::Processes,
        named: Vec::new(),
        run: Vec::new(),
        streams: BTreeMap::new(),
        threads: BTreeMap::new(),
    };
    for (r, recording) in recordings.iter().enumerate() {
        let pid = r as u64 + 1;
        let mut names = vec!["run".to_string()];
        for (device, stream) in rows(&recording.spans) {
            let tid = names.len() as u64 + 1;
            names.push(row_name(device, &stream, true));
            tracks.streams.insert((r, device, stream), (pid, tid));
        }
        // Threads in the order of their first host span, each with its ranges' track and its
        // calls' track where it has them.
        let mut threads: BTreeMap<&str, (usize, bool, bool)> = BTreeMap::new();
        for (at, h) in recording.host.iter().enumerate() {
            let seen = threads.entry(&h.thread).or_insert((at, false, false));
            match h.kind {
                HostWork::Range => seen.1 = true,
                _ => seen.2 = true,
            }
        }
        let mut threads: Vec<(&str, (usize, bool, bool))> = threads.into_iter().collect();
        threads.sort_by_key(|(_, (at, _, _))| *at);
        for (thread, (_, ranges, calls)) in threads {
            let range_track = format!("{thread} · NVTX");
            let own = [(ranges, range_track), (calls, thread.to_string())];
            for track in own.into_iter().filter(|(has, _)| *has).map(|(_, track)| track) {
                let tid = names.len() as u64 + 1;
                if let Entry::Vacant(slot) = tracks.threads.entry((r, track.clone())) {
                    slot.insert((pid, tid));
                    names.push(track);
                }
            }
        }
        let events = &mut tracks.named;
        events.push(named("process_name", pid, None, json!({"name": recording.version})));
        events.push(named("process_sort_index", pid, None, json!({"sort_index": r})));
        events.push(named("process_labels", pid, None, json!({"labels": source_line})));
        for (i, name) in names.iter().enumerate() {
            let tid = i as u64 + 1;
            events.push(named("thread_name", pid, Some(tid), json!({"name": name})));
            events.push(named("thread_sort_index", pid, Some(tid), json!({"sort_index": tid})));
        }
        tracks.run.push((pid, 1));
    }
    tracks
}
