//! Who may do what, enforced: [`authorize`] is the one check every server function and
//! admin route makes before it acts. The role rules themselves are pure and live in
//! `vf_rules::access` (the browser uses them too, to hide what a role cannot do); this
//! module finds where an object lives and applies them to the caller.

use crate::audit::Actor;
use crate::{ControlError, Db, Result};

pub use vf_rules::access::{role_for_release_action, role_in, Grant, Role, ALL_ENVIRONMENTS};

/// Parses a role named in `field` of a request.
pub fn parse_role(field: &str, s: &str) -> Result<Role> {
    Role::from_name(s).map_err(|message| ControlError::invalid(field, message))
}

/// [`vf_rules::access::check`], refusing with 403.
pub fn check(held: Option<Role>, need: Role, place: &str) -> Result<()> {
    vf_rules::access::check(held, need, place).map_err(ControlError::Forbidden)
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
    Webhook(&'a str),
    WebhookDelivery(&'a str),
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
    let (held, env) = match target {
        Target::Global => (p.global_role(), None),
        Target::Any => (p.grants.iter().map(|g| g.role).max(), None),
        other => {
            let env = environment_of(db, other).await?;
            (p.role_in(&env), Some(env))
        }
    };
    if vf_rules::access::check(held, need, "").is_err() {
        // The place is looked up only for the refusal; the environment is named only to
        // someone who may see it.
        let place = match (target, &env, held) {
            (Target::Global, _, _) => "every environment".to_string(),
            (Target::Any, _, _) => "any environment".to_string(),
            (_, Some(env), Some(_)) => format!("environment {}", env_name(db, env).await?),
            _ => "its environment".to_string(),
        };
        check(held, need, &place)?;
    }
    Ok(Granted {
        actor: p.actor(),
        role: held.unwrap_or(need),
    })
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
        Target::Webhook(id) => ("SELECT environment_id FROM webhooks WHERE id = $1", "webhook", id),
        Target::WebhookDelivery(id) => (
            "SELECT w.environment_id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = $1",
            "webhook delivery",
            id,
        ),
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
