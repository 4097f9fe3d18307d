//! Every response carries the security headers; pages a nonce-based Content-Security-Policy
//! that the hydration script satisfies; server functions answer bad arguments with 400.

use reqwest::header::{
    CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use serde_json::json;

use crate::helpers::TestApp;

#[tokio::test]
async fn pages_carry_a_nonce_policy_that_their_own_scripts_satisfy() {
    let app = TestApp::spawn().await;
    let resp = app.get("/").await;
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert_eq!(h[X_FRAME_OPTIONS], "DENY");
    assert_eq!(h[X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(h[REFERRER_POLICY], "no-referrer");
    let csp = h[CONTENT_SECURITY_POLICY].to_str().unwrap().to_string();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let script_src = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("script-src"))
        .expect("a script-src directive");
    assert!(
        !script_src.contains("'unsafe-inline'"),
        "inline scripts need the nonce: {csp}"
    );
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a script nonce in the policy")
        .to_string();
    let html = resp.text().await.unwrap();
    assert!(
        html.contains(&format!("nonce=\"{nonce}\"")),
        "the hydration script carries the nonce"
    );
    // A fresh nonce per response.
    let again = app.get("/").await;
    assert!(!again.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .contains(&nonce));
}

#[tokio::test]
async fn api_responses_allow_nothing_to_run() {
    let app = TestApp::spawn().await;
    let resp = app.get("/healthz").await;
    assert_eq!(
        resp.headers()[CONTENT_SECURITY_POLICY],
        "default-src 'none'; frame-ancestors 'none'"
    );
    assert_eq!(resp.headers()[X_CONTENT_TYPE_OPTIONS], "nosniff");
}

#[tokio::test]
async fn a_server_function_called_with_missing_arguments_answers_400_naming_them() {
    let app = TestApp::spawn().await;
    let (status, body) = app
        .call("pipeline.deploy", json!({ "pipeline_id": "x" }))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("config_yaml"), "{body}");
    let (status, body) = app
        .call("release.canary.get", json!({ "release_id": 7 }))
        .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn pages_go_compressed_to_a_browser_that_accepts_it_and_plain_to_one_that_does_not() {
    let app = TestApp::spawn().await;
    let page = |encoding: Option<&'static str>| {
        let mut req = app.api.get(format!("{}/pipelines", app.url));
        if let Some(encoding) = encoding {
            req = req.header(reqwest::header::ACCEPT_ENCODING, encoding);
        }
        req.send()
    };
    let br = page(Some("gzip, deflate, br")).await.unwrap();
    assert_eq!(br.status(), 200);
    assert_eq!(br.headers()[reqwest::header::CONTENT_ENCODING], "br");
    let gzip = page(Some("gzip")).await.unwrap();
    assert_eq!(gzip.headers()[reqwest::header::CONTENT_ENCODING], "gzip");
    let plain = page(None).await.unwrap();
    assert!(plain
        .headers()
        .get(reqwest::header::CONTENT_ENCODING)
        .is_none());
    assert!(plain.text().await.unwrap().contains("<html"));
}

#[tokio::test]
async fn the_bundle_goes_out_as_its_precompressed_twin_when_the_browser_accepts_it() {
    use reqwest::header::{ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, VARY};
    let site = tempfile::tempdir().unwrap();
    let pkg = site.path().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("app.wasm"), b"plain bytes").unwrap();
    std::fs::write(pkg.join("app.wasm.br"), b"brotli twin").unwrap();
    std::fs::write(pkg.join("app.wasm.gz"), b"gzip twin").unwrap();
    let root = site.path().to_str().unwrap().to_owned();
    let app = TestApp::spawn_with(vf_control::testing::TestDb::sqlite(), |c| {
        c.site_root = root
    })
    .await;
    let get = |encoding: Option<&'static str>, file: &str| {
        let mut req = app.client.get(format!("{}/pkg/{file}", app.url));
        if let Some(encoding) = encoding {
            req = req.header(ACCEPT_ENCODING, encoding);
        }
        req.send()
    };
    let br = get(Some("gzip, deflate, br"), "app.wasm").await.unwrap();
    assert_eq!(br.status(), 200);
    assert_eq!(br.headers()[CONTENT_ENCODING], "br");
    assert_eq!(br.headers()[VARY], "accept-encoding");
    assert_eq!(br.headers()[CACHE_CONTROL], "no-cache");
    assert_eq!(br.bytes().await.unwrap().as_ref(), b"brotli twin");
    let gzip = get(Some("gzip"), "app.wasm").await.unwrap();
    assert_eq!(gzip.headers()[CONTENT_ENCODING], "gzip");
    assert_eq!(gzip.bytes().await.unwrap().as_ref(), b"gzip twin");
    let plain = get(None, "app.wasm").await.unwrap();
    assert!(plain.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(plain.bytes().await.unwrap().as_ref(), b"plain bytes");
    let missing = get(Some("br"), "gone.wasm").await.unwrap();
    assert_eq!(missing.status(), 404);
    assert!(missing.headers().get(CACHE_CONTROL).is_none());
}
