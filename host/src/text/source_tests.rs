//! Tests that read the crate's own source: every key the code names is in both catalogs, the
//! lessons and the lab write no sentence of their own, and every error says a sentence of the
//! catalogs.
use super::find;
use crate::text::{en, zh, Text};

/// `host/src`, and every `.rs` file under it.
fn sources() -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    (src, files)
}

/// Every `t!("key", ..)` in the code names a key both catalogs have (a missing key would
/// print as the key itself), lesson and lab files write no sentence of their own, and
/// every check or figure name written out in the code has its Chinese in `zh::LABELS`.
#[test]
fn every_key_the_code_names_is_in_both_catalogs_and_lessons_write_no_sentences() {
    let (src, files) = sources();
    let (mut named, mut names) = (0, 0);
    for file in files.iter().filter(|f| !f.starts_with(src.join("text"))) {
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
        let code: String = code
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for (at, _) in code.match_indices("t!(") {
            let before = code[..at].chars().next_back().unwrap_or(' ');
            if before.is_alphanumeric() || before == '_' {
                continue; // format!(, assert!(
            }
            let rest = code[at + 3..].trim_start();
            let Some(rest) = rest.strip_prefix('"') else { continue };
            let key = &rest[..rest.find('"').unwrap()];
            assert!(find(en::MESSAGES, key).is_some(), "{}: {key} is not in en.rs", file.display());
            assert!(find(zh::MESSAGES, key).is_some(), "{}: {key} is not in zh.rs", file.display());
            named += 1;
        }
        let calls = ["checks.bitwise(", "checks.approx(", "checks.record(", "checks.concurrency("];
        for call in calls.into_iter().chain([".figure("]) {
            for (at, _) in code.match_indices(call) {
                let rest = code[at + call.len()..].trim_start();
                let Some(rest) = rest.strip_prefix('"') else { continue };
                let name = &rest[..rest.find('"').unwrap()];
                let translated = Text::label(name).is_translated();
                assert!(translated, "{}: {name:?} is not in zh::LABELS", file.display());
                names += 1;
            }
        }
        if file.starts_with(src.join("lessons")) || file.starts_with(src.join("lab")) {
            for bad in [".explain(format!(", ".explain(\"", "Ok(format!("] {
                assert!(
                    !code.contains(bad),
                    "{}: `{bad}` writes a sentence outside the catalogs",
                    file.display()
                );
            }
        }
    }
    assert!(named > 150, "only {named} keys found: the scan is broken");
    assert!(names > 100, "only {names} check and figure names found: the scan is broken");
}

/// Every error says a sentence of the catalogs, so that `--lang zh` reaches it: the
/// argument of `Error::NoDevice(`, `NotRun(`, `InvalidInput(` and `Verification(` (and
/// the message of `ensure(ok, || ..)`) is a `t!(..)` or a value already a `Text`, never
/// English made on the spot (`format!(..)`, a literal, `.into()`, `.to_string()`).
#[test]
fn every_error_says_a_sentence_of_the_catalogs() {
    let (src, files) = sources();
    let mut english = Vec::new();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let calls = ["NoDevice(", "NotRun(", "InvalidInput(", "Verification(", "ensure("];
            for call in calls {
                for (at, _) in line.match_indices(call) {
                    let before = line[..at].chars().next_back().unwrap_or(' ');
                    if call == "ensure(" && (before.is_alphanumeric() || before == '_') {
                        continue; // ensure_close(
                    }
                    seen += 1;
                    let rest = &line[at + call.len()..];
                    // The argument: the rest of this line, else the next line's start.
                    let next = code.lines().nth(n + 1).unwrap_or("").trim_start();
                    let arg = if rest.trim().is_empty() { next } else { rest.trim_start() };
                    let arg = match call {
                        "ensure(" => arg.split_once("||").map_or(arg, |(_, m)| m).trim_start(),
                        _ => arg,
                    };
                    let made_here = arg.starts_with("format!(")
                        || arg.starts_with('"')
                        || arg.contains(".into())")
                        || arg.contains(".to_string())")
                        || arg.contains(".clone())");
                    if made_here {
                        let at = file.strip_prefix(&src).unwrap().display();
                        english.push(format!("{at}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(seen > 50, "only {seen} error sites found: the scan is broken");
    assert!(
        english.is_empty(),
        "{} errors in English only:\n{}",
        english.len(),
        english.join("\n")
    );
}
