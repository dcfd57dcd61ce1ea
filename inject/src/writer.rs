//! The main trace file of one process, `<dir>/<pid>.jsonl`: lines are appended straight to
//! the file (each batch in one write, nothing of ours buffered past it), so a process killed even
//! with SIGKILL leaves every line written before, and at worst one cut line, which the reader
//! skips.
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use streamlab_cupti::trace_file::{self, Line};

pub struct Writer {
    file: File,
    /// The process the file is for. A child forked without exec inherits the writer (and
    /// CUPTI's buffers, copies of the parent's): it must write nothing, or the parent's
    /// records would be written twice.
    pid: u32,
    /// Lines that came before the `Process` line, held until it is written.
    early: String,
    started: bool,
    finished: bool,
}

impl Writer {
    /// Opens (or creates) the file of process `pid` in `dir`, creating `dir` if needed.
    pub fn create(dir: &Path, pid: u32) -> io::Result<Writer> {
        std::fs::create_dir_all(dir)?;
        let file =
            OpenOptions::new().create(true).append(true).open(trace_file::main_path(dir, pid))?;
        Ok(Writer { file, pid, early: String::new(), started: false, finished: false })
    }

    fn ours(&self) -> bool {
        !self.finished && std::process::id() == self.pid
    }

    fn write(&mut self, text: &str) {
        // A full disk or a removed folder loses lines; nothing here can report it to anyone
        // but the program's own stderr, which is the program's.
        let _ = self.file.write_all(text.as_bytes());
    }

    /// Writes the `Process` line, then whatever came before it.
    pub fn start(&mut self, process: &Line) {
        if !self.ours() || self.started {
            return;
        }
        self.started = true;
        let mut text = process.to_json_line();
        text.push_str(&std::mem::take(&mut self.early));
        self.write(&text);
    }

    /// Appends `text`, whole lines each ending in a newline.
    pub fn append(&mut self, text: &str) {
        if text.is_empty() || !self.ours() {
            return;
        }
        if self.started {
            self.write(text);
        } else {
            self.early.push_str(text);
        }
    }

    /// Appends the last lines; nothing is written after them.
    pub fn finish(&mut self, text: &str) {
        self.append(text);
        self.finished = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir()
            .join(format!("streamlab-inject-writer-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn process() -> Line {
        Line::Process {
            format: 1,
            pid: std::process::id(),
            ppid: 1,
            args: vec!["probe".into()],
            cupti: "/x/libcupti.so.13".into(),
            cupti_version: 130001,
            flush_ms: 200,
            max_records: 10,
            start_ns: 5,
            keep: Default::default(),
            missing: vec![],
        }
    }

    #[test]
    fn the_process_line_comes_first_and_nothing_follows_the_end() {
        let dir = folder("order");
        let pid = std::process::id();
        let mut w = Writer::create(&dir, pid).unwrap();
        let early = Line::Flushed { time: 7 }.to_json_line();
        w.append(&early);
        w.start(&process());
        w.append(&Line::Note { text: "n".into() }.to_json_line());
        w.finish(&Line::Exit { time: 9 }.to_json_line());
        w.append(&Line::Flushed { time: 10 }.to_json_line());
        let text = std::fs::read_to_string(trace_file::main_path(&dir, pid)).unwrap();
        let lines: Vec<Line> = text.lines().map(|l| Line::parse(l).unwrap()).collect();
        assert_eq!(
            lines,
            [
                process(),
                Line::Flushed { time: 7 },
                Line::Note { text: "n".into() },
                Line::Exit { time: 9 }
            ]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_forked_child_writes_nothing() {
        // A writer made for another pid stands for the parent's writer as a child inherits
        // it: this process is not the one the file is for.
        let dir = folder("fork");
        let parent = std::process::id() + 1;
        let mut w = Writer::create(&dir, parent).unwrap();
        w.start(&process());
        w.append(&Line::Flushed { time: 7 }.to_json_line());
        w.finish(&Line::Exit { time: 9 }.to_json_line());
        assert_eq!(std::fs::read_to_string(trace_file::main_path(&dir, parent)).unwrap(), "");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
