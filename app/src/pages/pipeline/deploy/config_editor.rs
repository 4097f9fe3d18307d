//! The config textarea with line numbers that scroll with it. YAML that does not parse is
//! marked as the operator types: its line number turns red and the problem is said under
//! the editor, by the same check the server runs (`vf_rules::check_config_yaml`).

use leptos::html::{Pre, Textarea};
use leptos::prelude::*;

/// `touched` turns true on the first keystroke: from then on the deployed config no longer
/// overwrites what the operator typed.
#[component]
pub fn ConfigEditor(config: RwSignal<String>, touched: RwSignal<bool>) -> impl IntoView {
    let gutter = NodeRef::<Pre>::new();
    let area = NodeRef::<Textarea>::new();
    let problem = Memo::new(move |_| {
        config.with(|c| {
            (!c.trim().is_empty())
                .then(|| vf_rules::check_config_yaml(c).err())
                .flatten()
        })
    });
    let line_numbers = move || {
        let n = config.with(|c| c.lines().count().max(1));
        let bad = problem.with(|p| p.as_ref().map(|p| p.line));
        (1..=n.max(bad.unwrap_or(0)))
            .map(|i| {
                let marked = bad == Some(i);
                view! {
                    <span class:bad-line=marked data-testid=marked.then_some("config-error-line")>{i.to_string()}</span>
                    "\n"
                }
            })
            .collect_view()
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
                aria-invalid=move || (empty() == "true" || problem.with(Option::is_some)).to_string()></textarea>
        </div>
        {move || problem.get().map(|p| view! {
            <p class="field-error" id="config-error" data-testid="config-problem">{format!("Config (YAML): {p}")}</p>
        })}
    }
}
