//! The way from CUPTI's buffers to the files, under one lock: the lines that describe
//! (devices, contexts, streams, names, CUPTI's own drops) go to the main file at once; the
//! records go through the gate ([`crate::gate`]), which decides at the end of each flush
//! cycle, to the store ([`crate::segments`]), which writes them to the main file or the
//! segments. Where the gate has nothing to decide (no capture window, no sampling), records
//! go to the store as they come, as format 1's recorder wrote them.
use streamlab_cupti::trace_file::Line;

use crate::gate::Gate;
use crate::segments::Store;
use crate::writer::Writer;

pub struct Keeper {
    /// The main file, `<pid>.jsonl`.
    pub writer: Writer,
    gate: Gate,
    store: Store,
}

/// A record the gate decides on and the limit counts (markers, calls, synchronizations and
/// GPU work); the other lines describe.
fn is_record(line: &Line) -> bool {
    matches!(
        line,
        Line::Kernel { .. }
            | Line::Copy { .. }
            | Line::Peer { .. }
            | Line::Memset { .. }
            | Line::Sync { .. }
            | Line::Api { .. }
            | Line::Marker { .. }
    )
}

/// A span with no end: work still running when a forced flush (at exit) took its record.
fn unfinished(line: &Line) -> bool {
    match line {
        Line::Kernel { start, end, .. }
        | Line::Copy { start, end, .. }
        | Line::Peer { start, end, .. }
        | Line::Memset { start, end, .. }
        | Line::Sync { start, end, .. }
        | Line::Api { start, end, .. } => *end == 0 || end < start,
        _ => false,
    }
}

impl Keeper {
    pub fn new(writer: Writer, gate: Gate, store: Store) -> Keeper {
        Keeper { writer, gate, store }
    }

    /// One buffer's lines, and `said`: lines of the recorder's own about it (CUPTI's drops).
    pub fn receive(&mut self, lines: Vec<Line>, said: &str) {
        let mut text = String::new();
        let mut records = Vec::new();
        for line in lines {
            if !is_record(&line) {
                text.push_str(&line.to_json_line());
            } else if unfinished(&line) {
                self.store.unfinished();
            } else {
                records.push(line);
            }
        }
        text.push_str(said);
        self.writer.append(&text);
        if self.gate.passes_all() {
            self.store.write(records.into_iter().map(|l| (l, 0)).collect(), &mut self.writer);
        } else {
            self.gate.receive(records);
        }
    }

    /// Decides what was received and writes what is kept: up to `until`, the time read
    /// before the flush just made, or all of it where this is the `last` time.
    pub fn settle(&mut self, until: u64, last: bool) {
        if self.gate.passes_all() {
            return;
        }
        let settled = self.gate.settle(until, last);
        let gates: String = settled.gates.iter().map(Line::to_json_line).collect();
        self.writer.append(&gates);
        if let Some(range) = self.gate.sampled_range() {
            for number in settled.started {
                self.store.occurrence(number, range);
            }
        }
        self.store.outside(settled.outside);
        self.store.write(settled.kept, &mut self.writer);
    }

    /// The end of a cycle at the recorder's clock `now`: `notes`, the store's lines
    /// (`Dropped`, `Sampled`), then `end` (`Flushed`; `Exit` or `Crashed` when `last`, after
    /// which nothing more is written).
    pub fn end_cycle(&mut self, now: u64, last: bool, notes: String, end: Option<Line>) {
        let mut text = notes;
        if last && self.gate.never_opened() {
            let text_of = "the capture window never opened, so no records were kept".to_string();
            text.push_str(&Line::Note { text: text_of }.to_json_line());
        }
        text.push_str(&self.store.end_cycle(now, last));
        if let Some(end) = end {
            text.push_str(&end.to_json_line());
        }
        if last {
            self.writer.finish(&text);
        } else {
            self.writer.append(&text);
        }
    }
}
