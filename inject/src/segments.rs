//! Where the kept records go, and what happens at the limit (`max_records`, counting only
//! records kept inside the capture window):
//! - `first`: into the main file, `<pid>.jsonl`; past the limit they are counted in
//!   `Dropped` lines (format 1's only way).
//! - `last`: into segment files `<pid>.<seq>.jsonl` ([`trace_file::segment_path`]), from seq
//!   0 on, each closed once it holds an eighth of the limit (even within one flush's records:
//!   a single flush may bring more than the limit). At the end of each flush cycle the
//!   segments closed during it are stamped with the recorder's clock, and while the records
//!   kept pass the limit the oldest closed segments are deleted (the open one, under an
//!   eighth, never is: the records kept stay within the limit). A `Dropped` line says how
//!   many, and `before`: the stamp of the last one deleted (every record in it had been
//!   handed over by then, and every record completed later is in a later segment, kept).
//! - `sample`: occurrence `n` of the sampled range into segment `n`, and what came before the
//!   first into segment 0 (always kept). When the records kept pass the limit, the
//!   occurrences kept are thinned evenly: every 2nd (1, 3, 5, ...), then every 4th (1, 5, 9,
//!   ...), the others' segments deleted, so that those kept stay whole and spread over the
//!   run; later occurrences are kept on the same rule. A `Sampled` line says which, when the
//!   set changed (at most every [`SAMPLED_EVERY_NS`] unless segments were deleted) and at
//!   the end. Where even occurrence 1 and segment 0 pass the limit, the records past it are
//!   counted as over the limit, as with `first`.
//!
//! Segments are appended to at every flush, as the main file is, so a crash leaves them.
use std::collections::{BTreeMap, VecDeque};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use streamlab_cupti::trace_file::{self, Line, WhenFull};

use crate::writer::Writer;

/// A `Sampled` line for a set that only grew is written at most this often (ns): it lists
/// every occurrence kept, and a program may mark thousands.
pub const SAMPLED_EVERY_NS: u64 = 5_000_000_000;

/// A count said in `Dropped` lines: how many so far, and how many said.
#[derive(Debug, Default)]
struct Count {
    now: u64,
    said: u64,
}

impl Count {
    /// A `Dropped` line for what came since the last one (counts of a process's `Dropped`
    /// lines add up).
    fn line(&mut self, why: impl FnOnce() -> String, before: Option<u64>, out: &mut String) {
        if self.now > self.said {
            let count = self.now - self.said;
            self.said = self.now;
            out.push_str(&Line::Dropped { count, why: why(), before }.to_json_line());
        }
    }
}

#[derive(Debug)]
struct Closed {
    seq: u64,
    records: u64,
    /// The recorder's clock at the end of the cycle that closed it (`None` until then).
    at: Option<u64>,
}

#[derive(Debug)]
pub struct Store {
    when_full: WhenFull,
    max: u64,
    dir: PathBuf,
    pid: u32,
    /// Records in the files now (deleted ones no longer count).
    kept: u64,
    over: Count,
    unfinished: Count,
    outside: Count,
    // `last`: the segment written to, its records, and those closed, oldest first.
    current: (u64, u64),
    closed: VecDeque<Closed>,
    segment_most: u64,
    oldest_dropped: Count,
    before: Option<u64>,
    // `sample`: the sampled range, one occurrence in `every` kept, of `total` seen so far;
    // the segments kept (0 and the occurrences) with their records.
    range: Option<String>,
    every: u64,
    total: u64,
    slices: BTreeMap<u64, u64>,
    not_sampled: Count,
    /// The set changed since the last `Sampled` line; segments were deleted.
    changed: bool,
    thinned: bool,
    sampled_said_at: Option<u64>,
}

impl Store {
    pub fn new(when_full: WhenFull, max: u64, dir: PathBuf, pid: u32) -> Store {
        Store {
            when_full,
            max,
            dir,
            pid,
            kept: 0,
            over: Count::default(),
            unfinished: Count::default(),
            outside: Count::default(),
            current: (0, 0),
            closed: VecDeque::new(),
            segment_most: (max / 8).max(1),
            oldest_dropped: Count::default(),
            before: None,
            range: None,
            every: 1,
            total: 0,
            slices: BTreeMap::from([(0, 0)]),
            not_sampled: Count::default(),
            changed: false,
            thinned: false,
            sampled_said_at: None,
        }
    }

    /// Records of work still running at exit (no end): counted, never written.
    pub fn unfinished(&mut self) {
        self.unfinished.now += 1;
    }

    /// Records decided outside the capture window.
    pub fn outside(&mut self, count: u64) {
        self.outside.now += count;
    }

    /// Occurrence `number` of `range` started (sampling): kept when it falls on the rule.
    pub fn occurrence(&mut self, number: u64, range: &str) {
        if self.range.is_none() {
            self.range = Some(range.to_string());
        }
        self.total = self.total.max(number);
        if (number - 1).is_multiple_of(self.every) {
            self.slices.entry(number).or_insert(0);
            self.changed = true;
        }
    }

    /// Writes the records kept (each with its slice): into the main file or the segments.
    pub fn write(&mut self, records: Vec<(Line, u64)>, main: &mut Writer) {
        let mut texts: BTreeMap<u64, String> = BTreeMap::new();
        let mut main_text = String::new();
        for (line, slice) in records {
            match self.when_full {
                WhenFull::First => {
                    if self.kept < self.max {
                        self.kept += 1;
                        main_text.push_str(&line.to_json_line());
                    } else {
                        self.over.now += 1;
                    }
                }
                WhenFull::Last => {
                    self.kept += 1;
                    let (seq, records) = (self.current.0, self.current.1 + 1);
                    texts.entry(seq).or_default().push_str(&line.to_json_line());
                    self.current = (seq, records);
                    if records >= self.segment_most {
                        self.closed.push_back(Closed { seq, records, at: None });
                        self.current = (seq + 1, 0);
                    }
                }
                WhenFull::Sample => {
                    if !self.slices.contains_key(&slice) {
                        self.not_sampled.now += 1;
                        continue;
                    }
                    if self.kept >= self.max {
                        self.thin(&mut texts);
                    }
                    if !self.slices.contains_key(&slice) {
                        self.not_sampled.now += 1;
                    } else if self.kept >= self.max {
                        self.over.now += 1;
                    } else {
                        self.kept += 1;
                        *self.slices.entry(slice).or_default() += 1;
                        texts.entry(slice).or_default().push_str(&line.to_json_line());
                    }
                }
            }
        }
        main.append(&main_text);
        for (seq, text) in texts {
            self.append(seq, &text);
        }
    }

    /// Keeps one occurrence in twice as many as now, until the records kept are under the
    /// limit or only occurrence 1 is left; `texts` (records not yet written) loses the
    /// deleted ones too.
    fn thin(&mut self, texts: &mut BTreeMap<u64, String>) {
        while self.kept >= self.max && self.slices.range(2..).next().is_some() {
            self.every *= 2;
            let every = self.every;
            let gone: Vec<u64> = self
                .slices
                .keys()
                .copied()
                .filter(|&n| n > 0 && !(n - 1).is_multiple_of(every))
                .collect();
            for number in gone {
                let records = self.slices.remove(&number).unwrap_or(0);
                self.kept -= records;
                self.not_sampled.now += records;
                texts.remove(&number);
                self.remove(number);
            }
            self.changed = true;
            self.thinned = true;
        }
    }

    fn ours(&self) -> bool {
        std::process::id() == self.pid
    }

    fn append(&self, seq: u64, text: &str) {
        if text.is_empty() || !self.ours() {
            return;
        }
        let path = trace_file::segment_path(&self.dir, self.pid, seq);
        // As for the main file: a full disk loses lines, and nobody can be told but the
        // program's own stderr.
        if let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = file.write_all(text.as_bytes());
        }
    }

    fn remove(&self, seq: u64) {
        if self.ours() {
            let _ = std::fs::remove_file(trace_file::segment_path(&self.dir, self.pid, seq));
        }
    }

    /// The end of a flush cycle, at the recorder's clock `now`, read after every record of
    /// the cycle was written: the segments closed stamped, the oldest deleted past the limit,
    /// and the lines for the main file (`Dropped`, and `Sampled` where the set changed).
    /// `last`: the end of the run, where `Sampled` is always said.
    pub fn end_cycle(&mut self, now: u64, last: bool) -> String {
        let mut out = String::new();
        if self.when_full == WhenFull::Last {
            for closed in self.closed.iter_mut().rev().take_while(|c| c.at.is_none()) {
                closed.at = Some(now);
            }
            while self.kept > self.max {
                let Some(oldest) = self.closed.pop_front() else { break };
                self.remove(oldest.seq);
                self.kept -= oldest.records;
                self.oldest_dropped.now += oldest.records;
                self.before = oldest.at;
            }
        }
        let max = self.max;
        let before = self.before;
        self.oldest_dropped.line(
            || format!("the oldest records were dropped to keep the last {max}"),
            before,
            &mut out,
        );
        if let Some(range) = self.range.clone() {
            let every = self.every;
            self.not_sampled.line(
                || format!(r#"not in the sample of "{range}": one occurrence in {every} is kept"#),
                None,
                &mut out,
            );
            let due = self.sampled_said_at.is_none_or(|at| now >= at + SAMPLED_EVERY_NS);
            if last || self.thinned || (self.changed && due) {
                let kept = self.slices.keys().copied().filter(|&n| n > 0).collect();
                let total = self.total;
                out.push_str(&Line::Sampled { range, every, total, kept }.to_json_line());
                (self.changed, self.thinned, self.sampled_said_at) = (false, false, Some(now));
            }
        }
        self.outside.line(
            || "outside the capture window: recorded before it opened or after it closed".into(),
            None,
            &mut out,
        );
        self.over.line(
            || format!("over the limit of {max} records (STREAMLAB_TRACE_MAX_RECORDS)"),
            None,
            &mut out,
        );
        self.unfinished.line(
            || "work still running at exit: its records had no end".into(),
            None,
            &mut out,
        );
        out
    }
}

#[cfg(test)]
#[path = "segments_tests.rs"]
mod tests;
