//! `--lang` and the locale, as a learner and a script see them, on any machine (through the
//! recorded runs the binary embeds): Chinese where asked for, English by default, the flag
//! before the locale, JSON unchanged, and `--lang xx` refused in one line.
use streamlab::text::{english_sentence, has_chinese};

mod common;
use common::stdout;

/// The binary with `args`, under exactly the locale variables given (the rest removed).
fn streamlab(args: &[&str], locale: &[(&str, &str)]) -> std::process::Output {
    common::streamlab_in(locale, args)
}

/// The interpretation lines of a text report.
fn interpretation(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("  > ")).collect()
}

const RECORDED_OVERLAP: &[&str] = &["run", "overlap", "--recorded"];

#[test]
fn lang_zh_explains_in_chinese() {
    let o = streamlab(&[RECORDED_OVERLAP, &["--lang", "zh"]].concat(), &[]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let said = interpretation(&text);
    assert!(said.len() >= 3, "{text}");
    for line in
        said.iter().chain(text.lines().filter(|l| l.starts_with("  [")).collect::<Vec<_>>().iter())
    {
        assert!(has_chinese(line), "not Chinese: {line}");
        assert_eq!(english_sentence(line), None, "English left in: {line}");
    }
    assert!(text.contains("设备：") && text.contains("单个流，中位数"), "{text}");
}

#[test]
fn english_by_default_and_from_a_locale_that_is_not_chinese() {
    for locale in [&[][..], &[("LANG", "en_US.UTF-8")], &[("LC_ALL", "C"), ("LANG", "zh_CN.UTF-8")]]
    {
        let text = stdout(&streamlab(RECORDED_OVERLAP, locale));
        let said = interpretation(&text);
        assert!(!said.is_empty() && said.iter().all(|l| !has_chinese(l)), "{locale:?}:\n{text}");
        assert!(said[0].contains("One stream runs H, C and D back to back"), "{text}");
    }
}

#[test]
fn a_chinese_locale_picks_chinese_and_the_flag_beats_it() {
    for locale in
        [&[("LANG", "zh_CN.UTF-8")][..], &[("LC_MESSAGES", "zh_TW.UTF-8")], &[("LC_ALL", "zh_CN")]]
    {
        let text = stdout(&streamlab(RECORDED_OVERLAP, locale));
        assert!(interpretation(&text).iter().all(|l| has_chinese(l)), "{locale:?}:\n{text}");
        let text = stdout(&streamlab(&[RECORDED_OVERLAP, &["--lang", "en"]].concat(), locale));
        let said = interpretation(&text);
        assert!(!said.is_empty() && said.iter().all(|l| !has_chinese(l)), "{locale:?}:\n{text}");
    }
}

#[test]
fn json_stays_english_in_every_language() {
    let plain = streamlab(&[RECORDED_OVERLAP, &["--json"]].concat(), &[]);
    let zh = streamlab(&[RECORDED_OVERLAP, &["--json", "--lang", "zh"]].concat(), &[]);
    let (plain, zh) = (stdout(&plain), stdout(&zh));
    assert_eq!(plain, zh, "--lang changed the JSON");
    let report: serde_json::Value = serde_json::from_str(&zh).unwrap();
    let first = report["interpretation"][0].as_str().unwrap();
    assert!(first.starts_with("One stream runs H, C and D"), "{first}");
    assert_eq!(report["checks"][0]["name"], "async == sync, bit for bit");
    assert!(!has_chinese(&zh));
}

#[test]
fn an_unknown_language_is_refused_in_one_line() {
    for args in [
        &["run", "overlap", "--lang", "xx"][..],
        &["run", "all", "--recorded", "--lang", "fr"],
        &["list", "--lang", "zh-CN"],
    ] {
        let o = streamlab(args, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("streamlab: ") && err.contains("invalid value"), "{err}");
        // The values as words, without clap's brackets or a stray "; [".
        assert!(err.contains("for '--lang <LANG>': one of en, zh"), "{err}");
        assert!(!err.contains('[') && !err.contains("; ["), "{err}");
        assert!(o.stdout.is_empty(), "{args:?}: printed before refusing");
    }
}

#[test]
fn help_and_list_know_the_flag() {
    let help = stdout(&streamlab(&["run", "--help"], &[]));
    assert!(help.contains("--lang <LANG>") && help.contains("LC_MESSAGES"), "{help}");
    let list = stdout(&streamlab(&["list", "--lang", "zh"], &[]));
    assert!(list.lines().next().is_some_and(has_chinese), "{list}");
    let list = stdout(&streamlab(&["list"], &[]));
    assert!(!has_chinese(&list), "{list}");
}

/// `--lang zh` draws the picture in Chinese too, without a GPU (a recorded run): the
/// caption, the axis, the legend, and the line on stderr saying where it went.
#[test]
fn lang_zh_draws_the_picture_and_says_where_it_went_in_chinese() {
    let dir = std::env::temp_dir().join(format!("streamlab-lang-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (zh_svg, en_svg) = (dir.join("zh.svg"), dir.join("en.svg"));
    let run = |svg: &std::path::Path, lang: &str| {
        let args = [RECORDED_OVERLAP, &["--svg", svg.to_str().unwrap(), "--lang", lang]].concat();
        let o = streamlab(&args, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        (common::stderr(&o), std::fs::read_to_string(svg).unwrap())
    };
    let (said, picture) = run(&zh_svg, "zh");
    assert_eq!(said, format!("streamlab: overlap: --svg 已写入 {}\n", zh_svg.display()));
    for words in ["时间（ms）", "内核", "拷贝入（主机到设备）", "（中位数）", "加速比", "录制"]
    {
        assert!(picture.contains(words), "{words} missing from the zh picture");
    }
    for english in ["time (ms)", "copy-in (host to device)", "(medians)", "speed-up", "recorded on"]
    {
        assert!(!picture.contains(english), "{english} left in the zh picture");
    }
    let (said, picture) = run(&en_svg, "en");
    assert_eq!(said, format!("streamlab: overlap: --svg wrote {}\n", en_svg.display()));
    assert!(picture.contains("time (ms)") && picture.contains("(medians)"), "en picture");
    assert!(!picture.chars().any(|c| has_chinese(c.encode_utf8(&mut [0; 4]))), "en picture");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A mistake on the command line is said in the language too: Chinese with `--lang zh` (or
/// under a Chinese locale when `--lang` names none it knows), the same English as before
/// without it, and English in the JSON object `--json` adds.
#[test]
fn command_line_mistakes_are_said_in_chinese_with_lang_zh() {
    let names: Vec<&str> = streamlab::lessons::LESSONS.iter().map(|l| l.name).collect();
    let lessons = names.join(", ");
    let cases: [(&[&str], String); 3] = [
        (
            &["run", "overlap", "--streams", "0"][..],
            "streamlab: overlap: invalid value '0' for '--streams <STREAMS>': must be a whole number from 1 to 64 (see streamlab run overlap --help)".into(),
        ),
        (
            &["run", "overlp"],
            format!("streamlab: run: unknown lesson 'overlp': did you mean 'overlap'? (the lessons: {lessons}, or all; see streamlab list)"),
        ),
        (
            &["run", "overlap", "--bogus"],
            "streamlab: overlap: unexpected argument '--bogus' found (see streamlab run overlap --help)".into(),
        ),
    ];
    for (args, english) in &cases {
        for locale in [&[][..], &[("LANG", "C")]] {
            let o = streamlab(args, locale);
            assert_eq!(&one_line(&o, args), english, "{args:?} under {locale:?}");
        }
        let zh_args = [*args, &["--lang", "zh"]].concat();
        let o = streamlab(&zh_args, &[("LANG", "C")]);
        let zh = one_line(&o, &zh_args);
        // The prefix stays: streamlab, and the lesson or command the line is about.
        let prefix = english.split(": ").take(2).collect::<Vec<_>>().join(": ") + ": ";
        assert!(zh.starts_with(&prefix), "{zh}");
        assert!(has_chinese(&zh), "not Chinese: {zh}");
        assert!(zh.contains(&format!("'{}'", args[args.len() - 1])), "the word is echoed: {zh}");
        // The JSON object stays English.
        let o = streamlab(&[&zh_args[..], &["--json"]].concat(), &[]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["error"].as_str(), english.strip_prefix("streamlab: "), "{v}");
    }
    // The range's sentence is the catalogs' too, and the flag and the help stay as they are.
    let o = streamlab(&["run", "overlap", "--streams", "0", "--lang", "zh"], &[]);
    let zh = one_line(&o, &["--streams", "0"]);
    assert!(zh.contains("'--streams <STREAMS>'") && zh.contains("1 到 64"), "{zh}");
    assert!(zh.contains("streamlab run overlap --help") && english_sentence(&zh).is_none(), "{zh}");
    // `--lang xx` names no language: the locale says which the refusal is in.
    let args = ["run", "overlap", "--lang", "xx"];
    let zh = one_line(&streamlab(&args, &[("LANG", "zh_CN.UTF-8")]), &args);
    assert!(has_chinese(&zh) && zh.contains("'xx'") && zh.contains("en, zh"), "{zh}");
    let en = one_line(&streamlab(&args, &[("LANG", "C")]), &args);
    assert!(en.contains("invalid value 'xx' for '--lang <LANG>': one of en, zh"), "{en}");
    // No command at all, under a Chinese locale.
    let zh = one_line(&streamlab(&[], &[("LANG", "zh_CN.UTF-8")]), &[]);
    assert!(zh.starts_with("streamlab: ") && has_chinese(&zh) && zh.contains("info"), "{zh}");
}

/// The one line `o` wrote on stderr, exit 2: a refused command line.
fn one_line(o: &std::process::Output, args: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err.trim_end().to_string()
}

/// Errors past the command line are said in the language too: a missing GPU (every GPU
/// hidden from the driver, so this runs the same on a GPU machine), for a lesson run here and
/// for `launch`, whose `--lang` comes after the `--` that starts its ranks' command; and a
/// report folder that does not exist.
#[test]
fn errors_of_the_run_are_said_in_chinese_with_lang_zh() {
    let hidden = [("CUDA_VISIBLE_DEVICES", "-1"), ("LANG", "C")];
    let runs: [&[&str]; 3] = [
        &["run", "overlap", "--lang", "zh"],
        &["launch", "--gpus", "2", "--", "run", "allreduce-overlap", "--lang", "zh"],
        &["report", "/no/such/streamlab/folder", "--lang", "zh"],
    ];
    for args in runs {
        let o = streamlab(args, &hidden);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(matches!(o.status.code(), Some(2 | 3)), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(has_chinese(&err), "{args:?}: not Chinese: {err}");
        assert!(english_sentence(&err).is_none(), "{args:?}: English left: {err}");
        // The same without --lang, under LANG=C: English, the words of before.
        let english: Vec<&str> =
            args.iter().copied().filter(|a| *a != "--lang" && *a != "zh").collect();
        let o = streamlab(&english, &hidden);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!has_chinese(&err), "{args:?}: {err}");
    }
}
