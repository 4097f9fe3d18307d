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
    fn remaining_time_rounds_up_to_whole_seconds() {
        assert_eq!(format_remaining(29_001), "0:30");
        assert_eq!(format_remaining(90_000), "1:30");
        assert_eq!(format_remaining(3_600_000), "1:00:00");
        assert_eq!(format_remaining(-5), "0:00");
    }
}
