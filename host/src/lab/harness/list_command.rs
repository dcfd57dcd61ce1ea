//! `streamlab list`: the lessons, in the order `run all` runs them.
use clap::Args as _;

use crate::lab::harness::common::LANG_HELP;
use crate::lab::harness::entry::Entry;
use crate::t;
use crate::text::{label, Lang};

// `list`'s flags. (`//`, not `///`: clap would make a doc comment the command's about.)
#[derive(clap::Args, Debug, Clone)]
pub struct ListFlags {
    #[arg(long, help = "Machine-readable output")]
    pub json: bool,
    #[arg(long, value_name = "LANG", value_parser = Lang::NAMES, help = LANG_HELP)]
    pub lang: Option<String>,
}

/// The `list` subcommand.
pub fn command() -> clap::Command {
    ListFlags::augment_args(
        clap::Command::new("list").about("List the lessons, in the order `run all` runs them"),
    )
}

/// Prints `lessons` with their summaries (in `--lang`), or as JSON with their flags.
pub fn print(lessons: &[Entry], flags: &ListFlags) {
    if flags.json {
        let list: Vec<_> = lessons
            .iter()
            .map(|l| {
                let flags: Vec<String> = (l.command)()
                    .get_arguments()
                    .filter_map(|a| a.get_long().map(|f| format!("--{f}")))
                    .collect();
                serde_json::json!({"name": l.name, "summary": l.summary, "flags": flags})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list).unwrap_or_default());
        return;
    }
    let lang = Lang::or_locale(flags.lang.as_deref());
    let width = lessons.iter().map(|l| l.name.len()).max().unwrap_or(0);
    for l in lessons {
        println!("{:<width$}  {}", l.name, label(lang, l.summary));
    }
    println!("\n{}", t!("list.more").render(lang));
}
