//! Value parsers for flags, so every range is checked and worded the same way: `--streams
//! 100: must be a whole number from 1 to 64`. A flag's help writes the same range
//! (`Number of streams [1..=64]`); the lessons' tests check the two agree. Here, beside the
//! words, so that the lessons' flags and `streamlab trace`'s share them.
use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;

use crate::t;
use crate::text::Text;

/// Why a parser here refused a flag's value, as a sentence of the catalogs. clap keeps it as
/// the error's source, where the command line's error line finds it again (by its type) to
/// say it in the learner's language; its `Display` is the English.
#[derive(Debug, Clone, PartialEq)]
pub struct BadValue(pub Text);

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.en())
    }
}

impl std::error::Error for BadValue {}

/// A whole number in `range`.
pub fn whole<T>(
    range: RangeInclusive<T>,
) -> impl Fn(&str) -> Result<T, BadValue> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Copy + std::fmt::Display + Send + Sync + 'static,
{
    move |s: &str| {
        let (min, max) = (range.start().to_string(), range.end().to_string());
        let message = || BadValue(t!("error.args.whole_number", min, max));
        let v: T = s.trim().parse().map_err(|_| message())?;
        if range.contains(&v) {
            Ok(v)
        } else {
            Err(message())
        }
    }
}

/// A number (decimals allowed) in `range`.
pub fn number(
    range: RangeInclusive<f64>,
) -> impl Fn(&str) -> Result<f64, BadValue> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let (min, max) = (range.start().to_string(), range.end().to_string());
        let message = || BadValue(t!("error.args.number", min, max));
        let v: f64 = s.trim().parse().map_err(|_| message())?;
        if v.is_finite() && range.contains(&v) {
            Ok(v)
        } else {
            Err(message())
        }
    }
}
