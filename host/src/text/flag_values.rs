//! Value parsers for flags, so every range is checked and worded the same way: `--streams
//! 100: must be a whole number from 1 to 64`. A flag's help writes the same range
//! (`Number of streams [1..=64]`); the lessons' tests check the two agree. Here, beside the
//! words, so that the lessons' flags and `streamlab trace`'s share them.
use std::ops::RangeInclusive;
use std::str::FromStr;

/// A whole number in `range`.
pub fn whole<T>(
    range: RangeInclusive<T>,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Copy + std::fmt::Display + Send + Sync + 'static,
{
    move |s: &str| {
        let message =
            || format!("must be a whole number from {} to {}", range.start(), range.end());
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
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let message = || format!("must be a number from {} to {}", range.start(), range.end());
        let v: f64 = s.trim().parse().map_err(|_| message())?;
        if v.is_finite() && range.contains(&v) {
            Ok(v)
        } else {
            Err(message())
        }
    }
}
