//! `Percent`: a rollout percentage parsed once at the boundary (admin forms, JSON), 0..=100.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A rollout percentage, always 0..=100: the share of buckets (0..=99) routed to the new path.
///
/// Admin input becomes a `Percent` at the edge so nothing further in needs to re-check the
/// range; [`crate::change_percent`] only accepts this type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Percent(u8);

impl Percent {
    /// Nobody routed to the new path.
    pub const ZERO: Percent = Percent(0);
    /// Everybody routed to the new path.
    pub const FULL: Percent = Percent(100);

    /// Accepts 0..=100 and rejects anything larger with a message naming the value.
    pub fn new(value: u8) -> Result<Percent, PercentError> {
        if value <= 100 {
            Ok(Percent(value))
        } else {
            Err(PercentError::OutOfRange(i128::from(value)))
        }
    }

    /// The percentage as a plain number, 0..=100.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl From<Percent> for u8 {
    fn from(percent: Percent) -> u8 {
        percent.0
    }
}

impl TryFrom<u8> for Percent {
    type Error = PercentError;

    fn try_from(value: u8) -> Result<Self, Self::Error> {
        Percent::new(value)
    }
}

impl TryFrom<i64> for Percent {
    type Error = PercentError;

    fn try_from(value: i64) -> Result<Self, Self::Error> {
        match u8::try_from(value) {
            Ok(small) => Percent::new(small),
            Err(_) => Err(PercentError::OutOfRange(i128::from(value))),
        }
    }
}

impl FromStr for Percent {
    type Err = PercentError;

    /// Parses a whole number such as `"50"` (surrounding whitespace allowed); `"50%"`, `"12.5"`
    /// or `"-1"` are rejected rather than guessed at.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let value: i128 = trimmed
            .parse()
            .map_err(|_| PercentError::NotAWholeNumber(trimmed.to_owned()))?;
        match u8::try_from(value) {
            Ok(small) => Percent::new(small),
            Err(_) => Err(PercentError::OutOfRange(value)),
        }
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

/// Why a value is not a rollout percentage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PercentError {
    /// A number outside 0..=100.
    OutOfRange(i128),
    /// Text that is not a whole number.
    NotAWholeNumber(String),
}

impl fmt::Display for PercentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PercentError::OutOfRange(value) => {
                write!(f, "rollout percent must be between 0 and 100, got {value}")
            }
            PercentError::NotAWholeNumber(text) => {
                write!(
                    f,
                    "rollout percent must be a whole number between 0 and 100, got {text:?}"
                )
            }
        }
    }
}

impl std::error::Error for PercentError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_through_one_hundred_are_percents() {
        for value in 0..=100u8 {
            assert_eq!(Percent::new(value).map(Percent::get), Ok(value));
        }
    }

    #[test]
    fn more_than_one_hundred_is_rejected_with_a_message_naming_the_value() {
        let error = Percent::new(101).unwrap_err();
        assert_eq!(error, PercentError::OutOfRange(101));
        assert_eq!(
            error.to_string(),
            "rollout percent must be between 0 and 100, got 101"
        );
        assert!(Percent::new(255).is_err());
    }

    #[test]
    fn form_text_parses_whole_numbers_only() {
        assert_eq!(" 42 ".parse::<Percent>(), Ok(Percent(42)));
        assert_eq!("100".parse::<Percent>(), Ok(Percent::FULL));
        assert_eq!("150".parse::<Percent>(), Err(PercentError::OutOfRange(150)));
        assert_eq!("-1".parse::<Percent>(), Err(PercentError::OutOfRange(-1)));
        assert_eq!(
            "12.5".parse::<Percent>().unwrap_err().to_string(),
            "rollout percent must be a whole number between 0 and 100, got \"12.5\""
        );
        assert!("50%".parse::<Percent>().is_err());
        assert!("".parse::<Percent>().is_err());
    }

    #[test]
    fn wide_integers_outside_the_range_are_rejected() {
        assert_eq!(Percent::try_from(100i64), Ok(Percent::FULL));
        assert_eq!(Percent::try_from(-5i64), Err(PercentError::OutOfRange(-5)));
        assert_eq!(
            Percent::try_from(1000i64),
            Err(PercentError::OutOfRange(1000))
        );
    }

    #[test]
    fn json_percent_over_one_hundred_fails_to_deserialize() {
        assert_eq!(serde_json::from_str::<Percent>("7").ok(), Some(Percent(7)));
        let error = serde_json::from_str::<Percent>("101").unwrap_err();
        assert!(error.to_string().contains("between 0 and 100, got 101"));
        assert!(serde_json::from_str::<Percent>("-3").is_err());
        assert_eq!(
            serde_json::to_string(&Percent(30)).ok().as_deref(),
            Some("30")
        );
    }
}
