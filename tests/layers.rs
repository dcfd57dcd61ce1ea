//! The architecture, checked from the source: arrows point one way.
//! - `text` (the words) imports nothing of the crate; `runtime` imports neither `lab` nor
//!   `lessons` nor `trace`; `lab` imports neither `lessons` nor `trace`;
//! - no lesson imports another lesson; `lessons` and `trace` never import each other, and
//!   `trace` uses only the drawing room (`lab::record`) of the lab;
//! - no file imports form a cycle (files are nodes, `use crate::…` lines are edges);
//! - no raw driver call outside the driver layer (`runtime/driver/`);
//! - lesson files hold no `unsafe` (`overlap`, the lesson that sets the shape, stays within
//!   180 lines before its tests);
//! - between `lab`'s rooms, and between `trace`'s, arrows point down, in the order their
//!   `mod.rs` declares them;
//! - `lab` holds no lesson helper: no module of it that only one lesson imports;
//! - no file in `host/src` is over 600 lines, tests included, but the catalogs.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `host/src/runtime/stream.rs` -> `runtime::stream`; `mod.rs` and `lib.rs` name their folder.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts.join("::")
}

/// The modules a file imports through `crate::` paths, resolved to files that exist
/// (`crate::lab::{Checks, Lesson}` -> `lab`; `crate::runtime::stream::Stream` -> `runtime::stream`).
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    // Code before the unit tests, without comments (a doc link is not an import).
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.as_str();
    for (at, _) in code.match_indices("crate::") {
        let path: String = code[at + 7..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        // The longest prefix that is a module file.
        for n in (1..=segments.len()).rev() {
            let candidate = segments[..n].join("::");
            if modules.contains(&candidate) {
                found.insert(candidate);
                break;
            }
        }
    }
    found
}

struct Tree {
    files: BTreeMap<String, String>,
    edges: BTreeMap<String, BTreeSet<String>>,
}

fn tree() -> Tree {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("host/src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    let files: BTreeMap<String, String> =
        paths.iter().map(|p| (module_of(&src, p), std::fs::read_to_string(p).unwrap())).collect();
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let edges = files
        .iter()
        .map(|(m, text)| {
            let mut to = imports(text, &modules);
            to.remove(m);
            (m.clone(), to)
        })
        .collect();
    Tree { files, edges }
}

fn layer(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

#[test]
fn arrows_point_down_only() {
    let t = tree();
    assert!(t.files.contains_key("runtime::stream") && t.files.contains_key("lessons::overlap"));
    // `lessons` and `trace` stand side by side on the lab: neither imports the other.
    let rank = |m: &str| match layer(m) {
        "text" => 0,
        "runtime" => 1,
        "lab" => 2,
        "lessons" | "trace" => 3,
        _ => 4,
    };
    for (from, to) in &t.edges {
        for m in to {
            assert!(
                rank(m) <= rank(from),
                "{from} imports {m}: the {} layer may not depend on the {} layer",
                layer(from),
                layer(m)
            );
            if layer(from) == "lessons" && from != "lessons" {
                assert!(
                    layer(m) != "lessons",
                    "lesson {from} imports {m}: lessons never import each other"
                );
            }
            let side_by_side = [layer(from), layer(m)];
            assert!(
                side_by_side != ["lessons", "trace"] && side_by_side != ["trace", "lessons"],
                "{from} imports {m}: lessons and trace never import each other"
            );
        }
    }
}

#[test]
fn no_import_cycles() {
    let t = tree();
    // Depth-first search for a back edge; the path is printed when one is found.
    fn visit<'a>(
        m: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) {
        state.insert(m, 1);
        path.push(m);
        for next in edges.get(m).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => panic!("import cycle: {} -> {next}", path.join(" -> ")),
                Some(_) => {}
                None => visit(next, edges, state, path),
            }
        }
        path.pop();
        state.insert(m, 2);
    }
    let mut state = BTreeMap::new();
    for m in t.edges.keys() {
        if !state.contains_key(m.as_str()) {
            visit(m, &t.edges, &mut state, &mut Vec::new());
        }
    }
    // The search can fail: a made-up cycle is found.
    let fake: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "a")]
        .into_iter()
        .map(|(x, y)| (x.to_string(), BTreeSet::from([y.to_string()])))
        .collect();
    let caught =
        std::panic::catch_unwind(|| visit("a", &fake, &mut BTreeMap::new(), &mut Vec::new()));
    assert!(caught.is_err(), "the cycle check missed a -> b -> a");
}

#[test]
fn lesson_files_are_short_and_hold_no_unsafe() {
    let t = tree();
    for (m, text) in
        t.files.iter().filter(|(m, _)| layer(m) == "lessons" && m.as_str() != "lessons")
    {
        // A file, tests included, stays readable in one sitting: a lesson that needs more
        // is a folder (`lessons/allreduce_overlap/`), its helpers beside its mod.rs.
        let lines = text.lines().count();
        assert!(lines <= 600, "{m}: {lines} lines (at most 600: make the lesson a folder)");
        // The lesson that sets the shape stays short: 150 lines when its two versions were
        // the trait's `without` and `with`, 166 since they are named methods of its own (an
        // `impl` block, their names, and the `match` in `Lesson::version`), 180 since its
        // `--issue-order` experiment (the flag, its field, the version's name; the orders
        // themselves live beside it in `overlap/issue_order.rs`).
        if m == "lessons::overlap" {
            let before_tests = text.split("#[cfg(test)]").next().unwrap_or(text).lines().count();
            assert!(
                before_tests <= 180,
                "{m}: {before_tests} lines before its tests (at most 180)"
            );
        }
        let unsafe_lines = text
            .lines()
            .filter(|l| l.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == "unsafe"))
            .count();
        assert_eq!(unsafe_lines, 0, "{m}: lesson code holds `unsafe`");
    }
}

/// `lab::record::span` -> `record`; `lab` itself and anything outside it -> None.
fn room(module: &str) -> Option<&str> {
    room_of("lab", module)
}

/// The room of `module` inside the layer `layer` (`trace::inspect::rules` -> `inspect`).
fn room_of<'a>(layer: &str, module: &'a str) -> Option<&'a str> {
    let rest = module.strip_prefix(layer)?.strip_prefix("::")?;
    Some(rest.split("::").next().unwrap_or(rest))
}

/// The rooms of a layer, top down, as its `mod.rs` declares them (`pub mod ...;`).
fn rooms(layer_mod: &str) -> Vec<String> {
    layer_mod
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// The first import that goes up between the rooms of `lab`: `(from, to)`.
fn upward(
    edges: &BTreeMap<String, BTreeSet<String>>,
    order: &[String],
) -> Option<(String, String)> {
    upward_in("lab", edges, order)
}

/// The first import that goes up between the rooms of `layer`: `(from, to)`.
fn upward_in(
    layer: &str,
    edges: &BTreeMap<String, BTreeSet<String>>,
    order: &[String],
) -> Option<(String, String)> {
    let rank = |m: &str| room_of(layer, m).and_then(|r| order.iter().position(|o| o == r));
    for (from, to) in edges {
        for m in to {
            if let (Some(a), Some(b)) = (rank(from), rank(m)) {
                if b < a {
                    return Some((from.clone(), m.clone()));
                }
            }
        }
    }
    None
}

#[test]
fn arrows_point_down_between_the_rooms_of_lab() {
    let t = tree();
    let order = rooms(&t.files["lab"]);
    let expected = ["ddp", "kit", "harness", "record"];
    assert_eq!(order, expected, "lab/mod.rs's rooms");
    // Every file of lab lives in a room.
    for m in t.files.keys().filter(|m| m.starts_with("lab::")) {
        let r = room(m).unwrap();
        assert!(order.iter().any(|o| o == r), "{m} is in no room of lab/mod.rs");
    }
    if let Some((from, to)) = upward(&t.edges, &order) {
        panic!("{from} imports {to}: a room of lab imports only the rooms below it");
    }
    // The check can fail: a made-up arrow from the record room up to the harness is found.
    let fake: BTreeMap<String, BTreeSet<String>> =
        [("lab::record::picture".to_string(), BTreeSet::from(["lab::harness::stats".to_string()]))]
            .into();
    assert!(upward(&fake, &order).is_some(), "the room check missed record -> harness");
}

/// The room of the lab that `trace` may use: the drawing room.
const LAB_ROOMS_FOR_TRACE: [&str; 1] = ["record"];

/// The first import of `trace` into a room of the lab other than [`LAB_ROOMS_FOR_TRACE`].
fn trace_beyond_its_lab_rooms(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    for (from, to) in edges.iter().filter(|(m, _)| layer(m) == "trace") {
        for m in to.iter().filter(|m| layer(m) == "lab") {
            if !room(m).is_some_and(|r| LAB_ROOMS_FOR_TRACE.contains(&r)) {
                return Some(format!("{from} imports {m}"));
            }
        }
    }
    None
}

#[test]
fn trace_has_rooms_of_its_own_and_uses_only_the_drawing_room_of_the_lab() {
    let t = tree();
    let order = rooms(&t.files["trace"]);
    assert_eq!(order, ["capture", "inspect", "read"], "trace/mod.rs's rooms");
    for m in t.files.keys().filter(|m| m.starts_with("trace::")) {
        let r = room_of("trace", m).unwrap();
        assert!(order.iter().any(|o| o == r), "{m} is in no room of trace/mod.rs");
    }
    if let Some((from, to)) = upward_in("trace", &t.edges, &order) {
        panic!("{from} imports {to}: a room of trace imports only the rooms below it");
    }
    if let Some(found) = trace_beyond_its_lab_rooms(&t.edges) {
        panic!("{found}: trace uses only lab::record of the lab");
    }
    // The checks can fail: an arrow up between trace's rooms, and one into the harness.
    let fake: BTreeMap<String, BTreeSet<String>> = [
        (
            "trace::inspect::rules".to_string(),
            BTreeSet::from(["trace::capture::model".to_string()]),
        ),
        ("trace::capture::command".to_string(), BTreeSet::from(["lab::harness::args".to_string()])),
    ]
    .into();
    assert!(upward_in("trace", &fake, &order).is_some(), "missed inspect -> capture");
    assert!(trace_beyond_its_lab_rooms(&fake).is_some(), "missed trace -> lab::harness");
}

/// The modules of `lab` that exactly one lesson imports and nothing else does (no other lab
/// module, no other lesson, not `main.rs`): helpers that belong beside that lesson.
fn lesson_helpers_in_lab(files: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let lesson_of = |m: &str| -> Option<String> {
        let rest = m.strip_prefix("lessons::")?;
        Some(rest.split("::").next().unwrap_or(rest).to_string())
    };
    let mut importers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, text) in files {
        // `main.rs` names the library as `streamlab::`.
        let text = text.replace("streamlab::", "crate::");
        for to in imports(&text, &modules) {
            if to != *from && room(&to).is_some() {
                // A lesson counts once, whichever of its files imports; anything else as itself.
                let who = lesson_of(from).map_or(from.clone(), |l| format!("lessons::{l}"));
                importers.entry(to).or_default().insert(who);
            }
        }
    }
    importers
        .into_iter()
        .filter(|(_, by)| by.len() == 1 && by.iter().all(|b| b.starts_with("lessons::")))
        .map(|(m, by)| (m, by.into_iter().next().unwrap()))
        .collect()
}

#[test]
fn lab_holds_no_helper_of_a_single_lesson() {
    let t = tree();
    let found = lesson_helpers_in_lab(&t.files);
    assert!(
        found.is_empty(),
        "only one lesson imports these (module, lesson): {found:?}: move each beside its lesson"
    );
    // The check can fail: a lab module that only one lesson imports is found.
    let fake: BTreeMap<String, String> = [
        ("lab::kit::race", "pub fn race() {}"),
        ("lessons::events", "use crate::lab::kit::race::race;"),
        ("lessons::overlap", "use crate::lab::kit::sleep;"),
        ("lab::kit::sleep", ""),
        ("lessons::priority", "use crate::lab::kit::sleep;"),
    ]
    .into_iter()
    .map(|(m, text)| (m.to_string(), text.to_string()))
    .collect();
    assert_eq!(
        lesson_helpers_in_lab(&fake),
        [("lab::kit::race".to_string(), "lessons::events".to_string())]
    );
}

/// The most lines a file in host/src may have, its unit tests included.
const MAX_LINES: usize = 600;

/// The catalogs, a line per message in one place: no cap.
const CATALOGS: [&str; 2] = ["text/en.rs", "text/zh.rs"];

/// Files still over [`MAX_LINES`], each with why, until they are split. An entry that is no
/// longer over the cap fails the test, so that the list only shrinks.
// Every file is under the cap now; a file that must go over it is listed here with why.
const OVER_THE_CAP: [(&str, &str); 0] = [];

/// The files of `files` (path, lines) over the cap and not allowed (`allowances`, or a
/// catalog), and the allowances that are not over it (stale).
fn over_the_cap(
    files: &[(String, usize)],
    allowances: &[(&str, &str)],
) -> (Vec<String>, Vec<String>) {
    let allowed = |p: &str| CATALOGS.contains(&p) || allowances.iter().any(|(a, _)| *a == p);
    let over: Vec<String> = files
        .iter()
        .filter(|(p, n)| *n > MAX_LINES && !allowed(p))
        .map(|(p, n)| format!("{p}: {n} lines"))
        .collect();
    let stale = allowances
        .iter()
        .filter(|(a, _)| !files.iter().any(|(p, n)| p == a && *n > MAX_LINES))
        .map(|(a, _)| a.to_string())
        .collect();
    (over, stale)
}

#[test]
fn no_file_is_over_600_lines_but_the_catalogs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("host/src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    let files: Vec<(String, usize)> = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(p).unwrap().lines().count())
        })
        .collect();
    let (over, stale) = over_the_cap(&files, &OVER_THE_CAP);
    assert!(over.is_empty(), "over {MAX_LINES} lines (split along what the parts do): {over:?}");
    assert!(stale.is_empty(), "no longer over the cap: take them off OVER_THE_CAP: {stale:?}");
    // The check can fail both ways: a made-up long file, and an allowance no longer needed.
    let fake = [
        ("lessons/long.rs".to_string(), 601),
        ("text/zh.rs".to_string(), 2000),
        ("text/mod.rs".to_string(), 10),
    ];
    let (over, stale) = over_the_cap(&fake, &[("text/mod.rs", "made up")]);
    assert_eq!(over, ["lessons/long.rs: 601 lines"]);
    assert!(stale.contains(&"text/mod.rs".to_string()));
}

/// The `host/src/....rs` paths `text` names that `exists` says are not there.
fn missing_paths(text: &str, exists: impl Fn(&str) -> bool) -> Vec<String> {
    let mut missing = Vec::new();
    for (at, _) in text.match_indices("host/src/") {
        let path: String = text[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '/' | '.' | '-'))
            .collect();
        let path = path.trim_end_matches('.');
        if path.ends_with(".rs") && !exists(path) && !missing.contains(&path.to_string()) {
            missing.push(path.to_string());
        }
    }
    missing
}

/// The README's and the guides' names of source files point at files that exist.
#[test]
fn the_docs_name_source_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md"), root.join("README.zh-CN.md")];
    for book in ["docs/guide/en/src", "docs/guide/zh-CN/src"] {
        for entry in std::fs::read_dir(root.join(book)).unwrap().flatten() {
            if entry.path().extension().is_some_and(|e| e == "md") {
                docs.push(entry.path());
            }
        }
    }
    assert!(docs.len() > 10, "{docs:?}");
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for path in missing_paths(&text, |p| root.join(p).is_file()) {
            missing.push(format!("{}: {path}", doc.strip_prefix(root).unwrap().display()));
        }
    }
    assert!(missing.is_empty(), "the docs name source files that are not there: {missing:?}");
    // The check can fail: a made-up path is caught, a real one is not.
    let text = "see `host/src/lessons/graph.rs` and host/src/lessons/overlap/mod.rs.";
    let found = missing_paths(text, |p| root.join(p).is_file());
    assert_eq!(found, ["host/src/lessons/graph.rs"]);
}

/// The lines of `text` that name a raw driver function of cudarc's `sys` (`cu::cuInit`,
/// `sys::cuCtxSetCurrent`), comments left out. Its types (`cu::CUstream`) are not calls; nor
/// are the calls of the CUPTI, NVML and NCCL bindings, which go to their own libraries.
fn raw_driver_calls(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .filter(|l| l.contains("cu::cu") || l.contains("sys::cu"))
        .collect()
}

#[test]
fn only_the_driver_layer_calls_the_driver() {
    let t = tree();
    // The layer is `runtime/driver/`: its mod.rs and the files beside it.
    assert!(t.files.contains_key("runtime::driver"), "the driver layer has moved");
    let in_driver_layer = |m: &str| m == "runtime::driver" || m.starts_with("runtime::driver::");
    for (m, text) in t.files.iter().filter(|(m, _)| !in_driver_layer(m)) {
        let calls = raw_driver_calls(text);
        assert!(
            calls.is_empty(),
            "{m} calls the driver directly (call a function of runtime/driver instead): {calls:?}"
        );
    }
    // The check can fail: a made-up file with a raw call is caught, its comment and its
    // call through the driver layer are not.
    let made_up = "// cu::cuInit is wrapped by driver::init\n\
                   let ok = driver::init();\n\
                   let status = unsafe { cu::cuStreamSynchronize(raw) };\n\
                   let bound = unsafe { cudarc::driver::sys::cuCtxSetCurrent(raw) };\n\
                   let handle: cu::CUstream = raw;";
    assert_eq!(
        raw_driver_calls(made_up),
        [
            "let status = unsafe { cu::cuStreamSynchronize(raw) };",
            "let bound = unsafe { cudarc::driver::sys::cuCtxSetCurrent(raw) };",
        ]
    );
}

/// The places `unsafe` may stand: the runtime, the kernels and the FFI crates.
const UNSAFE_ALLOWED: [&str; 4] = ["host/src/runtime/", "kernels-gpu/", "cupti/", "inject/"];

/// The files of `files` (path, text) outside [`UNSAFE_ALLOWED`] whose code (comments left out)
/// says `unsafe`.
fn unsafe_outside(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(p, _)| !UNSAFE_ALLOWED.iter().any(|a| p.starts_with(a)))
        .filter(|(_, text)| {
            text.lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| l.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == "unsafe"))
        })
        .map(|(p, _)| p.clone())
        .collect()
}

#[test]
fn unsafe_lives_only_in_the_runtime_the_kernels_and_the_ffi_crates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "host/src",
        "host/tests",
        "tests",
        "benches",
        "kernels-build",
        "kernels-gpu",
        "cupti",
        "inject",
    ] {
        let mut paths = Vec::new();
        sources(&root.join(dir), &mut paths);
        for p in paths {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            // This file names `unsafe` in its made-up inputs.
            if rel != "tests/layers.rs" {
                files.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    assert!(files.iter().any(|(p, _)| p.starts_with("cupti/")), "the CUPTI crate has moved");
    assert!(files.iter().any(|(p, _)| p.starts_with("inject/")), "the injected recorder has moved");
    let found = unsafe_outside(&files);
    assert!(
        found.is_empty(),
        "`unsafe` outside the runtime, the kernels and the FFI crates: {found:?}"
    );
    // The check can fail: a made-up lab file with an unsafe block is caught, a comment is not.
    let fake = [
        ("host/src/lab/x.rs".to_string(), "let v = unsafe { f() };".to_string()),
        ("host/src/lab/y.rs".to_string(), "// no unsafe here".to_string()),
        ("cupti/src/z.rs".to_string(), "unsafe { g() }".to_string()),
    ];
    assert_eq!(unsafe_outside(&fake), ["host/src/lab/x.rs"]);
}
