//! Start-up as a library: [`build`] connects, migrates, bootstraps, binds (port 0 in tests)
//! and returns an [`Application`] whose server runs until a shutdown signal.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list_with_exclusions, LeptosRoutes};
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;
use vf_control::access::{Role, ALL_ENVIRONMENTS};
use vf_control::accounts::{self, TokenRole};
use vf_control::db::PoolSizes;
use vf_control::{fleet, Actor, Clock, Control, Db, Settings, SystemClock};

use crate::auth::{self, AuthSettings};
use crate::config::Config;
use crate::extract::Caller;
use crate::state::{AppState, Shared};
use crate::{routes, server_fns};

/// A built, bound server that has not started serving yet.
pub struct Application {
    listener: TcpListener,
    router: Router,
    scheduler_interval: Option<Duration>,
    last_seen_flush: Option<Duration>,
    push_check: Duration,
    webhook_interval: Duration,
    pub addr: SocketAddr,
    pub control: Control,
    /// Held while serving: one server process per SQLite file
    /// ([`vf_control::db::lock_sqlite_file`]).
    _sqlite_lock: Option<std::fs::File>,
}

/// Builds the application with the wall clock.
pub async fn build(config: Config) -> anyhow::Result<Application> {
    build_with_clock(config, Arc::new(SystemClock)).await
}

/// Builds the application with an injected clock (tests step time instead of sleeping).
pub async fn build_with_clock(
    config: Config,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Application> {
    let mut sizes = PoolSizes::default();
    if let Some(n) = config.db_max_connections {
        sizes.postgres = n;
        sizes.sqlite_readers = n;
    }
    let sqlite_lock = vf_control::db::lock_sqlite_file(&config.database_url)?;
    let db = Db::connect_with(&config.database_url, sizes).await?;
    let control = Control::new(
        db,
        clock,
        Settings {
            poll_interval_ms: config.poll_interval_ms,
            prometheus: config.prometheus.clone(),
            session_ttl_ms: config.session_ttl_ms,
            config_validator: config.config_validator.clone(),
            offline_nodes_default: config.offline_nodes_default,
        },
    );
    bootstrap(&control, &config).await?;

    let listener = TcpListener::bind(config.addr)
        .await
        .with_context(|| format!("binding {} (LEPTOS_SITE_ADDR)", config.addr))?;
    let addr = listener.local_addr()?;
    let leptos_options = LeptosOptions::builder()
        .output_name(config.output_name.clone())
        .site_root(config.site_root.clone())
        .site_pkg_dir(config.site_pkg_dir.clone())
        .site_addr(addr)
        .hash_files(hashed_assets())
        .build();
    let state = AppState::new(Shared {
        control: control.clone(),
        metrics: control.metrics.clone(),
        leptos_options: leptos_options.clone(),
        auth: Arc::new(AuthSettings {
            secure_cookies: config
                .public_url
                .as_deref()
                .is_some_and(|u| u.starts_with("https://")),
            client_ip_header: config
                .client_ip_header
                .as_deref()
                .and_then(|h| axum::http::HeaderName::from_bytes(h.as_bytes()).ok()),
            public_origin: config.public_url.clone(),
        }),
    });
    first_admin(&control, &config, addr).await?;
    let router = router(state, &config)?;
    Ok(Application {
        listener,
        router,
        scheduler_interval: config.scheduler_interval_ms.map(Duration::from_millis),
        last_seen_flush: config.last_seen_flush_ms.map(Duration::from_millis),
        push_check: Duration::from_millis(config.push_check_ms),
        webhook_interval: Duration::from_millis(config.webhook_interval_ms),
        addr,
        control,
        _sqlite_lock: sqlite_lock,
    })
}

/// Registers the bootstrap tokens (idempotent: the same values register once), then
/// creates the bootstrap environment and enrollment token, so agents can enroll and
/// automation can act without anyone clicking.
async fn bootstrap(control: &Control, config: &Config) -> anyhow::Result<()> {
    let system = Actor::system("system");
    let tokens = [
        (
            &config.bootstrap_api_token,
            "bootstrap",
            TokenRole::Role(Role::Admin),
            "VF_BOOTSTRAP_API_TOKEN",
        ),
        (
            &config.edge_config_token,
            "edge-config",
            TokenRole::EdgeConfig,
            "VF_EDGE_CONFIG_TOKEN",
        ),
    ];
    for (value, name, role, var) in tokens {
        if let Some(value) = value {
            accounts::create_api_token(
                &control.db,
                &system,
                name,
                ALL_ENVIRONMENTS,
                role,
                Some(value),
                control.now(),
            )
            .await
            .with_context(|| format!("registering {var}"))?;
        }
    }
    let Some(name) = &config.bootstrap_environment else {
        return Ok(());
    };
    let env = fleet::ensure_environment(&control.db, name, control.now())
        .await
        .context("creating VF_BOOTSTRAP_ENVIRONMENT")?;
    if let Some(token) = &config.bootstrap_enrollment_token {
        fleet::create_enrollment_token(
            &control.db,
            &system,
            &env.id,
            Some(token),
            "bootstrap",
            control.now(),
        )
        .await
        .context("registering VF_BOOTSTRAP_ENROLLMENT_TOKEN")?;
    }
    tracing::info!(environment = env.name, "bootstrap environment ready");
    Ok(())
}

/// A first start (no users) creates the admin from `VF_ADMIN_EMAIL` / `VF_ADMIN_PASSWORD`,
/// or logs a one-time setup link that creates one.
async fn first_admin(control: &Control, config: &Config, addr: SocketAddr) -> anyhow::Result<()> {
    if let (Some(email), Some(password)) = (&config.admin_email, &config.admin_password) {
        if accounts::bootstrap_admin(&control.db, email, password, control.now())
            .await
            .context("creating the VF_ADMIN_EMAIL admin")?
        {
            tracing::info!(email, "first start: created the admin from VF_ADMIN_EMAIL");
        }
        return Ok(());
    }
    if let Some(token) = accounts::prepare_setup(&control.db, control.now()).await? {
        let base = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        // The one secret this server ever logs, by design: it works once, for a day, and
        // only while no user exists.
        tracing::warn!(
            "no users yet: open {base}/setup?token={token} to create the first admin (valid 24 h, once)"
        );
    }
    Ok(())
}

/// The whole HTTP surface. Each group of routes carries what its callers need, and the
/// routes themselves say who may call them (the extractors of [`crate::extract`]):
/// - agents (`/api/agent/*`, `/v1/opamp`): their own tokens; no browser is behind them, so
///   no cross-site refusal and no session lookup;
/// - server functions: the caller resolved onto the request, argument errors as 400;
/// - pages and unknown paths: behind the sign-in wall;
/// - everything but the agents' routes: cross-site request refusal;
/// - every response: the security headers.
fn router(state: AppState, config: &Config) -> anyhow::Result<Router> {
    let files = leptos_axum::file_and_error_handler::<AppState, _>(app::shell);

    let agents = Router::new()
        .merge(routes::agent_route_layers(
            routes::agent::router(),
            &state,
            config,
            "5",
        ))
        .merge(routes::counted(routes::agent::push_router(), &state))
        .merge(routes::opamp::router(config, &state))
        // Unknown protocol paths answer 404 without the sign-in wall.
        .route(
            &format!("{}{{*rest}}", vf_protocol::ROUTE_PREFIX),
            any(files.clone()),
        );

    let control = state.control.clone();
    let context = move || {
        provide_context(control.clone());
        leptos::nonce::provide_nonce();
    };
    // The server functions get routes of their own (below), not among the pages.
    let server_fn_paths = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path.to_string())
        .collect();
    let listing = generate_route_list_with_exclusions(app::App, Some(server_fn_paths));
    let options = state.leptos_options.clone();
    let pages = Router::new()
        .leptos_routes_with_context(&state, listing, context.clone(), move || {
            app::shell(options.clone())
        })
        .fallback(files.clone())
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::sign_in_wall,
        ));

    let caller = middleware::from_extractor_with_state::<Caller, AppState>(state.clone());
    let browsers = Router::new()
        .merge(routes::health::router())
        .merge(routes::edge::router())
        .merge(routes::openapi::router())
        .merge(auth::router())
        .merge(server_fns::router(&state, context)?)
        // Static files, and what else is under /api/: no pages, so not behind the wall. The
        // rest of /api/ answers with the not-found page, which shows who is signed in.
        .nest_service(
            &format!("/{}", config.site_pkg_dir),
            ServiceBuilder::new()
                .layer(asset_caching(state.leptos_options.hash_files))
                // The answer depends on Accept-Encoding, so caches keep one copy per encoding.
                .layer(SetResponseHeaderLayer::if_not_present(
                    header::VARY,
                    HeaderValue::from_static("accept-encoding"),
                ))
                .service(bundle_files(config)),
        )
        .route("/favicon.svg", any(files.clone()))
        .route("/api/", any(files.clone()).layer(caller.clone()))
        .route("/api/{*rest}", any(files).layer(caller))
        .merge(pages)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::refuse_cross_site,
        ))
        // Pages, the bundle and server-function answers go compressed (brotli or gzip, as the
        // browser accepts); event streams and images are left alone.
        .layer(CompressionLayer::new());

    Ok(Router::new()
        .merge(agents)
        .merge(browsers)
        .layer(middleware::from_fn(security_headers))
        .with_state(state))
}

/// Whether `cargo leptos build` named the assets by their content: it writes `hash.txt` next
/// to the server binary (the pages then link `pkg/vectorflow.<hash>.wasm`). A binary run
/// without one (tests, a plain `cargo build`) links the plain names.
fn hashed_assets() -> bool {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("hash.txt")))
        .is_some_and(|hashes| hashes.is_file())
}

/// The bundle (`/pkg/`): a file's brotli or gzip twin (`.br`, `.gz`, written beside it by
/// `scripts/precompress.sh` at the highest levels, which compressing on the fly cannot
/// afford) when the browser accepts it and the twin exists, else the file itself. The
/// compression layer leaves an answer that already has a Content-Encoding alone.
fn bundle_files(config: &Config) -> ServeDir {
    ServeDir::new(Path::new(&config.site_root).join(&config.site_pkg_dir))
        .precompressed_br()
        .precompressed_gzip()
}

/// How long browsers keep `/pkg/` files: forever when their names carry a hash of their
/// content (a new build has new names), else they ask again every time. Only successful
/// answers are cached.
fn asset_caching<B>(
    hashed: bool,
) -> SetResponseHeaderLayer<impl Fn(&Response<B>) -> Option<HeaderValue> + Clone> {
    let value = HeaderValue::from_static(if hashed {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    });
    SetResponseHeaderLayer::overriding(header::CACHE_CONTROL, move |resp: &Response<B>| {
        resp.status().is_success().then(|| value.clone())
    })
}

/// Headers every response carries. Pages set their own nonce-based Content-Security-Policy;
/// everything else gets one that allows nothing to run.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
    }
    resp
}

impl Application {
    /// Serves until `shutdown` resolves, then finishes in-flight requests (up to 30 s),
    /// waits for a scheduler tick in progress to finish (up to 10 s more), so its decisions
    /// are committed and logged before the process exits, and writes the heartbeats and
    /// last-seen times still in memory.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        tracing::info!(addr = %self.addr, "listening");
        let (stop_scheduler, stopped) = tokio::sync::watch::channel(false);
        let stopped_push = stopped.clone();
        // Webhook deliveries go out from the outbox; a pass in progress at shutdown is
        // simply cut short (what it did not record is sent again: at least once).
        let webhooks = tokio::spawn(vf_control::webhooks::run(
            self.control.clone(),
            self.webhook_interval,
            stopped.clone(),
        ));
        let scheduler = self.scheduler_interval.map(|every| {
            tokio::spawn(crate::scheduler::run(
                self.control.clone(),
                every,
                stopped.clone(),
            ))
        });
        let flusher = self.last_seen_flush.map(|every| {
            tokio::spawn(crate::scheduler::flush_last_seen(
                self.control.clone(),
                every,
                stopped,
            ))
        });
        // Agents' push streams hear of changes; they end when the server stops.
        let pusher = tokio::spawn(vf_control::push::watch(
            self.control.clone(),
            self.push_check,
            stopped_push,
        ));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = axum::serve(
            self.listener,
            self.router
                .into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move {
            shutdown.await;
            let _ = stop_scheduler.send(true);
            let _ = tx.send(());
        });
        let mut server = std::pin::pin!(server.into_future());
        tokio::select! {
            res = &mut server => res.context("serving")?,
            _ = async { let _ = rx.await; tokio::time::sleep(Duration::from_secs(30)).await } => {
                tracing::warn!("in-flight requests did not finish within 30 s; stopping");
            }
        }
        if let Some(scheduler) = scheduler {
            if tokio::time::timeout(Duration::from_secs(10), scheduler)
                .await
                .is_err()
            {
                tracing::warn!("the scheduler tick did not finish within 10 s; stopping");
            }
        }
        if let Some(flusher) = flusher {
            let _ = flusher.await;
        }
        let _ = pusher.await;
        // A delivery pass may be waiting on a slow receiver: give it a moment, then stop.
        if tokio::time::timeout(Duration::from_secs(2), webhooks)
            .await
            .is_err()
        {
            tracing::info!("a webhook delivery pass was cut short by the shutdown");
        }
        // Every request has been answered: what they recorded in memory is written now.
        self.control.db.heartbeats.settled().await;
        crate::scheduler::flush_once(&self.control).await;
        Ok(())
    }

    /// Serves in a background task (tests); returns the base URL.
    pub fn spawn(self) -> String {
        let url = format!("http://{}", self.addr);
        tokio::spawn(self.run_until(std::future::pending()));
        url
    }
}

/// Resolves on SIGTERM or ctrl-c.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}
