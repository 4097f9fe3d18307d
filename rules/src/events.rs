//! The events a webhook may ask for, by the names deliveries carry (docs/webhooks.md). The
//! server checks registrations against this list and the Webhooks page offers it.

pub const WEBHOOK_EVENTS: [&str; 10] = [
    "release.created",
    "stage.started",
    "gate.failed",
    "release.held",
    "release.paused",
    "release.completed",
    "release.rolled_back",
    "line.stopped",
    "freeze.started",
    "freeze.ended",
];
