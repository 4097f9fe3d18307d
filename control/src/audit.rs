//! The audit log: who did what to which object, when, with what evidence.
//!
//! The log is append-only and tamper-evident: every row stores the sha256 of the previous
//! row's hash followed by its own canonical bytes, so editing, deleting or reordering a
//! stored row breaks the chain at that row and [`verify`] names it. (Removing the newest
//! rows, or rewriting every hash after an edit, needs an external anchor to detect.)

use serde_json::Value;
use sqlx::AnyConnection;

use crate::ids::{new_id, sha256_hex};
use crate::{sql, Db, Result};

/// Who acted: a signed-in user's email, `token:<name>` for an API token, or the server
/// itself (`scheduler`, `system`); with the client's IP when a request carried the action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub name: String,
    pub ip: Option<String>,
}

impl Actor {
    /// The server acting on its own (no request, no IP).
    pub fn system(name: &str) -> Actor {
        Actor {
            name: name.to_string(),
            ip: None,
        }
    }
}

/// Everything the server records. [`AuditAction::as_str`] is the stored spelling: existing
/// databases, the audit page's prefix filter and hashed chains hold it, so a variant's
/// string never changes (a new action gets a new variant, listed in [`AuditAction::ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    /// `release.create`: a canary release was created and its first stage opened.
    ReleaseCreate,
    /// `release.advance`: the next stage started.
    ReleaseAdvance,
    /// `release.hold`: a gate held the release.
    ReleaseHold,
    /// `release.rollback`: the release was rolled back.
    ReleaseRollback,
    /// `release.complete`: every node converges on the canary version.
    ReleaseComplete,
    /// `release.refused`: a manual advance or complete was refused by a failing gate.
    ReleaseRefused,
    /// `pipeline.create`.
    PipelineCreate,
    /// `pipeline.deploy`: a direct deploy of a new version.
    PipelineDeploy,
    /// `node.enroll`: an agent enrolled (vf-agent) or registered (OpAMP).
    NodeEnroll,
    /// `node.labels`: an operator set a node's labels.
    NodeLabels,
    /// `node.revoke`.
    NodeRevoke,
    /// `node_group.create`.
    NodeGroupCreate,
    /// `node_group.delete`.
    NodeGroupDelete,
    /// `environment.create`.
    EnvironmentCreate,
    /// `enrollment_token.create`.
    EnrollmentTokenCreate,
    /// `enrollment_token.revoke`.
    EnrollmentTokenRevoke,
    /// `api_token.create`.
    ApiTokenCreate,
    /// `api_token.revoke`.
    ApiTokenRevoke,
    /// `user.create`.
    UserCreate,
    /// `user.grants.set`.
    UserGrantsSet,
    /// `user.disable`.
    UserDisable,
    /// `user.enable`.
    UserEnable,
    /// `user.password.set`: an admin's reset, or your own change.
    UserPasswordSet,
    /// `user.sessions.revoke`: an admin signed a user out everywhere.
    UserSessionsRevoke,
    /// `session.sign_in`.
    SessionSignIn,
    /// `session.sign_out`.
    SessionSignOut,
    /// `rollout.percent`: a rolling rollout's global percent was set (or the rollout created).
    RolloutPercent,
    /// `rollout.org.percent`: an org override was set.
    RolloutOrgPercent,
    /// `rollout.org.remove`: an org override was removed.
    RolloutOrgRemove,
    /// `rollout.delete`.
    RolloutDelete,
    /// `release.pause`: an operator paused a release (the bake clock stops).
    ReleasePause,
    /// `release.resume`: an operator resumed a paused release.
    ReleaseResume,
    /// `environment.line_stop`: an admin stopped the line of an environment.
    EnvironmentLineStop,
    /// `environment.line_lift`: an admin lifted a stopped line.
    EnvironmentLineLift,
    /// `freeze_window.create`.
    FreezeWindowCreate,
    /// `freeze_window.delete`.
    FreezeWindowDelete,
    /// `node.sample`: an operator asked a node for a sample of a pipeline's events.
    NodeSample,
    /// `node.tap_start`: an operator started a live tap on a node's pipeline component.
    NodeTapStart,
    /// `node.tap_stop`.
    NodeTapStop,
    /// `node.restart`: an operator had a node restart a pipeline.
    NodeRestart,
    /// `environment.freeze_start`: a freeze window of the environment opened.
    EnvironmentFreezeStart,
    /// `environment.freeze_end`: the environment's freeze ended.
    EnvironmentFreezeEnd,
    /// `webhook.create`: an admin registered a webhook.
    WebhookCreate,
    /// `webhook.delete`.
    WebhookDelete,
}

impl AuditAction {
    /// Every action, in declaration order.
    pub const ALL: [AuditAction; 44] = {
        use AuditAction::*;
        [
            ReleaseCreate,
            ReleaseAdvance,
            ReleaseHold,
            ReleaseRollback,
            ReleaseComplete,
            ReleaseRefused,
            PipelineCreate,
            PipelineDeploy,
            NodeEnroll,
            NodeLabels,
            NodeRevoke,
            NodeGroupCreate,
            NodeGroupDelete,
            EnvironmentCreate,
            EnrollmentTokenCreate,
            EnrollmentTokenRevoke,
            ApiTokenCreate,
            ApiTokenRevoke,
            UserCreate,
            UserGrantsSet,
            UserDisable,
            UserEnable,
            UserPasswordSet,
            UserSessionsRevoke,
            SessionSignIn,
            SessionSignOut,
            RolloutPercent,
            RolloutOrgPercent,
            RolloutOrgRemove,
            RolloutDelete,
            ReleasePause,
            ReleaseResume,
            EnvironmentLineStop,
            EnvironmentLineLift,
            FreezeWindowCreate,
            FreezeWindowDelete,
            NodeSample,
            NodeTapStart,
            NodeTapStop,
            NodeRestart,
            EnvironmentFreezeStart,
            EnvironmentFreezeEnd,
            WebhookCreate,
            WebhookDelete,
        ]
    };

    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        use AuditAction::*;
        match self {
            ReleaseCreate => "release.create",
            ReleaseAdvance => "release.advance",
            ReleaseHold => "release.hold",
            ReleaseRollback => "release.rollback",
            ReleaseComplete => "release.complete",
            ReleaseRefused => "release.refused",
            PipelineCreate => "pipeline.create",
            PipelineDeploy => "pipeline.deploy",
            NodeEnroll => "node.enroll",
            NodeLabels => "node.labels",
            NodeRevoke => "node.revoke",
            NodeGroupCreate => "node_group.create",
            NodeGroupDelete => "node_group.delete",
            EnvironmentCreate => "environment.create",
            EnrollmentTokenCreate => "enrollment_token.create",
            EnrollmentTokenRevoke => "enrollment_token.revoke",
            ApiTokenCreate => "api_token.create",
            ApiTokenRevoke => "api_token.revoke",
            UserCreate => "user.create",
            UserGrantsSet => "user.grants.set",
            UserDisable => "user.disable",
            UserEnable => "user.enable",
            UserPasswordSet => "user.password.set",
            UserSessionsRevoke => "user.sessions.revoke",
            SessionSignIn => "session.sign_in",
            SessionSignOut => "session.sign_out",
            RolloutPercent => "rollout.percent",
            RolloutOrgPercent => "rollout.org.percent",
            RolloutOrgRemove => "rollout.org.remove",
            RolloutDelete => "rollout.delete",
            ReleasePause => "release.pause",
            ReleaseResume => "release.resume",
            EnvironmentLineStop => "environment.line_stop",
            EnvironmentLineLift => "environment.line_lift",
            FreezeWindowCreate => "freeze_window.create",
            FreezeWindowDelete => "freeze_window.delete",
            NodeSample => "node.sample",
            NodeTapStart => "node.tap_start",
            NodeTapStop => "node.tap_stop",
            NodeRestart => "node.restart",
            EnvironmentFreezeStart => "environment.freeze_start",
            EnvironmentFreezeEnd => "environment.freeze_end",
            WebhookCreate => "webhook.create",
            WebhookDelete => "webhook.delete",
        }
    }

    /// The kind of object the action is about, stored as `target_kind` (the spelling up to
    /// the first dot).
    pub const fn target_kind(self) -> &'static str {
        use AuditAction::*;
        match self {
            ReleaseCreate | ReleaseAdvance | ReleaseHold | ReleaseRollback | ReleaseComplete
            | ReleaseRefused | ReleasePause | ReleaseResume => "release",
            PipelineCreate | PipelineDeploy => "pipeline",
            NodeEnroll | NodeLabels | NodeRevoke | NodeSample | NodeTapStart | NodeTapStop
            | NodeRestart => "node",
            WebhookCreate | WebhookDelete => "webhook",
            NodeGroupCreate | NodeGroupDelete => "node_group",
            EnvironmentCreate
            | EnvironmentLineStop
            | EnvironmentLineLift
            | EnvironmentFreezeStart
            | EnvironmentFreezeEnd => "environment",
            FreezeWindowCreate | FreezeWindowDelete => "freeze_window",
            EnrollmentTokenCreate | EnrollmentTokenRevoke => "enrollment_token",
            ApiTokenCreate | ApiTokenRevoke => "api_token",
            UserCreate | UserGrantsSet | UserDisable | UserEnable | UserPasswordSet
            | UserSessionsRevoke => "user",
            SessionSignIn | SessionSignOut => "session",
            RolloutPercent | RolloutOrgPercent | RolloutOrgRemove | RolloutDelete => "rollout",
        }
    }

    /// The audit action of a release transition the rules decided.
    pub const fn release(kind: vf_rules::DecisionKind) -> AuditAction {
        use vf_rules::DecisionKind::*;
        match kind {
            Advance => AuditAction::ReleaseAdvance,
            Complete => AuditAction::ReleaseComplete,
            Hold => AuditAction::ReleaseHold,
            Rollback => AuditAction::ReleaseRollback,
            Refused => AuditAction::ReleaseRefused,
            Pause => AuditAction::ReleasePause,
            Resume => AuditAction::ReleaseResume,
        }
    }

    /// The action a stored spelling names; `None` for one this server never writes.
    pub fn parse(s: &str) -> Option<AuditAction> {
        AuditAction::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One audit entry to append; its `target_kind` is the action's.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    pub actor: &'a Actor,
    pub action: AuditAction,
    pub target_id: &'a str,
    pub environment_id: Option<&'a str>,
    pub details: Value,
}

/// A transaction for one audited state change: the caller writes through it (it derefs to
/// the connection) and [`Audited::commit`] appends the entry and commits, so the change and
/// its record commit together or not at all and no audited write commits unrecorded.
/// Dropped without committing (an error returned with `?`), it rolls back.
pub struct Audited {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    db: Db,
}

/// Begins an audited state change.
pub async fn begin(db: &Db) -> Result<Audited> {
    Ok(Audited {
        tx: db.pool.begin().await?,
        db: db.clone(),
    })
}

impl Audited {
    /// Appends `entry` and commits.
    pub async fn commit(mut self, now: i64, entry: AuditEntry<'_>) -> Result<()> {
        record(&mut self.tx, now, entry).await?;
        self.db.commit_mirrored(self.tx).await
    }
}

impl std::ops::Deref for Audited {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        &self.tx
    }
}

impl std::ops::DerefMut for Audited {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }
}

/// The advisory lock key serialising appenders on PostgreSQL ("vf-audit" in ASCII).
const CHAIN_LOCK: i64 = 0x7666_2d61_7564_6974;

/// Appends an entry inside the transaction of [`Audited::commit`], so the action and its
/// record commit together or not at all. The row is chained to the newest one; on PostgreSQL
/// a transaction-scoped advisory lock keeps concurrent appenders from forking the chain (it
/// is held until the commit), on SQLite the single writer already serialises them.
async fn record(conn: &mut AnyConnection, now: i64, entry: AuditEntry<'_>) -> Result<()> {
    if conn.backend_name() == "PostgreSQL" {
        sqlx::query(sql!("SELECT pg_advisory_xact_lock({CHAIN_LOCK})"))
            .execute(&mut *conn)
            .await?;
    }
    let prev_hash: String =
        sqlx::query_scalar("SELECT hash FROM audit_events ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?
            .unwrap_or_default();
    let id = new_id();
    let details = entry.details.to_string();
    let (action, target_kind) = (entry.action.as_str(), entry.action.target_kind());
    let fields = ChainFields {
        id: &id,
        at: now,
        actor: &entry.actor.name,
        action,
        target_kind,
        target_id: entry.target_id,
        environment_id: entry.environment_id,
        details: &details,
        ip: entry.actor.ip.as_deref(),
    };
    let hash = chain_hash(&prev_hash, &fields);
    sqlx::query(
        "INSERT INTO audit_events (id, at, actor, action, target_kind, target_id, environment_id, details, ip, prev_hash, hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&id)
    .bind(now)
    .bind(&entry.actor.name)
    .bind(action)
    .bind(target_kind)
    .bind(entry.target_id)
    .bind(entry.environment_id)
    .bind(&details)
    .bind(entry.actor.ip.as_deref())
    .bind(&prev_hash)
    .bind(&hash)
    .execute(&mut *conn)
    .await?;
    // Webhooks hear of it in the same transaction: delivered at least once if it commits,
    // never if it does not.
    crate::webhooks::enqueue(conn, now, &entry).await
}

/// The stored fields a row's hash covers.
#[derive(Debug, Clone, Copy)]
pub struct ChainFields<'a> {
    pub id: &'a str,
    pub at: i64,
    pub actor: &'a str,
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    pub environment_id: Option<&'a str>,
    pub details: &'a str,
    pub ip: Option<&'a str>,
}

/// The unambiguous byte encoding of a row: `at` as 8 big-endian bytes, every string as its
/// length (8 bytes big-endian) then its UTF-8, every optional string as a 0 byte (absent) or
/// a 1 byte then the string. No two different rows encode the same; changing this changes
/// every stored hash.
pub fn canonical_bytes(f: &ChainFields<'_>) -> Vec<u8> {
    fn text(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u64).to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    fn optional(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            None => out.push(0),
            Some(s) => {
                out.push(1);
                text(out, s);
            }
        }
    }
    let mut out = Vec::with_capacity(128 + f.details.len());
    text(&mut out, f.id);
    out.extend_from_slice(&f.at.to_be_bytes());
    text(&mut out, f.actor);
    text(&mut out, f.action);
    text(&mut out, f.target_kind);
    text(&mut out, f.target_id);
    optional(&mut out, f.environment_id);
    text(&mut out, f.details);
    optional(&mut out, f.ip);
    out
}

/// `sha256_hex(prev_hash || canonical_bytes(row))`; `prev_hash` is "" for the first row.
pub fn chain_hash(prev_hash: &str, f: &ChainFields<'_>) -> String {
    let mut bytes = prev_hash.as_bytes().to_vec();
    bytes.extend(canonical_bytes(f));
    sha256_hex(&bytes)
}

/// A stored audit event.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AuditRow {
    pub seq: i64,
    pub id: String,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub environment_id: Option<String>,
    pub details: String,
    pub ip: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}

impl AuditRow {
    fn chain_fields(&self) -> ChainFields<'_> {
        ChainFields {
            id: &self.id,
            at: self.at,
            actor: &self.actor,
            action: &self.action,
            target_kind: &self.target_kind,
            target_id: &self.target_id,
            environment_id: self.environment_id.as_deref(),
            details: &self.details,
            ip: self.ip.as_deref(),
        }
    }

    /// Written before the log was chained: both hashes empty.
    fn is_unchained(&self) -> bool {
        self.hash.is_empty() && self.prev_hash.is_empty()
    }
}

/// Where and why a chain stops verifying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit chain broken at seq {seq}: {reason}")]
pub struct ChainBreak {
    pub seq: i64,
    pub reason: String,
}

/// Checks rows given in seq order: each row's `prev_hash` is the previous row's `hash` (""
/// for the first chained row) and its `hash` matches its content. Rows from before the log
/// was chained (empty hashes) are accepted only as a leading run. Returns how many rows were
/// checked, unchained ones included.
pub fn verify_chain(rows: &[AuditRow]) -> std::result::Result<usize, ChainBreak> {
    let mut prev = "";
    let mut prev_seq = None;
    for row in rows {
        let brk = |reason: String| ChainBreak {
            seq: row.seq,
            reason,
        };
        if prev_seq.is_some_and(|p| row.seq <= p) {
            return Err(brk("rows are out of order".into()));
        }
        prev_seq = Some(row.seq);
        if row.is_unchained() && prev.is_empty() {
            continue;
        }
        if row.prev_hash != prev {
            return Err(brk(if row.is_unchained() {
                "row has no hash after the chain started".into()
            } else {
                "prev_hash does not match the previous row: a row was removed, inserted or reordered".into()
            }));
        }
        if chain_hash(prev, &row.chain_fields()) != row.hash {
            return Err(brk(
                "hash does not match the row's content: the row was edited".into(),
            ));
        }
        prev = &row.hash;
    }
    Ok(rows.len())
}

/// The outcome of checking the whole stored chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Rows checked.
    pub events: usize,
    /// The first row that does not verify, if any.
    pub broken: Option<ChainBreak>,
}

pub(crate) const COLUMNS: &str = "seq, id, at, actor, action, target_kind, target_id, environment_id, details, ip, prev_hash, hash";

/// Reads the whole log in seq order and checks its chain.
pub async fn verify(db: &crate::Db) -> Result<VerifyReport> {
    let rows =
        sqlx::query_as::<_, AuditRow>(sql!("SELECT {COLUMNS} FROM audit_events ORDER BY seq"))
            .fetch_all(&db.pool)
            .await?;
    Ok(match verify_chain(&rows) {
        Ok(events) => VerifyReport {
            events,
            broken: None,
        },
        Err(b) => VerifyReport {
            events: rows.len(),
            broken: Some(b),
        },
    })
}

/// What to list; every filter is optional.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    /// Matches `action` by prefix (`release.` lists every release action).
    pub action_prefix: Option<String>,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    /// Inclusive lower bound on `at`, in ms.
    pub since: Option<i64>,
    /// Exclusive upper bound on `at`, in ms.
    pub until: Option<i64>,
}

/// The most rows one listing returns.
pub const MAX_LIST: i64 = 500;

/// `(id, name)` of `ids` by `sql`, whose `{ids}` becomes one placeholder per id (the ids go
/// through binds); nothing asked, nothing read.
async fn names_of(
    db: &crate::Db,
    sql: &str,
    ids: &std::collections::BTreeSet<&str>,
) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
    let sql = sql.replace("{ids}", &marks.join(", "));
    let mut query = sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(sql));
    for id in ids {
        query = query.bind(*id);
    }
    Ok(query.fetch_all(&db.pool).await?)
}

/// What people call the targets of `rows`, by `(target_kind, target_id)`: a pipeline's,
/// node's, group's or environment's name, a user's email, a release as "v3 of edge-logs", a
/// token by its label, a freeze window by its text. Targets gone since are left out (the page
/// shows their ids).
pub async fn target_names(
    db: &crate::Db,
    rows: &[AuditRow],
) -> Result<std::collections::HashMap<(String, String), String>> {
    const NAMES: [(&str, &str); 9] = [
        (
            "environment",
            "SELECT id, name FROM environments WHERE id IN ({ids})",
        ),
        (
            "pipeline",
            "SELECT id, name FROM pipelines WHERE id IN ({ids})",
        ),
        ("node", "SELECT id, name FROM nodes WHERE id IN ({ids})"),
        (
            "node_group",
            "SELECT id, name FROM node_groups WHERE id IN ({ids})",
        ),
        ("user", "SELECT id, email FROM users WHERE id IN ({ids})"),
        (
            "api_token",
            "SELECT id, name FROM api_tokens WHERE id IN ({ids})",
        ),
        (
            "enrollment_token",
            "SELECT id, label FROM enrollment_tokens WHERE id IN ({ids})",
        ),
        (
            "freeze_window",
            "SELECT id, spec FROM freeze_windows WHERE id IN ({ids})",
        ),
        (
            "release",
            "SELECT r.id, 'v' || CAST(r.canary_version AS TEXT) || ' of ' || p.name
             FROM releases r JOIN pipelines p ON p.id = r.pipeline_id WHERE r.id IN ({ids})",
        ),
    ];
    let mut names = std::collections::HashMap::new();
    for (kind, sql) in NAMES {
        let mut ids: std::collections::BTreeSet<&str> = (rows.iter())
            .filter(|r| r.target_kind == kind)
            .map(|r| r.target_id.as_str())
            .collect();
        // Every row's environment too, for the page's Environment column.
        if kind == "environment" {
            ids.extend(rows.iter().filter_map(|r| r.environment_id.as_deref()));
        }
        for (id, name) in names_of(db, sql, &ids).await? {
            names.insert((kind.to_owned(), id), name);
        }
    }
    Ok(names)
}

/// Events matching the filter, newest first, at most `limit` (clamped to 1..=500).
pub async fn list(db: &crate::Db, filter: &AuditFilter, limit: i64) -> Result<Vec<AuditRow>> {
    enum Bind {
        Text(String),
        Int(i64),
    }
    let mut clauses: Vec<String> = Vec::new();
    let mut binds: Vec<Bind> = Vec::new();
    let mut push = |clause: &str, b: Bind| {
        binds.push(b);
        clauses.push(clause.replace('?', &format!("${}", binds.len())));
    };
    fn nonempty(s: &Option<String>) -> Option<&str> {
        s.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }
    if let Some(a) = nonempty(&filter.actor) {
        push("actor = ?", Bind::Text(a.into()));
    }
    if let Some(p) = nonempty(&filter.action_prefix) {
        let escaped = p
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        push(
            "action LIKE ? ESCAPE '\\'",
            Bind::Text(format!("{escaped}%")),
        );
    }
    if let Some(k) = nonempty(&filter.target_kind) {
        push("target_kind = ?", Bind::Text(k.into()));
    }
    if let Some(t) = nonempty(&filter.target_id) {
        push("target_id = ?", Bind::Text(t.into()));
    }
    if let Some(s) = filter.since {
        push("at >= ?", Bind::Int(s));
    }
    if let Some(u) = filter.until {
        push("at < ?", Bind::Int(u));
    }
    let filter_sql = if clauses.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", clauses.join(" AND "))
    };
    let limit_at = binds.len() + 1;
    // The query text holds only constants and placeholders; every value is bound.
    let mut q = sqlx::query_as::<_, AuditRow>(sql!(
        "SELECT {COLUMNS} FROM audit_events {filter_sql} ORDER BY seq DESC LIMIT ${limit_at}"
    ));
    for b in binds {
        q = match b {
            Bind::Text(s) => q.bind(s),
            Bind::Int(i) => q.bind(i),
        };
    }
    Ok(q.bind(limit.clamp(1, MAX_LIST)).fetch_all(&db.pool).await?)
}

/// The newest events about any object of one kind (e.g. every rollout), newest first.
pub async fn for_kind(db: &crate::Db, target_kind: &str, limit: i64) -> Result<Vec<AuditRow>> {
    Ok(sqlx::query_as::<_, AuditRow>(sql!(
        "SELECT {COLUMNS} FROM audit_events WHERE target_kind = $1 ORDER BY seq DESC LIMIT $2"
    ))
    .bind(target_kind)
    .bind(limit)
    .fetch_all(&db.pool)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(details: &str) -> ChainFields<'_> {
        ChainFields {
            id: "e1",
            at: 1_700_000_000_000,
            actor: "alice",
            action: "pipeline.deploy",
            target_kind: "pipeline",
            target_id: "p1",
            environment_id: Some("env"),
            details,
            ip: None,
        }
    }

    /// A chain of `n` rows as `record` would store it.
    fn chain(n: i64) -> Vec<AuditRow> {
        let mut rows: Vec<AuditRow> = Vec::new();
        for seq in 1..=n {
            let prev_hash = rows.last().map(|r| r.hash.clone()).unwrap_or_default();
            let mut row = AuditRow {
                seq,
                id: format!("e{seq}"),
                at: 1_000 + seq,
                actor: "alice".into(),
                action: "pipeline.deploy".into(),
                target_kind: "pipeline".into(),
                target_id: format!("p{seq}"),
                environment_id: Some("env".into()),
                details: format!("{{\"version\":{seq}}}"),
                ip: None,
                prev_hash,
                hash: String::new(),
            };
            row.hash = chain_hash(&row.prev_hash, &row.chain_fields());
            rows.push(row);
        }
        rows
    }

    /// The stored spellings, written out once more: a change here is a change to every
    /// existing database's log, so it must be deliberate.
    const SPELLED: [(AuditAction, &str); 44] = {
        use AuditAction::*;
        [
            (ReleaseCreate, "release.create"),
            (ReleaseAdvance, "release.advance"),
            (ReleaseHold, "release.hold"),
            (ReleaseRollback, "release.rollback"),
            (ReleaseComplete, "release.complete"),
            (ReleaseRefused, "release.refused"),
            (PipelineCreate, "pipeline.create"),
            (PipelineDeploy, "pipeline.deploy"),
            (NodeEnroll, "node.enroll"),
            (NodeLabels, "node.labels"),
            (NodeRevoke, "node.revoke"),
            (NodeGroupCreate, "node_group.create"),
            (NodeGroupDelete, "node_group.delete"),
            (EnvironmentCreate, "environment.create"),
            (EnrollmentTokenCreate, "enrollment_token.create"),
            (EnrollmentTokenRevoke, "enrollment_token.revoke"),
            (ApiTokenCreate, "api_token.create"),
            (ApiTokenRevoke, "api_token.revoke"),
            (UserCreate, "user.create"),
            (UserGrantsSet, "user.grants.set"),
            (UserDisable, "user.disable"),
            (UserEnable, "user.enable"),
            (UserPasswordSet, "user.password.set"),
            (UserSessionsRevoke, "user.sessions.revoke"),
            (SessionSignIn, "session.sign_in"),
            (SessionSignOut, "session.sign_out"),
            (RolloutPercent, "rollout.percent"),
            (RolloutOrgPercent, "rollout.org.percent"),
            (RolloutOrgRemove, "rollout.org.remove"),
            (RolloutDelete, "rollout.delete"),
            (ReleasePause, "release.pause"),
            (ReleaseResume, "release.resume"),
            (EnvironmentLineStop, "environment.line_stop"),
            (EnvironmentLineLift, "environment.line_lift"),
            (FreezeWindowCreate, "freeze_window.create"),
            (FreezeWindowDelete, "freeze_window.delete"),
            (NodeSample, "node.sample"),
            (NodeTapStart, "node.tap_start"),
            (NodeTapStop, "node.tap_stop"),
            (NodeRestart, "node.restart"),
            (EnvironmentFreezeStart, "environment.freeze_start"),
            (EnvironmentFreezeEnd, "environment.freeze_end"),
            (WebhookCreate, "webhook.create"),
            (WebhookDelete, "webhook.delete"),
        ]
    };

    #[test]
    fn every_action_keeps_its_stored_spelling_and_kind_and_no_two_share_one() {
        assert_eq!(
            SPELLED.map(|(a, _)| a),
            AuditAction::ALL,
            "every action is spelled, once, in order"
        );
        let mut seen = std::collections::BTreeSet::new();
        for (action, spelled) in SPELLED {
            assert_eq!(action.as_str(), spelled);
            assert_eq!(action.to_string(), spelled);
            assert!(seen.insert(spelled), "{spelled} is used twice");
            assert_eq!(
                Some(action.target_kind()),
                spelled.split_once('.').map(|(kind, _)| kind),
                "{spelled}"
            );
            // And reads back: `parse` is `as_str` inverted.
            assert_eq!(AuditAction::parse(spelled), Some(action));
        }
        assert_eq!(AuditAction::parse("release"), None);
        assert_eq!(AuditAction::parse("Release.Create"), None);
        assert_eq!(AuditAction::parse(""), None);
    }

    #[test]
    fn the_encoding_separates_fields_so_shifted_text_does_not_collide() {
        let a = ChainFields {
            actor: "ab",
            action: "c",
            ..fields("{}")
        };
        let b = ChainFields {
            actor: "a",
            action: "bc",
            ..fields("{}")
        };
        assert_ne!(canonical_bytes(&a), canonical_bytes(&b));
    }

    #[test]
    fn the_encoding_tells_an_absent_optional_from_an_empty_one() {
        let none = fields("{}");
        let empty = ChainFields {
            environment_id: Some(""),
            ..none
        };
        let ip = ChainFields {
            ip: Some(""),
            ..none
        };
        assert_ne!(canonical_bytes(&none), canonical_bytes(&empty));
        assert_ne!(canonical_bytes(&none), canonical_bytes(&ip));
    }

    #[test]
    fn the_encoding_is_stable() {
        let bytes = canonical_bytes(&ChainFields {
            id: "i",
            at: 1,
            actor: "a",
            action: "b",
            target_kind: "k",
            target_id: "t",
            environment_id: None,
            details: "{}",
            ip: Some("::1"),
        });
        let mut want = Vec::new();
        want.extend_from_slice(&1u64.to_be_bytes());
        want.extend_from_slice(b"i");
        want.extend_from_slice(&1i64.to_be_bytes());
        for s in ["a", "b", "k", "t"] {
            want.extend_from_slice(&(s.len() as u64).to_be_bytes());
            want.extend_from_slice(s.as_bytes());
        }
        want.push(0);
        want.extend_from_slice(&2u64.to_be_bytes());
        want.extend_from_slice(b"{}");
        want.push(1);
        want.extend_from_slice(&3u64.to_be_bytes());
        want.extend_from_slice(b"::1");
        assert_eq!(bytes, want);
    }

    #[test]
    fn the_hash_depends_on_the_previous_hash_and_every_field() {
        let base = chain_hash("", &fields("{}"));
        assert_eq!(base.len(), 64);
        assert_ne!(base, chain_hash("00", &fields("{}")));
        assert_ne!(base, chain_hash("", &fields("{ }")));
        assert_ne!(
            base,
            chain_hash(
                "",
                &ChainFields {
                    at: 1,
                    ..fields("{}")
                }
            )
        );
    }

    #[test]
    fn an_intact_chain_verifies() {
        assert_eq!(verify_chain(&chain(5)), Ok(5));
        assert_eq!(verify_chain(&[]), Ok(0));
    }

    #[test]
    fn an_edited_row_is_named() {
        let mut rows = chain(5);
        rows[2].details = "{\"version\":99}".into();
        let brk = verify_chain(&rows).unwrap_err();
        assert_eq!(brk.seq, 3);
        assert!(brk.reason.contains("edited"), "{}", brk.reason);
    }

    #[test]
    fn a_deleted_row_breaks_the_chain_at_the_next_row() {
        let mut rows = chain(5);
        rows.remove(1);
        let brk = verify_chain(&rows).unwrap_err();
        assert_eq!(brk.seq, 3);
        assert!(brk.reason.contains("prev_hash"), "{}", brk.reason);
    }

    #[test]
    fn reordered_rows_break_the_chain() {
        let mut rows = chain(5);
        rows.swap(1, 2);
        assert_eq!(verify_chain(&rows).unwrap_err().seq, 3);
        // Renumbered to look ordered, the links still do not match.
        let mut rows = chain(5);
        rows.swap(1, 2);
        rows[1].seq = 2;
        rows[2].seq = 3;
        assert_eq!(verify_chain(&rows).unwrap_err().seq, 2);
    }

    #[test]
    fn rows_from_before_the_chain_are_accepted_only_as_a_leading_run() {
        let mut legacy = chain(2);
        for r in &mut legacy {
            r.prev_hash.clear();
            r.hash.clear();
        }
        let mut rows = legacy.clone();
        rows.extend(chain(3).into_iter().map(|mut r| {
            r.seq += 2;
            r
        }));
        assert_eq!(verify_chain(&rows), Ok(5));
        // Blanking the hashes of a chained row does not pass for legacy.
        let mut rows = chain(3);
        rows[1].prev_hash.clear();
        rows[1].hash.clear();
        assert_eq!(verify_chain(&rows).unwrap_err().seq, 2);
    }
}
