//! # lazarus-gateway
//!
//! `lazarus serve`: many durable sessions over HTTP. Create, list, inspect, send messages
//! (durably accepted, deduplicated by message id), post system events (`resume`), fork,
//! live-tail (SSE), health/readiness and Prometheus metrics. Bearer-token auth, loopback by
//! default. At startup it resumes its own interrupted sessions, then reports ready
//! (`READY=1` to `$NOTIFY_SOCKET`). SIGTERM drains: stop accepting, let running tool calls
//! finish within a budget, cancel the rest; every session stays resumable. On a shared store
//! (PostgreSQL) several gateways serve the same sessions: a session runs on the one holding
//! its writer lock, and a periodic takeover pass resumes the sessions of a gateway that died
//! (trigger `gateway-takeover`).
//!
//! See `docs/gateway.md` for the API.

pub mod api;
pub mod auth;
pub mod error;
pub mod fds;
#[doc(hidden)]
pub mod harness;
pub mod hub;
pub mod inbox;
mod memory;
pub mod metrics;
pub mod notify;
pub mod recovery;
pub mod registry;
pub mod scheduler;
pub mod server;
pub mod web;
pub mod workspace;
pub mod world;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lazarus_agent::runner::RunnerConfig;
use lazarus_agent::tools::Toolbox;
use lazarus_session::SharedStore;
use tokio_util::sync::CancellationToken;

pub use hub::{Hub, HubConfig, Limits};
pub use recovery::TakeoverReport;

/// Everything `lazarus serve` needs.
#[derive(Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub allow_remote: bool,
    /// Host names answered besides IP addresses and `localhost` (`--allowed-host`): every
    /// route checks `Host` first (`lazarus_web::host`).
    pub allowed_hosts: Vec<String>,
    /// Where sessions live: local files, or a store shared with other gateways.
    pub store: SharedStore,
    /// Shared stores only: how often to look for sessions whose gateway is gone (their
    /// writer lock is free) and take them over. `None`: never (local files: one gateway).
    pub takeover_interval: Option<Duration>,
    pub workspace_root: PathBuf,
    /// Directories at or beneath which a session's recorded workspace may be, besides the
    /// root (`--allow-workspace`).
    pub allowed_workspaces: Vec<PathBuf>,
    /// The world sessions run in here (workspace: each session's).
    pub world: lazarus_session::record::World,
    /// How `lazarus run` names this store (`--session-dir DIR`), for the resume command of a
    /// session left alone.
    pub store_flag: Option<String>,
    pub token: String,
    pub drain_timeout: Duration,
    pub limits: Limits,
    pub runner: RunnerConfig,
    pub toolbox: Toolbox,
    pub no_run: bool,
    /// Worker threads of the runtime that drives sessions (model requests, tools, their
    /// appends); the HTTP side has its own runtime so session I/O never stalls it.
    pub run_threads: usize,
    /// Worker threads of the HTTP runtime.
    pub http_threads: usize,
    /// How much lower than the HTTP threads the run threads are scheduled (nice, 0–19).
    pub run_nice: i32,
}

/// Runs the gateway until SIGTERM/SIGINT, then drains. Blocking.
pub fn run(cfg: Config) -> Result<()> {
    auth::check_listen(cfg.listen, cfg.allow_remote)?;
    if !cfg.listen.ip().is_loopback() {
        auth::check_remote_token(&cfg.token)?;
    }
    memory::limit_arenas();
    let http_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.http_threads.max(1))
        .thread_name("lazarus-http")
        .max_blocking_threads(256)
        // Idle blocking threads go soon: the pool wakes its idle threads in turn, so with the
        // default 10 s keep-alive a burst's threads (each with a stack, and memory held for
        // it by the allocator) stayed for as long as the inbox poll kept waking them.
        .thread_keep_alive(Duration::from_secs(1))
        // an idle worker empties its allocator cache once memory was released (memory.rs)
        .on_thread_park(lazarus_allocator::flush_thread_cache_if_asked)
        .enable_all()
        .build()
        .context("starting the HTTP runtime")?;
    let run_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.run_threads.max(1))
        .thread_name("lazarus-run")
        .thread_keep_alive(Duration::from_secs(1))
        .on_thread_start({
            let nice = cfg.run_nice;
            move || lower_run_priority(nice)
        })
        .on_thread_park(lazarus_allocator::flush_thread_cache_if_asked)
        .enable_all()
        .build()
        .context("starting the session runtime")?;
    let r = http_rt.block_on(serve(cfg, run_rt.handle().clone()));
    run_rt.shutdown_timeout(Duration::from_secs(5));
    http_rt.shutdown_timeout(Duration::from_secs(1));
    r
}

/// Session runs yield the CPU to the HTTP side: accepting a message (a write and a wait)
/// comes before driving a session (a model request, its records), so accept latency stays
/// low while every session runs, and a run that falls behind takes more inputs per turn
/// (`scripts/bench-gateway.sh`, accept + run: p99 20–27 ms at nice 0, 12–18 ms at 10, with
/// 1.5–2× the accepts). Per-thread nice on Linux, added to the inherited one (the run runtime's workers and blocking
/// threads; tool processes they start inherit it). Failing to set it changes nothing else.
fn lower_run_priority(nice: i32) {
    if nice == 0 {
        return;
    }
    // relative to what the thread inherited (a gateway started under `nice` keeps the gap)
    let tid = rustix::thread::gettid();
    let r = rustix::process::getpriority_process(Some(tid))
        .and_then(|base| rustix::process::setpriority_process(Some(tid), (base + nice).min(19)));
    if let Err(e) = r {
        tracing::debug!(error = %e, "could not lower the run threads' priority");
    }
}

async fn serve(cfg: Config, run_rt: tokio::runtime::Handle) -> Result<()> {
    let started = Instant::now();
    let store = cfg.store.clone();
    std::fs::create_dir_all(&cfg.workspace_root)
        .with_context(|| format!("creating {}", cfg.workspace_root.display()))?;
    let workspace_root = cfg
        .workspace_root
        .canonicalize()
        .with_context(|| format!("workspace root {}", cfg.workspace_root.display()))?;
    let mut allowed_workspaces = Vec::new();
    for a in &cfg.allowed_workspaces {
        allowed_workspaces.push(
            a.canonicalize()
                .with_context(|| format!("--allow-workspace {}", a.display()))?,
        );
    }
    let hub = Hub::new(
        store,
        HubConfig {
            workspace_root,
            allowed_workspaces,
            world: cfg.world.clone(),
            store_flag: cfg.store_flag.clone(),
            limits: cfg.limits.clone(),
            runner: cfg.runner.clone(),
            toolbox: cfg.toolbox.clone(),
            no_run: cfg.no_run,
        },
        run_rt,
    );
    // OpenTelemetry spans while sessions run, only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    if let Some(t) = lazarus_telemetry::live::Live::from_env(Some(cfg.runner.model.clone()))? {
        let _ = hub.telemetry.set(t);
    }
    let stop = CancellationToken::new();
    let state = api::AppState {
        hub: hub.clone(),
        token: Arc::from(cfg.token.as_str()),
        stop: stop.clone(),
    };
    let app = web::mount(
        api::router(state),
        hub.clone(),
        Arc::from(cfg.token.as_str()),
        stop.clone(),
    );
    // every route, the API, the view and /metrics alike, answers only its own host names
    let app = lazarus_web::host::guard(
        app,
        lazarus_web::host::AllowedHosts::new(cfg.listen, cfg.allowed_hosts.clone()),
    );
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    // Serve health (and 503 readiness) while the recovery scan runs.
    let conn_limits = server::ConnLimits {
        max_connections: cfg.limits.max_connections,
        header_timeout: cfg.limits.header_timeout,
        idle_timeout: cfg.limits.idle_timeout,
    };
    let server = tokio::spawn(server::serve(
        listener,
        app,
        conn_limits,
        hub.clone(),
        stop.clone(),
    ));
    println!("lazarus gateway listening on http://{addr}");
    eprintln!(
        "connections: at most {} (file descriptor limit {}), header timeout {} ms, idle timeout {} ms",
        conn_limits.max_connections,
        fds::limit().map_or_else(|| "unlimited".to_string(), |n| n.to_string()),
        conn_limits.header_timeout.as_millis(),
        conn_limits.idle_timeout.as_millis()
    );
    let signals = spawn_signals(stop.clone(), hub.clone());
    let report = hub.recover().await?;
    println!(
        "ready: {} sessions scanned, {} re-queued, {} left to their owner (a world this gateway cannot honour: `lazarus sessions list --status needs_owner`), {} held by another writer, {} unreadable; recovery took {} ms (start to ready {} ms)",
        report.scanned,
        report.requeued,
        report.left_alone,
        report.held_elsewhere,
        report.failed,
        report.took.as_millis(),
        started.elapsed().as_millis()
    );
    let takeover = cfg.takeover_interval.map(|every| {
        println!(
            "takeover: every {} ms, sessions of gateways that are gone are resumed here",
            every.as_millis()
        );
        hub.spawn_takeover(every, stop.clone())
    });
    let inbox = hub.spawn_inbox_watch(stop.clone());
    notify::ready();
    stop.cancelled().await;
    if let Some(t) = takeover {
        t.abort();
    }
    inbox.abort();
    eprintln!(
        "stopping: no new requests; running tool calls may finish within {} s",
        cfg.drain_timeout.as_secs()
    );
    notify::stopping();
    hub.drain(cfg.drain_timeout).await;
    if tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .is_err()
    {
        tracing::warn!("HTTP connections still open after drain; closing them");
    }
    signals.abort();
    if let Some(t) = hub.telemetry.get() {
        tokio::task::block_in_place(|| t.shutdown());
    }
    eprintln!("stopped; every session is resumable");
    Ok(())
}

fn spawn_signals(stop: CancellationToken, hub: Arc<Hub>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        for n in 0.. {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if n == 0 {
                stop.cancel();
            } else {
                eprintln!("second signal: cancelling everything now");
                hub.cancel_all();
            }
        }
    })
}
