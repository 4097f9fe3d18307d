//! The node identity returned once by enrollment, kept in `<data_dir>/identity.json` (0600) so a
//! restarted agent keeps its node id instead of enrolling a duplicate node.

use std::{fmt, io, path::Path};

use serde::{Deserialize, Serialize};

use crate::error::{AgentError, Result};

const FILE_NAME: &str = "identity.json";

/// What the agent must remember across restarts.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub node_id: String,
    pub node_token: String,
    pub environment_id: String,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("node_id", &self.node_id)
            .field("node_token", &"<redacted>")
            .field("environment_id", &self.environment_id)
            .finish()
    }
}

impl Identity {
    /// Reads the stored identity; `None` when this data directory has never enrolled.
    pub async fn load(data_dir: &Path) -> Result<Option<Identity>> {
        let path = data_dir.join(FILE_NAME);
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(AgentError::io(format!("reading {}", path.display()), e));
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| AgentError::CorruptIdentity { path, source })
    }

    /// Stores the identity atomically, readable by the owner only.
    pub async fn save(&self, data_dir: &Path) -> Result<()> {
        let path = data_dir.join(FILE_NAME);
        let context = || format!("writing {}", path.display());
        tokio::fs::create_dir_all(data_dir)
            .await
            .map_err(|e| AgentError::io(context(), e))?;
        let body =
            serde_json::to_vec_pretty(self).map_err(|e| AgentError::io(context(), e.into()))?;
        let tmp = data_dir.join(format!("{FILE_NAME}.tmp"));
        write_private(&tmp, &body)
            .await
            .map_err(|e| AgentError::io(context(), e))?;
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| AgentError::io(context(), e))
    }
}

async fn write_private(path: &Path, body: &[u8]) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path).await?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // `mode` only applies to new files; a stale temp file may have wider permissions.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .await?;
    }
    file.write_all(body).await?;
    file.sync_all().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            node_id: "n1".into(),
            node_token: "secret-token".into(),
            environment_id: "e1".into(),
        }
    }

    #[tokio::test]
    async fn saved_identity_loads_back_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        identity().save(dir.path()).await.unwrap();
        assert_eq!(Identity::load(dir.path()).await.unwrap(), Some(identity()));
    }

    #[tokio::test]
    async fn missing_identity_loads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Identity::load(dir.path()).await.unwrap(), None);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn identity_file_is_readable_by_the_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        identity().save(dir.path()).await.unwrap();
        let meta = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }

    #[tokio::test]
    async fn corrupt_identity_is_an_error_rather_than_a_silent_reenrollment() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        assert!(matches!(
            Identity::load(dir.path()).await,
            Err(AgentError::CorruptIdentity { .. })
        ));
    }

    #[test]
    fn debug_output_never_shows_the_node_token() {
        assert!(!format!("{:?}", identity()).contains("secret-token"));
    }
}
