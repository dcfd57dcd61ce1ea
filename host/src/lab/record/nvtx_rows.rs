//! A traced program's panels ([`plain_panels`]), each thread's NVTX ranges in rows above the
//! streams ([`range_rows`]): one row per level of nesting. A range inside another goes a row
//! lower, so `"step"` reads as one bar per step and `"forward"` and `"backward"` as bars under
//! it, each name on its bar; drawn in one row, the inner ranges would cover the outer ones.
//! Ranges that do not nest (NVTX start/end ranges may overlap) are laid out the same way: each
//! goes to the highest row free at its start. At most [`RANGE_LEVELS`] rows a thread: deeper
//! ranges (PyTorch's `emit_nvtx` marks every operator, many levels deep) are left to the
//! Perfetto trace, and counted.
use crate::lab::record::drawing::{panel, Bar, Drawing, Key, Panel, Row};
use crate::lab::record::span::{HostSpan, HostWork, Recording};

/// The most rows a thread's NVTX ranges get in a picture.
pub const RANGE_LEVELS: usize = 3;

/// What a thread name of a range ends with when the range is a library's (NCCL's, ...),
/// not the program's: its rows go below every thread's own.
pub const LIBRARY_ROWS: &str = " · libraries";

/// The panels of recordings that no lesson's report goes with (a traced program's
/// processes), drawn plain, each headed by what the recording calls itself and its time, its
/// NVTX ranges in rows above its streams ([`range_rows`]); and how many ranges were nested
/// too deep to be drawn.
pub fn plain_panels(recordings: &[Recording]) -> (Vec<Panel>, usize) {
    let several_gpus = recordings.iter().flat_map(|r| &r.spans).any(|s| s.device != 0);
    let mut too_deep = 0;
    let panels = recordings
        .iter()
        .map(|r| {
            let heading = format!("{}: {:.3} ms", r.version, r.ms);
            let mut p = panel(r, &Drawing::PLAIN, heading, several_gpus);
            let (mut rows, deeper) = range_rows(r);
            too_deep += deeper;
            rows.append(&mut p.rows);
            p.rows = rows;
            p
        })
        .collect();
    (panels, too_deep)
}

/// A row's name: `NVTX · main`, then `NVTX · main · level 2` for the ranges inside those.
pub fn range_row_name(thread: &str, level: usize) -> String {
    match level {
        0 => format!("NVTX · {thread}"),
        _ => format!("NVTX · {thread} · level {}", level + 1),
    }
}

/// The NVTX rows of `r` (threads in the order of their first range), and how many ranges
/// were nested too deep to be drawn.
pub fn range_rows(r: &Recording) -> (Vec<Row>, usize) {
    let mut threads: Vec<(&str, Vec<&HostSpan>)> = Vec::new();
    for h in r.host.iter().filter(|h| h.kind == HostWork::Range) {
        match threads.iter_mut().find(|(t, _)| *t == h.thread) {
            Some((_, ranges)) => ranges.push(h),
            None => threads.push((&h.thread, vec![h])),
        }
    }
    // The program's own ranges first, the libraries' below them.
    threads.sort_by_key(|(thread, _)| thread.ends_with(LIBRARY_ROWS));
    let mut rows = Vec::new();
    let mut too_deep = 0;
    for (thread, mut ranges) in threads {
        // By start, the enclosing one first.
        ranges
            .sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms).then(b.end_ms.total_cmp(&a.end_ms)));
        // Each level's last end: a range goes to the first level free at its start.
        let mut ends: Vec<f64> = Vec::new();
        let mut levels: Vec<Vec<Bar>> = Vec::new();
        for h in ranges {
            let level = ends.iter().position(|&end| end <= h.start_ms).unwrap_or(ends.len());
            if level == ends.len() {
                ends.push(h.end_ms);
            } else {
                ends[level] = h.end_ms;
            }
            if level >= RANGE_LEVELS {
                too_deep += 1;
                continue;
            }
            if level == levels.len() {
                levels.push(Vec::new());
            }
            levels[level].push(Bar {
                start_ms: h.start_ms,
                end_ms: h.end_ms,
                key: Key::Range,
                untimed: false,
                text: h.name.clone(),
            });
        }
        for (level, bars) in levels.into_iter().enumerate() {
            rows.push(Row { name: range_row_name(thread, level), bars, host: true });
        }
    }
    (rows, too_deep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::span::Source;

    fn range(thread: &str, name: &str, start_ms: f64, end_ms: f64) -> HostSpan {
        HostSpan {
            thread: thread.into(),
            kind: HostWork::Range,
            name: name.into(),
            start_ms,
            end_ms,
        }
    }

    fn recording(host: Vec<HostSpan>) -> Recording {
        Recording {
            version: "pid 1".into(),
            source: Source::Cupti { library: String::new(), version: 0 },
            ms: 1.0,
            parts: Vec::new(),
            spans: Vec::new(),
            host,
            flows: Vec::new(),
        }
    }

    /// (row, [(bar text, start)]) of each row.
    fn laid_out(rows: &[Row]) -> Vec<(String, Vec<(String, f64)>)> {
        let bars = |r: &Row| r.bars.iter().map(|b| (b.text.clone(), b.start_ms)).collect();
        rows.iter().map(|r| (r.name.clone(), bars(r))).collect()
    }

    #[test]
    fn nested_ranges_go_a_row_lower_and_each_thread_has_its_own() {
        let mut host = vec![
            range("main", "step", 0.0, 10.0),
            range("main", "forward", 0.0, 4.0),
            range("main", "backward", 4.0, 9.0),
            range("main", "step", 10.0, 20.0),
            range("loader", "batch", 1.0, 2.0),
            range("main", "forward", 10.0, 14.0),
        ];
        // Calls and waits are no ranges: they have no row here.
        host.push(HostSpan { kind: HostWork::Issue, ..range("main", "cuLaunchKernel", 1.0, 1.1) });
        let (rows, too_deep) = range_rows(&recording(host));
        assert_eq!(too_deep, 0);
        let s = |name: &str, at: f64| (name.to_string(), at);
        assert_eq!(
            laid_out(&rows),
            [
                ("NVTX · main".to_string(), vec![s("step", 0.0), s("step", 10.0)]),
                (
                    "NVTX · main · level 2".into(),
                    vec![s("forward", 0.0), s("backward", 4.0), s("forward", 10.0)]
                ),
                ("NVTX · loader".into(), vec![s("batch", 1.0)]),
            ]
        );
        assert!(rows.iter().all(|r| r.host && r.bars.iter().all(|b| b.key == Key::Range)));
    }

    #[test]
    fn ranges_deeper_than_the_rows_are_counted_and_overlapping_ones_share_free_rows() {
        // Five levels of nesting: two are too deep.
        let nested: Vec<HostSpan> =
            (0..5).map(|d| range("t", &format!("level {d}"), d as f64, 10.0 - d as f64)).collect();
        let (rows, too_deep) = range_rows(&recording(nested));
        assert_eq!((rows.len(), too_deep), (RANGE_LEVELS, 2));
        // Start/end ranges that overlap without nesting: b goes lower, c back to the top row.
        let crossing =
            vec![range("t", "a", 0.0, 5.0), range("t", "b", 3.0, 8.0), range("t", "c", 6.0, 9.0)];
        let (rows, _) = range_rows(&recording(crossing));
        let names: Vec<Vec<String>> =
            rows.iter().map(|r| r.bars.iter().map(|b| b.text.clone()).collect()).collect();
        assert_eq!(names, [vec!["a".to_string(), "c".into()], vec!["b".into()]]);
    }
}
