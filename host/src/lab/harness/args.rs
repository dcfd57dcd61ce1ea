//! The lessons' flag values: the range-checked numbers (`whole`, `number`, kept beside the
//! words in `text::flag_values` so that `streamlab trace` shares them), and the runtime's
//! `HalfFormat` as a flag's value (`--format bf16`).
use clap::builder::PossibleValue;

pub use crate::text::flag_values::{number, whole};

use crate::runtime::HalfFormat;

/// `--format bf16|f16`: the runtime's `HalfFormat` as a flag's value. The runtime knows no CLI,
/// so the flag's side of it lives here.
impl clap::ValueEnum for HalfFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[HalfFormat::Bf16, HalfFormat::F16]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            HalfFormat::Bf16 => "bfloat16 (`__nv_bfloat16`): f32's range, 8 significant bits",
            HalfFormat::F16 => "IEEE binary16 (`__half`): up to 65504, 11 significant bits",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn ranges_are_checked_and_worded_alike() {
        let streams = whole(1u64..=64);
        assert_eq!(streams("8"), Ok(8));
        let e = streams("65").unwrap_err();
        assert_eq!(e.to_string(), "must be a whole number from 1 to 64");
        assert_eq!(streams("-3").unwrap_err(), e);
        assert_eq!(streams("2.5").unwrap_err(), e);
        let sleep = number(100.0..=1e7);
        assert_eq!(sleep("250.5"), Ok(250.5));
        assert_eq!(sleep("50").unwrap_err().to_string(), "must be a number from 100 to 10000000");
        // The sentence is the catalogs', so the error line can say it in Chinese.
        let zh = e.0.render(crate::text::Lang::Zh);
        assert!(crate::text::has_chinese(&zh) && zh.contains("64"), "{zh}");
        assert!(sleep("NaN").is_err() && sleep("inf").is_err());
    }

    #[test]
    fn half_formats_parse_by_their_names() {
        for format in HalfFormat::value_variants() {
            assert_eq!(HalfFormat::from_str(format.name(), false), Ok(*format));
        }
        assert_eq!(HalfFormat::from_str("F16", true), Ok(HalfFormat::F16));
        assert!(HalfFormat::from_str("fp16", false).is_err());
        // The report's JSON names it as the flag does.
        assert_eq!(serde_json::to_string(&HalfFormat::Bf16).unwrap(), "\"bf16\"");
    }
}
