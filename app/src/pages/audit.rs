//! The audit log: every state change, filterable, and a check of its hash chain.

use leptos::prelude::*;

use crate::api::audit::{list_audit, AuditQuery, VerifyAudit};
use crate::api::error_text;
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

#[component]
pub fn AuditPage() -> impl IntoView {
    let actor = RwSignal::new(String::new());
    let action = RwSignal::new(String::new());
    let target_kind = RwSignal::new(String::new());
    let target_id = RwSignal::new(String::new());
    let since = RwSignal::new(String::new());
    let until = RwSignal::new(String::new());
    let applied = RwSignal::new(AuditQuery::default());
    let events = Resource::new(move || applied.get(), list_audit);
    let verify = ServerAction::<VerifyAudit>::new();
    view! {
        <h1>"Audit log"</h1>
        <p class="muted">
            "Every state change, newest first. Each row is chained to the one before it by a sha256 hash, so an edited, removed or reordered row is detected."
        </p>
        <form class="card form audit-filters" on:submit=move |ev| {
            ev.prevent_default();
            applied.set(AuditQuery {
                actor: non_blank(&actor.get_untracked()),
                action_prefix: non_blank(&action.get_untracked()),
                target_kind: non_blank(&target_kind.get_untracked()),
                target_id: non_blank(&target_id.get_untracked()),
                since: parse_utc_date(&since.get_untracked()),
                until: parse_utc_date(&until.get_untracked()).map(|t| t + 86_400_000),
                limit: Some(200),
            });
        }>
            <label>"Actor" <input bind:value=actor/></label>
            <label>"Action starts with" <input bind:value=action placeholder="release."/></label>
            <label>"Target kind" <input bind:value=target_kind placeholder="pipeline"/></label>
            <label>"Target id" <input bind:value=target_id/></label>
            <label>"From (UTC)" <input type="date" bind:value=since/></label>
            <label>"To (UTC, inclusive)" <input type="date" bind:value=until/></label>
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
            columns=&["#", "Time (UTC)", "Actor", "From", "Action", "Target", "Details"]
            empty="No matching events." let:r>
            <tr>
                <td>{r.seq}</td>
                <td>{format_time(r.at)}</td>
                <td>{r.actor}</td>
                <td class="muted">{r.ip.unwrap_or_default()}</td>
                <th scope="row">{r.action}</th>
                <td>{format!("{} {}", r.target_kind, r.target_id)}</td>
                <td><code class="audit-details">{r.details}</code></td>
            </tr>
        </AsyncTable>
    }
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
}
