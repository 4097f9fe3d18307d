//! `/users`: operator accounts with their role in each environment, and the API tokens of
//! automation. For admins of every environment (the server refuses anyone else).

mod tokens;

use crate::components::{load, Loads};
use leptos::prelude::*;

use crate::api::accounts::{
    list_users, CreateUser, GrantView, RevokeUserSessions, SetUserDisabled, SetUserGrants,
    SetUserPassword, UserView,
};
use crate::api::error_text;
use crate::api::fleet::list_environments;
use crate::components::{Can, ErrorBox, Loaded, Table};
use crate::types::{format_time, EnvironmentView};
use tokens::ApiTokens;

/// How an environment id reads on this page: its name, `*` as every environment.
pub fn environment_label(envs: &[EnvironmentView], id: &str) -> String {
    if id == "*" {
        return "All environments".into();
    }
    envs.iter()
        .find(|e| e.id == id)
        .map(|e| e.name.clone())
        .unwrap_or_else(|| id.to_string())
}

/// The options of an environment select: every environment first, then each by name.
fn environment_options(envs: &[EnvironmentView]) -> impl IntoView {
    let each = envs
        .iter()
        .map(|e| view! { <option value=e.id.clone()>{e.name.clone()}</option> })
        .collect_view();
    view! { <option value="*" selected>"All environments"</option> {each} }
}

type Environments = Loads<Vec<EnvironmentView>>;

#[derive(Clone, Copy)]
struct UserActions {
    disable: ServerAction<SetUserDisabled>,
    revoke: ServerAction<RevokeUserSessions>,
    grants: ServerAction<SetUserGrants>,
    password: ServerAction<SetUserPassword>,
}

#[component]
pub fn UsersPage() -> impl IntoView {
    let create = ServerAction::<CreateUser>::new();
    let actions = UserActions {
        disable: ServerAction::new(),
        revoke: ServerAction::new(),
        grants: ServerAction::new(),
        password: ServerAction::new(),
    };
    let envs: Environments = load(|| (), |_| list_environments());
    let users = load(
        move || {
            (
                create.version().get(),
                actions.disable.version().get(),
                actions.revoke.version().get(),
                actions.grants.version().get(),
            )
        },
        // The environments name the users' grants (their ids when they cannot be listed).
        move |_| async move {
            let users = list_users().await?;
            Ok((users, envs.await.unwrap_or_default()))
        },
    );
    view! {
        <h1>"Users and API tokens"</h1>
        <section aria-labelledby="users-title">
            <h2 id="users-title">"Users"</h2>
            <Loaded resource=users let((users, envs))>
                <UsersTable users envs actions/>
            </Loaded>
            {move || actions.disable.value().get().and_then(|r| r.err()).map(|e| view! { <ErrorBox message=error_text(&e)/> })}
            {move || actions.grants.value().get().map(|r| match r {
                Ok(u) => view! { <p class="ok" role="status">{format!("Roles of {} saved.", u.email)}</p> }.into_any(),
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
            {move || actions.password.value().get().map(|r| match r {
                Ok(()) => view! { <p class="ok" role="status">"Password set; the user was signed out everywhere."</p> }.into_any(),
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
            {move || actions.revoke.value().get().map(|r| match r {
                Ok(n) => view! { <p class="ok" role="status">{format!("Signed out of {}.", crate::types::plural(n as i64, "session"))}</p> }.into_any(),
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
            <Can role="admin" env="*">
                <Loaded resource=envs hide_loading=true hide_errors=true let:envs>
                    <NewUserForm envs create/>
                </Loaded>
            </Can>
        </section>
        <ApiTokens envs/>
    }
}

#[component]
fn UsersTable(
    users: Vec<UserView>,
    envs: Vec<EnvironmentView>,
    actions: UserActions,
) -> impl IntoView {
    view! {
        <Table rows=users testid="users-table"
            columns=&["Email", "Roles", "State", "Created"] actions=true let:u>
            <UserRow u envs=envs.clone() actions/>
        </Table>
    }
}

#[component]
fn UserRow(u: UserView, envs: Vec<EnvironmentView>, actions: UserActions) -> impl IntoView {
    let id = StoredValue::new(u.id.clone());
    let email = StoredValue::new(u.email.clone());
    let disabled = u.disabled;
    let grants = StoredValue::new(u.grants.clone());
    let new_role = RwSignal::new("viewer".to_string());
    let new_env = RwSignal::new("*".to_string());
    let env_options = environment_options(&envs);
    let roles = if u.grants.is_empty() {
        view! { <span class="muted">"none"</span> }.into_any()
    } else {
        view! {
            <ul class="plain">
                {u.grants.iter().map(|g: &GrantView| view! {
                    <li>{format!("{} in {}", g.role, environment_label(&envs, &g.environment_id))}</li>
                }).collect_view()}
            </ul>
        }
        .into_any()
    };
    view! {
        <tr data-user=u.email.clone()>
            <th scope="row">{u.email.clone()}</th>
            <td>
                {roles}
                <form class="form inline grant-edit" aria-label=format!("Roles of {}", u.email) on:submit=move |ev| {
                    ev.prevent_default();
                    let env = new_env.get_untracked();
                    let role = new_role.get_untracked();
                    let mut next = grants.get_value();
                    next.retain(|g| g.environment_id != env);
                    if role != "none" {
                        next.push(GrantView { environment_id: env, role });
                    }
                    actions.grants.dispatch(SetUserGrants { user_id: id.get_value(), grants: next });
                }>
                    <select aria-label="Role" on:change=move |ev| new_role.set(event_target_value(&ev))>
                        <option value="viewer" selected>"viewer"</option>
                        <option value="editor">"editor"</option>
                        <option value="admin">"admin"</option>
                        <option value="none">"no role"</option>
                    </select>
                    <span class="muted">"in"</span>
                    <select aria-label="Environment" on:change=move |ev| new_env.set(event_target_value(&ev))>
                        {env_options}
                    </select>
                    <button type="submit" class="small" disabled=move || actions.grants.pending().get()>"Set role"</button>
                </form>
            </td>
            <td>{if disabled { "disabled" } else { "active" }}</td>
            <td>{format_time(u.created_at)}</td>
            <td><div class="row-actions">
                <button class="small" class:danger=!disabled
                    aria-label=format!("{} {}", if disabled { "Enable" } else { "Disable" }, u.email)
                    on:click=move |_| {
                        let ok = disabled || crate::components::confirmed(&format!("Disable {}? They are signed out everywhere and cannot sign in until enabled again.", email.get_value()));
                        if ok { actions.disable.dispatch(SetUserDisabled { user_id: id.get_value(), disabled: !disabled }); }
                    }>{if disabled { "Enable" } else { "Disable" }}</button>
                <button class="small" aria-label=format!("Sign out {} everywhere", u.email)
                    on:click=move |_| {
                        let ok = crate::components::confirmed(&format!("Sign {} out of every session?", email.get_value()));
                        if ok { actions.revoke.dispatch(RevokeUserSessions { user_id: id.get_value() }); }
                    }>"Sign out everywhere"</button>
                <button class="small" aria-label=format!("Reset the password of {}", u.email)
                    on:click=move |_| {
                        let given = window()
                            .prompt_with_message(&format!("New password for {} (at least 10 characters). They are signed out everywhere.", email.get_value()))
                            .ok()
                            .flatten();
                        if let Some(password) = given.filter(|p| !p.is_empty()) {
                            actions.password.dispatch(SetUserPassword { user_id: id.get_value(), password });
                        }
                    }>"Reset password"</button>
            </div></td>
        </tr>
    }
}

#[component]
fn NewUserForm(envs: Vec<EnvironmentView>, create: ServerAction<CreateUser>) -> impl IntoView {
    let email = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let role = RwSignal::new("viewer".to_string());
    let environment = RwSignal::new("*".to_string());
    Effect::watch(
        move || create.version().get(),
        move |_, _, _| {
            if matches!(create.value().get_untracked(), Some(Ok(_))) {
                email.set(String::new());
                password.set(String::new());
            }
        },
        false,
    );
    view! {
        <form class="card form" aria-label="New user" on:submit=move |ev| {
            ev.prevent_default();
            create.dispatch(CreateUser {
                email: email.get_untracked(),
                password: password.get_untracked(),
                grants: vec![GrantView { environment_id: environment.get_untracked(), role: role.get_untracked() }],
            });
        }>
            <h2>"New user"</h2>
            <label>"Email" <input type="email" required autocomplete="off" bind:value=email/></label>
            <label>"Password" <input type="password" required autocomplete="new-password" bind:value=password/></label>
            <div class="form inline">
                <label>"Role"
                    <select on:change=move |ev| role.set(event_target_value(&ev))>
                        <option value="viewer" selected>"viewer"</option>
                        <option value="editor">"editor"</option>
                        <option value="admin">"admin"</option>
                    </select>
                </label>
                <label>"Environment"
                    <select on:change=move |ev| environment.set(event_target_value(&ev))>
                        {environment_options(&envs)}
                    </select>
                </label>
            </div>
            <div>
                <button type="submit" class="primary" disabled=move || create.pending().get()>"Create user"</button>
            </div>
            {move || create.value().get().map(|r| match r {
                Ok(u) => view! { <p class="ok" role="status">{format!("Created {}", u.email)}</p> }.into_any(),
                Err(e) => view! { <ErrorBox message=error_text(&e)/> }.into_any(),
            })}
        </form>
    }
}
