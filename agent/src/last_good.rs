//! The last config each pipeline ran healthily, in `<data_dir>/last-good/<pipelineId>.json`
//! (the served config as JSON), so the agent can go back to it after a crashing deploy, also
//! after the agent itself restarted.

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
};

use vf_protocol::PipelineConfig;

use crate::{
    checksum,
    crash::LastGood,
    error::{AgentError, Result},
    files::{write_atomic, PipelineId},
};

/// Every pipeline's last good config, in memory and on disk.
#[derive(Debug)]
pub struct LastGoodConfigs {
    dir: PathBuf,
    configs: BTreeMap<String, PipelineConfig>,
}

impl LastGoodConfigs {
    /// Reads what an earlier run stored; a file that does not parse or whose body does not
    /// match its checksum is skipped (and replaced once a version runs healthily).
    pub async fn load(data_dir: &Path) -> Result<LastGoodConfigs> {
        let dir = data_dir.join("last-good");
        let mut configs = BTreeMap::new();
        let context = || format!("could not read {}", dir.display());
        let mut entries = match tokio::fs::read_dir(&dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(LastGoodConfigs { dir, configs });
            }
            Err(e) => return Err(AgentError::io(context(), e)),
        };
        while let Some(entry) = entries
            .next_entry()
            .await
            .map_err(|e| AgentError::io(context(), e))?
        {
            let path = entry.path();
            let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str()?.strip_suffix(".json"))
            else {
                continue;
            };
            match read_config(&path).await {
                Ok(config) if config.pipeline_id == stem => {
                    configs.insert(stem.to_string(), config);
                }
                Ok(_) => {
                    tracing::warn!(path = %path.display(), "last good config names another pipeline; ignored")
                }
                Err(e) => tracing::warn!(path = %path.display(), "last good config ignored: {e}"),
            }
        }
        Ok(LastGoodConfigs { dir, configs })
    }

    /// The pipeline's last good config.
    pub fn get(&self, pipeline_id: &str) -> Option<&PipelineConfig> {
        self.configs.get(pipeline_id)
    }

    /// Where `config` stands against its pipeline's last good config.
    pub fn standing(&self, config: &PipelineConfig) -> LastGood {
        match self.get(&config.pipeline_id) {
            Some(good) if same_version(good, config) => LastGood::ThisVersion,
            Some(_) => LastGood::Another,
            None => LastGood::Nothing,
        }
    }

    /// Records `config` as its pipeline's last good config. On a write error it is still kept
    /// in memory, so this run can go back to it; only a restart of the agent forgets it.
    pub async fn save(&mut self, id: &PipelineId, config: &PipelineConfig) -> io::Result<()> {
        self.configs.insert(id.to_string(), config.clone());
        tokio::fs::create_dir_all(&self.dir).await?;
        let json = serde_json::to_vec_pretty(config).map_err(io::Error::other)?;
        write_atomic(&self.path(id), &json).await
    }

    /// Forgets every pipeline not in `keep` (no longer served to this node).
    pub async fn retain(&mut self, keep: &[&PipelineId]) -> io::Result<()> {
        let gone: Vec<String> = self
            .configs
            .keys()
            .filter(|id| !keep.iter().any(|k| k.as_str() == id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            self.configs.remove(&id);
            match tokio::fs::remove_file(self.dir.join(format!("{id}.json"))).await {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    fn path(&self, id: &PipelineId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }
}

fn same_version(a: &PipelineConfig, b: &PipelineConfig) -> bool {
    a.version == b.version && a.checksum == b.checksum
}

async fn read_config(path: &Path) -> io::Result<PipelineConfig> {
    let bytes = tokio::fs::read(path).await?;
    let config: PipelineConfig = serde_json::from_slice(&bytes).map_err(io::Error::other)?;
    checksum::verify(&config.config_yaml, &config.checksum).map_err(io::Error::other)?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::config;

    #[tokio::test]
    async fn saved_config_is_found_again_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let id = PipelineId::parse("p1").unwrap();
        let mut store = LastGoodConfigs::load(dir.path()).await.unwrap();
        store.save(&id, &config("p1", 4, "a: 1")).await.unwrap();

        let reloaded = LastGoodConfigs::load(dir.path()).await.unwrap();

        assert_eq!(reloaded.get("p1"), Some(&config("p1", 4, "a: 1")));
        assert_eq!(
            reloaded.standing(&config("p1", 4, "a: 1")),
            LastGood::ThisVersion
        );
        assert_eq!(
            reloaded.standing(&config("p1", 5, "a: 2")),
            LastGood::Another
        );
        assert_eq!(
            reloaded.standing(&config("p2", 1, "a: 1")),
            LastGood::Nothing
        );
    }

    #[tokio::test]
    async fn tampered_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let id = PipelineId::parse("p1").unwrap();
        let mut store = LastGoodConfigs::load(dir.path()).await.unwrap();
        store.save(&id, &config("p1", 4, "a: 1")).await.unwrap();
        let path = dir.path().join("last-good/p1.json");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("a: 1", "a: 666")).unwrap();

        let reloaded = LastGoodConfigs::load(dir.path()).await.unwrap();

        assert_eq!(reloaded.get("p1"), None);
    }

    #[tokio::test]
    async fn pipelines_no_longer_held_are_forgotten_on_disk_too() {
        let dir = tempfile::tempdir().unwrap();
        let (p1, p2) = (
            PipelineId::parse("p1").unwrap(),
            PipelineId::parse("p2").unwrap(),
        );
        let mut store = LastGoodConfigs::load(dir.path()).await.unwrap();
        store.save(&p1, &config("p1", 1, "a")).await.unwrap();
        store.save(&p2, &config("p2", 1, "b")).await.unwrap();

        store.retain(&[&p2]).await.unwrap();

        assert!(!dir.path().join("last-good/p1.json").exists());
        let reloaded = LastGoodConfigs::load(dir.path()).await.unwrap();
        assert_eq!(
            (reloaded.get("p1"), reloaded.get("p2").map(|c| c.version)),
            (None, Some(1))
        );
    }
}
