//! Server configuration from environment variables, validated at start-up. Every error names
//! the variable to fix.

use std::net::SocketAddr;
use std::time::Duration;

use vf_control::config_check::ConfigValidator;
use vf_control::promql::PromSettings;

/// A start-up configuration error.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{var}: {message}")]
pub struct ConfigError {
    pub var: &'static str,
    pub message: String,
}

fn err(var: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        message: message.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Everything the server reads from its environment.
#[derive(Clone, PartialEq)]
pub struct Config {
    pub database_url: String,
    /// `VF_DB_MAX_CONNECTIONS`: PostgreSQL's pool, or SQLite's read-only connections.
    pub db_max_connections: Option<u32>,
    pub addr: SocketAddr,
    pub site_root: String,
    pub site_pkg_dir: String,
    pub output_name: String,
    pub log_format: LogFormat,
    pub poll_interval_ms: i64,
    pub agent_max_body_bytes: usize,
    pub agent_max_concurrency: usize,
    pub bootstrap_environment: Option<String>,
    pub bootstrap_enrollment_token: Option<String>,
    /// How often the scheduler ticks; `None` (0) turns the loop off (tests step it).
    pub scheduler_interval_ms: Option<u64>,
    /// How often polls' last-seen times are written; `None` (0): only on shutdown.
    pub last_seen_flush_ms: Option<u64>,
    /// How often the push watcher reads the fleet generation (`VF_PUSH_CHECK_MS`).
    pub push_check_ms: u64,
    /// What an offline targeted node does to a stage whose plan does not say
    /// (`VF_OFFLINE_NODES_DEFAULT`: wait, exclude or fail; default exclude).
    pub offline_nodes_default: vf_rules::OfflinePolicy,
    /// How often the webhook worker looks for deliveries due (`VF_WEBHOOK_INTERVAL_MS`).
    pub webhook_interval_ms: u64,
    pub prometheus: Option<PromSettings>,
    /// `VF_CONFIG_VALIDATE_COMMAND` (+ `VF_CONFIG_VALIDATE_TIMEOUT_MS`).
    pub config_validator: Option<ConfigValidator>,
    /// Registered on start as a read-only token for `GET /api/edge-config`.
    pub edge_config_token: Option<String>,
    /// The first admin, created on a first start (no users yet).
    pub admin_email: Option<String>,
    pub admin_password: Option<String>,
    /// Registered on start as an admin API token for every environment (automation, e2e).
    pub bootstrap_api_token: Option<String>,
    /// How long a sign-in lasts.
    pub session_ttl_ms: i64,
    /// Where operators reach the server (`https://...` marks session cookies Secure; the
    /// first start's setup link uses it).
    pub public_url: Option<String>,
    /// A header set by a trusted reverse proxy that carries the client's address
    /// (`X-Forwarded-For`: its last entry is used); unset: the TCP peer.
    pub client_ip_header: Option<String>,
}

impl std::fmt::Debug for Config {
    /// Redacts secrets: the database URL may carry a password, tokens are credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("addr", &self.addr)
            .field("site_root", &self.site_root)
            .field("log_format", &self.log_format)
            .field("poll_interval_ms", &self.poll_interval_ms)
            .field("bootstrap_environment", &self.bootstrap_environment)
            .field(
                "bootstrap_enrollment_token",
                &self
                    .bootstrap_enrollment_token
                    .as_ref()
                    .map(|_| "<redacted>"),
            )
            .field("prometheus", &self.prometheus)
            .field("edge_config_token", &redacted(&self.edge_config_token))
            .field("admin_email", &self.admin_email)
            .field("admin_password", &redacted(&self.admin_password))
            .field("bootstrap_api_token", &redacted(&self.bootstrap_api_token))
            .field("session_ttl_ms", &self.session_ttl_ms)
            .field("public_url", &self.public_url)
            .field("client_ip_header", &self.client_ip_header)
            .finish()
    }
}

fn redacted(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "<redacted>")
}

/// `postgres://user:secret@host/db` -> `postgres://user:<redacted>@host/db`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((creds, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match creds.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:<redacted>@{host}"),
        None => url.to_string(),
    }
}

/// A service-layer validation message without its field name (the variable replaces it).
fn strip_field(e: &vf_control::ControlError) -> String {
    match e {
        vf_control::ControlError::Invalid { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn parse_int(
    var: &'static str,
    raw: Option<String>,
    default: i64,
    min: i64,
    max: i64,
) -> Result<i64, ConfigError> {
    let Some(raw) = raw else { return Ok(default) };
    let n: i64 = raw
        .trim()
        .parse()
        .map_err(|_| err(var, format!("must be a whole number, got {raw:?}")))?;
    if n < min || n > max {
        return Err(err(
            var,
            format!("must be between {min} and {max}, got {n}"),
        ));
    }
    Ok(n)
}

impl Config {
    /// Reads the configuration through `get` (the process environment in `main`).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let database_url = get("DATABASE_URL").unwrap_or_else(|| "sqlite://vectorflow.db".into());
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(err(
                "DATABASE_URL",
                "must start with sqlite: or postgres:// (for example sqlite://vectorflow.db)",
            ));
        }
        let addr_raw = get("LEPTOS_SITE_ADDR").unwrap_or_else(|| "127.0.0.1:3000".into());
        let addr: SocketAddr = addr_raw.parse().map_err(|_| {
            err(
                "LEPTOS_SITE_ADDR",
                format!("must be host:port, got {addr_raw:?}"),
            )
        })?;
        let log_format = match get("VF_LOG_FORMAT").as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(err(
                    "VF_LOG_FORMAT",
                    format!("must be text or json, got {other:?}"),
                ))
            }
        };
        let poll_interval_ms = parse_int(
            "VF_POLL_INTERVAL_MS",
            get("VF_POLL_INTERVAL_MS"),
            5_000,
            500,
            3_600_000,
        )?;
        let agent_max_body_bytes = parse_int(
            "VF_AGENT_MAX_BODY_BYTES",
            get("VF_AGENT_MAX_BODY_BYTES"),
            1024 * 1024,
            1024,
            64 * 1024 * 1024,
        )? as usize;
        let agent_max_concurrency = parse_int(
            "VF_AGENT_MAX_CONCURRENCY",
            get("VF_AGENT_MAX_CONCURRENCY"),
            256,
            1,
            100_000,
        )? as usize;
        let bootstrap_environment = get("VF_BOOTSTRAP_ENVIRONMENT");
        if let Some(name) = &bootstrap_environment {
            vf_control::fleet::parse_environment_name(name)
                .map_err(|e| err("VF_BOOTSTRAP_ENVIRONMENT", e.to_string()))?;
        }
        let bootstrap_enrollment_token = get("VF_BOOTSTRAP_ENROLLMENT_TOKEN");
        if let Some(token) = &bootstrap_enrollment_token {
            if bootstrap_environment.is_none() {
                return Err(err(
                    "VF_BOOTSTRAP_ENROLLMENT_TOKEN",
                    "needs VF_BOOTSTRAP_ENVIRONMENT to say which environment it enrolls into",
                ));
            }
            if token.len() < 16 {
                return Err(err(
                    "VF_BOOTSTRAP_ENROLLMENT_TOKEN",
                    "must be at least 16 characters",
                ));
            }
        }
        let scheduler_interval_ms = parse_int(
            "VF_SCHEDULER_INTERVAL_MS",
            get("VF_SCHEDULER_INTERVAL_MS"),
            2_000,
            0,
            600_000,
        )?;
        let db_max_connections = get("VF_DB_MAX_CONNECTIONS")
            .map(|raw| parse_int("VF_DB_MAX_CONNECTIONS", Some(raw), 0, 1, 1_000))
            .transpose()?
            .map(|n| n as u32);
        let last_seen_flush_ms = parse_int(
            "VF_LAST_SEEN_FLUSH_MS",
            get("VF_LAST_SEEN_FLUSH_MS"),
            1_000,
            0,
            60_000,
        )?;
        let push_check_ms =
            parse_int("VF_PUSH_CHECK_MS", get("VF_PUSH_CHECK_MS"), 250, 10, 60_000)? as u64;
        let offline_nodes_default = match get("VF_OFFLINE_NODES_DEFAULT") {
            None => vf_rules::OfflinePolicy::default(),
            Some(raw) => vf_rules::OfflinePolicy::parse(raw.trim()).ok_or_else(|| {
                err(
                    "VF_OFFLINE_NODES_DEFAULT",
                    format!("must be wait, exclude or fail, got {raw:?}"),
                )
            })?,
        };
        let webhook_interval_ms = parse_int(
            "VF_WEBHOOK_INTERVAL_MS",
            get("VF_WEBHOOK_INTERVAL_MS"),
            1_000,
            10,
            60_000,
        )? as u64;
        let prometheus = match get("VF_PROMETHEUS_URL") {
            None => None,
            Some(url) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(err(
                        "VF_PROMETHEUS_URL",
                        "must start with http:// or https://",
                    ));
                }
                let timeout_ms = parse_int(
                    "VF_PROMETHEUS_TIMEOUT_MS",
                    get("VF_PROMETHEUS_TIMEOUT_MS"),
                    5_000,
                    100,
                    120_000,
                )?;
                Some(PromSettings {
                    url: url.trim_end_matches('/').to_string(),
                    bearer_token: get("VF_PROMETHEUS_BEARER_TOKEN"),
                    timeout: Duration::from_millis(timeout_ms as u64),
                })
            }
        };
        let config_validator = match get("VF_CONFIG_VALIDATE_COMMAND") {
            None => None,
            Some(command) => {
                let timeout_ms = parse_int(
                    "VF_CONFIG_VALIDATE_TIMEOUT_MS",
                    get("VF_CONFIG_VALIDATE_TIMEOUT_MS"),
                    10_000,
                    100,
                    120_000,
                )?;
                if !command.contains("{file}") {
                    return Err(err(
                        "VF_CONFIG_VALIDATE_COMMAND",
                        "must contain {file}, where the config's path goes",
                    ));
                }
                Some(ConfigValidator {
                    command,
                    timeout: Duration::from_millis(timeout_ms as u64),
                })
            }
        };
        let edge_config_token = get("VF_EDGE_CONFIG_TOKEN");
        if edge_config_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err(err(
                "VF_EDGE_CONFIG_TOKEN",
                "must be at least 16 characters",
            ));
        }
        let admin_email = get("VF_ADMIN_EMAIL");
        let admin_password = get("VF_ADMIN_PASSWORD");
        match (&admin_email, &admin_password) {
            (Some(email), Some(password)) => {
                vf_control::accounts::normalize_email("VF_ADMIN_EMAIL", email)
                    .map_err(|e| err("VF_ADMIN_EMAIL", strip_field(&e)))?;
                vf_control::accounts::passwords::validate("VF_ADMIN_PASSWORD", password)
                    .map_err(|e| err("VF_ADMIN_PASSWORD", strip_field(&e)))?;
            }
            (Some(_), None) => {
                return Err(err(
                    "VF_ADMIN_PASSWORD",
                    "must be set together with VF_ADMIN_EMAIL",
                ))
            }
            (None, Some(_)) => {
                return Err(err(
                    "VF_ADMIN_EMAIL",
                    "must be set together with VF_ADMIN_PASSWORD",
                ))
            }
            (None, None) => {}
        }
        let bootstrap_api_token = get("VF_BOOTSTRAP_API_TOKEN");
        if bootstrap_api_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err(err(
                "VF_BOOTSTRAP_API_TOKEN",
                "must be at least 16 characters",
            ));
        }
        let session_ttl_hours = parse_int(
            "VF_SESSION_TTL_HOURS",
            get("VF_SESSION_TTL_HOURS"),
            12,
            1,
            720,
        )?;
        let public_url = get("VF_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_string());
        if let Some(u) = &public_url {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(err("VF_PUBLIC_URL", "must start with http:// or https://"));
            }
        }
        let client_ip_header = get("VF_CLIENT_IP_HEADER");
        if let Some(h) = &client_ip_header {
            if axum::http::HeaderName::from_bytes(h.trim().as_bytes()).is_err() {
                return Err(err(
                    "VF_CLIENT_IP_HEADER",
                    format!("{h:?} is not a header name"),
                ));
            }
        }
        Ok(Config {
            database_url,
            addr,
            site_root: get("LEPTOS_SITE_ROOT").unwrap_or_else(|| "target/site".into()),
            site_pkg_dir: get("LEPTOS_SITE_PKG_DIR").unwrap_or_else(|| "pkg".into()),
            output_name: get("LEPTOS_OUTPUT_NAME").unwrap_or_else(|| "vectorflow".into()),
            log_format,
            poll_interval_ms,
            agent_max_body_bytes,
            agent_max_concurrency,
            bootstrap_environment,
            bootstrap_enrollment_token,
            scheduler_interval_ms: (scheduler_interval_ms > 0)
                .then_some(scheduler_interval_ms as u64),
            last_seen_flush_ms: (last_seen_flush_ms > 0).then_some(last_seen_flush_ms as u64),
            push_check_ms,
            offline_nodes_default,
            webhook_interval_ms,
            db_max_connections,
            prometheus,
            config_validator,
            edge_config_token,
            admin_email,
            admin_password,
            bootstrap_api_token,
            session_ttl_ms: session_ttl_hours * 60 * 60 * 1000,
            public_url,
            client_ip_header: client_ip_header.map(|h| h.trim().to_string()),
        })
    }

    /// Configuration for tests: a given database, port 0, defaults elsewhere.
    pub fn for_tests(database_url: &str) -> Config {
        let url = database_url.to_string();
        Config::from_vars(|k| match k {
            "DATABASE_URL" => Some(url.clone()),
            "LEPTOS_SITE_ADDR" => Some("127.0.0.1:0".into()),
            "VF_SCHEDULER_INTERVAL_MS" => Some("0".into()),
            // Tests send webhook deliveries themselves (`webhooks::deliver_due`), at the
            // instant they choose.
            "VF_WEBHOOK_INTERVAL_MS" => Some("60000".into()),
            // A manual clock moves in steps between which no node polls: the release
            // scenarios wait for their nodes. Offline handling is tested with it set.
            "VF_OFFLINE_NODES_DEFAULT" => Some("wait".into()),
            _ => None,
        })
        .unwrap_or_else(|e| panic!("test config: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| {
            owned
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_offline_nodes_default_is_exclude_and_a_bad_value_names_the_variable() {
        let c = Config::from_vars(vars(&[])).unwrap();
        assert_eq!(c.offline_nodes_default, vf_rules::OfflinePolicy::Exclude);
        let c = Config::from_vars(vars(&[("VF_OFFLINE_NODES_DEFAULT", "fail")])).unwrap();
        assert_eq!(c.offline_nodes_default, vf_rules::OfflinePolicy::Fail);
        let e = Config::from_vars(vars(&[("VF_OFFLINE_NODES_DEFAULT", "skip")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("VF_OFFLINE_NODES_DEFAULT"), "{e}");
    }

    #[test]
    fn defaults_run_on_a_local_sqlite_file() {
        let c = Config::from_vars(vars(&[])).unwrap();
        assert_eq!(c.database_url, "sqlite://vectorflow.db");
        assert_eq!(c.addr.to_string(), "127.0.0.1:3000");
        assert_eq!(c.poll_interval_ms, 5_000);
    }

    #[test]
    fn a_config_validator_needs_the_file_placeholder_and_has_a_bounded_timeout() {
        let e = Config::from_vars(vars(&[("VF_CONFIG_VALIDATE_COMMAND", "vector validate")]))
            .unwrap_err();
        assert_eq!(e.var, "VF_CONFIG_VALIDATE_COMMAND");
        let c = Config::from_vars(vars(&[(
            "VF_CONFIG_VALIDATE_COMMAND",
            "vector validate --no-environment {file}",
        )]))
        .unwrap();
        let v = c.config_validator.expect("set");
        assert_eq!(v.timeout, Duration::from_secs(10));
        let e = Config::from_vars(vars(&[
            ("VF_CONFIG_VALIDATE_COMMAND", "v {file}"),
            ("VF_CONFIG_VALIDATE_TIMEOUT_MS", "50"),
        ]))
        .unwrap_err();
        assert_eq!(e.var, "VF_CONFIG_VALIDATE_TIMEOUT_MS");
    }

    #[test]
    fn a_bad_poll_interval_is_refused_naming_the_variable() {
        let e = Config::from_vars(vars(&[("VF_POLL_INTERVAL_MS", "fast")])).unwrap_err();
        assert_eq!(e.var, "VF_POLL_INTERVAL_MS");
        assert!(e
            .to_string()
            .starts_with("VF_POLL_INTERVAL_MS: must be a whole number"));
    }

    #[test]
    fn an_unknown_database_scheme_is_refused() {
        let e = Config::from_vars(vars(&[("DATABASE_URL", "mysql://x")])).unwrap_err();
        assert_eq!(e.var, "DATABASE_URL");
    }

    #[test]
    fn an_enrollment_token_without_an_environment_is_refused() {
        let e = Config::from_vars(vars(&[(
            "VF_BOOTSTRAP_ENROLLMENT_TOKEN",
            "0123456789abcdef",
        )]))
        .unwrap_err();
        assert_eq!(e.var, "VF_BOOTSTRAP_ENROLLMENT_TOKEN");
    }

    #[test]
    fn prometheus_settings_are_read_and_the_bearer_token_stays_out_of_debug_output() {
        let c = Config::from_vars(vars(&[
            ("VF_PROMETHEUS_URL", "http://127.0.0.1:9090/"),
            ("VF_PROMETHEUS_BEARER_TOKEN", "prom-secret-token"),
            ("VF_PROMETHEUS_TIMEOUT_MS", "750"),
        ]))
        .unwrap();
        let p = c.prometheus.clone().unwrap();
        assert_eq!(p.url, "http://127.0.0.1:9090");
        assert_eq!(p.timeout, Duration::from_millis(750));
        assert!(!format!("{c:?}").contains("prom-secret-token"));
    }

    #[test]
    fn a_prometheus_url_without_a_scheme_is_refused() {
        let e = Config::from_vars(vars(&[("VF_PROMETHEUS_URL", "prometheus:9090")])).unwrap_err();
        assert_eq!(e.var, "VF_PROMETHEUS_URL");
    }

    #[test]
    fn the_scheduler_ticks_every_two_seconds_unless_told_otherwise() {
        assert_eq!(
            Config::from_vars(vars(&[])).unwrap().scheduler_interval_ms,
            Some(2_000)
        );
        let off = Config::from_vars(vars(&[("VF_SCHEDULER_INTERVAL_MS", "0")])).unwrap();
        assert_eq!(off.scheduler_interval_ms, None);
    }

    #[test]
    fn the_pool_size_is_the_default_unless_given_and_must_be_positive() {
        assert_eq!(
            Config::from_vars(vars(&[])).unwrap().db_max_connections,
            None
        );
        let c = Config::from_vars(vars(&[("VF_DB_MAX_CONNECTIONS", "32")])).unwrap();
        assert_eq!(c.db_max_connections, Some(32));
        let e = Config::from_vars(vars(&[("VF_DB_MAX_CONNECTIONS", "0")])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("VF_DB_MAX_CONNECTIONS: must be between 1"),
            "{e}"
        );
    }

    #[test]
    fn last_seen_times_are_written_every_second_unless_told_otherwise() {
        let default = Config::from_vars(vars(&[])).unwrap();
        assert_eq!(default.last_seen_flush_ms, Some(1_000));
        let off = Config::from_vars(vars(&[("VF_LAST_SEEN_FLUSH_MS", "0")])).unwrap();
        assert_eq!(off.last_seen_flush_ms, None);
        let e = Config::from_vars(vars(&[("VF_LAST_SEEN_FLUSH_MS", "soon")])).unwrap_err();
        assert!(e.to_string().starts_with("VF_LAST_SEEN_FLUSH_MS: "), "{e}");
    }

    #[test]
    fn debug_output_never_shows_the_database_password_or_tokens() {
        let c = Config::from_vars(vars(&[
            ("DATABASE_URL", "postgres://vf:hunter2secret@db/vf"),
            ("VF_BOOTSTRAP_ENVIRONMENT", "demo"),
            ("VF_BOOTSTRAP_ENROLLMENT_TOKEN", "enroll-secret-value-123"),
        ]))
        .unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2secret"), "{shown}");
        assert!(!shown.contains("enroll-secret-value-123"), "{shown}");
        assert!(shown.contains("postgres://vf:<redacted>@db/vf"));
    }

    #[test]
    fn debug_output_redacts_the_admin_password_api_edge_and_prometheus_tokens() {
        let c = Config::from_vars(vars(&[
            ("VF_ADMIN_EMAIL", "ops@example.com"),
            ("VF_ADMIN_PASSWORD", "admin-secret-password"),
            ("VF_BOOTSTRAP_API_TOKEN", "api-secret-token-value"),
            ("VF_EDGE_CONFIG_TOKEN", "edge-secret-token-value"),
            ("VF_PROMETHEUS_URL", "http://127.0.0.1:9090"),
            ("VF_PROMETHEUS_BEARER_TOKEN", "prom-secret-token"),
        ]))
        .unwrap();
        let shown = format!("{c:?}");
        for secret in [
            "admin-secret-password",
            "api-secret-token-value",
            "edge-secret-token-value",
            "prom-secret-token",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("ops@example.com"));
    }

    #[test]
    fn admin_credentials_come_in_pairs_and_are_checked_naming_the_variable() {
        let e = Config::from_vars(vars(&[("VF_ADMIN_EMAIL", "ops@example.com")])).unwrap_err();
        assert_eq!(e.var, "VF_ADMIN_PASSWORD");
        let e = Config::from_vars(vars(&[
            ("VF_ADMIN_EMAIL", "ops@example.com"),
            ("VF_ADMIN_PASSWORD", "short"),
        ]))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "VF_ADMIN_PASSWORD: must be at least 10 characters"
        );
        let e = Config::from_vars(vars(&[
            ("VF_ADMIN_EMAIL", "not-an-email"),
            ("VF_ADMIN_PASSWORD", "long enough password"),
        ]))
        .unwrap_err();
        assert_eq!(e.var, "VF_ADMIN_EMAIL");
    }
}
