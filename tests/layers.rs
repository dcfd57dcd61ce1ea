//! The architecture, checked from the source: arrows point one way.
//! - `runtime` imports neither `lab` nor `lessons`; `lab` does not import `lessons`;
//! - no lesson imports another lesson;
//! - no file imports form a cycle (files are nodes, `use crate::…` lines are edges);
//! - no raw driver call outside the driver layer (`runtime/driver/`);
//! - lesson files hold no `unsafe` and stay within 300 lines before their unit tests
//!   (`overlap`, the lesson that sets the shape, within 150).
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
    let rank = |m: &str| match layer(m) {
        "runtime" => 0,
        "lab" => 1,
        "lessons" => 2,
        _ => 3,
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
        // The lesson that sets the shape stays short.
        if m == "lessons::overlap" {
            let before_tests = text.split("#[cfg(test)]").next().unwrap_or(text).lines().count();
            assert!(
                before_tests <= 150,
                "{m}: {before_tests} lines before its tests (at most 150)"
            );
        }
        let unsafe_lines = text
            .lines()
            .filter(|l| l.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == "unsafe"))
            .count();
        assert_eq!(unsafe_lines, 0, "{m}: lesson code holds `unsafe`");
    }
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
