//! The audit log: every state change, filterable, and a check of its hash chain.

use crate::components::load;
use leptos::prelude::*;

use crate::api::audit::{list_audit, AuditQuery, VerifyAudit};
use crate::api::error_text;
use leptos_router::hooks::{use_navigate, use_query_map};

use crate::components::{non_blank, AsyncTable, ErrorBox};
use crate::types::format_time;

/// Midnight UTC of a `YYYY-MM-DD` date, in ms; None unless the text is such a date.
pub fn parse_utc_date(text: &str) -> Option<i64> {
    let mut parts = text.trim().splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days-from-civil (Howard Hinnant's algorithm), the inverse of `format_time`'s.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some((era * 146_097 + doe - 719_468) * 86_400_000)
}

/// The filters as the URL keeps them (`/audit?actor=ann&action=release.&from=2026-12-01`),
/// so a filtered view can be shared and survives a reload.
const FILTERS: [(&str, &str); 6] = [
    ("actor", "Actor"),
    ("action", "Action starts with"),
    ("kind", "Target kind"),
    ("target", "Target id"),
    ("from", "From (UTC)"),
    ("to", "To (UTC, inclusive)"),
];

/// The query of a URL's filters.
pub fn audit_query(get: impl Fn(&str) -> Option<String>) -> AuditQuery {
    let text = |key: &str| get(key).and_then(|v| non_blank(&v));
    AuditQuery {
        actor: text("actor"),
        action_prefix: text("action"),
        target_kind: text("kind"),
        target_id: text("target"),
        since: text("from").and_then(|d| parse_utc_date(&d)),
        until: text("to")
            .and_then(|d| parse_utc_date(&d))
            .map(|t| t + 86_400_000),
        limit: Some(200),
    }
}

/// A stored details document as fields people read: top-level keys alphabetically, strings
/// unquoted, empty values left out, anything nested as compact JSON (cut at 300 characters).
pub fn detail_fields(details: &str) -> Vec<(String, String)> {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(details)
    else {
        return vec![("details".into(), details.to_owned())];
    };
    map.into_iter()
        .filter_map(|(key, value)| {
            let text = match value {
                serde_json::Value::Null => return None,
                serde_json::Value::String(s) if s.is_empty() => return None,
                serde_json::Value::Array(a) if a.is_empty() => return None,
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            let text = if text.chars().count() > 300 {
                format!("{}...", text.chars().take(300).collect::<String>())
            } else {
                text
            };
            Some((crate::components::human(&words(&key)), text))
        })
        .collect()
}

/// `operatorReason` -> `operator reason`.
fn words(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push(' ');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Where a target's page is, when it has one.
fn target_href(kind: &str, id: &str) -> Option<String> {
    match kind {
        "pipeline" => Some(format!("/pipelines/{id}")),
        _ => None,
    }
}

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let navigate = use_navigate();
    let fields: Vec<(&'static str, &'static str, RwSignal<String>)> = FILTERS
        .iter()
        .map(|(key, label)| {
            let value = query.with_untracked(|q| q.get(key)).unwrap_or_default();
            (*key, *label, RwSignal::new(value))
        })
        .collect();
    let events = load(
        move || query.with(|q| audit_query(|key| q.get(key))),
        list_audit,
    );
    let verify = ServerAction::<VerifyAudit>::new();
    let signals = fields.clone();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let params: Vec<String> = (signals.iter())
            .filter_map(|(key, _, value)| {
                let value = non_blank(&value.get_untracked())?;
                Some(format!("{key}={}", urlencoding(&value)))
            })
            .collect();
        navigate(&format!("/audit?{}", params.join("&")), Default::default());
    };
    view! {
        <h1>"Audit log"</h1>
        <p class="muted">
            "Every state change, newest first. Each row is chained to the one before it by a sha256 hash, so an edited, removed or reordered row is detected."
        </p>
        <form class="card form audit-filters" on:submit=submit>
            {fields.into_iter().map(|(key, label, value)| {
                let kind = if matches!(key, "from" | "to") { "date" } else { "text" };
                let placeholder = match key { "action" => "release.", "kind" => "pipeline", _ => "" };
                view! { <label>{label} " " <input type=kind name=key placeholder=placeholder bind:value=value/></label> }
            }).collect_view()}
            <button type="submit">"Filter"</button>
        </form>
        <div class="audit-verify">
            <button on:click=move |_| { verify.dispatch(VerifyAudit {}); } disabled=move || verify.pending().get()>
                "Verify chain"
            </button>
            {move || verify.value().get().map(|r| match r {
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
                Ok(v) => match v.broken_seq {
                    None => view! {
                        <p class="verify-ok" role="status" data-testid="audit-verify">
                            {format!("Chain intact: {} events verified.", v.events)}
                        </p>
                    }.into_any(),
                    Some(seq) => view! {
                        <p class="verify-broken" role="alert" data-testid="audit-verify">
                            {format!("Chain broken at event #{seq}: {}", v.reason.unwrap_or_default())}
                        </p>
                    }.into_any(),
                },
            })}
        </div>
        <AsyncTable resource=events class="grid audit" testid="audit-table"
            columns=&["#", "Time (UTC)", "Actor", "Environment", "Action", "Target", "Details"]
            empty="No matching events." let:r>
            <tr data-action=r.action.clone()>
                <td>{r.seq}</td>
                <td>{format_time(r.at)}</td>
                <td>{r.actor}{r.ip.map(|ip| view! { <div class="muted small">{ip}</div> })}</td>
                <td>{r.environment.unwrap_or_default()}</td>
                <th scope="row">{r.action.clone()}</th>
                <td data-testid="audit-target" title=format!("{} {}", r.target_kind, r.target_id)>
                    <span class="muted small">{r.target_kind.replace('_', " ")}" "</span>
                    {match (r.target_name, target_href(&r.target_kind, &r.target_id)) {
                        (Some(name), Some(href)) => view! { <a href=href>{name}</a> }.into_any(),
                        (Some(name), None) => view! { <span>{name}</span> }.into_any(),
                        (None, _) => view! { <span class="mono small">{r.target_id.clone()}</span> }.into_any(),
                    }}
                </td>
                <td>
                    <dl class="audit-details">
                        {detail_fields(&r.details).into_iter().map(|(k, v)| view! {
                            <dt>{k}</dt><dd>{v}</dd>
                        }).collect_view()}
                    </dl>
                </td>
            </tr>
        </AsyncTable>
    }
}

/// Percent-encodes a query value (letters, digits and `-_.~` stay).
fn urlencoding(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_to_utc_midnight_and_round_trip_through_format_time() {
        assert_eq!(parse_utc_date("1970-01-01"), Some(0));
        assert_eq!(parse_utc_date("2023-11-14"), Some(1_699_920_000_000));
        let t = parse_utc_date("2024-02-29").unwrap();
        assert!(
            format_time(t).starts_with("2024-02-29"),
            "{}",
            format_time(t)
        );
        assert_eq!(parse_utc_date("2024-13-01"), None);
        assert_eq!(parse_utc_date("yesterday"), None);
    }

    #[test]
    fn filters_read_from_the_url_and_details_read_as_fields() {
        let q = audit_query(|key| match key {
            "actor" => Some("ann@example.com".into()),
            "action" => Some(" release. ".into()),
            "from" => Some("2023-11-14".into()),
            "to" => Some("2023-11-14".into()),
            _ => None,
        });
        assert_eq!(q.actor.as_deref(), Some("ann@example.com"));
        assert_eq!(q.action_prefix.as_deref(), Some("release."));
        assert_eq!(q.since, Some(1_699_920_000_000));
        assert_eq!(q.until, Some(1_699_920_000_000 + 86_400_000));
        assert_eq!(q.target_kind, None);
        assert_eq!(urlencoding("a b&c"), "a%20b%26c");

        let fields = detail_fields(
            r#"{"pipelineId":"p1","operatorReason":"customer escalation","gateResults":null,"stage":2,"plan":{"stages":[]}}"#,
        );
        assert_eq!(
            fields,
            [
                (
                    "Operator reason".to_string(),
                    "customer escalation".to_string()
                ),
                ("Pipeline id".to_string(), "p1".to_string()),
                ("Plan".to_string(), "{\"stages\":[]}".to_string()),
                ("Stage".to_string(), "2".to_string()),
            ]
        );
        assert_eq!(
            detail_fields("not json"),
            [("details".to_string(), "not json".to_string())]
        );
    }
}
