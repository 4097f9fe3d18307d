//! Who may do what: the role rules, pure, shared by the server (which enforces them in
//! `vf_control::access::authorize`) and the browser (which hides what a role cannot do).
//!
//! Roles are held per environment, or in every environment (`*`). A role may do everything
//! the roles below it may:
//!
//! | role   | may                                                                       |
//! |--------|---------------------------------------------------------------------------|
//! | viewer | read everything in the environment                                        |
//! | editor | + deploy, create releases, advance/complete/broaden, roll back its own    |
//! |        |   releases, label nodes, manage node groups, create pipelines             |
//! | admin  | + roll back anyone's release, enrollment and API tokens, revoke nodes     |
//!
//! Objects that belong to no environment (users, the edge config, the audit log, creating
//! environments) need the role in every environment (`*`).

use serde::{Deserialize, Serialize};

use crate::Action;

/// A role, ordered: every role may do what the roles below it may.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
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

    /// The role named `s`; the error is the message to show next to the field.
    pub fn from_name(s: &str) -> Result<Role, String> {
        match s.trim() {
            "viewer" => Ok(Role::Viewer),
            "editor" => Ok(Role::Editor),
            "admin" => Ok(Role::Admin),
            other => Err(format!("must be viewer, editor or admin, got {other:?}")),
        }
    }
}

/// A grant's environment meaning "every environment".
pub const ALL_ENVIRONMENTS: &str = "*";

/// A role held in one environment, or in all of them (`environment_id == "*"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Grant {
    pub environment_id: String,
    pub role: Role,
}

/// The highest role `grants` give in `environment_id`; `"*"` asks for the role held in
/// every environment (an environment's own grant does not count there).
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
pub fn role_for_release_action(action: Action, release_created_by: &str, actor: &str) -> Role {
    match action {
        Action::Rollback if release_created_by != actor => Role::Admin,
        _ => Role::Editor,
    }
}

/// Is `held` enough for `need` in `place`? The refusal names both roles (and `place`, which
/// the caller only names to someone who may see it).
pub fn check(held: Option<Role>, need: Role, place: &str) -> Result<(), String> {
    match held {
        Some(r) if r >= need => Ok(()),
        Some(r) => Err(format!(
            "your role in {place} is {}; this needs {}",
            r.as_str(),
            need.as_str()
        )),
        None => Err(format!(
            "you have no role in {place}; this needs {}",
            need.as_str()
        )),
    }
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
        assert_eq!(
            check(Some(Role::Viewer), Role::Editor, "environment prod"),
            Err("your role in environment prod is viewer; this needs editor".into())
        );
        assert_eq!(
            check(None, Role::Viewer, "its environment"),
            Err("you have no role in its environment; this needs viewer".into())
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
    fn roles_are_named_in_lowercase_and_anything_else_is_refused() {
        for r in Role::ALL {
            assert_eq!(Role::from_name(r.as_str()), Ok(r));
        }
        assert_eq!(
            Role::from_name("owner"),
            Err("must be viewer, editor or admin, got \"owner\"".into())
        );
    }
}
