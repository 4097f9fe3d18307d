//! Server functions of accounts: who am I, users and their roles, API tokens. Signing in and
//! out are plain form posts to `/signin` and `/signout` (server routes), so they work before
//! the page hydrates.

use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A role held in one environment (`*`: all of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GrantView {
    pub environment_id: String,
    /// viewer | editor | admin
    pub role: String,
}

/// The caller, for the header and for hiding what its role cannot do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MeView {
    /// The email, or `token:<name>`.
    pub name: String,
    pub is_user: bool,
    pub grants: Vec<GrantView>,
}

impl MeView {
    /// Whether the caller holds at least `role` in `environment_id` (`*`: every
    /// environment), by the same rules the server enforces (`vf_rules::access`).
    pub fn can(&self, role: &str, environment_id: &str) -> bool {
        use vf_rules::access::{role_in, Grant, Role};
        let grants: Vec<Grant> = self
            .grants
            .iter()
            .filter_map(|g| {
                Some(Grant {
                    environment_id: g.environment_id.clone(),
                    role: Role::from_name(&g.role).ok()?,
                })
            })
            .collect();
        Role::from_name(role).is_ok_and(|need| role_in(&grants, environment_id) >= Some(need))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UserView {
    pub id: String,
    pub email: String,
    pub created_at: i64,
    pub disabled: bool,
    pub grants: Vec<GrantView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiTokenView {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub environment_id: String,
    /// viewer | editor | admin | edge-config
    pub role: String,
    pub created_by: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked: bool,
}

#[cfg(feature = "ssr")]
fn grant_views(grants: Vec<vf_control::access::Grant>) -> Vec<GrantView> {
    grants
        .into_iter()
        .map(|g| GrantView {
            environment_id: g.environment_id,
            role: g.role.as_str().to_string(),
        })
        .collect()
}

#[cfg(feature = "ssr")]
fn parse_grants(grants: Vec<GrantView>) -> Result<Vec<vf_control::access::Grant>, ServerFnError> {
    grants
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            Ok(vf_control::access::Grant {
                environment_id: g.environment_id.trim().to_string(),
                role: vf_control::access::parse_role(&format!("grants[{i}].role"), &g.role)
                    .map_err(super::server::fail)?,
            })
        })
        .collect()
}

#[cfg(feature = "ssr")]
fn user_view(u: vf_control::accounts::User) -> UserView {
    UserView {
        id: u.id,
        email: u.email,
        created_at: u.created_at,
        disabled: u.disabled_at.is_some(),
        grants: grant_views(u.grants),
    }
}

#[cfg(feature = "ssr")]
fn token_view(t: vf_control::accounts::ApiTokenRow) -> ApiTokenView {
    ApiTokenView {
        id: t.id,
        name: t.name,
        prefix: t.prefix,
        environment_id: t.environment_id,
        role: t.role,
        created_by: t.created_by,
        created_at: t.created_at,
        last_used_at: t.last_used_at,
        revoked: t.revoked_at.is_some(),
    }
}

/// The signed-in user or API token, with its roles. 401 without either.
#[server(endpoint = "session.me", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn me() -> Result<MeView, ServerFnError> {
    use super::server::*;
    let p = principal().ok_or_else(|| fail(vf_control::ControlError::SignInRequired))?;
    Ok(MeView {
        name: p.name(),
        is_user: matches!(p.identity, vf_control::access::Identity::User { .. }),
        grants: grant_views(p.grants),
    })
}

/// Changes the signed-in user's own password (the current one is required); every session
/// of the user, this one included, is signed out.
#[server(endpoint = "session.password.change", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn change_password(
    current_password: String,
    new_password: String,
) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::Identity;
    use vf_control::ControlError;
    let ctl = control()?;
    let p = principal().ok_or_else(|| fail(ControlError::SignInRequired))?;
    let Identity::User { id, email } = &p.identity else {
        return Err(fail(ControlError::Forbidden(
            "API tokens have no password".into(),
        )));
    };
    let ip = p.ip.as_deref();
    // The current password, under the same rate limits as signing in.
    vf_control::accounts::sessions::check_password(&ctl, email, &current_password, ip)
        .await
        .map_err(|e| match e {
            ControlError::Invalid { .. } => fail(ControlError::invalid(
                "current_password",
                "is not your current password",
            )),
            other => fail(other),
        })?;
    vf_control::accounts::set_password(&ctl.db, &p.actor(), id, &new_password, ctl.now())
        .await
        .map_err(|e| match e {
            ControlError::Invalid { message, .. } => {
                fail(ControlError::invalid("new_password", message))
            }
            other => fail(other),
        })
}

/// Every user with their grants.
#[server(endpoint = "user.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_users() -> Result<Vec<UserView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Admin, Target::Global).await?;
    let users = vf_control::accounts::list_users(&ctl.db)
        .await
        .map_err(fail)?;
    Ok(users.into_iter().map(user_view).collect())
}

/// Creates an operator account with roles (`environment_id` `*` means every environment).
#[server(endpoint = "user.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_user(
    email: String,
    password: String,
    grants: Vec<GrantView>,
) -> Result<UserView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let grants = parse_grants(grants)?;
    let u =
        vf_control::accounts::create_user(&ctl.db, &g.actor, &email, &password, &grants, ctl.now())
            .await
            .map_err(fail)?;
    Ok(user_view(u))
}

/// Replaces a user's roles.
#[server(endpoint = "user.grants.set", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn set_user_grants(
    user_id: String,
    grants: Vec<GrantView>,
) -> Result<UserView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let grants = parse_grants(grants)?;
    let u = vf_control::accounts::set_grants(&ctl.db, &g.actor, &user_id, &grants, ctl.now())
        .await
        .map_err(fail)?;
    Ok(user_view(u))
}

/// Disables a user (signing them out everywhere) or enables them again.
#[server(endpoint = "user.disabled.set", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn set_user_disabled(user_id: String, disabled: bool) -> Result<UserView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    let u = vf_control::accounts::set_disabled(&ctl.db, &g.actor, &user_id, disabled, ctl.now())
        .await
        .map_err(fail)?;
    Ok(user_view(u))
}

/// Signs a user out of every session.
#[server(endpoint = "user.sessions.revoke", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn revoke_user_sessions(user_id: String) -> Result<u64, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    vf_control::accounts::sessions::revoke_user_sessions(&ctl.db, &g.actor, &user_id, ctl.now())
        .await
        .map_err(fail)
}

/// An admin's password reset; the user's sessions are revoked.
#[server(endpoint = "user.password.set", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn set_user_password(user_id: String, password: String) -> Result<(), ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::Global).await?;
    vf_control::accounts::set_password(&ctl.db, &g.actor, &user_id, &password, ctl.now())
        .await
        .map_err(fail)
}

/// API tokens of the environments the caller administers (prefix only, never the token).
#[server(endpoint = "api_token.list", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn list_api_tokens() -> Result<Vec<ApiTokenView>, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, _) = authorize(Role::Admin, Target::Any).await?;
    let me = principal();
    let rows = vf_control::accounts::list_api_tokens(&ctl.db)
        .await
        .map_err(fail)?;
    Ok(rows
        .into_iter()
        .filter(|t| me.as_ref().and_then(|p| p.role_in(&t.environment_id)) == Some(Role::Admin))
        .map(token_view)
        .collect())
}

/// Mints an API token for automation: `role` viewer, editor or admin in `environment_id`
/// (`*`: all), or `edge-config` (reads `GET /api/edge-config` only; `environment_id` `*`).
/// The returned token is shown once and never again.
#[server(endpoint = "api_token.create", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn create_api_token(
    name: String,
    environment_id: String,
    role: String,
) -> Result<String, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let target = if environment_id.trim() == "*" {
        Target::Global
    } else {
        Target::Environment(environment_id.trim())
    };
    let (ctl, g) = authorize(Role::Admin, target).await?;
    let role = vf_control::accounts::TokenRole::parse("role", &role).map_err(fail)?;
    let (_, token) = vf_control::accounts::create_api_token(
        &ctl.db,
        &g.actor,
        &name,
        environment_id.trim(),
        role,
        None,
        ctl.now(),
    )
    .await
    .map_err(fail)?;
    token.ok_or_else(|| ServerFnError::new("token was not minted"))
}

/// Revokes an API token: its next request gets 401.
#[server(endpoint = "api_token.revoke", input = Json, input_derive = (Clone, Serialize, Deserialize, JsonSchema))]
pub async fn revoke_api_token(token_id: String) -> Result<ApiTokenView, ServerFnError> {
    use super::server::*;
    use vf_control::access::{Role, Target};
    let (ctl, g) = authorize(Role::Admin, Target::ApiToken(&token_id)).await?;
    let row = vf_control::accounts::revoke_api_token(&ctl.db, &g.actor, &token_id, ctl.now())
        .await
        .map_err(fail)?;
    Ok(token_view(row))
}
