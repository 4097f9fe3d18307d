//! What the server makes of an agent's numbers. The protocol sends every measurement as a
//! JSON number, fractional or not (`vf_protocol`'s module doc); here each becomes what is
//! stored, or is ignored for its field when it cannot be used. An ignored value never
//! refuses the heartbeat: the rest of it is kept, the field is named in a warning and counted
//! in `vectorflow_agent_values_ignored_total{field}`.
//!
//! | field | stored as | ignored when |
//! |---|---|---|
//! | pipeline counters (`eventsIn`, `eventsOut`, `errorsTotal`, `eventsDiscarded`, `bytesIn`, `bytesOut`) | an integer as sent; a fraction rounded to the nearest whole number (half away from zero) | negative, or past `i64::MAX` (2^63 - 1) |
//! | pipeline `uptimeSeconds` | whole seconds, rounded down | negative, or 2^63 or more |
//! | `spansIn`, `spansOut`, `tracesIn`, `utilization` | checked, not stored | negative |
//! | `componentMetrics[]` numbers, `hostMetrics`, `agentHealth` counters and uptime | the number as sent (`1.5e3` as `1500`) | negative |
//!
//! Counters are rounded, not cut, because a float counter that should read 3 may arrive as
//! 2.9999999. Gates add the rounded values ([`super::Counters`]).

use vf_protocol::Number;

/// The first number past `i64::MAX` as an `f64`.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// A counter as the gates add it: an integer as sent, a fraction rounded to the nearest
/// whole number.
pub fn counter(v: &Number) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return (i >= 0).then_some(i);
    }
    if v.is_u64() {
        return None; // past i64::MAX
    }
    let rounded = v.as_f64()?.round();
    // Whole and in range, so the conversion is exact. `-0.0 >= 0.0` holds: -0 is zero.
    (0.0..TWO_POW_63)
        .contains(&rounded)
        .then_some(rounded as i64)
}

/// A duration in whole seconds, rounded down.
pub fn whole_seconds(v: &Number) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return (i >= 0).then_some(i);
    }
    let floored = v.as_f64()?.floor();
    (0.0..TWO_POW_63)
        .contains(&floored)
        .then_some(floored as i64)
}

/// An amount that is never negative (bytes, load, seconds): kept as sent, a whole fraction
/// (`1.5e3`) written as the integer it is, so stored JSON reads `1500`, not `1500.0`.
pub fn amount(v: &Number) -> Option<Number> {
    if v.as_f64()? < 0.0 {
        return None;
    }
    if v.is_f64() {
        if let Some(whole) = counter(v).filter(|w| *w as f64 == v.as_f64().unwrap_or(-1.0)) {
            return Some(Number::from(whole));
        }
    }
    Some(v.clone())
}

/// The values of one heartbeat that could not be used: where, and what was sent.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Ignored {
    pub values: Vec<(String, Number)>,
}

impl Ignored {
    /// `value` made usable by `usable`; when it cannot be, `None`, and `field()` is noted.
    pub fn take<T>(
        &mut self,
        field: impl FnOnce() -> String,
        value: Option<&Number>,
        usable: fn(&Number) -> Option<T>,
    ) -> Option<T> {
        let value = value?;
        let kept = usable(value);
        if kept.is_none() {
            self.values.push((field(), value.clone()));
        }
        kept
    }

    /// The usable ones of `amounts` ([`amount`]), by protocol name, as a JSON object; an
    /// unusable one is noted under `prefix` and its name (`hostMetrics.loadAvg1`).
    pub fn amounts<'n>(
        &mut self,
        prefix: &str,
        amounts: impl IntoIterator<Item = (&'static str, Option<&'n Number>)>,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut kept = serde_json::Map::new();
        for (name, value) in amounts {
            if let Some(v) = self.take(|| format!("{prefix}{name}"), value, amount) {
                kept.insert(name.into(), v.into());
            }
        }
        kept
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// For the log line: `pipelines[0].eventsIn = -5, hostMetrics.loadAvg1 = -1`.
    pub fn describe(&self) -> String {
        self.values
            .iter()
            .map(|(field, value)| format!("{field} = {value}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The metric label of each ignored value: its field with indexes left out
    /// (`pipelines[].eventsIn`), so the label set stays as small as the protocol.
    pub fn labels(&self) -> impl Iterator<Item = String> + '_ {
        self.values.iter().map(|(field, _)| label_of(field))
    }
}

/// `pipelines[12].componentMetrics[3].sentBytes` -> `pipelines[].componentMetrics[].sentBytes`.
pub fn label_of(field: &str) -> String {
    let mut label = String::with_capacity(field.len());
    let mut in_index = false;
    for c in field.chars() {
        match c {
            '[' => {
                in_index = true;
                label.push('[');
            }
            ']' => {
                in_index = false;
                label.push(']');
            }
            _ if in_index => {}
            c => label.push(c),
        }
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(json: &str) -> Number {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn counters_keep_integers_exact_and_round_fractions_to_the_nearest_whole_number() {
        assert_eq!(counter(&n("9223372036854775807")), Some(i64::MAX));
        assert_eq!(counter(&n("2.9999999")), Some(3));
        assert_eq!(counter(&n("1.5e3")), Some(1500));
        assert_eq!(counter(&n("0.4")), Some(0));
        assert_eq!(counter(&n("2.5")), Some(3));
        assert_eq!(counter(&n("-0")), Some(0));
    }

    #[test]
    fn a_negative_counter_or_one_beyond_i64_cannot_be_used() {
        for json in [
            "-1",
            "-0.6",
            "9223372036854775808",
            "18446744073709551615",
            "9.3e18",
            "1e308",
        ] {
            assert_eq!(counter(&n(json)), None, "{json}");
        }
        assert_eq!(counter(&n("9.2e18")), Some(9_200_000_000_000_000_000));
    }

    #[test]
    fn seconds_round_down() {
        assert_eq!(whole_seconds(&n("0.117464567")), Some(0));
        assert_eq!(whole_seconds(&n("59.99")), Some(59));
        assert_eq!(whole_seconds(&n("-1")), None);
    }

    #[test]
    fn amounts_are_kept_as_sent_with_whole_fractions_written_as_integers() {
        assert_eq!(amount(&n("0.42")), Some(n("0.42")));
        assert_eq!(
            amount(&n("1.5e3")).map(|v| v.to_string()),
            Some("1500".into())
        );
        assert_eq!(amount(&n("1e300")).and_then(|v| v.as_f64()), Some(1e300));
        assert_eq!(amount(&n("-0.5")), None);
    }

    #[test]
    fn ignored_values_are_named_and_labelled_without_indexes() {
        let mut ignored = Ignored::default();
        let kept = ignored.take(|| "pipelines[3].eventsIn".into(), Some(&n("-5")), counter);
        assert_eq!(kept, None);
        assert_eq!(ignored.take(|| "x".into(), Some(&n("4")), counter), Some(4));
        assert_eq!(ignored.take(|| "y".into(), None, counter), None);
        assert_eq!(ignored.describe(), "pipelines[3].eventsIn = -5");
        assert_eq!(
            label_of("pipelines[12].componentMetrics[3].sentBytes"),
            "pipelines[].componentMetrics[].sentBytes"
        );
        assert_eq!(
            ignored.labels().collect::<Vec<_>>(),
            ["pipelines[].eventsIn"]
        );
    }
}
