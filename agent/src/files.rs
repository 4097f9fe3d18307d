//! On-disk layout under the data directory: `pipelines/<pipelineId>.yaml`, written atomically
//! so a process (re)starting never reads half a config.

use std::{
    fmt, io,
    path::{Path, PathBuf},
};

/// A pipeline id that is safe to use as a file name (no separators, no leading dot).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PipelineId(String);

impl PipelineId {
    /// Accepts ids made of ASCII letters, digits, `-`, `_` and `.`, not starting with `.`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let valid = !raw.is_empty()
            && raw.len() <= 128
            && !raw.starts_with('.')
            && raw
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if valid {
            Ok(PipelineId(raw.to_string()))
        } else {
            Err(format!("invalid pipeline id {raw:?}; config not applied"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PipelineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `pipelines/` folder of one agent.
#[derive(Debug, Clone)]
pub struct PipelineFiles {
    dir: PathBuf,
}

impl PipelineFiles {
    pub fn new(data_dir: &Path) -> Self {
        PipelineFiles {
            dir: data_dir.join("pipelines"),
        }
    }

    pub fn path(&self, id: &PipelineId) -> PathBuf {
        self.dir.join(format!("{id}.yaml"))
    }

    /// Writes the config to a temporary file and renames it into place.
    pub async fn write(&self, id: &PipelineId, yaml: &str) -> io::Result<PathBuf> {
        tokio::fs::create_dir_all(&self.dir).await?;
        let path = self.path(id);
        write_atomic(&path, yaml.as_bytes()).await?;
        Ok(path)
    }

    /// Removes the config file; a file that is already gone is fine.
    pub async fn remove(&self, id: &PipelineId) -> io::Result<()> {
        match tokio::fs::remove_file(self.path(id)).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes `*.yaml` files left by an earlier run for pipelines not in `keep`.
    pub async fn remove_others(&self, keep: &[&PipelineId]) -> io::Result<()> {
        let mut entries = match tokio::fs::read_dir(&self.dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        while let Some(entry) = entries.next_entry().await? {
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".yaml")) else {
                continue;
            };
            if !keep.iter().any(|id| id.as_str() == stem) {
                tokio::fs::remove_file(entry.path()).await?;
            }
        }
        Ok(())
    }
}

/// Writes `bytes` to `path` via a sibling temporary file and a rename.
pub async fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    tokio::fs::write(&tmp, bytes).await?;
    tokio::fs::rename(&tmp, path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_ids_are_accepted() {
        for id in ["p1", "0190f5a2-7c1e-7b0a", "web_logs.v2"] {
            assert!(PipelineId::parse(id).is_ok(), "{id}");
        }
    }

    #[test]
    fn ids_that_could_escape_the_pipelines_folder_are_rejected() {
        for id in ["", "../identity", "a/b", ".hidden", "a b", "a\\b"] {
            assert!(PipelineId::parse(id).is_err(), "{id}");
        }
    }
}
