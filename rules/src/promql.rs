//! Reading a Prometheus instant-query answer down to the one number a `customPromQL` gate
//! compares.
//!
//! The SPEC allows a scalar or a vector with exactly one sample; anything else (an error, an
//! empty or multi-sample vector, NaN, infinity, a non-number, a body that is not the
//! Prometheus JSON) is refused with a reason saying which: an empty vector or NaN as no
//! data (the gate is inconclusive), anything else as an error reading the signal. Text
//! taken from outside into a reason goes through `scrub` first, so a credential that found
//! its way into an error string is not repeated on the release page.

use serde_json::Value;

/// Why an answer gave no number: `no_data` for an empty vector or a NaN (what a ratio of
/// two idle rates gives), which a gate reads as inconclusive; anything else is an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct PromQlError {
    pub no_data: bool,
    pub reason: String,
}

impl PromQlError {
    pub fn no_data(reason: impl Into<String>) -> PromQlError {
        PromQlError {
            no_data: true,
            reason: reason.into(),
        }
    }

    pub fn unusable(reason: impl Into<String>) -> PromQlError {
        PromQlError {
            no_data: false,
            reason: reason.into(),
        }
    }
}

impl From<String> for PromQlError {
    fn from(reason: String) -> PromQlError {
        PromQlError::unusable(reason)
    }
}

impl From<&str> for PromQlError {
    fn from(reason: &str) -> PromQlError {
        PromQlError::unusable(reason)
    }
}

/// Reads a Prometheus `/api/v1/query` answer down to one finite number: a scalar, or a
/// vector with exactly one sample. The error says which rule the answer broke.
pub fn parse_promql_response(http_status: u16, body: &str) -> Result<f64, PromQlError> {
    let json: Option<Value> = serde_json::from_str(body).ok();
    if !(200..300).contains(&http_status) {
        return Err(match json.as_ref().and_then(prometheus_error) {
            Some(detail) => format!("Prometheus answered HTTP {http_status} ({detail})"),
            None => format!("Prometheus answered HTTP {http_status}"),
        }
        .into());
    }
    let json = json.ok_or("malformed response: body is not JSON")?;
    match json.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some("error") => {
            let detail = prometheus_error(&json).unwrap_or_else(|| "no detail".into());
            return Err(format!("Prometheus returned an error ({detail})").into());
        }
        _ => return Err("malformed response: no status".into()),
    }
    let data = json.get("data");
    let result = data.and_then(|d| d.get("result"));
    let (Some(kind), Some(result)) = (data.and_then(|d| d.get("resultType")), result) else {
        return Err("malformed response: no data.resultType or data.result".into());
    };
    let pair = match kind.as_str() {
        Some("scalar") => result,
        Some("vector") => match result.as_array().map(Vec::as_slice) {
            None => return Err("malformed response: vector result is not a list".into()),
            Some([]) => return Err(PromQlError::no_data("empty vector: no series matched")),
            Some([sample]) => sample
                .get("value")
                .ok_or("malformed response: vector sample has no value")?,
            Some(many) => return Err(format!("multi-sample vector ({} series)", many.len()).into()),
        },
        Some(other) => {
            return Err(format!(
                "unsupported result type \"{}\": need a scalar or a one-sample vector",
                scrub(other)
            )
            .into())
        }
        None => return Err("malformed response: resultType is not a string".into()),
    };
    sample_value(pair)
}

/// A `[timestamp, "value"]` pair; Prometheus sends the value as a string.
fn sample_value(pair: &Value) -> Result<f64, PromQlError> {
    let text = match pair.as_array().map(Vec::as_slice) {
        Some([_, Value::String(text)]) => text.clone(),
        Some([_, Value::Number(number)]) => number.to_string(),
        _ => return Err("malformed response: sample is not [timestamp, value]".into()),
    };
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(v) if v.is_nan() => Err(PromQlError::no_data("result is NaN")),
        Ok(_) => Err(format!("result {} is not a finite number", scrub(&text)).into()),
        Err(_) => Err(format!("result \"{}\" is not a number", scrub(&text)).into()),
    }
}

/// Prometheus' `errorType: error`, when the body carries them.
fn prometheus_error(json: &Value) -> Option<String> {
    let error = json.get("error").and_then(Value::as_str);
    let kind = json.get("errorType").and_then(Value::as_str);
    let detail = match (kind, error) {
        (Some(kind), Some(error)) => format!("{kind}: {error}"),
        (None, Some(text)) | (Some(text), None) => text.to_owned(),
        (None, None) => return None,
    };
    Some(scrub(&detail))
}

/// Longest reason fragment taken from outside text, so one odd body cannot flood the page.
const MAX_DETAIL_CHARS: usize = 300;

/// Masks URL userinfo (`https://user:pass@host` -> `https://***@host`) and bearer tokens in
/// text that came from outside (error strings, response bodies), then shortens it.
pub(crate) fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(['/', ' ', '?', '#', '"', '\''])
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str("***");
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    let masked = mask_bearer(&out);
    match masked.char_indices().nth(MAX_DETAIL_CHARS) {
        Some((cut, _)) => format!("{}...", &masked[..cut]),
        None => masked,
    }
}

fn mask_bearer(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    match lower.find("bearer ") {
        None => text.to_owned(),
        Some(at) => {
            let token_start = at + "bearer ".len();
            let token_end = text[token_start..]
                .find(char::is_whitespace)
                .map_or(text.len(), |end| token_start + end);
            let rest = mask_bearer(&text[token_end..]);
            format!("{}***{rest}", &text[..token_start])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn ok_body(result_type: &str, result: Value) -> String {
        json!({"status": "success", "data": {"resultType": result_type, "result": result}})
            .to_string()
    }

    fn vector(values: &[&str]) -> String {
        let samples: Vec<Value> = values
            .iter()
            .map(|v| json!({"metric": {"job": "x"}, "value": [1_700_000_000.5, v]}))
            .collect();
        ok_body("vector", json!(samples))
    }

    #[test]
    fn a_scalar_result_is_a_number() {
        let body = ok_body("scalar", json!([1_700_000_000.5, "1.5"]));
        assert_eq!(parse_promql_response(200, &body), Ok(1.5));
    }

    #[test]
    fn a_one_sample_vector_is_a_number() {
        assert_eq!(parse_promql_response(200, &vector(&["0.3"])), Ok(0.3));
    }

    #[test]
    fn an_empty_vector_is_no_data() {
        assert_eq!(
            parse_promql_response(200, &vector(&[])),
            Err(PromQlError::no_data("empty vector: no series matched"))
        );
    }

    #[test]
    fn a_multi_sample_vector_fails_naming_the_series_count() {
        assert_eq!(
            parse_promql_response(200, &vector(&["1", "2", "3"])),
            Err("multi-sample vector (3 series)".into())
        );
    }

    #[test]
    fn matrix_and_string_results_are_unsupported() {
        for kind in ["matrix", "string"] {
            let err = parse_promql_response(200, &ok_body(kind, json!([]))).expect_err(kind);
            assert!(
                err.reason
                    .starts_with(&format!("unsupported result type \"{kind}\"")),
                "{err}"
            );
        }
    }

    #[test]
    fn nan_is_no_data_and_infinite_or_non_numeric_values_are_errors() {
        assert_eq!(
            parse_promql_response(200, &vector(&["NaN"])),
            Err(PromQlError::no_data("result is NaN"))
        );
        assert_eq!(
            parse_promql_response(200, &vector(&["+Inf"])),
            Err("result +Inf is not a finite number".into())
        );
        assert_eq!(
            parse_promql_response(200, &vector(&["-Inf"])),
            Err("result -Inf is not a finite number".into())
        );
        assert_eq!(
            parse_promql_response(200, &vector(&["high"])),
            Err("result \"high\" is not a number".into())
        );
    }

    #[test]
    fn a_prometheus_error_status_fails_with_its_type_and_message() {
        let body =
            json!({"status": "error", "errorType": "bad_data", "error": "parse error at char 4"});
        assert_eq!(
            parse_promql_response(200, &body.to_string()),
            Err("Prometheus returned an error (bad_data: parse error at char 4)".into())
        );
    }

    #[test]
    fn a_non_2xx_answer_fails_naming_the_status_and_prometheus_error() {
        let body = json!({"status": "error", "errorType": "bad_data", "error": "invalid parameter \"query\""});
        assert_eq!(
            parse_promql_response(400, &body.to_string()),
            Err("Prometheus answered HTTP 400 (bad_data: invalid parameter \"query\")".into())
        );
        assert_eq!(
            parse_promql_response(502, "<html>Bad Gateway</html>"),
            Err("Prometheus answered HTTP 502".into())
        );
    }

    #[test]
    fn malformed_responses_fail() {
        let cases = [
            "not json",
            "{}",
            r#"{"status":"success"}"#,
            r#"{"status":"success","data":{"resultType":"scalar"}}"#,
            r#"{"status":"success","data":{"resultType":"scalar","result":"1"}}"#,
            r#"{"status":"success","data":{"resultType":"scalar","result":[1]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":{}}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
            r#"{"status":"success","data":{"resultType":7,"result":[]}}"#,
        ];
        for body in cases {
            let err = parse_promql_response(200, body).expect_err(body);
            assert!(
                err.reason.starts_with("malformed response"),
                "{body}: {err}"
            );
        }
    }

    #[test]
    fn scrub_masks_url_userinfo_and_bearer_tokens() {
        assert_eq!(
            scrub("GET https://admin:s3cret@prom:9090/api failed"),
            "GET https://***@prom:9090/api failed"
        );
        assert_eq!(
            scrub("header Bearer abc.def was refused"),
            "header Bearer *** was refused"
        );
        assert_eq!(
            scrub("http://prom:9090/x?a=b@c"),
            "http://prom:9090/x?a=b@c"
        );
    }

    #[test]
    fn scrub_shortens_overlong_text_on_a_character_boundary() {
        let long = "é".repeat(1000);
        let short = scrub(&long);
        assert_eq!(short.chars().count(), MAX_DETAIL_CHARS + 3);
        assert!(short.ends_with("..."));
    }

    proptest! {
        #[test]
        fn any_finite_single_sample_is_read_back_exactly(v in proptest::num::f64::NORMAL | proptest::num::f64::ZERO) {
            prop_assert_eq!(parse_promql_response(200, &vector(&[&v.to_string()])), Ok(v));
        }

        #[test]
        fn promql_parsing_never_panics_and_only_yields_finite_numbers(
            status in 100u16..600,
            body in ".{0,200}",
        ) {
            if let Ok(v) = parse_promql_response(status, &body) {
                prop_assert!(v.is_finite());
            }
        }
    }
}
