//! Self-update: the server's `pendingAction` of type `self_update` asks this agent to become
//! another build. The security model (docs/agent.md, "Self-update"):
//!
//! - **HTTPS only**, redirects included: the binary becomes the agent process, often root.
//! - **sha256**: the download must hash to the action's `checksum` (`sha256:<hex>`), or it is
//!   thrown away. This proves the bytes are the ones the server meant.
//! - **ed25519 signature**, when the agent is given a public key (`--update-public-key`,
//!   `VF_UPDATE_PUBLIC_KEY`, standard base64 of the raw 32-byte key): the action's
//!   `signature` (standard base64) must verify over the raw 32-byte sha256 digest. This
//!   proves the publisher built it, so a compromised server cannot push its own binary.
//!   With a key set, an update without a signature is refused.
//! - **Atomic replace**: the download goes to a file beside the running executable, is made
//!   executable and renamed over it; the agent then stops its pipelines and executes the new
//!   binary with the same arguments. A failure before the rename leaves the old binary.
//! - **Not in a container** (`deploymentMode: DOCKER`): the image is what to upgrade; the
//!   agent refuses and reports why in `updateError`.
//!
//! Every refusal is a sentence for `updateError`, which the heartbeat carries until the
//! server stops asking for that version.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use vf_protocol::PendingAction;

/// The `pendingAction.type` this module performs.
pub const SELF_UPDATE: &str = "self_update";

/// Longest download: a slow link may take minutes for a 50 MB binary, but never forever.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// How the agent is deployed, as heartbeats report it (`deploymentMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeploymentMode {
    Standalone,
    Docker,
}

impl DeploymentMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentMode::Standalone => "STANDALONE",
            DeploymentMode::Docker => "DOCKER",
        }
    }

    /// `VF_DEPLOYMENT_MODE` when set (`DOCKER` or `STANDALONE`), else DOCKER when
    /// `/.dockerenv` exists, else STANDALONE.
    pub fn detect() -> DeploymentMode {
        match std::env::var("VF_DEPLOYMENT_MODE").ok().as_deref() {
            Some("DOCKER") => DeploymentMode::Docker,
            Some("STANDALONE") => DeploymentMode::Standalone,
            _ if Path::new("/.dockerenv").exists() => DeploymentMode::Docker,
            _ => DeploymentMode::Standalone,
        }
    }
}

/// The publisher's ed25519 public key updates must be signed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateKey(VerifyingKey);

impl FromStr for UpdateKey {
    type Err = String;

    /// Standard base64 of the raw 32-byte key.
    fn from_str(text: &str) -> Result<UpdateKey, String> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|e| format!("the update public key is not base64: {e}"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
            format!(
                "the update public key must be 32 bytes (an ed25519 key), not {}",
                b.len()
            )
        })?;
        VerifyingKey::from_bytes(&bytes)
            .map(UpdateKey)
            .map_err(|_| "the update public key is not an ed25519 key".to_string())
    }
}

/// A `self_update` action, checked: what to fetch and what it must hash to.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateRequest {
    pub target_version: String,
    pub url: reqwest::Url,
    pub sha256: [u8; 32],
    pub signature: Option<Signature>,
}

/// Checks `action` before anything is downloaded. `mode` refuses containers.
pub fn check(action: &PendingAction, mode: DeploymentMode) -> Result<UpdateRequest, String> {
    if action.kind != SELF_UPDATE {
        return Err(format!("unknown pending action {:?}", action.kind));
    }
    if mode == DeploymentMode::Docker {
        return Err(format!(
            "cannot update to {} in place: this agent runs in a container (deploymentMode \
             DOCKER); upgrade its image instead",
            action.target_version
        ));
    }
    let url = reqwest::Url::parse(&action.download_url)
        .map_err(|e| format!("downloadUrl is not a URL: {e}"))?;
    if url.scheme() != "https" {
        return Err(format!(
            "refusing to download an update over {}: downloadUrl must be https",
            url.scheme()
        ));
    }
    let hex = action
        .checksum
        .trim()
        .strip_prefix("sha256:")
        .ok_or("checksum must be sha256:<64 hex digits>")?;
    let sha256: [u8; 32] = hex::decode(hex.to_ascii_lowercase())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("checksum must be sha256:<64 hex digits>")?;
    let signature = match action.signature.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => {
            let bytes = STANDARD
                .decode(text)
                .map_err(|e| format!("signature is not base64: {e}"))?;
            let bytes: [u8; 64] = bytes
                .try_into()
                .map_err(|_| "signature must be 64 bytes (ed25519)".to_string())?;
            Some(Signature::from_bytes(&bytes))
        }
    };
    Ok(UpdateRequest {
        target_version: action.target_version.clone(),
        url,
        sha256,
        signature,
    })
}

/// Whether a download hashing to `digest` may be installed: it matches the checksum, and,
/// when the agent has a key, the signature verifies over the digest.
pub fn verify(
    request: &UpdateRequest,
    digest: &[u8; 32],
    key: Option<&UpdateKey>,
) -> Result<(), String> {
    if *digest != request.sha256 {
        return Err(format!(
            "checksum mismatch: expected sha256:{}, the download is sha256:{}",
            hex::encode(request.sha256),
            hex::encode(digest)
        ));
    }
    let Some(UpdateKey(key)) = key else {
        return Ok(());
    };
    let signature = request
        .signature
        .as_ref()
        .ok_or("the update is not signed, and this agent requires signed updates")?;
    key.verify_strict(digest, signature)
        .map_err(|_| "the update's signature does not verify against this agent's key".into())
}

/// The client updates are fetched with: https redirects only, a long timeout, and the
/// extra root certificate the agent trusts (`--ca-file`), if any.
pub fn client(extra_root: Option<&reqwest::Certificate>) -> Result<reqwest::Client, String> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        if attempt.url().scheme() != "https" {
            attempt.error("refusing a redirect away from https")
        } else if attempt.previous().len() >= 5 {
            attempt.error("more than 5 redirects")
        } else {
            attempt.follow()
        }
    });
    let mut builder = reqwest::Client::builder()
        .timeout(DOWNLOAD_TIMEOUT)
        .redirect(policy)
        .https_only(true);
    if let Some(root) = extra_root {
        builder = builder.add_root_certificate(root.clone());
    }
    builder.build().map_err(|e| format!("update client: {e}"))
}

/// Downloads the request's binary beside `exe`, hashing as it writes, and verifies it.
/// Returns the verified file (executable), or why not; nothing is left behind on failure.
pub async fn download(
    http: &reqwest::Client,
    request: &UpdateRequest,
    key: Option<&UpdateKey>,
    exe: &Path,
) -> Result<PathBuf, String> {
    let dir = exe.parent().ok_or("the agent's executable has no folder")?;
    let temp = dir.join(format!(
        ".vf-agent-update-{}-{}",
        request.target_version.replace(['/', '\\'], "_"),
        std::process::id()
    ));
    let result = fetch_into(http, request, key, &temp).await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&temp).await;
    }
    result.map(|()| temp)
}

async fn fetch_into(
    http: &reqwest::Client,
    request: &UpdateRequest,
    key: Option<&UpdateKey>,
    temp: &Path,
) -> Result<(), String> {
    let fail = |what: &'static str| move |e: std::io::Error| format!("{what}: {e}");
    let mut response = http
        .get(request.url.clone())
        .send()
        .await
        .map_err(|e| format!("downloading {}: {e}", request.url))?;
    if !response.status().is_success() {
        return Err(format!(
            "downloading {}: the server answered {}",
            request.url,
            response.status()
        ));
    }
    let mut file = tokio::fs::File::create(temp)
        .await
        .map_err(fail("writing the download"))?;
    let mut hasher = Sha256::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("downloading {}: {e}", request.url))?
    {
        hasher.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(fail("writing the download"))?;
    }
    file.sync_all()
        .await
        .map_err(fail("writing the download"))?;
    drop(file);
    let digest: [u8; 32] = hasher.finalize().into();
    verify(request, &digest, key)?;
    make_executable(temp).await
}

#[cfg(unix)]
async fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .await
        .map_err(|e| format!("making the download executable: {e}"))
}

#[cfg(not(unix))]
async fn make_executable(_: &Path) -> Result<(), String> {
    Ok(())
}

/// Puts the verified download in place of `exe`, in one rename (same folder, so the same
/// file system): a crash leaves either the old binary or the new one, never half of one.
pub fn install(verified: &Path, exe: &Path) -> Result<(), String> {
    std::fs::rename(verified, exe).map_err(|e| format!("replacing {}: {e}", exe.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    fn digest(bytes: &[u8]) -> [u8; 32] {
        Sha256::digest(bytes).into()
    }

    fn action(url: &str, checksum: &str, signature: Option<String>) -> PendingAction {
        PendingAction {
            kind: SELF_UPDATE.into(),
            target_version: "1.5.0".into(),
            download_url: url.into(),
            checksum: checksum.into(),
            signature,
        }
    }

    fn signing_key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    fn public_key() -> UpdateKey {
        STANDARD
            .encode(signing_key().verifying_key().to_bytes())
            .parse()
            .unwrap()
    }

    const BINARY: &[u8] = b"#!/bin/sh\necho new agent\n";

    fn checksum() -> String {
        format!("sha256:{}", hex::encode(digest(BINARY)))
    }

    #[test]
    fn an_https_action_with_a_sha256_checksum_is_accepted() {
        let request = check(
            &action("https://updates.example/vf-agent", &checksum(), None),
            DeploymentMode::Standalone,
        )
        .unwrap();
        assert_eq!(request.sha256, digest(BINARY));
        assert_eq!(verify(&request, &digest(BINARY), None), Ok(()));
    }

    #[test]
    fn plain_http_a_bad_checksum_or_a_container_are_refused_before_downloading() {
        let refused = |a: PendingAction, mode| check(&a, mode).unwrap_err();
        assert!(refused(
            action("http://updates.example/a", &checksum(), None),
            DeploymentMode::Standalone
        )
        .contains("must be https"));
        for bad in ["md5:abc", "sha256:xyz", "sha256:abcd"] {
            assert!(refused(
                action("https://u.example/a", bad, None),
                DeploymentMode::Standalone
            )
            .contains("checksum must be sha256:<64 hex digits>"));
        }
        assert!(refused(
            action("https://u.example/a", &checksum(), None),
            DeploymentMode::Docker
        )
        .contains("runs in a container"));
        let mut other = action("https://u.example/a", &checksum(), None);
        other.kind = "reboot".into();
        assert!(refused(other, DeploymentMode::Standalone).contains("unknown pending action"));
    }

    #[test]
    fn a_download_that_does_not_hash_to_the_checksum_is_refused() {
        let request = check(
            &action("https://u.example/a", &checksum(), None),
            DeploymentMode::Standalone,
        )
        .unwrap();
        let err = verify(&request, &digest(b"something else"), None).unwrap_err();
        assert!(err.starts_with("checksum mismatch"), "{err}");
    }

    #[test]
    fn with_a_key_the_signature_over_the_raw_digest_must_verify() {
        let signature = STANDARD.encode(signing_key().sign(&digest(BINARY)).to_bytes());
        let signed = check(
            &action("https://u.example/a", &checksum(), Some(signature)),
            DeploymentMode::Standalone,
        )
        .unwrap();
        assert_eq!(
            verify(&signed, &digest(BINARY), Some(&public_key())),
            Ok(())
        );

        let unsigned = check(
            &action("https://u.example/a", &checksum(), None),
            DeploymentMode::Standalone,
        )
        .unwrap();
        let err = verify(&unsigned, &digest(BINARY), Some(&public_key())).unwrap_err();
        assert!(err.contains("not signed"), "{err}");

        let forged = SigningKey::from_bytes(&[9u8; 32]).sign(&digest(BINARY));
        let forged = check(
            &action(
                "https://u.example/a",
                &checksum(),
                Some(STANDARD.encode(forged.to_bytes())),
            ),
            DeploymentMode::Standalone,
        )
        .unwrap();
        let err = verify(&forged, &digest(BINARY), Some(&public_key())).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
    }

    #[test]
    fn a_public_key_must_be_32_bytes_of_standard_base64() {
        assert!("not base64!".parse::<UpdateKey>().is_err());
        let short = STANDARD.encode([1u8; 16]);
        assert!(short
            .parse::<UpdateKey>()
            .unwrap_err()
            .contains("must be 32 bytes"));
        assert_eq!(
            STANDARD
                .encode(signing_key().verifying_key().to_bytes())
                .parse::<UpdateKey>(),
            Ok(public_key())
        );
    }

    #[test]
    fn install_replaces_the_executable_in_one_rename() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("vf-agent");
        std::fs::write(&exe, b"old").unwrap();
        let verified = dir.path().join(".vf-agent-update");
        std::fs::write(&verified, BINARY).unwrap();
        install(&verified, &exe).unwrap();
        assert_eq!(std::fs::read(&exe).unwrap(), BINARY);
        assert!(!verified.exists());
    }
}
