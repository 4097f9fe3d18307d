//! Keeping keyboard focus on the control that moved, after the view has re-rendered.

use leptos::prelude::*;
use leptos::wasm_bindgen::JsCast;

/// Focuses the first enabled button among `ids` on the next frame (the list re-renders
/// before it). Browser-only: call it from event handlers.
pub fn focus_later(ids: Vec<String>) {
    request_animation_frame(move || {
        let doc = document();
        let target = ids.iter().find_map(|id| {
            let button = doc
                .get_element_by_id(id)?
                .dyn_into::<leptos::web_sys::HtmlButtonElement>()
                .ok()?;
            (!button.disabled()).then_some(button)
        });
        if let Some(button) = target {
            // Focus can only fail on a detached element; there is nothing to do then.
            let _ = button.focus();
        }
    });
}
