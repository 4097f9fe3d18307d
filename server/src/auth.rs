//! Authentication at the edge of the server, where it is not a route's own extractor
//! ([`crate::extract`]): the one bearer-token parser, cross-site request refusal, the
//! sign-in wall in front of pages, and the sign-in, sign-out and first-start setup form
//! posts. What a caller may do is decided per server function and admin route by
//! `vf_control::access::authorize`.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Router};
use serde::Deserialize;
use vf_control::accounts::{self, sessions::COOKIE};
use vf_control::ControlError;

use crate::error::ApiError;
use crate::extract::{Caller, ClientIp};
use crate::state::AppState;

/// What the auth layer needs from the configuration.
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// Mark the session cookie `Secure` (the server is reached over https).
    pub secure_cookies: bool,
    /// A trusted proxy's client-address header.
    pub client_ip_header: Option<HeaderName>,
    /// The public origin (`https://vf.example.com`), also accepted as a same-site `Origin`.
    pub public_origin: Option<String>,
}

/// The token of an `Authorization: Bearer <token>` header (RFC 6750 section 2.1): the scheme
/// in any case (RFC 7235 section 2.1), exactly one space, then a non-empty token without
/// whitespace. Anything else (another scheme, no token, extra spaces, several
/// `Authorization` headers) is no bearer token. The token's characters are not held to
/// RFC 6750's `b64token`: operators choose bootstrap tokens (`VF_BOOTSTRAP_API_TOKEN`, ...)
/// freely, and a header value is visible ASCII anyway.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    let well_formed = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && !token.contains(|c: char| c.is_ascii_whitespace());
    well_formed.then_some(token)
}

/// Pages anyone may open: signing in, and the first start's setup link.
const OPEN_PAGES: [&str; 2] = ["/signin", "/setup"];

/// The sign-in wall in front of the pages (and of unknown paths, which would be pages):
/// resolves the [`Caller`] (which the pages' server functions read during rendering) and
/// sends anyone without a session from a page to the sign-in page; other methods get 401.
pub async fn sign_in_wall(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let signed_in = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(Caller(auth)) => auth.principal.is_some(),
        Err(rejection) => return rejection.into_response(),
    };
    let req = Request::from_parts(parts, body);
    if signed_in || OPEN_PAGES.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    if req.method() == Method::GET || req.method() == Method::HEAD {
        let wanted = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        return Redirect::to(&format!("/signin?next={}", urlencode(&wanted))).into_response();
    }
    ApiError(ControlError::SignInRequired).into_response()
}

/// Adds the `WWW-Authenticate: Bearer` challenge to a 401, on routes that tools and
/// scrapers call with a bearer token (`/metrics`, `/api/edge-config`).
pub async fn bearer_challenge(mut resp: Response) -> Response {
    if resp.status() == StatusCode::UNAUTHORIZED {
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

/// Refuses state-changing requests a browser sent from another site (`Sec-Fetch-Site`,
/// or `Origin` where the browser sends no fetch metadata). Tools like curl send neither and
/// authenticate with bearer tokens, which browsers never attach on their own. Agent routes
/// are not behind it: agents are no browsers.
pub async fn refuse_cross_site(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if safe {
        return next.run(req).await;
    }
    if let Some(reason) = cross_site(req.headers(), state.auth.public_origin.as_deref()) {
        tracing::warn!(
            path = req.uri().path(),
            reason,
            "cross-site request refused"
        );
        return ApiError(ControlError::Forbidden(format!(
            "cross-site request refused ({reason})"
        )))
        .into_response();
    }
    next.run(req).await
}

/// Why a request looks cross-site, if it does.
pub fn cross_site(headers: &HeaderMap, public_origin: Option<&str>) -> Option<&'static str> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return match site {
            "same-origin" | "none" => None,
            _ => Some("Sec-Fetch-Site is not same-origin"),
        };
    }
    let origin = headers.get(header::ORIGIN)?.to_str().ok()?;
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, h)| h);
    let same_host = origin_host.is_some() && origin_host == host;
    if same_host || public_origin == Some(origin) {
        None
    } else {
        Some("Origin is another site")
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Where to go after signing in: only a path of this site (never `//evil.example`).
fn local_path(next: Option<&str>) -> String {
    match next {
        // Browsers drop tabs and newlines from URLs ("/\t/evil" becomes "//evil"): refuse them.
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.contains('\\')
                && !p.chars().any(|c| c.is_control() || c.is_whitespace()) =>
        {
            p.to_string()
        }
        _ => "/".to_string(),
    }
}

/// Whether the cookie must be `Secure`: `VF_PUBLIC_URL` is https, or the TLS-terminating
/// proxy says the browser came over https.
fn secure_request(settings: &AuthSettings, headers: &HeaderMap) -> bool {
    settings.secure_cookies
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

fn session_cookie(value: &str, max_age_secs: i64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("vf_session=; Path=/; Max-Age=0"))
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/signin", post(sign_in))
        .route("/signout", post(sign_out))
        .route("/setup", post(setup))
}

#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    next: Option<String>,
}

/// `POST /signin` (form): on success a session cookie and a redirect to `next`; on failure
/// back to the sign-in page with the reason (429 past the rate limits).
async fn sign_in(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let next = local_path(form.next.as_deref());
    let secure = secure_request(&state.auth, &headers);
    match accounts::sign_in(&state.control, &form.email, &form.password, ip.as_deref()).await {
        Ok(signed_in) => {
            let max_age = (signed_in.expires_at - state.control.now()) / 1000;
            let mut resp = Redirect::to(&next).into_response();
            resp.headers_mut().insert(
                header::SET_COOKIE,
                session_cookie(&signed_in.token, max_age, secure),
            );
            resp
        }
        Err(e) => {
            let status = StatusCode::from_u16(e.status_code()).unwrap_or(StatusCode::BAD_REQUEST);
            if status == StatusCode::INTERNAL_SERVER_ERROR {
                return ApiError(e).into_response();
            }
            if let ControlError::TooManyAttempts { retry_after_secs } = e {
                // A browser follows no Location on a 429: the answer is a page of its own.
                let page = format!(
                    "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
                     <title>VectorFlow: sign-in locked</title></head><body>\
                     <h1>Sign-in locked</h1><p role=\"alert\">{}</p>\
                     <p><a href=\"/signin\">Back to sign in</a></p></body></html>",
                    ControlError::TooManyAttempts { retry_after_secs }
                );
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [
                        (header::RETRY_AFTER, HeaderValue::from(retry_after_secs)),
                        (
                            header::CONTENT_TYPE,
                            HeaderValue::from_static("text/html; charset=utf-8"),
                        ),
                    ],
                    page,
                )
                    .into_response();
            }
            // A code, not text: the page maps it to its own words, so a crafted link cannot
            // put an attacker's message on the sign-in page.
            let code = match &e {
                ControlError::Invalid { field, .. } if field == "email" => "email",
                _ => "credentials",
            };
            let location = format!("/signin?error={code}&next={}", urlencode(&next));
            Redirect::to(&location).into_response()
        }
    }
}

/// `POST /signout`: revokes the session server-side and clears the cookie.
async fn sign_out(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
) -> Response {
    if let Some(token) = cookie(&headers, COOKIE) {
        if let Err(e) = accounts::sign_out(
            &state.control.db,
            &token,
            ip.as_deref(),
            state.control.now(),
        )
        .await
        {
            return ApiError(e).into_response();
        }
    }
    let mut resp = Redirect::to("/signin").into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        session_cookie("", 0, secure_request(&state.auth, &headers)),
    );
    resp
}

#[derive(Deserialize)]
struct SetupForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

/// `POST /setup` (form): the one-time link of a first start creates the first admin, who
/// then signs in.
async fn setup(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    Form(form): Form<SetupForm>,
) -> Response {
    let now = state.control.now();
    match accounts::complete_setup(
        &state.control.db,
        &form.token,
        &form.email,
        &form.password,
        ip.as_deref(),
        now,
    )
    .await
    {
        Ok(user) => {
            tracing::info!(
                email = user.email,
                "first admin created from the setup link"
            );
            Redirect::to("/signin?setup=done").into_response()
        }
        Err(ControlError::Invalid { field, .. }) => {
            let code = match field.as_str() {
                "email" | "password" | "token" => field.as_str(),
                _ => "invalid",
            };
            Redirect::to(&format!(
                "/setup?token={}&error={code}",
                urlencode(&form.token)
            ))
            .into_response()
        }
        Err(e) => ApiError(e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn browsers_same_origin_requests_and_tools_pass_cross_site_ones_do_not() {
        assert_eq!(
            cross_site(&headers(&[("sec-fetch-site", "same-origin")]), None),
            None
        );
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")]), None).is_some());
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-site")]), None).is_some());
        assert_eq!(cross_site(&headers(&[]), None), None, "curl sends neither");
        let same = headers(&[
            ("origin", "http://vf.local:3000"),
            ("host", "vf.local:3000"),
        ]);
        assert_eq!(cross_site(&same, None), None);
        let other = headers(&[
            ("origin", "https://evil.example"),
            ("host", "vf.local:3000"),
        ]);
        assert!(cross_site(&other, None).is_some());
        let proxied = headers(&[
            ("origin", "https://vf.example.com"),
            ("host", "10.0.0.5:3000"),
        ]);
        assert_eq!(cross_site(&proxied, Some("https://vf.example.com")), None);
        assert!(cross_site(&headers(&[("origin", "null")]), None).is_some());
    }

    #[test]
    fn after_sign_in_only_local_paths_are_followed() {
        assert_eq!(
            local_path(Some("/pipelines/7?env=prod")),
            "/pipelines/7?env=prod"
        );
        assert_eq!(local_path(Some("//evil.example/x")), "/");
        assert_eq!(local_path(Some("https://evil.example")), "/");
        assert_eq!(local_path(Some("/\\evil.example")), "/");
        assert_eq!(local_path(Some("/\t/evil.example")), "/");
        assert_eq!(local_path(Some("/\n/evil.example")), "/");
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn the_session_cookie_is_http_only_lax_and_secure_over_https() {
        let c = session_cookie("abc", 60, true);
        let c = c.to_str().unwrap();
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax") && c.contains("Secure"));
        assert!(!session_cookie("abc", 60, false)
            .to_str()
            .unwrap()
            .contains("Secure"));
    }

    #[test]
    fn a_bearer_token_is_the_scheme_in_any_case_one_space_and_a_token() {
        let token = |v: &str| bearer(&headers(&[("authorization", v)])).map(str::to_string);
        assert_eq!(token("Bearer vfa_abc-123").as_deref(), Some("vfa_abc-123"));
        assert_eq!(token("bearer vfa_abc").as_deref(), Some("vfa_abc"));
        assert_eq!(token("BEARER vfa_abc").as_deref(), Some("vfa_abc"));
        assert_eq!(
            token("Bearer a+b/c=~.!#$").as_deref(),
            Some("a+b/c=~.!#$"),
            "operators choose bootstrap tokens freely"
        );
        for refused in [
            "Bearer ",
            "Bearer",
            "Bearer  vfa_abc",
            "Bearer vfa_abc ",
            "Bearer vfa abc",
            "Bearer\tvfa_abc",
            "Bearer\tvfa_abc\tx",
            "Basic dXNlcjpwYXNz",
            "Bearervfa_abc",
            "Token vfa_abc",
            "vfa_abc",
            "",
        ] {
            assert_eq!(token(refused), None, "{refused:?}");
        }
        assert_eq!(bearer(&HeaderMap::new()), None);
        let mut two = headers(&[("authorization", "Bearer one")]);
        two.append(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer two"),
        );
        assert_eq!(bearer(&two), None, "two Authorization headers name nobody");
        let mut opaque = HeaderMap::new();
        opaque.insert(
            header::AUTHORIZATION,
            HeaderValue::from_bytes(b"Bearer caf\xe9").unwrap(),
        );
        assert_eq!(bearer(&opaque), None, "not visible ASCII");
    }

    #[test]
    fn cookies_are_found_among_others() {
        let h = headers(&[("cookie", "a=1; vf_session=vfs_x ; b=2")]);
        assert_eq!(cookie(&h, "vf_session").as_deref(), Some("vfs_x"));
        assert_eq!(cookie(&h, "c"), None);
    }
}
