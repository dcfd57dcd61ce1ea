//! The `streamlab` binary as a script sees it: exit codes and one-line errors. These run
//! everywhere; where a GPU is present the device branch is asserted instead.
mod common;
use common::{machine_has_nvidia_gpu, stderr, stdout, streamlab, streamlab_in};

/// Exit 2, one line on stderr that contains `expected`, no panic, nothing on stdout.
fn assert_refused(args: &[&str], expected: &str) {
    let o = streamlab(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("streamlab: "), "{args:?}: {err}");
    assert!(err.contains(expected), "{args:?}: {err} (expected {expected:?})");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}: printed before refusing");
}

#[test]
fn invalid_arguments_exit_2_with_one_explanation() {
    for (args, expected) in [
        (&["run", "overlap", "--elements", "0"][..], "whole number from 1 to 4294967295"),
        (&["run", "overlap", "--streams", "0"], "whole number from 1 to 64"),
        (&["run", "overlap", "--streams", "65"], "whole number from 1 to 64"),
        (&["run", "overlap", "--streams", "-3"], "whole number from 1 to 64"),
        (&["run", "overlap", "--reps", "0"], "whole number from 1 to 10000"),
        (&["run", "overlap", "--elements", "5000000000"], "whole number from 1 to 4294967295"),
        (&["run", "overlap", "--no-such-flag"], "--no-such-flag"),
        (
            &["run", "overlap", "--elements", "3", "--streams", "4"],
            "overlap: --streams 4 is more than --elements 3",
        ),
    ] {
        assert_refused(args, expected);
    }
}

#[test]
fn a_missing_or_misspelt_lesson_is_named() {
    assert_refused(&["run"], "<LESSON> is missing");
    let o = streamlab(&["run"]);
    assert!(stderr(&o).contains("overlap") && stderr(&o).contains("all"), "{}", stderr(&o));
    // clap's "did you mean" survives, in the same one line.
    assert_refused(&["run", "overlp"], "'overlap'");
    assert_refused(&["run", "no-such-lesson"], "no-such-lesson");
}

/// A lesson streamlab does not have is called an unknown lesson, not an "unrecognized
/// subcommand": a guess where one is near, and the lessons to choose from, in one line.
#[test]
fn an_unknown_lesson_is_said_so_with_a_guess_and_the_lessons() {
    let listed = "(the lessons: ";
    let o = streamlab(&["run", "overlp", "--reps", "3"]);
    let err = stderr(&o);
    assert_refused(
        &["run", "overlp", "--reps", "3"],
        "run: unknown lesson 'overlp': did you mean 'overlap'? ",
    );
    assert!(err.contains(listed) && err.contains(" overlap, "), "{err}");
    assert!(err.trim_end().ends_with(", or all; see streamlab list)"), "{err}");
    assert!(!err.contains("subcommand"), "{err}");
    // No near name: the lessons alone; a part of a name: the lessons that hold it.
    assert_refused(&["run", "qwertyuiop"], &format!("run: unknown lesson 'qwertyuiop' {listed}"));
    assert_refused(&["run", "sync"], "unknown lesson 'sync': did you mean ");
    let err = stderr(&streamlab(&["run", "sync"]));
    assert!(err.contains("'sync-methods'"), "{err}");
    // An unknown command is one too, with the commands.
    assert_refused(&["lsit"], "unknown command 'lsit': did you mean 'list'? (the commands: info,");
    let err = stderr(&streamlab(&["lsit"]));
    assert!(!err.contains("subcommand"), "{err}");
    // A lesson name pasted with a file's worth of text is echoed short, in one line.
    let long = format!("overlap\n{}", "x".repeat(100_000));
    let o = streamlab(&["run", &long]);
    let err = stderr(&o);
    assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{}", &err[..200]);
    assert!(err.len() < 2_000, "echoed whole: {} bytes", err.len());
    assert!(err.contains("'overlap\\nxxx") && err.contains("… (100008 characters)"), "{err}");
}

#[test]
fn the_lesson_is_named_once_in_its_errors() {
    let o = streamlab(&["run", "overlap", "--elements", "3", "--streams", "4"]);
    let err = stderr(&o);
    assert_eq!(err.matches("overlap").count(), 1, "{err}");
}

#[test]
fn each_lesson_has_its_own_help_with_defaults_and_ranges() {
    let o = streamlab(&["run", "overlap", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = stdout(&o);
    assert!(
        help.contains("--streams") && help.contains("[default: 8]") && help.contains("[1..=64]"),
        "{help}"
    );
    // Not the generic `run` help: that one lists lessons, not overlap's flags.
    let generic = stdout(&streamlab(&["run", "--help"]));
    assert_ne!(help, generic);
    assert!(!generic.contains("--streams"), "{generic}");
}

#[test]
fn with_json_an_error_is_also_a_json_object_on_stdout() {
    let o = streamlab(&["run", "overlap", "--streams", "65", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    assert_eq!(v["exit_code"], 2);
    assert!(v["error"].as_str().unwrap().contains("whole number from 1 to 64"), "{v}");
}

#[test]
fn info_reports_the_device_or_says_in_one_line_there_is_none() {
    let o = streamlab(&["info"]);
    if machine_has_nvidia_gpu() {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = stdout(&o);
        for fact in [
            "compute capability",
            "multiprocessors",
            "asyncEngineCount",
            "concurrentKernels",
            "deviceOverlap",
            "stream priorities",
        ] {
            assert!(out.contains(fact), "missing {fact}: {out}");
        }
    } else {
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("streamlab: no CUDA device available: "), "{err}");
    }
}

#[test]
fn without_a_gpu_a_lesson_exits_3_in_one_line_naming_itself() {
    // Every GPU hidden, so a GPU machine takes the no-GPU path too (cuInit finds none).
    let o = streamlab_in(&[("CUDA_VISIBLE_DEVICES", "-1")], &["run", "overlap", "--reps", "1"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("streamlab: overlap: no CUDA device available"), "{err}");
}

/// `STREAMLAB_GPU_ARCH` naming a PTX this build does not carry is bad input: exit 2 and one
/// line, before the driver is asked anything (every GPU hidden, so any machine shows it); one
/// it carries gets as far as the device (here: none, exit 3).
#[test]
fn a_forced_arch_the_build_lacks_is_refused_in_one_line() {
    let hidden = ("CUDA_VISIBLE_DEVICES", "-1");
    let archs = streamlab::runtime::ptx::embedded_archs();
    for (arch, what) in [("sm_86", "is not embedded in"), ("hopper", "is not an architecture of")] {
        for args in [&["info"][..], &["run", "overlap", "--reps", "1"]] {
            let o = streamlab_in(&[hidden, ("STREAMLAB_GPU_ARCH", arch)], args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            let line = format!("STREAMLAB_GPU_ARCH={arch} {what} this build, which carries {archs} (unset it to let streamlab choose)");
            assert!(err.starts_with("streamlab: ") && err.trim_end().ends_with(&line), "{err}");
        }
    }
    let o = streamlab_in(&[hidden, ("STREAMLAB_GPU_ARCH", "sm_75")], &["info"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

#[test]
fn list_names_every_lesson_with_its_flags() {
    let o = streamlab(&["list", "--json"]);
    assert!(o.status.success());
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let lessons = list.as_array().unwrap();
    let names: Vec<&str> = lessons.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"overlap"), "{names:?}");
    assert_eq!(names.len(), streamlab::lessons::LESSONS.len());
    let overlap = lessons.iter().find(|l| l["name"] == "overlap").unwrap();
    assert!(overlap["flags"].as_array().unwrap().iter().any(|f| f == "--streams"), "{overlap}");
}

#[test]
fn help_documents_the_exit_codes() {
    let out = stdout(&streamlab(&["--help"]));
    assert!(out.contains("Exit codes") && out.contains("5  a result check failed"), "{out}");
}

/// A fresh folder of this test process's own under the system's temporary folder.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("streamlab-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn recorded_names_the_flags_it_ignores_on_stderr_and_succeeds() {
    assert!(
        streamlab::lab::record::recorded_runs::find("overlap").is_some(),
        "this build embeds no recorded run of overlap (docs/recorded)"
    );
    let note = "--recorded shows the recorded run with its own parameters; ignored: ";
    for (args, who, ignored) in [
        (
            &["run", "overlap", "--recorded", "--reps", "3", "--streams", "8"][..],
            "overlap",
            "--reps, --streams",
        ),
        (&["run", "overlap", "--seed", "2", "--recorded", "--json"], "overlap", "--seed"),
        (&["run", "all", "--recorded", "--device", "1"], "all", "--device"),
    ] {
        let o = streamlab(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err, format!("streamlab: {who}: {note}{ignored}\n"), "{args:?}");
        assert!(stdout(&o).contains("recorded on "), "{args:?}: the run is still shown");
    }
    // Flags a recorded run honours are not named.
    for args in
        [&["run", "overlap", "--recorded"][..], &["run", "overlap", "--recorded", "--timeline"]]
    {
        let o = streamlab(args);
        assert_eq!((o.status.code(), stderr(&o)), (Some(0), String::new()), "{args:?}");
    }
}

#[test]
fn trace_and_svg_naming_a_missing_folder_or_a_folder_are_refused_before_the_gpu() {
    // Without the check, a machine with no GPU would exit 3 (no device), and one with a GPU
    // would run the lesson before failing to write: exit 2 proves the refusal comes first.
    let dir = scratch("folders");
    let missing = dir.join("no-such-folder").join("t.json");
    let missing = missing.to_str().unwrap();
    let folder = dir.to_str().unwrap();
    let cannot = format!("cannot write it: the folder {}", dir.join("no-such-folder").display());
    for flag in ["--trace", "--svg"] {
        let not_a_file = format!("{flag} {folder}: a folder, not a file: name the file");
        assert_refused(&["run", "overlap", flag, missing], &format!("overlap: {flag} {missing}"));
        assert_refused(&["run", "overlap", flag, missing], &cannot);
        assert_refused(&["run", "overlap", flag, folder], &format!("overlap: {not_a_file}"));
        assert_refused(&["run", "overlap", "--recorded", flag, missing], &cannot);
        assert_refused(&["run", "overlap", "--recorded", flag, folder], &not_a_file);
        assert_refused(&["run", "all", flag, missing], &cannot);
    }
    assert!(!dir.join("no-such-folder").exists(), "the missing folder was made");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A file named for another format is refused before anything runs, in one line that names
/// the right extension, and nothing is written: `--svg pic.png` would have held SVG, and
/// `--svg same.out --trace same.out` would have lost the trace under the picture.
#[test]
fn a_file_named_for_another_format_or_named_twice_is_refused_before_the_gpu() {
    let dir = scratch("formats");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (png, same, t_svg) = (path("pic.png"), path("same.out"), path("t.svg"));
    for lesson in [&["run", "overlap"][..], &["run", "overlap", "--recorded"], &["run", "all"]] {
        let args = [lesson, &["--svg", &png]].concat();
        assert_refused(&args, &format!("--svg {png}: --svg writes an SVG picture"));
        assert_refused(&args, &format!("must end in .svg: name it {}", path("pic.svg")));
        let args = [lesson, &["--svg", &same, "--trace", &same]].concat();
        assert_refused(&args, "so its file must end in .json");
        let args = [lesson, &["--trace", &t_svg]].concat();
        assert_refused(&args, "--trace writes a JSON trace, so its file must end in .json");
    }
    // `streamlab trace` writes three files: two of them spelt differently are one.
    let (t, also_t) = (path("t.json"), format!("{}/./t.json", dir.display()));
    let args = ["trace", "--trace", &t, "--json", &also_t, "--", "sh"];
    let o = streamlab(&args);
    let err = stderr(&o);
    assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    let said = format!("streamlab: trace: --trace {t} and --json {also_t} name one file");
    assert!(err.starts_with(&said), "{err}");
    let written: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(written.is_empty(), "a refused run wrote {written:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A file that cannot be written or read is said in words, not the system's "(os error N)",
/// in one line with exit 2.
#[test]
fn file_errors_are_said_in_words_without_the_os_error_number() {
    let full = std::path::Path::new("/dev/full");
    let mut cases = vec![(
        vec!["diff", "/no-such-folder/a.json", "/no-such-folder/b.json"],
        "diff: /no-such-folder/a.json: cannot read it: no such file or folder",
    )];
    if full.exists() {
        // Written after the recorded run is shown: the disk is full.
        let args = vec!["run", "overlap", "--recorded", "--svg", "/dev/full"];
        cases.push((args, "overlap: --svg /dev/full: cannot write it: no space left on the disk"));
    }
    if std::path::Path::new("/proc/self").is_dir() {
        let args = vec!["run", "overlap", "--recorded", "--trace", "/proc/t.json"];
        cases.push((args, "--trace /proc/t.json: cannot write it: no such file or folder"));
    }
    for (args, expected) in cases {
        let o = streamlab(&args);
        let err = stderr(&o);
        assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("os error") && !err.contains("panicked"), "{args:?}: {err}");
    }
}

/// An argument of 100 KB (a file pasted by mistake) is echoed back by its start and its
/// length, in a line of a few hundred bytes.
#[test]
fn a_long_argument_is_echoed_short() {
    let long = "7".repeat(100_000);
    let png = format!("{long}.png");
    let unknown = format!("--{long}");
    let cases = [
        (vec!["run", "overlap", "--reps", &long], "invalid value '77777"),
        (vec!["run", "overlap", "--svg", &png], "--svg 77777"),
        (vec!["run", "overlap", &unknown], "'--77777"),
        (vec!["trace", &unknown, "--", "sh"], "trace: unknown flag '--77777"),
    ];
    for (args, expected) in cases {
        let o = streamlab(&args);
        let err = stderr(&o);
        let start = &err[..err.len().min(300)];
        assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{start}");
        assert!(err.len() < 1_000, "echoed whole: {} bytes: {start}", err.len());
        assert!(err.contains(expected) && err.contains(" characters)"), "{err}");
    }
}

#[test]
fn a_missing_command_or_argument_is_named_in_one_complete_line() {
    assert_refused(
        &[],
        "a command is missing: info, list, run, launch, trace, report or diff (see streamlab --help)",
    );
    for (args, named) in [
        (
            &["launch"][..],
            "not provided: --gpus <N>, <run LESSON [FLAGS]>... (see streamlab launch --help)",
        ),
        (
            &["launch", "--gpus", "2"],
            "not provided: <run LESSON [FLAGS]>... (see streamlab launch --help)",
        ),
        (
            &["launch", "run", "allreduce-overlap"],
            "not provided: --gpus <N> (see streamlab launch --help)",
        ),
    ] {
        assert_refused(args, named);
        let err = stderr(&streamlab(args));
        assert!(err.ends_with("--help)\n"), "{args:?}: the line is cut short: {err}");
    }
}

/// `STREAMLAB_RECORDER` takes `cupti`, `cupti-gpu` or `events`; a typo is refused before the
/// GPU is touched, instead of silently recording with CUPTI.
#[test]
fn a_recorder_that_does_not_exist_is_refused_before_the_gpu() {
    let o = streamlab_in(&[("STREAMLAB_RECORDER", "evnets")], &["run", "overlap", "--timeline"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "streamlab: overlap: STREAMLAB_RECORDER=evnets names no recorder (one of: cupti, cupti-gpu, events)"
    );
    assert!(o.stdout.is_empty());
    // A recorder that exists gets past the check: to the GPU, or to "no CUDA device" (3).
    let o = streamlab_in(&[("STREAMLAB_RECORDER", "events")], &["run", "overlap", "--reps", "1"]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// An argument error of a lesson named on the command line names it, as its other errors
/// do; one that belongs to no lesson (`run all`, `info`, `list`) names none.
#[test]
fn argument_errors_name_their_lesson_where_there_is_one() {
    for (args, start) in [
        (&["run", "overlap", "--streams", "0"][..], "streamlab: overlap: invalid value '0'"),
        (&["run", "--reps", "0", "overlap"], "streamlab: overlap: invalid value '0'"),
        (&["run", "all", "--reps", "0"], "streamlab: invalid value '0'"),
        (&["info", "--no-such-flag"], "streamlab: unexpected argument '--no-such-flag'"),
        (&["list", "--lang", "fr"], "streamlab: invalid value 'fr'"),
    ] {
        let o = streamlab(args);
        let err = stderr(&o);
        assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{args:?}: {err}");
        assert!(err.starts_with(start), "{args:?}: {err}");
    }
    let o = streamlab(&["run", "overlap", "--streams", "0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["lesson"], "overlap", "{v}");
}

/// `--trace` and `--svg` say where they wrote, a line each on stderr (a plot beside the
/// picture on the same line); `run all` writes each lesson's files and says so per lesson.
#[test]
fn trace_and_svg_say_where_they_wrote() {
    let dir = scratch("wrote");
    let (svg, trace) = (dir.join("s.svg"), dir.join("t.json"));
    let (svg_s, trace_s) = (svg.to_str().unwrap(), trace.to_str().unwrap());
    let o = streamlab(&["run", "stream-sweep", "--recorded", "--svg", svg_s, "--trace", trace_s]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let plot = dir.join("s-plot.svg");
    assert_eq!(
        stderr(&o),
        format!(
            "streamlab: stream-sweep: --trace wrote {trace_s}\nstreamlab: stream-sweep: --svg wrote {svg_s} and {}\n",
            plot.display()
        )
    );
    assert!(svg.is_file() && trace.is_file() && plot.is_file());
    let o = streamlab(&["run", "all", "--recorded", "--svg", svg_s]);
    let err = stderr(&o);
    let shown = streamlab::lab::record::recorded_runs::lessons();
    assert_eq!(err.lines().count(), shown.len(), "{err}");
    for lesson in shown {
        let file = dir.join(format!("s-{lesson}.svg"));
        let line = format!("streamlab: {lesson}: --svg wrote {}", file.display());
        assert!(err.lines().any(|l| l.starts_with(&line)), "{line} missing: {err}");
        assert!(file.is_file(), "{}", file.display());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `run all --recorded` ends with one line of totals, after every lesson's report.
#[test]
fn run_all_recorded_ends_with_its_totals() {
    let o = streamlab(&["run", "all", "--recorded"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let n = streamlab::lessons::LESSONS.len();
    let last = out.lines().last().unwrap_or_default();
    let shown = streamlab::lab::record::recorded_runs::lessons().len();
    let start = format!(
        "== all: {shown} of {n} recorded runs shown, {} not shown; their checks as recorded: ",
        n - shown
    );
    assert!(last.starts_with(&start), "{last}");
    // The checks it counts are the ones printed above it.
    let count = |tag: &str| out.lines().filter(|l| l.starts_with(tag)).count();
    let ends = format!(
        "{} passed, {} not asserted, {} failed",
        count("  [ok  ]"),
        count("  [--  ]"),
        count("  [FAIL]")
    );
    assert!(last.ends_with(&ends), "{last} (counted: {ends})");
    // JSON stays one array: no totals line in it.
    let o = streamlab(&["run", "all", "--recorded", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(shown));
}

/// `streamlab diff` of a report with itself: exit 0, every change zero, the same in the JSON;
/// a file that is no report: exit 2 and one line naming it.
#[test]
fn diff_compares_two_reports_and_names_a_file_that_is_none() {
    let dir = scratch("diff");
    let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/src/trace/read/testdata/one-process");
    let report = dir.join("r.json");
    let report = report.to_str().unwrap();
    let o = streamlab(&["report", testdata, "--json", report]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = dir.join("d.json");
    let o = streamlab(&["diff", report, report, "--json", out.to_str().unwrap(), "--lang", "en"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("process #1: pid 4242 in A, pid 4242 in B"), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" (ms) ")).collect();
    assert!(rows.len() >= 10, "{text}");
    for row in rows {
        let cells: Vec<&str> = row.split_whitespace().rev().take(2).collect();
        assert_eq!(cells, ["1.00", "0.000"], "{row}");
    }
    assert!(stderr(&o).contains("diff (JSON) written to"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let windows = v["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 2, "{v}");
    for figure in windows.iter().flat_map(|w| w["figures"].as_array().unwrap()) {
        assert_eq!(figure["delta"], 0.0, "{figure}");
    }
    // Not a report: the lesson list's JSON, and a file that is not JSON.
    let lesson = dir.join("list.json");
    std::fs::write(&lesson, stdout(&streamlab(&["list", "--json"]))).unwrap();
    let lesson = lesson.to_str().unwrap();
    assert_refused(
        &["diff", report, lesson],
        &format!("streamlab: diff: {lesson}: not a streamlab trace report ("),
    );
    assert_refused(&["diff", testdata, report], "diff: ");
    assert_refused(&["diff", report, "no-such.json"], "diff: no-such.json: cannot read it");
    assert_refused(&["diff", report], "<B.json>");
    std::fs::remove_dir_all(dir).unwrap();
}
