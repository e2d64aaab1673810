//! # lazarus-web
//!
//! The web view of Lazarus sessions: a sessions page (status, workspace, activity, size,
//! parent; filter, search, pages of 100), a session page (the timeline of records as a
//! conversation: inputs, responses, tool calls as intent → start → outcome cards, in-doubt
//! calls with the notice the model received, resume receipts with every count, fork points,
//! damaged lines), and a fork tree. Server-rendered HTML ([`maud`], escaped by construction)
//! with one small script that only adds to it: live updates, the token prompt, and — on the
//! gateway — sending a message, forking and downloading. Everything reads through the
//! [`Store`](lazarus_session::Store) trait; nothing here writes a record.
//!
//! Mounted by `lazarus serve` ([`Mode::Gateway`]: the hub's live status, the gateway's SSE
//! stream and its `/v1` actions) and served alone by `lazarus ui` ([`Mode::ReadOnly`], with
//! its own live stream that polls the store), both through [`router`].
//!
//! Security: every page is behind the same bearer token as the API ([`Auth`]); the browser
//! keeps the token in the tab's session storage and sends it in an `Authorization` header,
//! never in a URL. Responses carry a strict Content-Security-Policy (scripts and styles from
//! this origin only, no inline code), and every asset is embedded in the binary.

mod assets;
mod auth;
mod export;
mod fmt;
pub mod host;
mod list;
mod live;
mod page;
mod session;
pub mod timeline;
mod tree;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use lazarus_session::{LocalStore, SessionId, SessionSummary, SharedStore, Status};
use tokio_util::sync::CancellationToken;

/// Who may read the pages.
#[derive(Clone)]
pub enum Auth {
    /// Every request but the embedded assets must carry `Authorization: Bearer <token>`.
    Token(Arc<str>),
    /// No token (`lazarus ui --no-auth`, loopback only; the page header says so).
    None,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Token(_) => f.write_str("Auth::Token(<redacted>)"),
            Auth::None => f.write_str("Auth::None"),
        }
    }
}

/// What the gateway tells the view about sessions it hosts.
pub trait Gateway: Send + Sync + 'static {
    /// The live status of a session open in this gateway (`running` while a run holds it),
    /// `None` when it is not open here.
    fn live_status(&self, id: &SessionId) -> Option<Status>;
}

/// Where the view is served from.
#[derive(Clone)]
pub enum Mode {
    /// Mounted on `lazarus serve`: live status from the hub, the live tail from
    /// `GET /v1/sessions/{id}/stream`, actions (send, fork) through the `/v1` API.
    Gateway(Arc<dyn Gateway>),
    /// `lazarus ui`: read-only over a store; the live tail polls the store.
    ReadOnly,
}

/// Limits of the view. Every one is explicit.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Sessions per page of the sessions page.
    pub page_size: usize,
    /// How long a listing is reused by the pages that need one (fork tree, children of a
    /// session) before the store is listed again. The sessions page always lists afresh.
    pub list_cache: Duration,
    /// Records a session page shows at most (the latest ones; earlier ones behind a link).
    pub records_per_page: u64,
    /// Full-text search reads at most this many sessions per request…
    pub text_search_sessions: usize,
    /// …and at most this many bytes of records.
    pub text_search_bytes: u64,
    /// Fork-tree nodes drawn at most.
    pub tree_nodes: usize,
    /// Read-only live tails open at once (`lazarus ui`).
    pub max_streams: usize,
    /// How often a read-only live tail looks for new records.
    pub poll_interval: Duration,
    /// Longest search query, in bytes.
    pub query_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            page_size: 100,
            list_cache: Duration::from_secs(2),
            records_per_page: 2_000,
            text_search_sessions: 10_000,
            text_search_bytes: 512 * 1024 * 1024,
            tree_nodes: 1_000,
            max_streams: 256,
            poll_interval: Duration::from_millis(300),
            query_bytes: 256,
        }
    }
}

/// Everything the view needs.
#[derive(Clone)]
pub struct WebConfig {
    pub store: SharedStore,
    pub auth: Auth,
    pub mode: Mode,
    /// The same store as local files, when it is one: a damaged session's page then shows
    /// `verify`'s report of every bad line (torn tails included), not only the first error a
    /// reader met.
    pub local: Option<LocalStore>,
    pub limits: Limits,
    /// Ends read-only live tails (so a graceful shutdown is not held open by them).
    pub stop: CancellationToken,
    /// Host names answered besides IP addresses and `localhost` (`--allowed-host`; see
    /// [`host`]).
    pub allowed_hosts: Vec<String>,
}

impl WebConfig {
    pub fn new(store: SharedStore, auth: Auth, mode: Mode) -> Self {
        WebConfig {
            store,
            auth,
            mode,
            local: None,
            limits: Limits::default(),
            stop: CancellationToken::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// Shared by the handlers.
pub(crate) struct Web {
    pub cfg: WebConfig,
    pub streams: Arc<tokio::sync::Semaphore>,
    list_cache: Mutex<Option<(Instant, Arc<Vec<SessionSummary>>)>>,
}

pub(crate) type WebState = Arc<Web>;

impl Web {
    pub fn gateway(&self) -> Option<&Arc<dyn Gateway>> {
        match &self.cfg.mode {
            Mode::Gateway(g) => Some(g),
            Mode::ReadOnly => None,
        }
    }

    /// The status to show: the live one for a session open in the gateway.
    pub fn status_of(&self, s: &SessionSummary) -> Status {
        self.gateway()
            .and_then(|g| g.live_status(&s.id))
            .unwrap_or(s.status)
    }

    /// Every session, listed afresh, live statuses applied.
    pub fn list_fresh(&self) -> lazarus_session::Result<Arc<Vec<SessionSummary>>> {
        let mut list = self.cfg.store.list()?;
        for s in &mut list {
            s.status = self.status_of(s);
        }
        let list = Arc::new(list);
        *self.list_cache.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), list.clone()));
        Ok(list)
    }

    /// A listing at most [`Limits::list_cache`] old.
    pub fn list_recent(&self) -> lazarus_session::Result<Arc<Vec<SessionSummary>>> {
        if let Some((at, list)) = &*self.list_cache.lock().unwrap_or_else(|p| p.into_inner())
            && at.elapsed() <= self.cfg.limits.list_cache
        {
            return Ok(list.clone());
        }
        self.list_fresh()
    }
}

/// The view's routes, for mounting (the gateway merges them with its API) or serving alone.
/// Paths: `/` (sessions), `/sessions/{id}` (timeline), `/sessions/{id}/tree`,
/// `/sessions/{id}/timeline?after=SEQ` (the live page's updates, HTML),
/// `/sessions/{id}/export.jsonl`, `/sessions/{id}/live` (read-only mode's SSE tail),
/// `/assets/…`.
pub fn router(cfg: WebConfig) -> Router {
    let state: WebState = Arc::new(Web {
        streams: Arc::new(tokio::sync::Semaphore::new(cfg.limits.max_streams)),
        cfg,
        list_cache: Mutex::new(None),
    });
    let pages = Router::new()
        .route("/", get(list::page))
        .route("/sessions/{id}", get(session::page))
        .route("/sessions/{id}/timeline", get(session::fragment))
        .route("/sessions/{id}/tree", get(tree::page))
        .route("/sessions/{id}/export.jsonl", get(export::download))
        .route("/sessions/{id}/live", get(live::stream))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ));
    Router::new()
        .route("/assets/{name}", get(assets::serve))
        .merge(pages)
        .layer(axum::middleware::from_fn(page::security_headers))
        .with_state(state)
}

/// `lazarus ui`: serves the view of `cfg` on `listen` until SIGINT or SIGTERM. `listening`
/// is called with the bound address (port 0 picks one) before the first request is served.
/// Refuses a non-loopback address unless `allow_remote`, and [`Auth::None`] on anything but
/// loopback.
pub fn serve_blocking(
    cfg: WebConfig,
    listen: SocketAddr,
    allow_remote: bool,
    listening: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    check_listen(&cfg.auth, listen, allow_remote)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("lazarus-ui")
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("listening on {listen}: {e}"))?;
        listening(listener.local_addr()?);
        let stop = cfg.stop.clone();
        let signals = stop.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            if let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            signals.cancel();
        });
        let allowed = host::AllowedHosts::new(listen, cfg.allowed_hosts.clone());
        axum::serve(listener, host::guard(router(cfg), allowed))
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await?;
        anyhow::Ok(())
    })
}

/// The listening rules of `lazarus ui` (the same as `serve`'s, plus: no auth only on
/// loopback).
pub fn check_listen(auth: &Auth, listen: SocketAddr, allow_remote: bool) -> anyhow::Result<()> {
    let loopback = listen.ip().is_loopback();
    if matches!(auth, Auth::None) && !loopback {
        anyhow::bail!(
            "--no-auth is accepted on a loopback address only (127.0.0.1, ::1), not {listen}: anyone who can reach it could read every session"
        );
    }
    if !loopback && !allow_remote {
        anyhow::bail!(
            "refusing to listen on {listen} (not loopback); pass --allow-remote to serve other hosts"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_auth_only_on_loopback_remote_only_when_allowed() {
        let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let lo6: SocketAddr = "[::1]:0".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let tok = Auth::Token("t".into());
        assert!(check_listen(&Auth::None, lo, false).is_ok());
        assert!(check_listen(&Auth::None, lo6, false).is_ok());
        let e = check_listen(&Auth::None, any, true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("loopback"), "{e}");
        assert!(check_listen(&tok, any, false).is_err());
        assert!(check_listen(&tok, any, true).is_ok());
    }
}
