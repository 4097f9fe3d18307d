//! Every server function with who may call it and how it can fail: the least role it needs,
//! where that role must be held, and the error statuses it answers besides 400 and 401.
//!
//! This one table feeds both the API description (`GET /api/openapi.json`, built in
//! [`super::openapi`]) and the access test (`server/tests/api/access.rs`), which calls every
//! row as every kind of caller and fails when a role is not enforced exactly as written here,
//! when an answer's status is not listed, or when a registered server function has no row.
//! So what the document promises is what the server does.

use leptos::server_fn::ServerFn;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use vf_rules::access::Role;

use super::{accounts, audit, channel, edge, fleet, freeze, pipelines, releases, webhooks};

/// Where a row's role must be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In the environment of the object the call names (a grant there, or in every
    /// environment).
    Environment,
    /// In every environment (`*`): objects outside any environment.
    Everywhere,
    /// In any environment at all: lists that keep only what the caller may see.
    Anywhere,
    /// Any session or API token.
    SignedIn,
    /// Signed-in users only: API tokens have no password.
    Users,
}

impl Scope {
    /// How the API description says it.
    pub fn describe(self, role: Role) -> String {
        let role = role.as_str();
        match self {
            Scope::Environment => format!("{role} of the environment the call acts on"),
            Scope::Everywhere => format!("{role} of every environment (`*`)"),
            Scope::Anywhere => format!("{role} of any environment"),
            Scope::SignedIn => "any signed-in caller (session or API token)".into(),
            Scope::Users => "a signed-in user (a session, not an API token)".into(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Environment => "environment",
            Scope::Everywhere => "every-environment",
            Scope::Anywhere => "any-environment",
            Scope::SignedIn => "signed-in",
            Scope::Users => "users",
        }
    }
}

/// One server function.
#[derive(Clone, Copy)]
pub struct Endpoint {
    /// `/api/<name>`, where it is called with `POST`.
    pub path: &'static str,
    pub role: Role,
    pub scope: Scope,
    /// The role that is enough when the caller created the release it acts on (a rollback),
    /// below `role`, which any other caller needs.
    pub author_role: Option<Role>,
    /// Error statuses besides 400 (arguments) and 401 (no session or token); 403 is implied
    /// by every scope but [`Scope::SignedIn`].
    pub errors: &'static [u16],
    pub(crate) arguments: fn(&mut SchemaGenerator) -> Schema,
    pub(crate) result: fn(&mut SchemaGenerator) -> Schema,
}

impl Endpoint {
    /// The endpoint's name, as docs/api.md lists it: `release.canary.get`.
    pub fn name(&self) -> &'static str {
        self.path.trim_start_matches("/api/")
    }

    /// Every status an answer may have: 200 and the errors.
    pub fn statuses(&self) -> Vec<u16> {
        let mut all = vec![200, 400, 401];
        if self.scope != Scope::SignedIn {
            all.push(403);
        }
        all.extend(self.errors);
        all.sort_unstable();
        all.dedup();
        all
    }
}

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// The row of server function `F`, whose arguments and result the document takes from its
/// types.
const fn call<F>(role: Role, scope: Scope, errors: &'static [u16]) -> Endpoint
where
    F: ServerFn + JsonSchema,
    F::Output: JsonSchema,
{
    Endpoint {
        path: F::PATH,
        role,
        scope,
        author_role: None,
        errors,
        arguments: schema_of::<F>,
        result: schema_of::<F::Output>,
    }
}

const fn by_author(endpoint: Endpoint, role: Role) -> Endpoint {
    Endpoint {
        author_role: Some(role),
        ..endpoint
    }
}

/// The name of an endpoint's object that can be unknown (404), refused by its state (409),
/// or changed since the caller read it (412, 428 without a `row_version`).
const NOT_FOUND: &[u16] = &[404];
const CONFLICT: &[u16] = &[409];
const NOT_FOUND_OR_CONFLICT: &[u16] = &[404, 409];
const VERSIONED: &[u16] = &[404, 409, 412, 428];
const NONE: &[u16] = &[];

/// Every server function, grouped as docs/api.md lists them.
pub static ENDPOINTS: &[Endpoint] = {
    use Role::{Admin, Editor, Viewer};
    use Scope::*;
    &[
        // The caller itself.
        call::<accounts::Me>(Viewer, SignedIn, NONE),
        call::<accounts::ChangePassword>(Viewer, Users, NONE),
        // Environments and enrollment tokens.
        call::<fleet::ListEnvironments>(Viewer, Anywhere, NONE),
        call::<fleet::CreateEnvironment>(Admin, Everywhere, CONFLICT),
        call::<fleet::ListEnrollmentTokens>(Admin, Environment, NOT_FOUND),
        call::<fleet::CreateEnrollmentToken>(Admin, Environment, NOT_FOUND),
        call::<fleet::RevokeEnrollmentToken>(Admin, Environment, NOT_FOUND_OR_CONFLICT),
        // Stopping the line and freeze windows.
        call::<freeze::EnvironmentHold>(Viewer, Environment, NOT_FOUND),
        call::<freeze::StopLine>(Admin, Environment, NOT_FOUND_OR_CONFLICT),
        call::<freeze::LiftLine>(Admin, Environment, NOT_FOUND_OR_CONFLICT),
        call::<freeze::ListFreezeWindows>(Viewer, Environment, NOT_FOUND),
        call::<freeze::CreateFreezeWindow>(Admin, Environment, NOT_FOUND),
        call::<freeze::DeleteFreezeWindow>(Admin, Environment, NOT_FOUND),
        // Webhooks.
        call::<webhooks::CreateWebhook>(Admin, Environment, NOT_FOUND),
        call::<webhooks::ListWebhooks>(Admin, Environment, NOT_FOUND),
        call::<webhooks::DeleteWebhook>(Admin, Environment, NOT_FOUND),
        call::<webhooks::WebhookDeliveries>(Admin, Environment, NOT_FOUND),
        call::<webhooks::Redeliver>(Admin, Environment, NOT_FOUND),
        // The fleet.
        call::<fleet::FleetNodes>(Viewer, Environment, NOT_FOUND),
        call::<fleet::GetNode>(Viewer, Environment, NOT_FOUND),
        call::<fleet::SetNodeLabels>(Editor, Environment, NOT_FOUND),
        call::<fleet::RevokeNode>(Admin, Environment, NOT_FOUND_OR_CONFLICT),
        call::<fleet::ListNodeGroups>(Viewer, Environment, NOT_FOUND),
        call::<fleet::CreateNodeGroup>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<fleet::DeleteNodeGroup>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        // Asking a node.
        call::<channel::RequestSample>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<channel::SampleResults>(Editor, Environment, NOT_FOUND),
        call::<channel::StartTap>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<channel::StopTap>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<channel::TapEvents>(Editor, Environment, NOT_FOUND),
        call::<channel::RestartPipeline>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        // Pipelines.
        call::<pipelines::ListPipelines>(Viewer, Environment, NOT_FOUND),
        call::<pipelines::CreatePipeline>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<pipelines::GetPipelineSummary>(Viewer, Environment, NOT_FOUND),
        call::<pipelines::GetPipeline>(Viewer, Environment, NOT_FOUND),
        call::<pipelines::PipelineNodes>(Viewer, Environment, NOT_FOUND),
        call::<pipelines::VersionConfig>(Viewer, Environment, NOT_FOUND),
        call::<pipelines::DeployPipeline>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<pipelines::DiffVersions>(Viewer, Environment, NOT_FOUND),
        call::<pipelines::ReleaseDiff>(Viewer, Environment, NOT_FOUND),
        call::<releases::LatestReleaseSeries>(Viewer, Environment, NOT_FOUND),
        // Releases.
        call::<releases::CreateCanary>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<releases::NewReleaseId>(Viewer, Anywhere, NONE),
        call::<releases::TestPromql>(Viewer, Anywhere, NONE),
        call::<releases::PreviewRelease>(Viewer, Environment, NOT_FOUND),
        call::<releases::GetRelease>(Viewer, Environment, NOT_FOUND),
        call::<releases::StageNodes>(Viewer, Environment, NOT_FOUND),
        call::<releases::ListReleases>(Viewer, Environment, NOT_FOUND),
        call::<releases::AdvanceRelease>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<releases::CompleteRelease>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<releases::BroadenRelease>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<releases::PauseRelease>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        call::<releases::ResumeRelease>(Editor, Environment, NOT_FOUND_OR_CONFLICT),
        by_author(
            call::<releases::RollbackRelease>(Admin, Environment, NOT_FOUND_OR_CONFLICT),
            Editor,
        ),
        call::<releases::ReleaseSeries>(Viewer, Environment, NOT_FOUND),
        call::<releases::ReleaseHistory>(Viewer, Environment, NOT_FOUND),
        // Users and API tokens.
        call::<accounts::ListUsers>(Admin, Everywhere, NONE),
        call::<accounts::CreateUser>(Admin, Everywhere, CONFLICT),
        call::<accounts::SetUserGrants>(Admin, Everywhere, NOT_FOUND),
        call::<accounts::SetUserDisabled>(Admin, Everywhere, NOT_FOUND_OR_CONFLICT),
        call::<accounts::RevokeUserSessions>(Admin, Everywhere, NOT_FOUND),
        call::<accounts::SetUserPassword>(Admin, Everywhere, NOT_FOUND),
        call::<accounts::ListApiTokens>(Admin, Anywhere, NONE),
        call::<accounts::CreateApiToken>(Admin, Environment, NOT_FOUND_OR_CONFLICT),
        call::<accounts::RevokeApiToken>(Admin, Environment, NOT_FOUND_OR_CONFLICT),
        // The audit log.
        call::<audit::ListAudit>(Viewer, Everywhere, NONE),
        call::<audit::VerifyAudit>(Viewer, Everywhere, NONE),
        // Rolling rollouts of the edge client.
        call::<edge::EdgeAdmin>(Viewer, Everywhere, NONE),
        call::<edge::SetRolloutPercent>(Admin, Everywhere, VERSIONED),
        call::<edge::RemoveOrgOverride>(Admin, Everywhere, VERSIONED),
        call::<edge::DeleteRollout>(Admin, Everywhere, VERSIONED),
    ]
};

/// The row of `name` (`release.canary.get`).
pub fn endpoint(name: &str) -> Option<&'static Endpoint> {
    ENDPOINTS.iter().find(|e| e.name() == name)
}
