//! Reading English lines back into messages: a report kept only its English lines when it
//! was recorded before the keys were stored, and [`Text::recover`] finds the message (and
//! its arguments) each line is a rendering of, so that it can be shown in another language.
use crate::text::en;
use crate::text::template::{best_match, label_patterns, recoverable, Holes};
use crate::text::Text;

impl Text {
    /// The message `english` is a rendering of, found by matching it against every English
    /// template (its arguments recovered the same way, else as labels); `Plain` when none
    /// matches. This renders reports that kept only their English lines (runs recorded
    /// before the keys were stored) in another language.
    pub fn recover(english: &str) -> Text {
        recover(english, true)
    }

    /// The message among those whose key starts with `prefix` that `english` is a
    /// rendering of, its holes kept as they are (paths, counts, CUPTI's own error text);
    /// `Plain` when none is. For sentences another program wrote in English, in words the
    /// catalogs hold: the trace recorder's notes (`trace.file.`). Rendered in English, a
    /// match gives back `english` exactly.
    pub fn recover_among(english: &str, prefix: &str) -> Text {
        let among = en::MESSAGES.iter().copied().filter(|(key, _)| key.starts_with(prefix));
        match best_match(among, english, Holes::Anything) {
            Some((key, args)) => Text::Message {
                key: key.into(),
                args: args
                    .into_iter()
                    .map(|(n, v)| (n.to_string(), Text::from(v.to_string())))
                    .collect(),
            },
            None => Text::Plain(english.into()),
        }
    }
}

fn recover(english: &str, whole_line: bool) -> Text {
    let messages = recoverable;
    // An argument that is a name (a version, a stage) stays one.
    if !whole_line && best_match(label_patterns(), english, Holes::LabelHoles).is_some() {
        return Text::label(english);
    }
    // A list of messages ("prepared 0 (2.16), enqueued 0 (2.19)") before one message.
    let items: Vec<&str> = english.split(", ").collect();
    let all_items = items.iter().all(|i| best_match(messages(), i, Holes::Anything).is_some());
    if !whole_line && items.len() > 1 && all_items {
        return Text::List(items.into_iter().map(|i| recover(i, false)).collect());
    }
    match best_match(messages(), english, Holes::Anything) {
        Some((key, args)) => Text::Message {
            key: key.into(),
            args: args.into_iter().map(|(n, v)| (n.to_string(), recover(v, false))).collect(),
        },
        None if whole_line => Text::Plain(english.into()),
        None => Text::label(english),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::text::template::holes;
    use crate::text::Lang;

    /// Every English template, filled with distinct values, is recognized as itself: how a
    /// report that kept only its English lines is rendered in Chinese.
    #[test]
    fn every_english_line_is_recovered_as_its_own_message() {
        for (key, english) in recoverable() {
            let args = holes(english)
                .into_iter()
                .enumerate()
                .map(|(i, h)| (h, Text::Plain(format!("<{i}>"))))
                .collect();
            let line = Text::message(key, args);
            let found = Text::recover(&line.en());
            assert_eq!(found.key(), Some(key), "{key}: recovered as another message");
            let (zh, want) = (found.render(Lang::Zh), line.render(Lang::Zh));
            assert_eq!(zh, want, "{key}: its arguments were not recovered");
        }
        // A line no template has stays as it is, in every language.
        let unknown = Text::recover("Nothing in the catalogs reads like this.");
        assert_eq!(unknown, Text::Plain("Nothing in the catalogs reads like this.".into()));
    }

    #[test]
    fn recovered_arguments_keep_their_labels_and_numbers() {
        let line = "recording cost: 8 streams 2.911 ms with the recorder off, 2.927 ms on (+0.5%, medians of 10 interleaved runs)";
        let found = Text::recover(line);
        assert_eq!(found.key(), Some("timeline.cost"));
        let zh = found.render(Lang::Zh);
        assert!(zh.contains("8 个流") && zh.contains("2.911") && zh.contains("+0.5%"), "{zh}");
        let list = Text::recover("Order of events in the last pipelined run (ms): prepared 0 (2.16), enqueued 0 (2.19) ... : one batch, so no preparation could overlap GPU work.");
        let zh = list.render(Lang::Zh);
        assert!(zh.contains("准备 0 (2.16), 入队 0 (2.19)"), "{zh}");
    }
}
