//! Who may do what. Roles are held per environment (or in every environment, `*`) by
//! principals: signed-in users and API tokens. [`authorize`] is the one check every server
//! function and admin route makes before it acts; the rules it applies are the pure
//! functions below, tested beside them.
//!
//! | role   | may                                                                       |
//! |--------|---------------------------------------------------------------------------|
//! | viewer | read everything in the environment                                        |
//! | editor | + deploy, create releases, advance/complete/broaden, roll back its own    |
//! |        |   releases, label nodes, manage node groups                               |
//! | admin  | + roll back anyone's release, enrollment and API tokens, revoke nodes     |
//!
//! Objects that belong to no environment (users, the edge config, the audit log, creating
//! environments) need the role in every environment (`*`).

use serde::{Deserialize, Serialize};

use crate::audit::Actor;
use crate::{ControlError, Db, Result};

/// A role, ordered: every role may do what the roles below it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Editor,
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Editor, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    /// Parses a role named in `field` of a request.
    pub fn parse(field: &str, s: &str) -> Result<Role> {
        match s.trim() {
            "viewer" => Ok(Role::Viewer),
            "editor" => Ok(Role::Editor),
            "admin" => Ok(Role::Admin),
            other => Err(ControlError::invalid(
                field,
                format!("must be viewer, editor or admin, got {other:?}"),
            )),
        }
    }
}

/// A grant's environment meaning "every environment".
pub const ALL_ENVIRONMENTS: &str = "*";

/// A role held in one environment, or in all of them (`environment_id == "*"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub environment_id: String,
    pub role: Role,
}

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    User { id: String, email: String },
    ApiToken { id: String, name: String },
}

/// An authenticated caller: who, what it holds, and where the request came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub identity: Identity,
    pub grants: Vec<Grant>,
    pub ip: Option<String>,
}

impl Principal {
    /// The name the audit log and `created_by` record: the user's email, or `token:<name>`.
    pub fn name(&self) -> String {
        match &self.identity {
            Identity::User { email, .. } => email.clone(),
            Identity::ApiToken { name, .. } => format!("token:{name}"),
        }
    }

    pub fn actor(&self) -> Actor {
        Actor {
            name: self.name(),
            ip: self.ip.clone(),
        }
    }

    /// The highest role held in `environment_id` (directly or through `*`).
    pub fn role_in(&self, environment_id: &str) -> Option<Role> {
        role_in(&self.grants, environment_id)
    }

    /// The role held in every environment, for objects outside any environment.
    pub fn global_role(&self) -> Option<Role> {
        role_in(&self.grants, ALL_ENVIRONMENTS)
    }
}

/// The highest role `grants` give in `environment_id`; `"*"` asks for the global role.
pub fn role_in(grants: &[Grant], environment_id: &str) -> Option<Role> {
    grants
        .iter()
        .filter(|g| {
            g.environment_id == ALL_ENVIRONMENTS
                || (environment_id != ALL_ENVIRONMENTS && g.environment_id == environment_id)
        })
        .map(|g| g.role)
        .max()
}

/// The role a release action needs: rolling back someone else's release is an admin's call;
/// everything else an editor may do.
pub fn role_for_release_action(
    action: vf_rules::Action,
    release_created_by: &str,
    actor: &str,
) -> Role {
    match action {
        vf_rules::Action::Rollback if release_created_by != actor => Role::Admin,
        _ => Role::Editor,
    }
}

/// What a request acts on; [`authorize`] finds its environment.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// Outside any environment: needs the role in every environment.
    Global,
    /// Anything the caller can see at all (lists filter by environment themselves).
    Any,
    Environment(&'a str),
    Pipeline(&'a str),
    Release(&'a str),
    Node(&'a str),
    Group(&'a str),
    EnrollmentToken(&'a str),
    ApiToken(&'a str),
}

/// What [`authorize`] found: who acts, and the role they hold where they act (pages hide
/// the actions that role cannot take).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub actor: Actor,
    pub role: Role,
}

/// Checks that `principal` holds `need` where `target` lives. No principal: 401. Too low a
/// role: 403 naming the role needed and where. An unknown object: 404 (only to callers who
/// are signed in).
pub async fn authorize(
    db: &Db,
    principal: Option<&Principal>,
    need: Role,
    target: Target<'_>,
) -> Result<Granted> {
    let p = principal.ok_or(ControlError::SignInRequired)?;
    let (held, place) = match target {
        Target::Global => (p.global_role(), "every environment".to_string()),
        Target::Any => (
            p.grants.iter().map(|g| g.role).max(),
            "any environment".to_string(),
        ),
        other => {
            let env = environment_of(db, other).await?;
            (
                p.role_in(&env),
                format!("environment {}", env_name(db, &env).await?),
            )
        }
    };
    check(held, need, &place)?;
    Ok(Granted {
        actor: p.actor(),
        role: held.unwrap_or(need),
    })
}

/// The pure part of [`authorize`]: is `held` enough for `need`?
pub fn check(held: Option<Role>, need: Role, place: &str) -> Result<()> {
    match held {
        Some(r) if r >= need => Ok(()),
        Some(r) => Err(ControlError::Forbidden(format!(
            "your role in {place} is {}; this needs {}",
            r.as_str(),
            need.as_str()
        ))),
        None => Err(ControlError::Forbidden(format!(
            "you have no role in {place}; this needs {}",
            need.as_str()
        ))),
    }
}

/// The environment an object belongs to.
async fn environment_of(db: &Db, target: Target<'_>) -> Result<String> {
    let (query, kind, id) = match target {
        Target::Environment(id) => ("SELECT id FROM environments WHERE id = $1", "environment", id),
        Target::Pipeline(id) => ("SELECT environment_id FROM pipelines WHERE id = $1", "pipeline", id),
        Target::Release(id) => (
            "SELECT p.environment_id FROM releases r JOIN pipelines p ON p.id = r.pipeline_id WHERE r.id = $1",
            "release",
            id,
        ),
        Target::Node(id) => ("SELECT environment_id FROM nodes WHERE id = $1", "node", id),
        Target::Group(id) => ("SELECT environment_id FROM node_groups WHERE id = $1", "node group", id),
        Target::EnrollmentToken(id) => (
            "SELECT environment_id FROM enrollment_tokens WHERE id = $1",
            "enrollment token",
            id,
        ),
        Target::ApiToken(id) => ("SELECT environment_id FROM api_tokens WHERE id = $1", "API token", id),
        Target::Global | Target::Any => return Ok(ALL_ENVIRONMENTS.to_string()),
    };
    sqlx::query_scalar::<_, String>(query)
        .bind(id)
        .fetch_optional(&db.pool)
        .await?
        .ok_or_else(|| ControlError::NotFound(format!("{kind} {id}")))
}

async fn env_name(db: &Db, id: &str) -> Result<String> {
    if id == ALL_ENVIRONMENTS {
        return Ok("every environment".into());
    }
    Ok(
        sqlx::query_scalar::<_, String>("SELECT name FROM environments WHERE id = $1")
            .bind(id)
            .fetch_optional(&db.pool)
            .await?
            .unwrap_or_else(|| id.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(env: &str, role: Role) -> Grant {
        Grant {
            environment_id: env.into(),
            role,
        }
    }

    #[test]
    fn a_role_covers_the_roles_below_it_and_nothing_above() {
        assert!(check(Some(Role::Admin), Role::Editor, "e").is_ok());
        assert!(check(Some(Role::Editor), Role::Editor, "e").is_ok());
        let refused = check(Some(Role::Viewer), Role::Editor, "environment prod").unwrap_err();
        assert_eq!(refused.status_code(), 403);
        assert_eq!(
            refused.to_string(),
            "your role in environment prod is viewer; this needs editor"
        );
        assert_eq!(
            check(None, Role::Viewer, "e").unwrap_err().status_code(),
            403
        );
    }

    #[test]
    fn a_grant_applies_to_its_environment_and_star_to_all() {
        let grants = vec![grant("staging", Role::Editor), grant("*", Role::Viewer)];
        assert_eq!(role_in(&grants, "staging"), Some(Role::Editor));
        assert_eq!(role_in(&grants, "prod"), Some(Role::Viewer));
        assert_eq!(role_in(&grants, "*"), Some(Role::Viewer));
        let scoped = vec![grant("staging", Role::Admin)];
        assert_eq!(role_in(&scoped, "prod"), None);
        assert_eq!(
            role_in(&scoped, "*"),
            None,
            "an environment grant is not global"
        );
    }

    #[test]
    fn rolling_back_someone_elses_release_needs_admin() {
        use vf_rules::Action;
        assert_eq!(
            role_for_release_action(Action::Rollback, "ann", "ann"),
            Role::Editor
        );
        assert_eq!(
            role_for_release_action(Action::Rollback, "ann", "bob"),
            Role::Admin
        );
        assert_eq!(
            role_for_release_action(Action::Advance, "ann", "bob"),
            Role::Editor
        );
        assert_eq!(
            role_for_release_action(Action::Complete, "ann", "bob"),
            Role::Editor
        );
    }

    #[test]
    fn roles_parse_naming_the_field() {
        assert_eq!(Role::parse("role", "editor").ok(), Some(Role::Editor));
        assert_eq!(
            Role::parse("grants[0].role", "owner")
                .unwrap_err()
                .to_string(),
            "grants[0].role: must be viewer, editor or admin, got \"owner\""
        );
    }
}
