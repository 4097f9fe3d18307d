//! Pipelines, their immutable numbered versions, and direct deploys.

use serde_json::json;
use vf_rules::freeze::Change;

use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::fleet::{parse_labels, Labels};
use crate::ids::{new_id, sha256_hex};
use crate::{ControlError, Db, Result};

/// Largest config body accepted, in bytes.
pub const MAX_CONFIG_BYTES: usize = 512 * 1024;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PipelineRow {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub node_selector: String,
    pub log_level: Option<String>,
    pub deployed_version: Option<i64>,
    pub row_version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

pub(crate) const PIPELINE_COLUMNS: &str = "id, environment_id, name, node_selector, log_level, \
    deployed_version, row_version, created_at, updated_at";

impl PipelineRow {
    pub fn node_selector(&self) -> Labels {
        serde_json::from_str(&self.node_selector).unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct VersionRow {
    pub pipeline_id: String,
    pub version: i64,
    pub config_yaml: String,
    pub checksum: String,
    pub changelog: String,
    pub author: String,
    pub created_at: i64,
}

pub(crate) const VERSION_COLUMNS: &str =
    "pipeline_id, version, config_yaml, checksum, changelog, author, created_at";

fn parse_pipeline_name(name: &str) -> Result<String> {
    let name = name.trim();
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(name.to_string())
    } else {
        Err(ControlError::invalid(
            "name",
            "1-100 characters of letters, digits, '-', '_' or '.'",
        ))
    }
}

/// A config body as delivered: non-empty text within the size limit.
pub fn parse_config(config_yaml: &str) -> Result<String> {
    if config_yaml.trim().is_empty() {
        return Err(ControlError::invalid("configYaml", "must not be empty"));
    }
    if config_yaml.len() > MAX_CONFIG_BYTES {
        return Err(ControlError::invalid(
            "configYaml",
            format!("must be at most {} KiB", MAX_CONFIG_BYTES / 1024),
        ));
    }
    vf_rules::check_config_yaml(config_yaml)
        .map_err(|problem| ControlError::invalid("configYaml", problem.to_string()))?;
    Ok(config_yaml.to_string())
}

fn parse_changelog(changelog: &str) -> Result<String> {
    if changelog.len() > 4000 {
        return Err(ControlError::invalid(
            "changelog",
            "at most 4000 characters",
        ));
    }
    Ok(changelog.trim().to_string())
}

pub async fn list_pipelines(db: &Db, environment_id: &str) -> Result<Vec<PipelineRow>> {
    Ok(sqlx::query_as::<_, PipelineRow>(crate::sql!(
        "SELECT {PIPELINE_COLUMNS} FROM pipelines WHERE environment_id = $1 ORDER BY name"
    ))
    .bind(environment_id)
    .fetch_all(&db.pool)
    .await?)
}

pub async fn get_pipeline(db: &Db, id: &str) -> Result<PipelineRow> {
    sqlx::query_as::<_, PipelineRow>(crate::sql!(
        "SELECT {PIPELINE_COLUMNS} FROM pipelines WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("pipeline {id}")))
}

pub async fn create_pipeline(
    db: &Db,
    actor: &Actor,
    environment_id: &str,
    name: &str,
    node_selector: Labels,
    now: i64,
) -> Result<PipelineRow> {
    let name = parse_pipeline_name(name)?;
    let selector = parse_labels("nodeSelector", node_selector)?;
    crate::fleet::get_environment(db, environment_id).await?;
    let taken = sqlx::query("SELECT id FROM pipelines WHERE environment_id = $1 AND name = $2")
        .bind(environment_id)
        .bind(&name)
        .fetch_optional(&db.pool)
        .await?;
    if taken.is_some() {
        return Err(ControlError::Conflict(format!(
            "a pipeline named {name} already exists in this environment"
        )));
    }
    let id = new_id();
    let mut tx = audit::begin(db).await?;
    sqlx::query(
        "INSERT INTO pipelines (id, environment_id, name, node_selector, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $5)",
    )
    .bind(&id)
    .bind(environment_id)
    .bind(&name)
    .bind(serde_json::to_string(&selector)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::PipelineCreate,
            target_id: &id,
            environment_id: Some(environment_id),
            details: json!({ "name": name, "nodeSelector": selector }),
        },
    )
    .await?;
    get_pipeline(db, &id).await
}

pub async fn list_versions(db: &Db, pipeline_id: &str) -> Result<Vec<VersionRow>> {
    Ok(sqlx::query_as::<_, VersionRow>(crate::sql!(
        "SELECT {VERSION_COLUMNS} FROM pipeline_versions WHERE pipeline_id = $1 ORDER BY version DESC"
    ))
    .bind(pipeline_id)
    .fetch_all(&db.pool)
    .await?)
}

pub async fn get_version(db: &Db, pipeline_id: &str, version: i64) -> Result<VersionRow> {
    version_in(&db.pool, pipeline_id, version).await
}

/// One version of a pipeline, through `conn` (the pool, or a snapshot).
pub(crate) async fn version_in(
    conn: impl sqlx::AnyExecutor<'_>,
    pipeline_id: &str,
    version: i64,
) -> Result<VersionRow> {
    sqlx::query_as::<_, VersionRow>(crate::sql!(
        "SELECT {VERSION_COLUMNS} FROM pipeline_versions WHERE pipeline_id = $1 AND version = $2"
    ))
    .bind(pipeline_id)
    .bind(version)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("version {version} of pipeline {pipeline_id}")))
}

/// Refuses when the pipeline has a release in flight; `conn` is the pool, or a transaction
/// to re-check inside it.
pub async fn refuse_if_release_in_flight(
    conn: impl sqlx::AnyExecutor<'_>,
    pipeline_id: &str,
    what: &str,
) -> Result<()> {
    if crate::releases::in_flight_row(conn, pipeline_id)
        .await?
        .is_some()
    {
        return Err(ControlError::Conflict(format!(
            "cannot {what}: a release is in flight for this pipeline; complete or roll it back first"
        )));
    }
    Ok(())
}

/// Claims the pipeline row for the caller's transaction: bumps its row version if it is
/// still `row_version`. On PostgreSQL the update also locks the row until commit, so two
/// writers (a deploy and a canary create, two creates) queue instead of both numbering the
/// same next version; the second then sees a changed version and gets a conflict.
pub(crate) async fn claim_pipeline(
    conn: &mut sqlx::AnyConnection,
    pipeline_id: &str,
    row_version: i64,
) -> Result<()> {
    let done = sqlx::query(
        "UPDATE pipelines SET row_version = row_version + 1 WHERE id = $1 AND row_version = $2",
    )
    .bind(pipeline_id)
    .bind(row_version)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Err(ControlError::Conflict(
            "the pipeline changed meanwhile (another deploy or release); reload and try again"
                .into(),
        ));
    }
    Ok(())
}

/// Appends the next version inside the caller's transaction and returns its number.
pub(crate) async fn insert_version(
    conn: &mut sqlx::AnyConnection,
    pipeline_id: &str,
    config_yaml: &str,
    changelog: &str,
    author: &str,
    now: i64,
) -> Result<i64> {
    let next: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(MAX(version), 0) + 1 AS BIGINT) FROM pipeline_versions WHERE pipeline_id = $1",
    )
    .bind(pipeline_id)
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO pipeline_versions (pipeline_id, version, config_yaml, checksum, changelog, author, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(pipeline_id)
    .bind(next)
    .bind(config_yaml)
    .bind(sha256_hex(config_yaml.as_bytes()))
    .bind(changelog)
    .bind(author)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(|e| {
        if e.as_database_error().is_some_and(|d| d.is_unique_violation()) {
            ControlError::Conflict("another version was published meanwhile; reload and try again".into())
        } else {
            e.into()
        }
    })?;
    Ok(next)
}

/// Direct deploy: publishes `config_yaml` as the next version and makes it the deployed
/// version every eligible node converges on. Refused while a release is in flight, and for a
/// config identical to the deployed version. The caller runs the validator command first
/// ([`crate::config_check::validate`]).
pub async fn deploy(
    db: &Db,
    actor: &Actor,
    pipeline_id: &str,
    config_yaml: &str,
    changelog: &str,
    now: i64,
) -> Result<VersionRow> {
    deploy_noted(
        db,
        actor,
        pipeline_id,
        config_yaml,
        changelog,
        None,
        None,
        now,
    )
    .await
}

/// [`deploy`] with the reason the operator gave, kept in the audit event (`reason`), and an
/// admin's reason for deploying during a freeze window (`freeze_override`; the caller
/// checked the role).
#[allow(clippy::too_many_arguments)]
pub async fn deploy_noted(
    db: &Db,
    actor: &Actor,
    pipeline_id: &str,
    config_yaml: &str,
    changelog: &str,
    reason: Option<&str>,
    freeze_override: Option<&str>,
    now: i64,
) -> Result<VersionRow> {
    let config = parse_config(config_yaml)?;
    let changelog = parse_changelog(changelog)?;
    let pipeline = get_pipeline(db, pipeline_id).await?;
    refuse_if_release_in_flight(&db.pool, pipeline_id, "deploy directly").await?;
    crate::config_check::refuse_identical(db, &pipeline, &config).await?;
    let freeze_override = freeze_override
        .map(|r| crate::freeze::freeze_override(Some(r)))
        .transpose()?;
    let overridden = freeze_override.is_some();
    (crate::freeze::hold_of(db, &pipeline.environment_id, now).await?)
        .allow(Change::DirectDeploy, overridden)?;
    let mut tx = audit::begin(db).await?;
    claim_pipeline(&mut tx, pipeline_id, pipeline.row_version).await?;
    let env = &pipeline.environment_id;
    crate::freeze::refuse_in(&mut tx, env, Change::DirectDeploy, overridden, now).await?;
    let version =
        insert_version(&mut tx, pipeline_id, &config, &changelog, &actor.name, now).await?;
    sqlx::query("UPDATE pipelines SET deployed_version = $1, updated_at = $2 WHERE id = $3")
        .bind(version)
        .bind(now)
        .bind(pipeline_id)
        .execute(&mut *tx)
        .await?;
    // Re-check inside the transaction: a canary created between our check and now wins.
    refuse_if_release_in_flight(&mut *tx, pipeline_id, "deploy directly").await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::PipelineDeploy,
            target_id: pipeline_id,
            environment_id: Some(&pipeline.environment_id),
            details: json!({
                "version": version,
                "previousVersion": pipeline.deployed_version,
                "changelog": changelog,
                "reason": reason,
                "freezeOverride": freeze_override,
            }),
        },
    )
    .await?;
    get_version(db, pipeline_id, version).await
}

/// One line of a diff between two versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// ' ' unchanged, '+' added, '-' removed.
    pub op: char,
    pub text: String,
}

/// A line diff from version `from` to version `to`.
pub async fn diff_versions(
    db: &Db,
    pipeline_id: &str,
    from: i64,
    to: i64,
) -> Result<Vec<DiffLine>> {
    let a = get_version(db, pipeline_id, from).await?;
    let b = get_version(db, pipeline_id, to).await?;
    Ok(diff_lines(&a.config_yaml, &b.config_yaml))
}

/// The pure half of [`diff_versions`].
pub fn diff_lines(old: &str, new: &str) -> Vec<DiffLine> {
    similar::TextDiff::from_lines(old, new)
        .iter_all_changes()
        .map(|c| DiffLine {
            op: match c.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Delete => '-',
            },
            text: c.value().trim_end_matches('\n').to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_marks_added_and_removed_lines() {
        let d = diff_lines("a\nb\n", "a\nc\n");
        let ops: String = d.iter().map(|l| l.op).collect();
        assert_eq!(ops, " -+");
        assert_eq!(d[2].text, "c");
    }

    #[test]
    fn an_empty_config_is_refused_naming_the_field() {
        assert_eq!(
            parse_config("  \n").unwrap_err().to_string(),
            "configYaml: must not be empty"
        );
    }
}
