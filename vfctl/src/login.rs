//! What `vfctl login` stores: the server and an API token, as JSON in
//! `<config dir>/vectorflow/vfctl.json` (`~/.config/vectorflow/vfctl.json` on Linux), readable
//! by its owner only (0600). `--server`/`VF_SERVER` and `--token`/`VF_API_TOKEN` override it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::api::CliError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credentials {
    pub server: String,
    pub token: String,
}

/// Where credentials live unless `--config-file` says otherwise.
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("vectorflow").join("vfctl.json"))
}

/// The stored credentials; `None` when nothing was stored.
pub fn load(path: &Path) -> Result<Option<Credentials>, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            CliError::Input(format!(
                "{}: not what vfctl login writes ({e}); run vfctl login again",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::Input(format!("{}: {e}", path.display()))),
    }
}

/// Writes `credentials` to `path`, readable by its owner only.
pub fn store(path: &Path, credentials: &Credentials) -> Result<(), CliError> {
    let fail = |e: std::io::Error| CliError::Input(format!("{}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let text =
        serde_json::to_string_pretty(credentials).map_err(|e| CliError::Input(e.to_string()))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        // A file that existed keeps its mode through open: narrow it first.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
        }
    }
    use std::io::Write;
    let mut file = options.open(path).map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.write_all(b"\n").map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_credentials_read_back_and_only_their_owner_can_read_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("vfctl.json");
        assert_eq!(load(&path).unwrap(), None);
        let credentials = Credentials {
            server: "https://vf.example".into(),
            token: "vfa_secret".into(),
        };
        store(&path, &credentials).unwrap();
        assert_eq!(load(&path).unwrap(), Some(credentials));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not json").unwrap();
        let refused = load(&path).unwrap_err().to_string();
        assert!(refused.contains("run vfctl login again"), "{refused}");
    }
}
