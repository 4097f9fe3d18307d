//! `Percent`: a share of a fleet, held exactly as hundredths of a percent.
//!
//! The SPEC promises "7 % of 100 nodes is 7 nodes" and "0.5 % of 10 nodes is 1". Floats
//! cannot keep that promise (`0.07 * 100.0` is `7.000000000000001`, whose ceiling is 8), so a
//! percentage is read from the JSON number's decimal text and stored as an integer count of
//! hundredths. Everything downstream does integer arithmetic.

use std::fmt;

use serde_json::Value;

/// A percentage in `(0, 100]` with at most two decimals, stored as hundredths (`1..=10000`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Percent(u32);

/// Hundredths in 100 %.
const FULL: u32 = 10_000;

impl Percent {
    /// The whole fleet.
    pub const HUNDRED: Percent = Percent(FULL);

    /// Builds a percentage from hundredths; `None` outside `1..=10000`.
    pub fn from_hundredths(hundredths: u32) -> Option<Percent> {
        (1..=FULL)
            .contains(&hundredths)
            .then_some(Percent(hundredths))
    }

    /// Hundredths of a percent: `12.25 %` is `1225`. Selection arithmetic uses this.
    pub fn hundredths(self) -> u32 {
        self.0
    }

    /// Reads a JSON number. The error is the message half of a `PlanError`.
    pub fn from_json(value: &Value) -> Result<Percent, &'static str> {
        match value {
            Value::Number(number) => Percent::from_decimal_str(&number.to_string()),
            _ => Err("must be a number"),
        }
    }

    /// Reads decimal text such as `7`, `0.5`, `12.25` or `1e1` exactly, so forms and JSON
    /// share one rule and no float rounding can move a value across a bound.
    pub fn from_decimal_str(text: &str) -> Result<Percent, &'static str> {
        let decimal = Decimal::parse(text.trim()).ok_or("must be a number")?;
        if decimal.digits.is_empty() || decimal.negative {
            return Err("must be greater than 0");
        }
        // Digits left of the decimal point once trailing zeros are gone.
        let integer_digits = decimal.digits.len() as i64 - decimal.scale;
        if decimal.scale > 2 {
            // A non-zero fraction beyond hundredths: too big if the integer part is >= 100.
            return Err(if integer_digits >= 3 {
                "must be at most 100"
            } else {
                "must have at most two decimal places"
            });
        }
        if integer_digits > 3 {
            return Err("must be at most 100");
        }
        let shift = u32::try_from(2 - decimal.scale).map_err(|_| "must be a number")?;
        let hundredths = decimal
            .digits
            .parse::<u32>()
            .ok()
            .and_then(|digits| digits.checked_mul(10u32.pow(shift)))
            .filter(|h| *h <= FULL)
            .ok_or("must be at most 100")?;
        Ok(Percent(hundredths))
    }

    /// The canonical JSON number: an integer when whole (`7`), else the shortest decimal
    /// (`12.25`), which [`Percent::from_json`] reads back to the same value.
    pub fn to_json(self) -> Value {
        if self.0.is_multiple_of(100) {
            Value::from(self.0 / 100)
        } else {
            Value::from(f64::from(self.0) / 100.0)
        }
    }
}

impl fmt::Display for Percent {
    /// `7%`, `12.5%`, `12.25%`: what an operator typed, not a float artefact.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, hundredths) = (self.0 / 100, self.0 % 100);
        match hundredths {
            0 => write!(f, "{whole}%"),
            h if h.is_multiple_of(10) => write!(f, "{whole}.{}%", h / 10),
            h => write!(f, "{whole}.{h:02}%"),
        }
    }
}

/// An exact decimal `digits * 10^-scale`, with leading and trailing zeros stripped
/// (so zero has empty `digits`).
struct Decimal {
    negative: bool,
    digits: String,
    scale: i64,
}

impl Decimal {
    /// Accepts `[+-]digits[.digits][(e|E)[+-]digits]`, the JSON number grammar plus a
    /// leading `+`, a bare trailing `.` and a bare leading `.`.
    fn parse(text: &str) -> Option<Decimal> {
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], rest[at + 1..].parse::<i32>().ok()?),
            None => (rest, 0),
        };
        let (integer, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if integer.len() + fraction.len() == 0 || !all_digits(integer) || !all_digits(fraction) {
            return None;
        }
        let joined = format!("{integer}{fraction}");
        let significant = joined.trim_start_matches('0');
        let digits = significant.trim_end_matches('0');
        let trailing_zeros = (significant.len() - digits.len()) as i64;
        Some(Decimal {
            negative,
            digits: digits.to_owned(),
            scale: fraction.len() as i64 - i64::from(exponent) - trailing_zeros,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hundredths(value: Value) -> Result<u32, &'static str> {
        Percent::from_json(&value).map(Percent::hundredths)
    }

    #[test]
    fn whole_and_two_decimal_percentages_are_stored_exactly_as_hundredths() {
        assert_eq!(hundredths(json!(7)), Ok(700));
        assert_eq!(hundredths(json!(0.5)), Ok(50));
        assert_eq!(hundredths(json!(12.25)), Ok(1225));
        assert_eq!(hundredths(json!(0.01)), Ok(1));
        assert_eq!(hundredths(json!(100)), Ok(10_000));
        assert_eq!(hundredths(json!(100.0)), Ok(10_000));
    }

    #[test]
    fn a_third_decimal_is_refused() {
        assert_eq!(
            hundredths(json!(12.345)),
            Err("must have at most two decimal places")
        );
        assert_eq!(
            hundredths(json!(0.001)),
            Err("must have at most two decimal places")
        );
    }

    #[test]
    fn zero_and_negative_percentages_are_refused() {
        assert_eq!(hundredths(json!(0)), Err("must be greater than 0"));
        assert_eq!(hundredths(json!(0.0)), Err("must be greater than 0"));
        assert_eq!(hundredths(json!(-5)), Err("must be greater than 0"));
    }

    #[test]
    fn anything_above_one_hundred_is_refused_even_with_extra_decimals() {
        assert_eq!(hundredths(json!(100.01)), Err("must be at most 100"));
        assert_eq!(hundredths(json!(100.001)), Err("must be at most 100"));
        assert_eq!(hundredths(json!(250)), Err("must be at most 100"));
        assert_eq!(hundredths(json!(1e300)), Err("must be at most 100"));
    }

    #[test]
    fn non_numbers_are_refused() {
        assert_eq!(hundredths(json!("7")), Err("must be a number"));
        assert_eq!(hundredths(json!(null)), Err("must be a number"));
        assert_eq!(Percent::from_decimal_str("7%"), Err("must be a number"));
        assert_eq!(Percent::from_decimal_str(""), Err("must be a number"));
        assert_eq!(Percent::from_decimal_str("."), Err("must be a number"));
    }

    #[test]
    fn decimal_text_with_exponents_and_padding_is_read_exactly() {
        let read = |s| Percent::from_decimal_str(s).map(Percent::hundredths);
        assert_eq!(read("1e1"), Ok(1000));
        assert_eq!(read("1E2"), Ok(10_000));
        assert_eq!(read("125e-1"), Ok(1250));
        assert_eq!(read("007.50"), Ok(750));
        assert_eq!(read("12.2500000000000000000"), Ok(1225));
        assert_eq!(read(" 3 "), Ok(300));
        assert_eq!(read("1e-3"), Err("must have at most two decimal places"));
    }

    #[test]
    fn every_representable_percentage_round_trips_through_json() {
        for h in 1..=FULL {
            let percent = Percent::from_hundredths(h).expect("in range");
            assert_eq!(Percent::from_json(&percent.to_json()), Ok(percent), "{h}");
        }
    }

    #[test]
    fn every_two_decimal_percentage_typed_into_the_editor_reads_back_exactly() {
        // Through serde_json's text parser, as the server receives it.
        for h in 1..=FULL {
            let text = format!("{}.{:02}", h / 100, h % 100);
            let value: Value = serde_json::from_str(&text).expect("json number");
            assert_eq!(hundredths(value), Ok(h), "{text}");
        }
    }

    #[test]
    fn hundredths_outside_one_to_ten_thousand_are_not_percentages() {
        assert_eq!(Percent::from_hundredths(0), None);
        assert_eq!(Percent::from_hundredths(10_001), None);
    }

    #[test]
    fn display_shows_what_an_operator_typed() {
        let show = |h| Percent::from_hundredths(h).expect("in range").to_string();
        assert_eq!(show(700), "7%");
        assert_eq!(show(1250), "12.5%");
        assert_eq!(show(1225), "12.25%");
        assert_eq!(show(5), "0.05%");
    }
}
