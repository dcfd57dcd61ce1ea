//! The English sentences a trace file holds (the recorder's notes, the reasons of its drops,
//! the kinds it could not record, and the reader's own notes about a file), read back into
//! the catalogs' `trace.file.*` messages so that the report says them in its language. The
//! file keeps the sentences as they are (its format does not change); one this streamlab
//! does not know, a newer recorder's, is shown as it is.
use crate::text::Text;

/// The message `english` is, or `english` itself.
pub fn said(english: &str) -> Text {
    Text::recover_among(english, "trace.file.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{en, english_sentence, pieces, Lang, Piece};

    /// Each sentence as the recorder writes it (its format strings filled in) is read back
    /// as its message: the English unchanged, the Chinese with no English sentence left.
    #[test]
    fn the_recorders_sentences_are_said_in_the_reports_language() {
        let written = [
            ("other_cupti", "another CUPTI library is loaded in the process: /opt/venv/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12 (the recorder's is /usr/local/cuda-13.0/lib64/libcupti.so.2025.3.0); a profiler the program starts itself (torch.profiler) may record no CUDA activity while streamlab trace records"),
            ("probe_stopped", "the recorder's probe call (cuDriverGetVersion, one per flush) left no record for its last 3 flushes, since CUPTI time 1710000000 ns, though it did before: another CUPTI client in the process registered its own activity buffers or turned recording off, and records after that time are missing"),
            ("probe_silent", "the recorder's probe call (cuDriverGetVersion, one per flush) has left no record for 12 s, since CUPTI time 1710000000 ns, though it did before: another CUPTI client in the process registering its own activity buffers or turning recording off does this (torch.profiler does as it starts and stops), and records after that time may be missing"),
            ("probe_never", "the recorder's probe call (cuDriverGetVersion) never left a record, so whether another CUPTI client took over the activity buffers was not checked"),
            ("flush_failed", "cuptiActivityFlushAll: CUPTI_ERROR_UNKNOWN: the periodic flush failed (first at CUPTI time 42 ns)"),
            ("exit_flush_failed", "cuptiActivityFlushAll: CUPTI_ERROR_UNKNOWN: the flush at exit failed"),
            ("no_flush_thread", "no flush thread (Resource temporarily unavailable (os error 11)): records are written only as buffers fill and at exit"),
            ("over_limit", "over the limit of 250000 records (STREAMLAB_TRACE_MAX_RECORDS)"),
            ("still_running", "work still running at exit: its records had no end"),
            ("no_buffer", "dropped by CUPTI: it had no buffer to write them in"),
            ("outside_window", "outside the capture window: recorded before it opened or after it closed"),
            ("oldest_dropped", "the oldest records were dropped to keep the last 250000"),
            ("not_sampled", "not in the sample of \"train step\": one occurrence in 4 is kept"),
            ("capture_started", "capture range \"step\" #1 started"),
            ("capture_ended", "capture range \"step\": 10 ended"),
            ("delay_passed", "delay of 2000 ms passed"),
            ("duration_passed", "duration of 5000 ms passed"),
            ("never_opened", "the capture window never opened, so no records were kept"),
            ("no_buffers", "everything: cuptiActivityRegisterCallbacks: CUPTI_ERROR_NOT_INITIALIZED"),
            ("nvtx_unset", "NVTX ranges and markers: NVTX_INJECTION64_PATH is not set, so the program's NVTX calls reach no tool"),
            ("nvtx_other", "NVTX ranges and markers: NVTX_INJECTION64_PATH names /opt/libcupti.so.12, not the recorder's CUPTI /usr/lib/libcupti.so.13"),
            ("off_kernels", "kernels: cuptiActivityEnable: CUPTI_ERROR_NOT_COMPATIBLE"),
            ("off_peer_copies", "peer copies: cuptiActivityEnable: CUPTI_ERROR_INVALID_KIND"),
            ("off_markers", "NVTX ranges and markers: cuptiActivityEnable: CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED"),
            ("off_driver_calls", "driver calls: cuptiActivityEnable: CUPTI_ERROR_NOT_SUPPORTED"),
            ("other_format", "trace file format 2, and this streamlab reads format 1: lines it does not know were skipped"),
            ("no_process_line", "the file has no process line (its start is missing): its command line and CUPTI are unknown"),
        ];
        for (key, english) in written {
            let text = said(english);
            assert_eq!(text.key(), Some(format!("trace.file.{key}").as_str()), "{english}");
            assert_eq!(text.en(), english);
            let zh = text.render(Lang::Zh);
            assert_eq!(english_sentence(&zh), None, "{key}: {zh}");
        }
        // One this streamlab does not know stays as it is, in every language.
        let newer = "a sentence a newer recorder wrote";
        assert_eq!(said(newer), Text::Plain(newer.into()));
        assert_eq!(said(newer).render(Lang::Zh), newer);
    }

    /// Every `trace.file.*` template's words are still written by the recorder's code
    /// (`inject/src`) or the reader's: a sentence changed there and not here would be shown
    /// untranslated.
    #[test]
    fn every_template_is_still_written_by_the_recorder_or_the_reader() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut code = String::new();
        for dir in ["inject/src", "host/src/trace/capture", "host/src/trace/read"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
                let path = entry.path();
                // Not this file, whose tests write every sentence out.
                if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("file_text.rs") {
                    code += &std::fs::read_to_string(&path).unwrap();
                }
            }
        }
        let templates = en::MESSAGES.iter().filter(|(k, _)| k.starts_with("trace.file."));
        let mut checked = 0;
        for (key, template) in templates {
            // The recorder joins some of a sentence's parts (`{what}: {why}`): each part
            // between holes and colons is looked for.
            let parts: Vec<&str> = pieces(template)
                .into_iter()
                .filter_map(|p| match p {
                    Piece::Literal(l) => Some(l),
                    Piece::Hole(_) => None,
                })
                .flat_map(|l| l.split(": "))
                .map(|part| part.trim_matches(|c: char| " :;,()".contains(c)))
                .filter(|part| part.len() > 2)
                .collect();
            // The reader writes its notes from the catalog: its keys are in its code.
            let reader_key = format!("\"{key}\"");
            for part in parts {
                assert!(
                    code.contains(part) || code.contains(&reader_key),
                    "{key}: {part:?} is written nowhere"
                );
            }
            checked += 1;
        }
        assert!(checked >= 20, "only {checked} templates");
    }
}
