//! What the agent answers when an operator asks this node something over the live channel
//! (`sample_request`, `tap_start`): events of a pipeline's components and the fields they
//! showed. A simulated node (`--simulate`) answers with plausible generated events, so the
//! whole flow can be tried without Vector; a node running a real command says it cannot
//! sample its process (Vector's own `tap` needs its API, which vf-agent does not drive yet).
//! The agent sends the answers (`/api/agent/samples`, `/api/agent/tap-events`); nothing
//! here touches the network.

use serde_json::{json, Map, Value};
use vf_protocol::{SampleRequest, SampleResult, SchemaField};

/// Events a sample answer carries per component, at most (the server keeps 100).
pub const MAX_SAMPLE: i64 = 100;
/// Why a node running a command answers no events.
pub const CANNOT_SAMPLE: &str =
    "this agent runs its pipelines as a command and cannot sample their events; \
     run vf-agent with --simulate to try sampling";

/// Generated events of one component: log lines as a web server's access log would give
/// them, numbered from `seq`.
pub fn simulated_events(
    hostname: &str,
    component_key: &str,
    count: i64,
    seq: u64,
    now_ms: i64,
) -> Vec<Value> {
    const PATHS: [&str; 4] = ["/", "/api/orders", "/api/users/42", "/health"];
    const STATUSES: [i64; 5] = [200, 200, 201, 404, 500];
    (0..count.clamp(0, MAX_SAMPLE) as u64)
        .map(|i| {
            let n = seq + i;
            let path = PATHS[(n % PATHS.len() as u64) as usize];
            let status = STATUSES[(n % STATUSES.len() as u64) as usize];
            json!({
                "message": format!("GET {path} HTTP/1.1 {status}"),
                "timestamp": rfc3339(now_ms - (count as u64 - i) as i64 * 250),
                "host": hostname,
                "component": component_key,
                "status": status,
                "duration_ms": 3.5 + (n % 7) as f64,
                "tags": { "env": "simulated" },
            })
        })
        .collect()
}

/// The answers to `request`: per component, `limit` generated events with their schema
/// when `simulated`, else an error saying why there are none.
pub fn sample_answers(
    request: &SampleRequest,
    simulated: bool,
    hostname: &str,
    now_ms: i64,
) -> Vec<SampleResult> {
    request
        .component_keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let mut result = SampleResult {
                request_id: request.request_id.clone(),
                component_key: key.clone(),
                ..SampleResult::default()
            };
            if simulated {
                let events = simulated_events(hostname, key, request.limit, i as u64, now_ms);
                result.schema = Some(schema_of(&events));
                result.events = Some(events);
            } else {
                result.error = Some(CANNOT_SAMPLE.to_owned());
            }
            result
        })
        .collect()
}

/// Every field the events showed, by path (`.tags.env`), with its JSON type and the first
/// value seen; nested objects are walked, arrays are one field.
pub fn schema_of(events: &[Value]) -> Vec<SchemaField> {
    fn walk(prefix: &str, map: &Map<String, Value>, out: &mut Vec<SchemaField>) {
        for (key, value) in map {
            let path = format!("{prefix}.{key}");
            if let Value::Object(inner) = value {
                walk(&path, inner, out);
                continue;
            }
            if out.iter().any(|f| f.path == path) {
                continue;
            }
            let kind = match value {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
                Value::Number(_) => "float",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            out.push(SchemaField {
                path,
                kind: kind.to_owned(),
                sample: Some(value.clone()),
            });
        }
    }
    let mut out = Vec::new();
    for event in events {
        if let Value::Object(map) = event {
            walk("", map, &mut out);
        }
    }
    out
}

/// Now, in unix milliseconds: the time generated events carry.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Unix milliseconds as an RFC 3339 UTC time with milliseconds (`2026-12-06T21:40:00.250Z`);
/// times before 1970 read as 1970.
pub fn rfc3339(unix_ms: i64) -> String {
    let since_epoch = std::time::Duration::from_millis(u64::try_from(unix_ms).unwrap_or(0));
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + since_epoch).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_796_420_096_250), "2026-12-04T21:34:56.250Z");
    }

    #[test]
    fn a_simulated_node_answers_every_component_with_events_and_their_schema() {
        let request = SampleRequest {
            request_id: "r1".into(),
            pipeline_id: "p1".into(),
            component_keys: vec!["in".into(), "out".into()],
            limit: 3,
        };
        let answers = sample_answers(&request, true, "sim-1", 1_000_000);
        assert_eq!(answers.len(), 2);
        let first = &answers[0];
        assert_eq!(
            (first.request_id.as_str(), first.component_key.as_str()),
            ("r1", "in")
        );
        let events = first.events.as_ref().expect("events");
        assert_eq!(events.len(), 3);
        assert_eq!(events[0]["host"], "sim-1");
        let schema = first.schema.as_ref().expect("schema");
        let field = |path: &str| {
            schema
                .iter()
                .find(|f| f.path == path)
                .map(|f| f.kind.as_str())
        };
        assert_eq!(field(".message"), Some("string"));
        assert_eq!(field(".status"), Some("integer"));
        assert_eq!(field(".duration_ms"), Some("float"));
        assert_eq!(field(".tags.env"), Some("string"));
        assert_eq!(field(".tags"), None, "objects are walked, not listed");
    }

    #[test]
    fn a_node_running_a_command_says_why_it_sends_no_events() {
        let request = SampleRequest {
            request_id: "r1".into(),
            pipeline_id: "p1".into(),
            component_keys: vec!["in".into()],
            limit: 500,
        };
        let answers = sample_answers(&request, false, "h", 0);
        assert_eq!(answers[0].error.as_deref(), Some(CANNOT_SAMPLE));
        assert_eq!(answers[0].events, None);
        assert_eq!(
            simulated_events("h", "in", 500, 0, 0).len(),
            MAX_SAMPLE as usize
        );
    }
}
