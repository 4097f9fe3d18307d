//! The protocol's few integer fields. JSON has one number type, and the protocol's
//! reference agent is free to write an integer as `3`, `3.0` or `3e0`; all three are the
//! integer 3. A number with a fraction (`3.5`) or beyond `i64` is the wrong type: the field
//! is refused, naming it, as serde refuses a string where a number belongs.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// An integer, however it is written.
pub fn any<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    at_least(d, i64::MIN, "an integer")
}

/// An integer >= 0 (versions, a sample's `limit`).
pub fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    at_least(d, 0, "an integer >= 0")
}

/// An integer > 0 (`pollIntervalMs`).
pub fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    at_least(d, 1, "an integer > 0")
}

/// An optional integer: absent or `null` is `None`.
pub fn option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_option(OptionalWhole)
}

fn at_least<'de, D: Deserializer<'de>>(
    d: D,
    min: i64,
    expected: &'static str,
) -> Result<i64, D::Error> {
    d.deserialize_any(Whole { min, expected })
}

struct Whole {
    min: i64,
    expected: &'static str,
}

impl Whole {
    fn check<E: de::Error>(&self, v: i64) -> Result<i64, E> {
        if v < self.min {
            return Err(E::invalid_value(de::Unexpected::Signed(v), &self.expected));
        }
        Ok(v)
    }
}

/// The first number past `i64::MAX` as an `f64` (`i64::MAX as f64` rounds up to it).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

impl<'de> Visitor<'de> for Whole {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expected)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        self.check(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        let v = i64::try_from(v)
            .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self.expected))?;
        self.check(v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        if v.fract() != 0.0 || !(-TWO_POW_63..TWO_POW_63).contains(&v) {
            return Err(E::invalid_value(de::Unexpected::Float(v), &self.expected));
        }
        // Whole and in range, so the conversion is exact.
        self.check(v as i64)
    }
}

struct OptionalWhole;

impl<'de> Visitor<'de> for OptionalWhole {
    type Value = Option<i64>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<i64>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<i64>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
        any(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    struct Body {
        #[serde(deserialize_with = "non_negative")]
        version: i64,
        #[serde(default, deserialize_with = "option")]
        pid: Option<i64>,
    }

    fn read(json: &str) -> Result<Body, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn an_integer_may_be_written_with_a_zero_fraction_or_an_exponent() {
        for json in [
            r#"{"version": 3}"#,
            r#"{"version": 3.0}"#,
            r#"{"version": 3e0}"#,
            r#"{"version": 0.3e1}"#,
        ] {
            assert_eq!(read(json).map(|b| b.version), Ok(3), "{json}");
        }
        assert_eq!(read(r#"{"version": 1.5e3}"#).map(|b| b.version), Ok(1500));
    }

    #[test]
    fn a_fraction_a_negative_version_or_a_number_beyond_i64_is_refused_as_the_wrong_type() {
        for (json, says) in [
            (
                r#"{"version": 1.5}"#,
                "floating point `1.5`, expected an integer >= 0",
            ),
            (
                r#"{"version": -1}"#,
                "integer `-1`, expected an integer >= 0",
            ),
            (r#"{"version": 1e19}"#, "expected an integer >= 0"),
            (
                r#"{"version": 18446744073709551615}"#,
                "expected an integer >= 0",
            ),
            (r#"{"version": "3"}"#, "invalid type: string"),
        ] {
            let err = read(json).expect_err(json);
            assert!(err.contains(says), "{json}: {err}");
        }
    }

    #[test]
    fn an_optional_integer_may_be_absent_or_null() {
        assert_eq!(read(r#"{"version": 1}"#).map(|b| b.pid), Ok(None));
        assert_eq!(
            read(r#"{"version": 1, "pid": null}"#).map(|b| b.pid),
            Ok(None)
        );
        assert_eq!(
            read(r#"{"version": 1, "pid": 42.0}"#).map(|b| b.pid),
            Ok(Some(42))
        );
        assert!(read(r#"{"version": 1, "pid": 4.2}"#).is_err());
    }
}
