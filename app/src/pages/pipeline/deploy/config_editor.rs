//! The config textarea with line numbers that scroll with it.

use leptos::html::{Pre, Textarea};
use leptos::prelude::*;

/// `touched` turns true on the first keystroke: from then on the deployed config no longer
/// overwrites what the operator typed.
#[component]
pub fn ConfigEditor(config: RwSignal<String>, touched: RwSignal<bool>) -> impl IntoView {
    let gutter = NodeRef::<Pre>::new();
    let area = NodeRef::<Textarea>::new();
    let line_numbers = move || {
        let n = config.with(|c| c.lines().count().max(1));
        (1..=n)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let empty = move || (touched.get() && config.with(|c| c.trim().is_empty())).to_string();
    // Browser-only, in an event handler: keep the numbers level with the text.
    let sync_scroll = move |_| {
        if let (Some(g), Some(a)) = (gutter.get(), area.get()) {
            g.set_scroll_top(a.scroll_top());
        }
    };
    view! {
        <label for="config">"Config (YAML)"</label>
        <div class="editor">
            <pre class="gutter" aria-hidden="true" node_ref=gutter>{line_numbers}</pre>
            <textarea id="config" name="config" rows="14" spellcheck="false" node_ref=area
                aria-describedby="config-error"
                prop:value=move || config.get()
                on:input=move |ev| { touched.set(true); config.set(event_target_value(&ev)); }
                on:scroll=sync_scroll
                aria-invalid=empty></textarea>
        </div>
    }
}
