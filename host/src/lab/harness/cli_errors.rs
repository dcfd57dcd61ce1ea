//! A command-line error as streamlab's one error line: what clap found wrong, its tip, and
//! the `--help` of the command where to look.
use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::lab::harness::entry::Entry;
use crate::runtime::error::echoed;

/// One line for a clap error: its first line without "error: ", plus clap's "did you mean"
/// tip when it has one, and where to look. `command` is [`command_path`]'s.
pub fn clap_error_line(e: &clap::Error, command: &str, lessons: &[Entry]) -> String {
    if e.kind() == ErrorKind::MissingSubcommand && command.starts_with("streamlab run") {
        let names: Vec<&str> = lessons.iter().map(|l| l.name).collect();
        return format!(
            "run: <LESSON> is missing: name one of {}, or all (see streamlab list)",
            names.join(", ")
        );
    }
    if e.kind() == ErrorKind::MissingSubcommand && command == "streamlab" {
        return "a command is missing: info, list, run, launch, trace, report or diff (see streamlab --help)"
            .into();
    }
    if let Some(line) = trace_line(e, command) {
        return line;
    }
    if let Some(line) = unknown_command_line(e, command, lessons) {
        return line;
    }
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // clap puts the names of missing arguments on the lines after the first.
    let (first, rest): (String, Vec<&str>) = if e.kind() == ErrorKind::MissingRequiredArgument {
        let (names, rest): (Vec<&str>, Vec<&str>) =
            lines.partition(|l| l.starts_with('<') || l.starts_with("--"));
        (format!("{first} {}", names.join(", ")).trim_end().to_string(), rest)
    } else {
        (first.to_string(), lines.collect())
    };
    // "[possible values: en, zh]" reads ": one of en, zh" on the line.
    let values: String = rest
        .iter()
        .filter_map(|l| l.strip_prefix("[possible values: ")?.strip_suffix(']'))
        .map(|v| format!(": one of {v}"))
        .collect();
    let tips: String =
        rest.iter().filter(|l| l.starts_with("tip:")).map(|t| format!("; {t}")).collect();
    let line = shorten_quoted(&format!("{first}{values}{tips} (see {command} --help)"));
    // Every error of `trace` names it, as those said after its checks do.
    if command == "streamlab trace" {
        format!("trace: {line}")
    } else {
        line
    }
}

/// The lesson `argv` runs (`streamlab run overlap --bad`: overlap), which an error line
/// names; none for `run all`, for the other commands, or before a lesson is named.
pub fn lesson_named(argv: &[String], lessons: &'static [Entry]) -> Option<&'static str> {
    let path = command_path(argv, lessons);
    let name = path.strip_prefix("streamlab run ")?;
    lessons.iter().find(|l| l.name == name).map(|l| l.name)
}

/// A lesson, or a command, that streamlab does not have (`streamlab run overlp`,
/// `streamlab lsit`), said as such rather than as clap's "unrecognized subcommand": clap's
/// "did you mean" where it has one, else the lessons whose names hold the word, and the
/// names to choose from.
fn unknown_command_line(e: &clap::Error, command: &str, lessons: &[Entry]) -> Option<String> {
    if e.kind() != ErrorKind::InvalidSubcommand {
        return None;
    }
    let Some(ContextValue::String(word)) = e.get(ContextKind::InvalidSubcommand) else {
        return None;
    };
    let clap_says = match e.get(ContextKind::SuggestedSubcommand) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(list)) => list.clone(),
        _ => Vec::new(),
    };
    let quoted = |names: &[String]| names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>();
    let echoed = echoed(word);
    match command {
        "streamlab run" => {
            let names: Vec<&str> = lessons.iter().map(|l| l.name).collect();
            let lower = word.to_lowercase();
            let similar: Vec<String> = match clap_says.is_empty() {
                false => clap_says,
                true if lower.chars().count() >= 3 => names
                    .iter()
                    .filter(|n| n.contains(lower.as_str()))
                    .map(|n| n.to_string())
                    .collect(),
                true => Vec::new(),
            };
            let guess = match similar.as_slice() {
                [] => String::new(),
                some => format!(": did you mean {}?", quoted(some).join(" or ")),
            };
            Some(format!(
                "run: unknown lesson '{echoed}'{guess} (the lessons: {}, or all; see streamlab list)",
                names.join(", ")
            ))
        }
        "streamlab" => {
            let guess = match clap_says.as_slice() {
                [] => String::new(),
                some => format!(": did you mean {}?", quoted(some).join(" or ")),
            };
            Some(format!(
                "unknown command '{echoed}'{guess} (the commands: info, list, run, launch, trace, report, diff; see streamlab --help)"
            ))
        }
        _ => None,
    }
}

/// `line` with every 'quoted' value clap echoed shortened as [`echoed`] says: a 100 KB
/// argument gives a line of its start and its length.
fn shorten_quoted(line: &str) -> String {
    let parts: Vec<&str> = line.split('\'').collect();
    // Odd pieces are between quotes, where the quotes pair up.
    let paired = parts.len() % 2 == 1;
    let shortened = parts.iter().enumerate().map(|(i, part)| match paired && i % 2 == 1 {
        true => echoed(part),
        false => part.to_string(),
    });
    shortened.collect::<Vec<_>>().join("'")
}

/// `trace`'s three mistakes that clap words for itself: no program, a program given without
/// `--` before it (clap then sees the program's name as an argument of its own), and a flag
/// trace does not have.
fn trace_line(e: &clap::Error, command: &str) -> Option<String> {
    if command != "streamlab trace" {
        return None;
    }
    let usage = "streamlab trace [FLAGS] -- <PROGRAM> [ARGS]... (see streamlab trace --help)";
    let named = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(list)) => list.clone(),
        _ => Vec::new(),
    };
    match e.kind() {
        ErrorKind::MissingRequiredArgument if named.iter().any(|n| n.contains("PROGRAM")) => {
            Some(format!("trace: the program to run is missing: {usage}"))
        }
        // clap's tip ("use '-- --flag'") would make the flag the program to run.
        ErrorKind::UnknownArgument => match named.first().map(|n| echoed(n))?.as_str() {
            flag if flag.starts_with('-') => Some(format!(
                "trace: unknown flag '{flag}': trace's flags come before `--`, the program's own after it: {usage}"
            )),
            word => Some(format!(
                "trace: unexpected argument '{word}': the program comes after `--`: {usage}"
            )),
        },
        _ => None,
    }
}

/// The words of `argv` that name a command streamlab has: `streamlab run overlap` for
/// `streamlab run overlap --bad`, `streamlab run` for `streamlab run overlp`.
pub fn command_path(argv: &[String], lessons: &[Entry]) -> String {
    let mut path = vec!["streamlab"];
    let mut words = argv.iter().skip(1).filter(|a| !a.starts_with('-'));
    let commands = ["info", "list", "run", "launch", "trace", "report", "diff"];
    let top = words.next().filter(|w| commands.contains(&w.as_str()));
    if let Some(top) = top {
        path.push(top);
        let is_lesson = |w: &str| w == "all" || lessons.iter().any(|l| l.name == w);
        // The first word that names a lesson: a flag's value (`--reps 5`) may come before it.
        let lesson = words.find(|w| top == "run" && is_lesson(w));
        if let Some(lesson) = lesson {
            path.push(lesson);
        }
    }
    path.join(" ")
}
