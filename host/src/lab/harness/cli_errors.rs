//! A command-line error as streamlab's one error line: what clap found wrong, its tip, and
//! the `--help` of the command where to look, as a sentence of the catalogs so that it is
//! said in the language `--lang` (or the locale) picks. The line is built from clap's
//! error kind and its context (the argument, the value, the suggestions), not from clap's
//! English; a kind not worded here keeps clap's English ([`english_line`]).
use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::lab::harness::entry::Entry;
use crate::runtime::error::echoed;
use crate::t;
use crate::text::flag_values::BadValue;
use crate::text::Text;

/// One line for a clap error: what is wrong, clap's "did you mean" tips when it has some,
/// and where to look. `command` is [`command_path`]'s. In English it reads as
/// [`english_line`] does.
pub fn clap_error_line(e: &clap::Error, command: &str, lessons: &[Entry]) -> Text {
    if e.kind() == ErrorKind::MissingSubcommand && command.starts_with("streamlab run") {
        let lessons: Vec<&str> = lessons.iter().map(|l| l.name).collect();
        return t!("error.cli.no_lesson", lessons = lessons.join(", "));
    }
    if e.kind() == ErrorKind::MissingSubcommand && command == "streamlab" {
        return t!("error.cli.no_command");
    }
    if let Some(line) = trace_line(e, command) {
        return line;
    }
    if let Some(line) = unknown_command_line(e, command, lessons) {
        return line;
    }
    let Some(said) = said(e) else {
        // A kind not worded here: clap's English, as the line has always said it.
        return Text::Plain(english_line(e, command));
    };
    let line = t!("error.cli.see_help", line = said, command = command.to_string());
    // Every error of `trace` names it, as those said after its checks do.
    match command {
        "streamlab trace" => t!("error.cli.in_trace", line),
        _ => line,
    }
}

/// What clap found wrong, with its tips, for the kinds of error worded here; `None` for
/// the others. Every value clap echoes is shortened as [`echoed`] says.
fn said(e: &clap::Error) -> Option<Text> {
    let string = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(echoed(s)),
        _ => None,
    };
    let (arg, value) = (string(ContextKind::InvalidArg), string(ContextKind::InvalidValue));
    let first = match e.kind() {
        ErrorKind::InvalidValue => {
            let (arg, value) = (arg?, value?);
            // "[possible values: en, zh]" reads ": one of en, zh" on the line.
            let values = match e.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(v)) if !v.is_empty() => {
                    Some(v.iter().map(|v| escaped(v)).collect::<Vec<_>>().join(", "))
                }
                _ => None,
            };
            match (value.is_empty(), values) {
                (false, None) => t!("error.cli.invalid_value", value, arg),
                (false, Some(values)) => t!("error.cli.invalid_value_one_of", value, arg, values),
                (true, None) => t!("error.cli.value_missing", arg),
                (true, Some(values)) => t!("error.cli.value_missing_one_of", arg, values),
            }
        }
        ErrorKind::ValueValidation => {
            let (arg, value) = (arg?, value?);
            match std::error::Error::source(e) {
                Some(why) => t!("error.cli.invalid_value_because", value, arg, why = reason(why)),
                None => t!("error.cli.invalid_value", value, arg),
            }
        }
        ErrorKind::UnknownArgument => t!("error.cli.unexpected_argument", arg = arg?),
        ErrorKind::TooManyValues => t!("error.cli.unexpected_value", value = value?, arg = arg?),
        ErrorKind::MissingRequiredArgument => match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::Strings(names)) if !names.is_empty() => {
                t!("error.cli.not_provided", names = names.join(", "))
            }
            _ => return None,
        },
        ErrorKind::ArgumentConflict => {
            let arg = arg?;
            match e.get(ContextKind::PriorArg) {
                Some(ContextValue::String(other)) if echoed(other) == arg => {
                    t!("error.cli.used_twice", arg)
                }
                Some(ContextValue::String(other)) => {
                    t!("error.cli.conflict", arg, other = echoed(other))
                }
                _ => return None,
            }
        }
        _ => return None,
    };
    // clap's tips, in its order: similar names, then its other suggestions.
    let mut tips = Vec::new();
    for kind in
        [ContextKind::SuggestedSubcommand, ContextKind::SuggestedArg, ContextKind::SuggestedValue]
    {
        if e.get(kind).is_some() {
            tips.push(similar(e, kind)?);
        }
    }
    if let Some(ContextValue::StyledStrs(suggested)) = e.get(ContextKind::Suggested) {
        // clap hands these over only as its English sentences: each is read back into the
        // catalogs' sentence it is ("to pass '--x' as a value, use '-- --x'"), or kept as it
        // is where none matches.
        for s in suggested {
            tips.push(Text::recover_among(&shorten_quoted(&s.to_string()), "error.cli.tip_"));
        }
    }
    Some(tips.into_iter().fold(first, |line, tip| t!("error.cli.tip", line, tip)))
}

/// Why a value parser refused a value. Ours (`text::flag_values`) return a [`BadValue`],
/// which carries its sentence of the catalogs: it is found by its type, so the reason is
/// said in the learner's language exactly, with nothing read back from English (as
/// `Text::recover_among` would). A parser that returns a `String` is shown as it is.
fn reason(why: &(dyn std::error::Error + 'static)) -> Text {
    match why.downcast_ref::<BadValue>() {
        Some(BadValue(text)) => text.clone(),
        None => Text::Plain(shorten_quoted(&why.to_string())),
    }
}

/// clap's "a similar argument exists: '--streams'" (or several), from its context.
fn similar(e: &clap::Error, kind: ContextKind) -> Option<Text> {
    let names: Vec<String> = match e.get(kind)? {
        ContextValue::String(s) => vec![echoed(s)],
        ContextValue::Strings(list) if !list.is_empty() => list.iter().map(|s| echoed(s)).collect(),
        _ => return None,
    };
    let (one, name) = (names.len() == 1, names[0].clone());
    let names = names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    Some(match (kind, one) {
        (ContextKind::SuggestedArg, true) => t!("error.cli.tip_similar_argument", name),
        (ContextKind::SuggestedArg, false) => t!("error.cli.tip_similar_arguments", names),
        (ContextKind::SuggestedValue, true) => t!("error.cli.tip_similar_value", name),
        (ContextKind::SuggestedValue, false) => t!("error.cli.tip_similar_values", names),
        (ContextKind::SuggestedSubcommand, true) => t!("error.cli.tip_similar_subcommand", name),
        (ContextKind::SuggestedSubcommand, false) => {
            t!("error.cli.tip_similar_subcommands", names)
        }
        _ => return None,
    })
}

/// A possible value as clap lists it: quoted where it is empty or holds a space.
fn escaped(value: &str) -> String {
    match value.is_empty() || value.contains(char::is_whitespace) {
        true => format!("{value:?}"),
        false => value.to_string(),
    }
}

/// The line in English from clap's own rendering: its first line without "error: ", the
/// names of missing arguments, the possible values, its tips, and where to look. What a
/// kind [`said`] does not word says; the others read the same.
fn english_line(e: &clap::Error, command: &str) -> String {
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
fn unknown_command_line(e: &clap::Error, command: &str, lessons: &[Entry]) -> Option<Text> {
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
    let (lower, word) = (word.to_lowercase(), echoed(word));
    match command {
        "streamlab run" => {
            let names: Vec<&str> = lessons.iter().map(|l| l.name).collect();
            let similar: Vec<String> = match clap_says.is_empty() {
                false => clap_says,
                true if lower.chars().count() >= 3 => names
                    .iter()
                    .filter(|n| n.contains(lower.as_str()))
                    .map(|n| n.to_string())
                    .collect(),
                true => Vec::new(),
            };
            let lessons = names.join(", ");
            Some(match either(&similar) {
                None => t!("error.cli.unknown_lesson", word, lessons),
                Some(guess) => t!("error.cli.unknown_lesson_guess", word, guess, lessons),
            })
        }
        "streamlab" => Some(match either(&clap_says) {
            None => t!("error.cli.unknown_command", word),
            Some(guess) => t!("error.cli.unknown_command_guess", word, guess),
        }),
        _ => None,
    }
}

/// `'a' or 'b' or 'c'`: the names a "did you mean" offers; none for no names.
fn either(names: &[String]) -> Option<Text> {
    let mut quoted = names.iter().map(|n| Text::Plain(format!("'{n}'")));
    let first = quoted.next()?;
    Some(quoted.fold(first, |a, b| t!("error.cli.or", a, b)))
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
fn trace_line(e: &clap::Error, command: &str) -> Option<Text> {
    if command != "streamlab trace" {
        return None;
    }
    let usage = t!("error.cli.trace_usage");
    let named = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(list)) => list.clone(),
        _ => Vec::new(),
    };
    match e.kind() {
        ErrorKind::MissingRequiredArgument if named.iter().any(|n| n.contains("PROGRAM")) => {
            Some(t!("error.cli.trace_no_program", usage))
        }
        // clap's tip ("use '-- --flag'") would make the flag the program to run.
        ErrorKind::UnknownArgument => match named.first().map(|n| echoed(n))? {
            flag if flag.starts_with('-') => Some(t!("error.cli.trace_unknown_flag", flag, usage)),
            word => Some(t!("error.cli.trace_after_dashes", word, usage)),
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

#[cfg(test)]
mod tests {
    use clap::{Arg, Command};

    use super::*;
    use crate::lab::harness::{info_command, list_command, run_command};
    use crate::lessons::LESSONS;
    use crate::text::{english_sentence, has_chinese, Lang};

    /// streamlab's commands as main.rs puts them together.
    fn cli() -> Command {
        Command::new("streamlab")
            .subcommand_required(true)
            .subcommand(info_command::command())
            .subcommand(list_command::command())
            .subcommand(run_command::command(LESSONS))
            .subcommand(crate::lab::ddp::launcher::command())
            .subcommand(crate::trace::capture::command::command())
    }

    /// The error line for `args` (after `streamlab`).
    fn said_for(args: &[&str]) -> (Text, clap::Error, String) {
        let argv: Vec<String> =
            std::iter::once("streamlab").chain(args.iter().copied()).map(String::from).collect();
        let e = cli().try_get_matches_from(&argv).expect_err("a mistake");
        let command = command_path(&argv, LESSONS);
        (clap_error_line(&e, &command, LESSONS), e, command)
    }

    /// Each mistake clap words, said as a sentence of the catalogs: the same English as
    /// clap's own rendering gave the line ([`english_line`]), Chinese under `--lang zh`.
    #[test]
    fn clap_errors_are_sentences_of_the_catalogs_with_the_english_of_before() {
        let long = "7".repeat(100_000);
        let unknown = format!("--{long}");
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["run", "overlap", "--streams", "0"], "invalid value '0' for '--streams <STREAMS>': must be a whole number from 1 to 64 (see streamlab run overlap --help)"),
            (vec!["run", "overlap", "--streams", "2.5"], "must be a whole number from 1 to 64"),
            (vec!["run", "--reps", "0", "overlap"], "invalid value '0' for '--reps <N>'"),
            (vec!["run", "overlap", "--bogus"], "unexpected argument '--bogus' found (see streamlab run overlap --help)"),
            (vec!["run", "overlap", "--stream", "4"], "; tip: a similar argument exists: '--streams'"),
            (vec!["list", "--lang", "xx"], "invalid value 'xx' for '--lang <LANG>': one of en, zh (see streamlab list --help)"),
            (vec!["list", "--lang", "zhh"], "'--lang <LANG>': one of en, zh; tip: a similar value exists: 'zh'"),
            (vec!["run", "overlap", "--lang"], "'--lang <LANG>'"),
            (vec!["run", "overlap", "--reps", "3", "--reps", "4"], "cannot be used multiple times"),
            (vec!["info", "--no-such-flag"], "unexpected argument '--no-such-flag'"),
            (vec!["--lang", "zh"], "unexpected argument '--lang' found"),
            (vec!["launch"], "not provided: --gpus <N>, <run LESSON [FLAGS]>... (see streamlab launch --help)"),
            (vec!["launch", "--gpus", "0", "run"], "invalid value '0' for '--gpus <N>'"),
            (vec!["run", "overlap", "--reps", &long], "invalid value '77777"),
            (vec!["run", "overlap", &unknown], "'--77777"),
            (vec!["trace", "--idle-gap-ms", "-1", "--", "sh"], "trace: invalid value '-1'"),
            (vec!["trace", "--lang", "xx", "--", "sh"], "trace: invalid value 'xx'"),
            (vec!["trace", "--capture-count", "3", "--", "sh"], "--capture-range <NAME>"),
            (vec!["trace", "--when-full", "newest", "--", "sh"], "one of first, last, sample"),
        ];
        for (args, expected) in cases {
            let (line, e, command) = said_for(&args);
            let en = line.en();
            assert_eq!(en, english_line(&e, &command), "{args:?}");
            assert!(en.contains(expected), "{args:?}: {en} (expected {expected:?})");
            assert!(line.is_translated() || line.key().is_some(), "{args:?}: {line:?}");
            let zh = line.render(Lang::Zh);
            assert!(has_chinese(&zh), "{args:?}: {zh}");
            assert_eq!(english_sentence(&zh), None, "{args:?}: {zh}");
            assert!(zh.len() < 1_000 && !zh.contains('\n'), "{args:?}: {zh}");
        }
    }

    /// The lines streamlab words itself: a missing or unknown command or lesson, trace's
    /// mistakes. Their English is the tests' (host/tests/cli.rs, trace_command.rs).
    #[test]
    fn streamlab_own_lines_are_said_in_both_languages() {
        let names: Vec<&str> = LESSONS.iter().map(|l| l.name).collect();
        let lessons = names.join(", ");
        let cases: Vec<(Vec<&str>, String)> = vec![
            (vec![], "a command is missing: info, list, run, launch, trace, report or diff (see streamlab --help)".into()),
            (vec!["run"], format!("run: <LESSON> is missing: name one of {lessons}, or all (see streamlab list)")),
            (vec!["run", "overlp", "--reps", "3"], format!("run: unknown lesson 'overlp': did you mean 'overlap'? (the lessons: {lessons}, or all; see streamlab list)")),
            (vec!["run", "qwertyuiop"], format!("run: unknown lesson 'qwertyuiop' (the lessons: {lessons}, or all; see streamlab list)")),
            (vec!["lsit"], "unknown command 'lsit': did you mean 'list'? (the commands: info, list, run, launch, trace, report, diff; see streamlab --help)".into()),
            (vec!["trace"], "trace: the program to run is missing: streamlab trace [FLAGS] -- <PROGRAM> [ARGS]... (see streamlab trace --help)".into()),
            (vec!["trace", "python", "x.py"], "trace: unexpected argument 'python': the program comes after `--`: streamlab trace [FLAGS] -- <PROGRAM> [ARGS]... (see streamlab trace --help)".into()),
            (vec!["trace", "--bogus", "--", "sh"], "trace: unknown flag '--bogus': trace's flags come before `--`, the program's own after it: streamlab trace [FLAGS] -- <PROGRAM> [ARGS]... (see streamlab trace --help)".into()),
        ];
        for (args, expected) in cases {
            let (line, ..) = said_for(&args);
            assert_eq!(line.en(), expected, "{args:?}");
            assert!(line.is_translated(), "{args:?}: {line:?}");
            assert!(has_chinese(&line.render(Lang::Zh)), "{args:?}: {}", line.render(Lang::Zh));
        }
        // Several guesses: 'a' or 'b', in each language.
        let (line, ..) = said_for(&["run", "sync"]);
        assert!(line.en().contains("did you mean 'sync-methods'"), "{}", line.en());
        // A lesson name pasted with a file's worth of text is echoed short.
        let long = format!("overlap\n{}", "x".repeat(100_000));
        let (line, ..) = said_for(&["run", &long]);
        let zh = line.render(Lang::Zh);
        assert!(zh.contains("'overlap\\nxxx") && zh.contains("… (100008 characters)"), "{zh}");
    }

    /// Our value parsers' reasons reach the line as their sentence, found by type; another
    /// parser's words stay as they are.
    #[test]
    fn a_value_parser_reason_is_said_in_the_language() {
        let (line, ..) = said_for(&["run", "overlap", "--streams", "65"]);
        let zh = line.render(Lang::Zh);
        assert!(zh.contains("1 到 64 之间的整数") && zh.contains("'65'"), "{zh}");
        let odd = Command::new("x")
            .arg(Arg::new("n").long("n").value_parser(|_: &str| Err::<u32, _>("not 'this' one")));
        let e = odd.try_get_matches_from(["x", "--n", "5"]).unwrap_err();
        let line = clap_error_line(&e, "x", &[]);
        assert_eq!(line.en(), english_line(&e, "x"));
        assert!(line.en().ends_with(": not 'this' one (see x --help)"), "{}", line.en());
    }
}
