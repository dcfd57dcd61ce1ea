//! One `streamlab trace`, once its arguments are checked: the trace folder, the recorder
//! prepared, the program run (twice with `--cost`), the files read, and the report and
//! files written. [`trace`] takes the recorder's `prepare` as an argument: the command passes
//! the real one, and the tests a stand-in whose "recorder" is the program itself writing a
//! trace file, so that everything after the injection runs on a machine without a GPU.
use std::path::{Path, PathBuf};

use crate::runtime::error::io_text;
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{Lang, Text};
use crate::trace::capture::analysis::analyse_ranges;
use crate::trace::capture::injection::{self, Injection, Recording};
use crate::trace::capture::present::{present, say, Output, RunFile, RUN_FILE};
use crate::trace::capture::program::{self, Ran};
use crate::trace::capture::summary::Cost;
use crate::trace::inspect::findings::Thresholds;

/// What one trace was asked to do.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The program and its arguments.
    pub program: Vec<String>,
    /// The files and views asked for, and the language.
    pub output: Output,
    /// Where to keep the recorder's files; None: a temporary folder, removed at the end.
    pub keep: Option<PathBuf>,
    /// What the recorder is asked to do: its flushes, its limit, what it keeps.
    pub recording: Recording,
    pub cost: bool,
    pub thresholds: Thresholds,
    /// The NVTX range names that get windows (`--range`; all when empty).
    pub ranges: Vec<String>,
}

/// The recorder's preparation: `injection::prepare`, or a test's stand-in.
pub type Prepare<'a> = &'a dyn Fn(&Path, &Recording) -> std::result::Result<Injection, Text>;

/// The folder the recorder writes to: a temporary one, removed when dropped; or `--keep`'s,
/// removed only where this trace made it and the program never started (it is then empty).
struct TraceDir {
    path: PathBuf,
    remove: bool,
    /// `--keep`'s folder did not exist before this trace.
    made: bool,
    /// The program was started with the recorder.
    ran: bool,
}

impl Drop for TraceDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        } else if self.made && !self.ran {
            // `remove_dir` removes only an empty folder: nothing of the user's is lost.
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

/// `--keep DIR`, refused where it cannot hold this trace's files alone: its parent folder
/// missing, a file, a folder this user cannot write, or one that already holds trace files,
/// main files or segments (they would be read as this program's processes). A missing folder is made and removed
/// again, so that one that cannot be made is refused before anything runs.
pub fn check_keep(dir: &Path) -> Result<()> {
    let bad = |why: Text| Err(Error::InvalidInput(why));
    let shown = dir.display().to_string();
    let cannot_write = |e: std::io::Error| {
        bad(t!("error.trace.keep_cannot_write", dir = shown.clone(), why = io_text(&e)))
    };
    if dir.exists() && !dir.is_dir() {
        return bad(t!("error.trace.keep_a_file", dir = shown));
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty() && !p.is_dir()) {
        let parent = parent.display().to_string();
        return bad(t!("error.trace.keep_no_parent", dir = shown, parent));
    }
    if !dir.exists() {
        return match std::fs::create_dir(dir) {
            Ok(()) => std::fs::remove_dir(dir).or_else(|e| {
                bad(t!("error.trace.keep_cannot_remove", dir = shown, why = io_text(&e)))
            }),
            Err(e) => bad(t!("error.trace.keep_cannot_make", dir = shown, why = io_text(&e))),
        };
    }
    let held = std::fs::read_dir(dir).into_iter().flatten().flatten();
    if held.into_iter().any(|e| e.path().extension().is_some_and(|x| x == "jsonl")) {
        return bad(t!("error.trace.keep_holds_traces", dir = shown));
    }
    // The recorder writes as the program, which runs as this user: a file of ours must go in.
    let probe = dir.join(format!(".streamlab-write-check-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => std::fs::remove_file(&probe).or_else(cannot_write),
        Err(e) => cannot_write(e),
    }
}

/// A new folder of this user's alone (mode 0700) in the temp folder, under a name no other
/// trace has: one that exists already, whoever made it, is never used.
fn temporary_folder() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700);
    let mut last = None;
    for attempt in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("streamlab-trace-{}-{nanos}-{attempt}", std::process::id());
        let path = std::env::temp_dir().join(name);
        match builder.create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(path),
            Err(e) => {
                let path = path.display().to_string();
                return Err(no_folder(t!("error.trace.path_why", path, why = io_text(&e))));
            }
        }
    }
    let path = last.map(|p| p.display().to_string()).unwrap_or_default();
    Err(no_folder(t!("error.trace.names_taken", path)))
}

/// The temporary folder could not be made: TMPDIR can name another.
fn no_folder(why: Text) -> Error {
    Error::InvalidInput(t!("error.trace.no_temporary_folder", why))
}

impl TraceDir {
    fn new(keep: Option<&Path>) -> Result<TraceDir> {
        let Some(dir) = keep else {
            let path = temporary_folder()?;
            return Ok(TraceDir { path, remove: true, made: true, ran: false });
        };
        let made = !dir.is_dir();
        std::fs::create_dir_all(dir).map_err(|e| {
            let (dir, why) = (dir.display().to_string(), io_text(&e));
            Error::InvalidInput(t!("error.trace.keep_cannot_make", dir, why))
        })?;
        Ok(TraceDir { path: dir.to_path_buf(), remove: false, made, ran: false })
    }
}

/// Runs the program (`traced`: told when it started, for the recorder); where it cannot
/// start, says why in `lang` and gives the shell's code.
fn start(
    program: &[String],
    env: &[(String, String)],
    traced: bool,
    lang: Lang,
) -> std::result::Result<Ran, i32> {
    let started = traced.then_some(injection::STARTED_NS);
    program::run(program, env, started).map_err(|not| {
        eprintln!("streamlab: trace: {}", not.why.render(lang));
        not.code
    })
}

/// Runs one trace; returns the exit code (the program's, see `streamlab trace --help`).
pub fn trace(settings: &Settings, prepare: Prepare) -> Result<i32> {
    let lang = settings.output.lang;
    let mut dir = TraceDir::new(settings.keep.as_deref())?;
    let injection = prepare(&dir.path, &settings.recording).map_err(Error::NotRun)?;
    let untraced = match settings.cost {
        true => match start(&settings.program, &[], false, lang) {
            // Asked to stop during the first run: no second one.
            Ok(ran) if ran.interrupted.is_some() => return Ok(ran.ended.exit_code()),
            Ok(ran) => Some(ran),
            Err(code) => return Ok(code),
        },
        false => None,
    };
    dir.ran = true;
    let ran = match start(&settings.program, &injection.env, true, lang) {
        Ok(ran) => ran,
        Err(code) => return Ok(code),
    };
    let code = ran.ended.exit_code();
    // From here on the program's code is the answer; a failure of ours is said in a line,
    // and its code used only where the program succeeded.
    let after = |e: Error| {
        eprintln!("streamlab: trace: {}", e.render(lang));
        if code == 0 {
            e.exit_code()
        } else {
            code
        }
    };
    let cost = untraced.map(|u| Cost {
        untraced_ms: u.wall_ms,
        traced_ms: ran.wall_ms,
        untraced: u.ended,
        traced: ran.ended,
    });
    // The run described beside the recorder's files, for `streamlab report` on a kept folder.
    let run = RunFile {
        command: settings.program.clone(),
        ended: ran.ended,
        cost,
        cupti: injection.cupti.display().to_string(),
        cupti_version: injection.cupti_version,
    };
    if let Err(why) = run.write(&dir.path) {
        return Ok(after(Error::Internal(format!("writing {}: {why}", RUN_FILE))));
    }
    let analysis = match analyse_ranges(&dir.path, &settings.thresholds, &settings.ranges) {
        Ok(a) => a,
        Err(why) => {
            let why = why.en();
            return Ok(after(Error::Internal(format!("reading the recorder's files: {why}"))));
        }
    };
    let fallback = Some((run.cupti.clone(), run.cupti_version));
    let shown =
        present(&analysis, &settings.program, Some(ran.ended), cost, fallback, &settings.output);
    // Where the files are kept is said even when one of them could not be written (an
    // `--svg-range` the trace does not hold): `streamlab report` can draw it again from there.
    if !dir.remove {
        say(&t!("trace.kept", path = dir.path.display().to_string()), lang);
    }
    match shown {
        Ok(()) => Ok(code),
        Err(e) => Ok(after(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::output::OutputFile;
    use crate::text::Lang;
    use crate::trace::capture::program::RUNS;
    use crate::trace::read::reader_tests::testdata;

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
            output: Output {
                trace: file("--trace", "t.json"),
                svg: file("--svg", "t.svg"),
                svg_range: Default::default(),
                json: file("--json", "r.json"),
                timeline: true,
                lang: Lang::En,
            },
            keep: None,
            recording: Recording { flush_ms: 200, max_records: 1000, keep: Default::default() },
            cost: false,
            thresholds: Thresholds::DEFAULT,
            ranges: Vec::new(),
        }
    }

    /// A stand-in recorder: the program is told where the folder is, and writes the file.
    fn stand_in(dir: &Path, _: &Recording) -> std::result::Result<Injection, Text> {
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

    /// `streamlab report` on the folder a trace kept says what the trace said: the same
    /// JSON report, the program's command line and ending included.
    #[test]
    fn the_report_on_a_kept_folder_is_the_traces() {
        let _one_at_a_time = RUNS.lock().unwrap_or_else(|e| e.into_inner());
        let out = scratch("report-again");
        let keep = out.join("raw");
        let fixture = testdata("one-process/4242.jsonl");
        let script = format!("cp {} \"$TRACE_DIR/4242.jsonl\"; exit 3", fixture.display());
        let mut s = settings(&["sh", "-c", &script], &out);
        s.keep = Some(keep.clone());
        assert_eq!(trace(&s, &stand_in).unwrap(), 3);
        let again = OutputFile::checked("--json", &out.join("again.json")).unwrap();
        let output = Output { json: Some(again), lang: Lang::En, ..Output::default() };
        crate::trace::capture::report_command::report_dir(&keep, &s.thresholds, &[], &output)
            .unwrap();
        let read = |name: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap()
        };
        let (traced, reported) = (read("r.json"), read("again.json"));
        assert_eq!(traced, reported);
        assert_eq!(reported["exit_code"], 3);
        assert_eq!(reported["command"][0], "sh");
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
        let none =
            |_: &Path, _: &Recording| Err(Text::Plain("libcupti not found: install it".into()));
        let mut s = s;
        let keep = out.join("raw");
        s.keep = Some(keep.clone());
        let e = trace(&s, &none).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert_eq!(e.to_string(), "libcupti not found: install it");
        assert!(!marker.exists(), "the program ran without its recorder");
        assert!(!keep.exists(), "the --keep folder made for it was left, empty");
        // A --keep folder that was there stays, as it was.
        std::fs::create_dir(&keep).unwrap();
        trace(&s, &none).unwrap_err();
        assert!(keep.is_dir());
        s.keep = None;
        // A program that is not there: the shell's 127.
        let s = settings(&["no-such-program-x"], &out);
        assert_eq!(trace(&s, &stand_in).unwrap(), 127);
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn keep_is_checked_writable_and_made_only_for_the_trace() {
        let out = scratch("keep");
        // A new folder can be made: it is, and removed again until the trace makes it.
        let new = out.join("new");
        check_keep(&new).unwrap();
        assert!(!new.exists());
        let e = check_keep(&out.join("no/such")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with(&format!("--keep {}: ", out.join("no/such").display())));
        // A folder this user cannot write is refused (root writes anywhere: not checked).
        use std::os::unix::fs::PermissionsExt;
        let locked = out.join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
        let root = std::fs::write(locked.join("x"), "").is_ok();
        if !root {
            let e = check_keep(&locked).unwrap_err();
            assert!(e.to_string().contains("cannot write in it"), "{e}");
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
        check_keep(&locked).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read_dir(&locked).unwrap().count(), usize::from(root));
        // A folder holding only a segment of another trace is refused too.
        let segment = out.join("segment");
        std::fs::create_dir(&segment).unwrap();
        std::fs::write(segment.join("77.3.jsonl"), "").unwrap();
        let e = check_keep(&segment).unwrap_err();
        assert!(e.to_string().contains("already holds trace files"), "{e}");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn the_temporary_folder_is_new_and_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (temporary_folder().unwrap(), temporary_folder().unwrap());
        assert_ne!(a, b);
        for dir in [&a, &b] {
            assert_eq!(dir.metadata().unwrap().permissions().mode() & 0o777, 0o700);
            std::fs::remove_dir(dir).unwrap();
        }
    }
}
