//! `--recorded`, `--trace` and `--svg` as a script sees them, on any machine: a recorded run
//! is shown (labelled) where the binary embeds one, refused in one line where it does not,
//! and the no-GPU error points to it.
use streamlab::lab::record::recorded_runs;

mod common;
use common::{streamlab, text};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("streamlab-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `streamlab` with `args` and every GPU hidden from the driver (an invalid first index in
/// `CUDA_VISIBLE_DEVICES` hides them all), so the no-GPU path runs on a GPU machine too
/// instead of the test returning early and counting as passed.
fn streamlab_without_a_gpu(args: &[&str]) -> std::process::Output {
    common::streamlab_in(&[("CUDA_VISIBLE_DEVICES", "-1")], args)
}

#[test]
fn without_a_gpu_the_error_line_points_to_recorded() {
    let o = streamlab_without_a_gpu(&["run", "overlap", "--reps", "1"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no CUDA device available") && err.contains("--recorded"), "{err}");
    let o = streamlab_without_a_gpu(&["run", "all"]);
    let err = text(&o.stderr);
    assert_eq!((o.status.code(), err.lines().count()), (Some(3), 1), "{err}");
    assert!(err.contains("--recorded"), "{err}");
}

/// `info` and `launch` without a GPU offer the recorded runs too, in their one line; `info`
/// names this build (its version, its kernels and the PTX it carries) there, and in its text
/// and JSON where there is a GPU.
#[test]
fn without_a_gpu_info_and_launch_offer_recorded_and_info_names_the_build() {
    let kernels = streamlab::lab::record::report::kernels_id();
    let archs = streamlab::runtime::ptx::embedded_archs();
    let build =
        format!("streamlab {}, kernels {kernels}, PTX for {archs}", env!("CARGO_PKG_VERSION"));
    let o = streamlab_without_a_gpu(&["info"]);
    let err = text(&o.stderr);
    assert_eq!((o.status.code(), err.lines().count()), (Some(3), 1), "{err}");
    assert!(err.starts_with("streamlab: no CUDA device available: "), "{err}");
    assert!(err.contains(&format!("; this is {build}; ")), "{err}");
    assert!(err.contains(" run all --recorded`"), "{err}");
    let o = streamlab_without_a_gpu(&["info", "--json"]);
    let error: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(error["error"].as_str().unwrap().contains(&build), "{error}");
    let o = streamlab_without_a_gpu(&["launch", "--gpus", "2", "run", "allreduce-overlap"]);
    let err = text(&o.stderr);
    assert_eq!((o.status.code(), err.lines().count()), (Some(3), 1), "{err}");
    assert!(err.contains("run allreduce-overlap --recorded`"), "{err}");
    // Where there is a GPU, its facts end with the build's.
    if common::machine_has_nvidia_gpu() {
        let o = streamlab(&["info"]);
        assert!(text(&o.stdout).contains(&format!("  build                  {build}")));
        let facts: serde_json::Value =
            serde_json::from_slice(&streamlab(&["info", "--json"]).stdout).unwrap();
        assert_eq!(facts["build"]["kernels"], kernels, "{facts}");
    }
}

#[test]
fn recorded_shows_the_embedded_run_labelled_or_says_there_is_none() {
    let dir = scratch("recorded");
    let (trace, svg) = (dir.join("t.json"), dir.join("o.svg"));
    let args = [
        "run",
        "overlap",
        "--recorded",
        "--trace",
        trace.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ];
    let o = streamlab(&args);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    match recorded_runs::find("overlap") {
        Some(run) => {
            let run = run.unwrap();
            assert_eq!(o.status.code(), Some(0), "{err}");
            assert!(out.contains(&run.label()), "{out}");
            assert!(out.contains("not measured on this machine"), "{out}");
            let t: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
            assert!(t["metadata"]["provenance"].as_str().unwrap().starts_with("recorded on "));
            let picture = std::fs::read_to_string(&svg).unwrap();
            assert!(picture.contains(&run.label()), "the caption names the run");
            // Where each file went, a line each.
            let wrote = [
                format!("streamlab: overlap: --trace wrote {}", trace.display()),
                format!("streamlab: overlap: --svg wrote {}", svg.display()),
            ];
            assert_eq!(err.lines().collect::<Vec<_>>(), wrote, "{err}");
        }
        None => {
            assert_eq!(o.status.code(), Some(3), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("overlap: this build embeds no recorded run of it"), "{err}");
            assert!(out.is_empty() && !trace.exists() && !svg.exists());
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_embedded_run_is_shown_with_its_gpu_and_date() {
    for lesson in recorded_runs::lessons() {
        let o = streamlab(&["run", lesson, "--recorded", "--json"]);
        assert_eq!(o.status.code(), Some(0), "{lesson}: {}", text(&o.stderr));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["lesson"], lesson);
        let r = &report["details"]["recorded"];
        assert!(r["gpu"].is_string() && r["date"].is_string(), "{lesson}: {r}");
        assert!(report["device"].as_str().unwrap().contains("not measured on this machine"));
    }
}

/// Every recording made before the report named its kernels (all of those in docs/recorded
/// when the id came in) says, in both languages, that an earlier build's kernels made it;
/// one made with this binary's kernels says nothing of them.
#[test]
fn recorded_says_when_its_kernels_are_not_this_binarys() {
    let lessons = recorded_runs::lessons();
    assert!(!lessons.is_empty(), "this build embeds no recorded runs (docs/recorded)");
    for lesson in lessons {
        let run = recorded_runs::find(lesson).unwrap().unwrap();
        let en = text(&streamlab(&["run", lesson, "--recorded", "--lang", "en"]).stdout);
        let zh = text(&streamlab(&["run", lesson, "--recorded", "--lang", "zh"]).stdout);
        let header: Vec<&str> = en.lines().take_while(|l| !l.starts_with("== ")).collect();
        let said = |what: &str| en.contains(what);
        match run.report.kernels.as_deref() {
            _ if run.same_kernels() => {
                assert!(!said("(note: this run was recorded"), "{lesson}: {header:?}");
                assert!(!zh.contains("（注意：这次运行"), "{lesson}: {zh}");
            }
            None => {
                let earlier =
                    "(note: this run was recorded with an older version of streamlab's GPU code";
                assert!(said(earlier), "{lesson}: {en}");
                assert!(zh.contains("GPU 代码比本程序的旧"), "{lesson}: {zh}");
            }
            Some(theirs) => {
                let other = said("recorded with other GPU code") || said("recorded by an older");
                assert!(other && said(theirs), "{lesson}: {en}");
                assert!(zh.contains(theirs), "{lesson}: {zh}");
            }
        }
        let o = streamlab(&["run", lesson, "--recorded", "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["details"]["recorded"]["same_kernels"], run.same_kernels(), "{lesson}");
    }
}

#[test]
fn the_flags_are_documented() {
    let o = streamlab(&["run", "overlap", "--help"]);
    let help = text(&o.stdout);
    for flag in ["--trace <FILE.json>", "--svg <FILE.svg>", "--recorded"] {
        assert!(help.contains(flag), "{flag} missing from --help: {help}");
    }
}

/// How the golden files write this build's kernels id, which every kernel change moves: the
/// recordings' own ids stay as they are, so a golden file changes when a recording's kernels
/// go from this build's to other ones (or back), not at every kernel edit.
const THIS_BUILD: &str = "ptx-<this build's kernels>";

/// What `--recorded` prints for every embedded run, byte for byte, against the files in
/// `host/tests/golden/recorded/` (`<lesson>.txt` in English, `<lesson>.zh.txt` in Chinese,
/// `<lesson>.json` with `--json`), this build's kernels id written as [`THIS_BUILD`]. They pin
/// the output while the code moves around it; a change meant to alter the output rewrites
/// them with `STREAMLAB_BLESS=1`, as the trace's golden file is rewritten, and the diff shows
/// what changed.
#[test]
fn recorded_output_matches_the_golden_files() {
    let ours = streamlab::lab::record::report::kernels_id();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/recorded");
    let bless = std::env::var_os("STREAMLAB_BLESS").is_some();
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut expected = std::collections::BTreeSet::new();
    let mut changed = Vec::new();
    for lesson in recorded_runs::lessons() {
        let outputs = [
            ("txt", vec!["run", lesson, "--recorded", "--lang", "en"]),
            ("zh.txt", vec!["run", lesson, "--recorded", "--lang", "zh"]),
            ("json", vec!["run", lesson, "--recorded", "--json"]),
        ];
        for (ext, args) in outputs {
            let o = streamlab(&args);
            assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
            let out = text(&o.stdout).replace(ours, THIS_BUILD);
            let name = format!("{lesson}.{ext}");
            let path = dir.join(&name);
            expected.insert(name.clone());
            let golden = std::fs::read(&path).ok();
            if golden.as_deref() == Some(out.as_bytes()) {
                continue;
            }
            if bless {
                std::fs::write(&path, &out).unwrap();
            } else {
                changed.push(name);
            }
        }
    }
    // A golden file for a run no longer embedded would pin nothing: it goes.
    let present: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    for stale in present.difference(&expected) {
        if bless {
            std::fs::remove_file(dir.join(stale)).unwrap();
        } else {
            changed.push(format!("{stale} (no embedded run)"));
        }
    }
    // Whose kernels made the recordings, for the message: a line added or gone in every
    // header means the recordings' kernels and this build's went apart (or together).
    let mut made_with: Vec<String> = recorded_runs::lessons()
        .iter()
        .map(|l| recorded_runs::find(l).unwrap().unwrap().report.kernels.unwrap_or_default())
        .collect();
    made_with.sort();
    made_with.dedup();
    assert!(
        changed.is_empty(),
        "--recorded output differs from host/tests/golden/recorded/ for {changed:?}: \
         if the change is meant, rewrite them with STREAMLAB_BLESS=1 and read the diff. \
         (The recordings were made with kernels {made_with:?}; this build carries {ours}, \
         written {THIS_BUILD} there. Where only the header's kernels line differs, the \
         embedded kernels changed: re-record the runs on a GPU (scripts/pictures.sh) or bless.)"
    );
}
