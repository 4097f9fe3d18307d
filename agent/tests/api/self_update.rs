//! Self-update (`pendingAction: self_update`) against an HTTPS file server made here: a real
//! vf-agent process downloads, verifies and becomes the new build; a download that does not
//! hash to its checksum, an unsigned update where a key is pinned, or plain http are refused
//! and reported in `updateError`, the binary untouched.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use vf_agent::update::DeploymentMode;
use vf_agent::Agent;
use vf_protocol::PendingAction;

use crate::fake_server::FakeServer;

/// An HTTPS server on 127.0.0.1 answering every request with `body`; its certificate (PEM)
/// is self-signed, so clients must trust it (`--ca-file`).
struct FileServer {
    url: String,
    cert_pem: String,
}

async fn https_file_server(body: Vec<u8>) -> FileServer {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert_pem = certified.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/vf-agent-next", listener.local_addr().unwrap());
    let body = Arc::new(body);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tls.write_all(head.as_bytes()).await;
                let _ = tls.write_all(&body).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    FileServer { url, cert_pem }
}

/// The "next build": a script that records the arguments it was started with.
fn next_build(marker: &Path) -> Vec<u8> {
    format!("#!/bin/sh\necho \"$@\" > '{}'\n", marker.display()).into_bytes()
}

fn checksum_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn self_update(url: &str, checksum: String, signature: Option<String>) -> PendingAction {
    PendingAction {
        kind: "self_update".into(),
        target_version: "9.9.9".into(),
        download_url: url.into(),
        checksum,
        signature,
    }
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_real_agent_downloads_verifies_and_becomes_the_new_build_with_the_same_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started-with");
    let build = next_build(&marker);
    let files = https_file_server(build.clone()).await;
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &files.cert_pem).unwrap();
    let server = FakeServer::start().await;
    server.ask(self_update(&files.url, checksum_of(&build), None));

    // A copy of this build, so the test replaces its own file and nothing else.
    let exe = dir.path().join("vf-agent");
    std::fs::copy(env!("CARGO_BIN_EXE_vf-agent"), &exe).unwrap();
    let data = dir.path().join("data");
    let mut child = tokio::process::Command::new(&exe)
        .args([
            "--server",
            &server.url,
            "--token",
            crate::fake_server::ENROLLMENT_TOKEN,
        ])
        .arg("--data-dir")
        .arg(&data)
        .arg("--ca-file")
        .arg(&ca)
        .args(["--no-push", "--hostname", "upgrading-1"])
        .env("VF_DEPLOYMENT_MODE", "STANDALONE")
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    wait_for("the new build to start", || marker.exists()).await;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(
        std::fs::read(&exe).unwrap(),
        build,
        "the executable was replaced"
    );
    let started_with = std::fs::read_to_string(&marker).unwrap();
    assert!(
        started_with.starts_with(&format!("--server {} --token", server.url)),
        "{started_with}"
    );
    assert!(
        started_with.contains("--hostname upgrading-1"),
        "{started_with}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".vf-agent-update")
        })
        .collect();
    assert!(leftovers.is_empty(), "no download left behind");
}

/// An in-process agent (the test binary is its executable, so nothing may be installed):
/// refusals come back in the next heartbeat's `updateError`, once, and the version stays.
async fn refused(action: PendingAction, key: Option<&SigningKey>, extra_root: &str) -> String {
    refused_in(DeploymentMode::Standalone, action, key, extra_root).await
}

async fn refused_in(
    mode: DeploymentMode,
    action: PendingAction,
    key: Option<&SigningKey>,
    extra_root: &str,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start().await;
    server.ask(action);
    let mut options = server.options(dir.path());
    options.deployment_mode = Some(mode);
    options.extra_root = Some(reqwest::Certificate::from_pem(extra_root.as_bytes()).unwrap());
    options.update_key = key.map(|k| {
        STANDARD
            .encode(k.verifying_key().to_bytes())
            .parse()
            .unwrap()
    });
    let mut agent = Agent::start(options).await.unwrap();
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();
    let heartbeats = server.heartbeats(agent.node_id());
    assert_eq!(
        heartbeats[0].deployment_mode.as_deref(),
        Some(mode.as_str())
    );
    let last = heartbeats.last().unwrap();
    assert_eq!(
        last.agent_version.as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    last.update_error.clone().expect("an updateError")
}

#[tokio::test]
async fn a_download_that_does_not_match_its_checksum_is_refused_and_reported() {
    let files = https_file_server(b"tampered".to_vec()).await;
    let error = refused(
        self_update(&files.url, checksum_of(b"the real build"), None),
        None,
        &files.cert_pem,
    )
    .await;
    assert!(error.starts_with("checksum mismatch"), "{error}");
}

#[tokio::test]
async fn with_a_pinned_key_an_unsigned_or_wrongly_signed_update_is_refused() {
    let build = b"the real build".to_vec();
    let files = https_file_server(build.clone()).await;
    let publisher = SigningKey::from_bytes(&[3u8; 32]);
    let error = refused(
        self_update(&files.url, checksum_of(&build), None),
        Some(&publisher),
        &files.cert_pem,
    )
    .await;
    assert!(error.contains("not signed"), "{error}");

    let digest: [u8; 32] = Sha256::digest(&build).into();
    let forged = SigningKey::from_bytes(&[4u8; 32]).sign(&digest);
    let error = refused(
        self_update(
            &files.url,
            checksum_of(&build),
            Some(STANDARD.encode(forged.to_bytes())),
        ),
        Some(&publisher),
        &files.cert_pem,
    )
    .await;
    assert!(error.contains("does not verify"), "{error}");
}

#[tokio::test]
async fn plain_http_is_refused_before_anything_is_downloaded() {
    let files = https_file_server(Vec::new()).await;
    let error = refused(
        self_update("http://127.0.0.1:9/vf-agent", checksum_of(b"x"), None),
        None,
        &files.cert_pem,
    )
    .await;
    assert!(error.contains("must be https"), "{error}");
}

#[tokio::test]
async fn an_agent_in_a_container_refuses_to_replace_itself_and_says_to_upgrade_the_image() {
    let build = b"the real build".to_vec();
    let files = https_file_server(build.clone()).await;
    let error = refused_in(
        DeploymentMode::Docker,
        self_update(&files.url, checksum_of(&build), None),
        None,
        &files.cert_pem,
    )
    .await;
    assert!(error.contains("runs in a container"), "{error}");
    assert!(error.contains("upgrade its image"), "{error}");
}

/// A simulated node has no binary of its own: it takes the target version at once, so an
/// agent release can be rehearsed on a simulated fleet.
#[tokio::test]
async fn a_simulated_node_reports_the_target_version_at_once_without_downloading() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start().await;
    server.ask(self_update(
        "https://127.0.0.1:9/unreachable",
        checksum_of(b"x"),
        None,
    ));
    let mut agent = Agent::start_simulated(server.options(dir.path()), Default::default())
        .await
        .unwrap();
    agent.poll_once().await.unwrap();
    agent.poll_once().await.unwrap();
    let last = server.heartbeats(agent.node_id()).pop().unwrap();
    assert_eq!(last.agent_version.as_deref(), Some("9.9.9"));
    assert_eq!(last.update_error, None);
}
