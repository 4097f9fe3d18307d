//! How to release: deploy to everyone now, a plan-less canary, or a staged rollout.

use leptos::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Direct,
    Canary,
    Progressive,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Direct, Mode::Canary, Mode::Progressive];

    /// The radio's accessible name.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Direct => "Deploy now",
            Mode::Canary => "Canary",
            Mode::Progressive => "Progressive Rollout",
        }
    }

    fn value(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Canary => "canary",
            Mode::Progressive => "progressive",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Mode::Direct => "Publishes the config as a new version and deploys it to every node the pipeline's node selector admits.",
            Mode::Canary => "Publishes a new version to a slice of the fleet; every other node keeps the deployed version until you broaden or roll back.",
            Mode::Progressive => "Publishes a new version stage by stage: each stage adds nodes, bakes, then its gates decide whether the rollout continues.",
        }
    }

    pub fn submit_text(self) -> &'static str {
        match self {
            Mode::Direct => "Deploy now",
            Mode::Canary => "Start canary",
            Mode::Progressive => "Start rollout",
        }
    }

    /// The status shown once the release exists (direct deploys say their version).
    pub fn started_text(self) -> &'static str {
        match self {
            Mode::Direct => "Deployed",
            Mode::Canary => "Canary started",
            Mode::Progressive => "Rollout started",
        }
    }
}

/// Native radios in one group: arrow keys move between them, Space selects.
#[component]
pub fn ModeChoice(mode: RwSignal<Mode>) -> impl IntoView {
    view! {
        <fieldset class="modes" role="radiogroup" aria-describedby="deploy-mode-hint">
            <legend>"Release as"</legend>
            <div class="mode-options">
                {Mode::ALL.into_iter().map(|m| view! {
                    <label class="check mode-option">
                        <input type="radio" name="deploy-mode" value=m.value()
                            checked=move || mode.get() == m
                            on:change=move |_| mode.set(m)/>
                        {m.label()}
                    </label>
                }).collect_view()}
            </div>
            <p class="hint" id="deploy-mode-hint">{move || mode.get().hint()}</p>
        </fieldset>
    }
}
