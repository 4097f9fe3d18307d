//! Who is signed in: loaded once by the layout and shared with every page, so a page can
//! hide what the caller's role cannot do. The server refuses those calls anyway; hiding
//! only spares the operator a button that answers 403.

use super::{load, Loads};
use leptos::prelude::*;

use crate::api::accounts::{me, MeView};

/// The caller of this page, or nobody on the sign-in and setup pages (which must not ask
/// the server who is signed in: that answers 401 there).
#[derive(Clone, Copy)]
pub struct Session(Option<Loads<MeView>>);

impl Session {
    /// Loads the caller once for the page and shares it with every component below.
    pub fn provide() -> Self {
        let session = Self(Some(load(|| (), |_| me())));
        provide_context(session);
        session
    }

    /// The caller's roles. Await it only inside a `Suspense`/`Transition` (or inside another
    /// resource's fetcher): reading a resource outside one stalls server rendering.
    pub async fn roles(self) -> Roles {
        match self.0 {
            Some(r) => Roles(r.await.ok()),
            None => Roles(None),
        }
    }
}

/// The session the layout provided (nobody outside it).
pub fn use_session() -> Session {
    use_context::<Session>().unwrap_or(Session(None))
}

/// What the caller may do; nobody may do anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles(Option<MeView>);

impl Roles {
    /// Whether the caller holds at least `role` in `environment_id` (`*`: every environment).
    pub fn can(&self, role: &str, environment_id: &str) -> bool {
        self.0.as_ref().is_some_and(|m| m.can(role, environment_id))
    }

    /// The signed-in email (or `token:<name>`), if anyone is signed in.
    pub fn name(&self) -> Option<String> {
        self.0.as_ref().map(|m| m.name.clone())
    }
}

/// Shows `children` only to a caller holding `role` in `env` (`*`: every environment).
#[component]
pub fn Can(
    #[prop(into)] role: String,
    #[prop(into)] env: String,
    children: ChildrenFn,
) -> impl IntoView {
    let session = use_session();
    let allowed = StoredValue::new((role, env));
    view! {
        <Transition fallback=|| ()>
            {move || {
                let children = children.clone();
                Suspend::new(async move {
                    let roles = session.roles().await;
                    allowed
                        .with_value(|(role, env)| roles.can(role, env))
                        .then(|| children())
                })
            }}
        </Transition>
    }
}
