//! One `streamlab trace`, once its arguments are checked: the trace folder, the recorder
//! prepared, the program run (twice with `--cost`), the files read, and the report and
//! files written. [`trace`] takes the recorder's `prepare` as an argument: the command passes
//! the real one, and the tests a stand-in whose "recorder" is the program itself writing a
//! trace file, so that everything after the injection runs on a machine without a GPU.
use std::path::{Path, PathBuf};

use crate::lab::capture::injection::Injection;
use crate::lab::capture::program::{self, Ran};
use crate::lab::capture::reader;
use crate::lab::capture::recordings::{self, timeline_text};
use crate::lab::capture::summary::{header, overlap, overlap_text, Cost, TraceReport};
use crate::lab::harness::run_command::Failure;
use crate::lab::inspect::findings::Thresholds;
use crate::lab::record::output::OutputFile;
use crate::lab::text::{Lang, Text};
use crate::runtime::{Error, Result};
use crate::t;

/// What one trace was asked to do.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The program and its arguments.
    pub program: Vec<String>,
    pub trace: Option<OutputFile>,
    pub svg: Option<OutputFile>,
    pub json: Option<OutputFile>,
    pub timeline: bool,
    pub lang: Lang,
    /// Where to keep the recorder's files; None: a temporary folder, removed at the end.
    pub keep: Option<PathBuf>,
    pub flush_ms: u64,
    pub max_records: u64,
    pub cost: bool,
    pub thresholds: Thresholds,
}

/// The recorder's preparation: `injection::prepare`, or a test's stand-in.
pub type Prepare<'a> = &'a dyn Fn(&Path, u64, u64) -> std::result::Result<Injection, String>;

/// The folder the recorder writes to, removed when dropped unless it is `--keep`'s.
struct TraceDir {
    path: PathBuf,
    remove: bool,
}

impl Drop for TraceDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `--keep DIR`, refused where it cannot hold this trace's files alone: its parent folder
/// missing, a file, or a folder that already holds trace files (they would be read as this
/// program's processes).
pub fn check_keep(dir: &Path) -> Result<()> {
    let bad = |why: String| Err(Error::InvalidInput(format!("--keep {}: {why}", dir.display())));
    if dir.exists() && !dir.is_dir() {
        return bad("a file, not a folder".into());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty() && !p.is_dir()) {
        return bad(format!("the folder {} does not exist", parent.display()));
    }
    let held = std::fs::read_dir(dir).into_iter().flatten().flatten();
    if held.into_iter().any(|e| e.path().extension().is_some_and(|x| x == "jsonl")) {
        return bad("already holds trace files (*.jsonl): name an empty or a new folder".into());
    }
    Ok(())
}

impl TraceDir {
    fn new(keep: Option<&Path>) -> Result<TraceDir> {
        let (path, remove) = match keep {
            Some(dir) => (dir.to_path_buf(), false),
            None => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                let name = format!("streamlab-trace-{}-{nanos}", std::process::id());
                (std::env::temp_dir().join(name), true)
            }
        };
        std::fs::create_dir_all(&path).map_err(|e| {
            Error::InvalidInput(format!("creating the trace folder {}: {e}", path.display()))
        })?;
        Ok(TraceDir { path, remove })
    }
}

fn failure(e: Error) -> Failure {
    (e, Some("trace"))
}

/// A line of the report, on stderr (stdout is the program's).
fn say(line: &Text, lang: Lang) {
    eprintln!("{}", line.render(lang));
}

/// Runs the program; where it cannot start, says why and gives the shell's code.
fn start(program: &[String], env: &[(String, String)]) -> std::result::Result<Ran, i32> {
    program::run(program, env).map_err(|not| {
        eprintln!("streamlab: trace: {}", not.why);
        not.code
    })
}

/// Runs one trace; returns the exit code (the program's, see `streamlab trace --help`).
pub fn trace(settings: &Settings, prepare: Prepare) -> std::result::Result<i32, Failure> {
    let lang = settings.lang;
    let dir = TraceDir::new(settings.keep.as_deref()).map_err(failure)?;
    let injection = prepare(&dir.path, settings.flush_ms, settings.max_records)
        .map_err(|why| failure(Error::NotRun(why)))?;
    let untraced = match settings.cost {
        true => match start(&settings.program, &[]) {
            // Asked to stop during the first run: no second one.
            Ok(ran) if ran.interrupted.is_some() => return Ok(ran.ended.exit_code()),
            Ok(ran) => Some(ran),
            Err(code) => return Ok(code),
        },
        false => None,
    };
    let ran = match start(&settings.program, &injection.env) {
        Ok(ran) => ran,
        Err(code) => return Ok(code),
    };
    let code = ran.ended.exit_code();
    // From here on the program's code is the answer; a failure of ours is said in a line,
    // and its code used only where the program succeeded.
    let after = |e: Error| {
        eprintln!("streamlab: trace: {e}");
        if code == 0 {
            e.exit_code()
        } else {
            code
        }
    };
    let capture = match reader::read_dir(&dir.path) {
        Ok(c) => c,
        Err(why) => {
            return Ok(after(Error::Internal(format!("reading the recorder's files: {why}"))))
        }
    };
    let mut lines = header(&capture, &injection, &settings.program);
    lines.push(ran.ended.line());
    let cost = untraced.map(|u| Cost {
        untraced_ms: u.wall_ms,
        traced_ms: ran.wall_ms,
        untraced: u.ended,
        traced: ran.ended,
    });
    lines.extend(cost.iter().flat_map(Cost::lines));
    for line in &lines {
        say(line, lang);
    }
    if settings.timeline {
        eprint!("{}", timeline_text(&recordings::recordings(&capture), lang));
    }
    let report = overlap(&capture, &settings.thresholds);
    eprint!("{}", overlap_text(&report, lang));
    let written = recordings::write(
        &capture,
        &settings.program,
        settings.trace.as_ref(),
        settings.svg.as_ref(),
    );
    if let Err(e) = written {
        return Ok(after(e));
    }
    if let Some(file) = &settings.json {
        let json = TraceReport::new(&settings.program, ran.ended, &lines, &capture, &report, cost);
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| Error::Internal(format!("report JSON: {e}")));
        if let Err(e) = text.and_then(|t| file.write(&t)) {
            return Ok(after(e));
        }
    }
    let shown = |f: &OutputFile| f.path().display().to_string();
    let written = [
        settings.trace.as_ref().map(|f| t!("trace.wrote_trace", path = shown(f))),
        settings.svg.as_ref().map(|f| t!("trace.wrote_svg", path = shown(f))),
        settings.json.as_ref().map(|f| t!("trace.wrote_json", path = shown(f))),
    ];
    for line in written.iter().flatten() {
        say(line, lang);
    }
    if !dir.remove {
        say(&t!("trace.kept", path = dir.path.display().to_string()), lang);
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::capture::program::RUNS;
    use crate::lab::capture::reader_tests::testdata;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("streamlab-session-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn settings(program: &[&str], out: &Path) -> Settings {
        let file = |flag, name: &str| Some(OutputFile::checked(flag, &out.join(name)).unwrap());
        Settings {
            program: program.iter().map(|s| s.to_string()).collect(),
            trace: file("--trace", "t.json"),
            svg: file("--svg", "t.svg"),
            json: file("--json", "r.json"),
            timeline: true,
            lang: Lang::En,
            keep: None,
            flush_ms: 200,
            max_records: 1000,
            cost: false,
            thresholds: Thresholds::DEFAULT,
        }
    }

    /// A stand-in recorder: the program is told where the folder is, and writes the file.
    fn stand_in(dir: &Path, _: u64, _: u64) -> std::result::Result<Injection, String> {
        Ok(Injection {
            library: "/nowhere/libstreamlab_inject.so".into(),
            cupti: "/nowhere/libcupti.so.13".into(),
            cupti_version: 130001,
            env: vec![("TRACE_DIR".into(), dir.display().to_string())],
        })
    }

    /// Everything after the injection, end to end: the program's own code comes back, the
    /// files are written, the report reads the recorder's file, the folder is removed.
    #[test]
    fn a_traced_run_reports_and_writes_its_files_and_keeps_the_programs_code() {
        let _one_at_a_time = RUNS.lock().unwrap_or_else(|e| e.into_inner());
        let out = scratch("files");
        let fixture = testdata("one-process/4242.jsonl");
        let script = format!(
            "cp {} \"$TRACE_DIR/4242.jsonl\"; echo $TRACE_DIR > {}/dir; exit 7",
            fixture.display(),
            out.display()
        );
        let mut s = settings(&["sh", "-c", &script], &out);
        s.cost = true;
        assert_eq!(trace(&s, &stand_in).unwrap(), 7);
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("r.json")).unwrap()).unwrap();
        assert_eq!(report["exit_code"], 7);
        assert_eq!(report["processes"][0]["pid"], 4242);
        assert_eq!(report["overlap"]["windows"][0]["findings"][0]["rule"], "pageable_copy");
        assert!(report["cost"]["traced_ms"].as_f64().unwrap() > 0.0, "{report}");
        let header: Vec<&str> =
            report["header"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
        assert!(header.contains(&"the program exited 7"), "{header:?}");
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("t.json")).unwrap()).unwrap();
        assert_eq!(crate::lab::record::trace::read(&trace).unwrap().1.len(), 1);
        assert!(std::fs::read_to_string(out.join("t.svg")).unwrap().starts_with("<svg"));
        let dir = std::fs::read_to_string(out.join("dir")).unwrap();
        assert!(!Path::new(dir.trim()).exists(), "the temporary folder {dir} was left");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn a_program_killed_by_a_signal_gives_128_plus_n_and_keep_keeps_the_files() {
        let _one_at_a_time = RUNS.lock().unwrap_or_else(|e| e.into_inner());
        let out = scratch("killed");
        let keep = out.join("raw");
        let fixture = testdata("killed/777.jsonl");
        let script = format!("cp {} \"$TRACE_DIR/777.jsonl\"; kill -9 $$", fixture.display());
        let mut s = settings(&["sh", "-c", &script], &out);
        s.keep = Some(keep.clone());
        assert_eq!(trace(&s, &stand_in).unwrap(), 137);
        assert!(keep.join("777.jsonl").is_file());
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("r.json")).unwrap()).unwrap();
        assert_eq!(report["ended"]["signal"], 9);
        assert_eq!(report["processes"][0]["ending"]["how"], "last_flush");
        // The folder now holds a trace: a second trace may not be mixed into it.
        let e = check_keep(&keep).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("already holds trace files"), "{e}");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn without_a_recorder_the_program_does_not_start() {
        let _one_at_a_time = RUNS.lock().unwrap_or_else(|e| e.into_inner());
        let out = scratch("no-recorder");
        let marker = out.join("ran");
        let script = format!("touch {}", marker.display());
        let s = settings(&["sh", "-c", &script], &out);
        let none = |_: &Path, _: u64, _: u64| Err("libcupti not found: install it".to_string());
        let (e, named) = trace(&s, &none).unwrap_err();
        assert_eq!((e.exit_code(), named), (3, Some("trace")));
        assert_eq!(e.to_string(), "libcupti not found: install it");
        assert!(!marker.exists(), "the program ran without its recorder");
        // A program that is not there: the shell's 127.
        let s = settings(&["no-such-program-x"], &out);
        assert_eq!(trace(&s, &stand_in).unwrap(), 127);
        std::fs::remove_dir_all(&out).unwrap();
    }
}
