//! Node groups: named label criteria. No membership table: a node is in a group when its
//! labels match every criterion.

use serde_json::json;

use super::labels::{self, parse_labels, Labels};
use crate::audit::{self, Actor, AuditAction, AuditEntry};
use crate::ids::new_id;
use crate::{ControlError, Db, Result};

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct NodeGroupRow {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub criteria: String,
    pub created_at: i64,
}

impl NodeGroupRow {
    pub fn criteria(&self) -> Labels {
        labels::from_json(&self.criteria)
    }
}

pub async fn list_node_groups(db: &Db, environment_id: &str) -> Result<Vec<NodeGroupRow>> {
    Ok(sqlx::query_as::<_, NodeGroupRow>(
        "SELECT id, environment_id, name, criteria, created_at FROM node_groups
         WHERE environment_id = $1 ORDER BY name",
    )
    .bind(environment_id)
    .fetch_all(&db.pool)
    .await?)
}

pub async fn get_node_group(db: &Db, id: &str) -> Result<NodeGroupRow> {
    sqlx::query_as::<_, NodeGroupRow>(
        "SELECT id, environment_id, name, criteria, created_at FROM node_groups WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(&db.pool)
    .await?
    .ok_or_else(|| ControlError::NotFound(format!("node group {id}")))
}

pub async fn create_node_group(
    db: &Db,
    actor: &Actor,
    environment_id: &str,
    name: &str,
    criteria: Labels,
    now: i64,
) -> Result<NodeGroupRow> {
    let name = name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(ControlError::invalid("name", "1-100 characters"));
    }
    let criteria = parse_labels("criteria", criteria)?;
    let taken = sqlx::query("SELECT id FROM node_groups WHERE environment_id = $1 AND name = $2")
        .bind(environment_id)
        .bind(name)
        .fetch_optional(&db.pool)
        .await?;
    if taken.is_some() {
        return Err(ControlError::Conflict(format!(
            "a node group named {name} already exists in this environment"
        )));
    }
    let row = NodeGroupRow {
        id: new_id(),
        environment_id: environment_id.to_string(),
        name: name.to_string(),
        criteria: labels::to_json(&criteria),
        created_at: now,
    };
    let mut tx = audit::begin(db).await?;
    sqlx::query(
        "INSERT INTO node_groups (id, environment_id, name, criteria, created_at)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&row.id)
    .bind(&row.environment_id)
    .bind(&row.name)
    .bind(&row.criteria)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::NodeGroupCreate,
            target_id: &row.id,
            environment_id: Some(environment_id),
            details: json!({ "name": row.name, "criteria": criteria }),
        },
    )
    .await?;
    Ok(row)
}

/// Deletes a node group; refused while an in-flight release's plan names it (its later
/// stages could not select their nodes).
pub async fn delete_node_group(db: &Db, actor: &Actor, id: &str, now: i64) -> Result<()> {
    let row = get_node_group(db, id).await?;
    let plans: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT r.id, r.plan FROM releases r JOIN pipelines p ON p.id = r.pipeline_id
         WHERE p.environment_id = $1 AND r.status IN ('CANARY_DEPLOYED', 'HEALTH_CHECK')",
    )
    .bind(&row.environment_id)
    .fetch_all(&db.pool)
    .await?;
    for (release_id, plan) in plans {
        let names_group = plan
            .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
            .and_then(|v| vf_rules::RolloutPlan::parse(&v).ok())
            .is_some_and(|plan| plan.node_group_ids().contains(&id));
        if names_group {
            return Err(ControlError::Conflict(format!(
                "node group {} is used by release {release_id}, which is in flight; complete or roll it back first",
                row.name
            )));
        }
    }
    let mut tx = audit::begin(db).await?;
    sqlx::query("DELETE FROM node_groups WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit(
        now,
        AuditEntry {
            actor,
            action: AuditAction::NodeGroupDelete,
            target_id: id,
            environment_id: Some(&row.environment_id),
            details: json!({ "name": row.name, "criteria": row.criteria() }),
        },
    )
    .await?;
    Ok(())
}
