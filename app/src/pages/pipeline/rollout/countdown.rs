//! The bake countdown: server-rendered from the server's clock, then ticking every second
//! in the browser (gloo-timers) until the next refresh replaces it. Fixed-width digits, so
//! nothing jumps while it ticks.

use leptos::prelude::*;

/// `m:ss` (or `h:mm:ss`) for a non-negative number of milliseconds.
pub fn format_remaining(ms: i64) -> String {
    let s = (ms.max(0) + 999) / 1000;
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// How long a release has run: `elapsed 12:04` in flight, `elapsed 40:00, held for 3:10`
/// while held for an operator (since its last transition), `took 1:02:03` once finished.
pub fn timing_text(
    status: Option<vf_rules::ReleaseStatus>,
    paused: bool,
    (created_at, updated_at, completed_at): (i64, i64, Option<i64>),
    now: i64,
) -> String {
    let elapsed = format_remaining(now - created_at);
    match (completed_at, status) {
        (Some(done), _) => format!("took {}", format_remaining(done - created_at)),
        (None, Some(vf_rules::ReleaseStatus::HealthCheck)) if !paused => format!(
            "elapsed {elapsed}, held for {}",
            format_remaining(now - updated_at)
        ),
        _ => format!("elapsed {elapsed}"),
    }
}

#[component]
pub fn Countdown(deadline: i64, now: i64) -> impl IntoView {
    let elapsed = RwSignal::new(0i64);
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        {
            let interval = gloo_timers::callback::Interval::new(1_000, move || {
                elapsed.update(|e| *e += 1_000);
            });
            let interval = send_wrapper::SendWrapper::new(interval);
            on_cleanup(move || drop(interval));
        }
    });
    let remaining = move || deadline - now - elapsed.get();
    view! {
        <span class="countdown" data-testid="bake-countdown" aria-live="off">
            {move || {
                let r = remaining();
                if r > 0 { format!("bake ends in {}", format_remaining(r)) } else { "bake over, gates evaluating".to_string() }
            }}
        </span>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_says_elapsed_held_for_and_took() {
        use vf_rules::ReleaseStatus as S;
        let t = (1_000_000, 1_000_000 + 600_000, None);
        let now = 1_000_000 + 800_000;
        assert_eq!(
            timing_text(Some(S::CanaryDeployed), false, t, now),
            "elapsed 13:20"
        );
        assert_eq!(
            timing_text(Some(S::HealthCheck), false, t, now),
            "elapsed 13:20, held for 3:20"
        );
        assert_eq!(
            timing_text(Some(S::HealthCheck), true, t, now),
            "elapsed 13:20"
        );
        let done = (1_000_000, 0, Some(1_000_000 + 3_723_000));
        assert_eq!(
            timing_text(Some(S::Broadened), false, done, now),
            "took 1:02:03"
        );
    }

    #[test]
    fn remaining_time_rounds_up_to_whole_seconds() {
        assert_eq!(format_remaining(29_001), "0:30");
        assert_eq!(format_remaining(90_000), "1:30");
        assert_eq!(format_remaining(3_600_000), "1:00:00");
        assert_eq!(format_remaining(-5), "0:00");
    }
}
