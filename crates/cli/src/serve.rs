//! `lazarus serve`: wiring only; the gateway lives in the `lazarus-gateway` crate.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use lazarus_gateway::auth::{self, TokenSource};

use crate::args::{ModelArgs, StoreArgs, parse_millis, parse_secs};

/// Arguments of `lazarus serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:7077")]
    pub listen: SocketAddr,
    /// Allow listening on a non-loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    /// Answer requests for this host name too (repeatable; `.example.com` allows every name
    /// under it). By default only an IP address the gateway is reached by and `localhost`
    /// are answered, on every route: any other `Host` gets 421, so a web page whose name is
    /// pointed at this machine (DNS rebinding) reads nothing.
    #[arg(long, value_name = "NAME")]
    pub allowed_host: Vec<String>,
    /// Sessions in local files (`--session-dir`, the default) or a PostgreSQL store shared
    /// with other gateways (`--store postgres://…`).
    #[command(flatten)]
    pub store: StoreArgs,
    /// With a shared store (`--store postgres://…`): how often to look for sessions whose
    /// gateway is gone and resume them here (`1s`, `500ms`; a bare number is milliseconds).
    /// 0 turns takeover off.
    #[arg(long, alias = "takeover-interval-ms", default_value = "1s", value_parser = parse_millis)]
    pub takeover_interval: Duration,
    /// Directory holding the sessions' workspaces [default: $XDG_STATE_HOME/lazarus/workspaces]
    #[arg(long)]
    pub workspace_root: Option<PathBuf>,
    /// Sessions whose recorded workspace lies at or beneath DIR may run here, in that
    /// workspace (repeatable): e.g. sessions `lazarus run --workspace ~/src/app` made.
    /// Without it such a session is left to its owner (`needs_owner`, with the command that
    /// resumes it). New sessions always get a workspace beneath --workspace-root.
    #[arg(long, value_name = "DIR")]
    pub allow_workspace: Vec<PathBuf>,
    /// Bearer token file, created with mode 0600 on first start [default:
    /// $XDG_STATE_HOME/lazarus/gateway.token; env LAZARUS_TOKEN wins]
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// How long running tool calls may take to finish after SIGTERM before they are
    /// cancelled (`30s`, `2m`; a bare number is seconds).
    #[arg(long, default_value = "30s", value_parser = parse_secs)]
    pub drain_timeout: Duration,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Largest message text in bytes.
    #[arg(long, default_value_t = 256 * 1024)]
    pub max_text_bytes: usize,
    /// Sessions driven at once (each has at most one model request or tool call in flight).
    #[arg(long, default_value_t = 64)]
    pub max_running: usize,
    /// Sessions waiting for a run slot before new work gets 429.
    #[arg(long, default_value_t = 4096)]
    pub max_queued: usize,
    /// Sessions open (writer held) at once; a message for one more waits in its inbox
    /// [default: local files: a third of the descriptors the connections leave (2 per open
    /// session), at most 10000; PostgreSQL: 10000]
    #[arg(long)]
    pub max_open_sessions: Option<usize>,
    /// A session idle (not running, nobody using it) this long is closed: its writer, lock
    /// or lease, descriptors and memory are released; the next message reopens it (`60s`;
    /// `0` keeps sessions open).
    #[arg(long, default_value = "60s", value_parser = parse_secs)]
    pub idle_close: Duration,
    /// Concurrent live tails (SSE).
    #[arg(long, default_value_t = 1024)]
    pub max_streams: usize,
    /// HTTP connections served at once; a few more are answered `429 too_many_connections`
    /// (`/healthz` still answers), the rest closed at once [default: half the open-files
    /// limit (`ulimit -n`), between 16 and 1024]
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Time a client has to send a request's head (method, path, headers); also the longest
    /// a keep-alive connection may wait for its next request (`10s`, `500ms`; a bare number is
    /// seconds).
    #[arg(long, default_value = "10s", value_parser = parse_secs)]
    pub header_timeout: Duration,
    /// A connection on which no byte moves either way for this long is closed (a stalled
    /// body, a live tail nobody reads) (`60s`; a bare number is seconds).
    #[arg(long, default_value = "60s", value_parser = parse_secs)]
    pub idle_timeout: Duration,
    /// Record inputs durably but never drive sessions (benchmarks, maintenance).
    #[arg(long)]
    pub no_run: bool,
    /// Worker threads driving sessions.
    #[arg(long, default_value_t = 4)]
    pub run_threads: usize,
    /// Worker threads serving HTTP.
    #[arg(long, default_value_t = 2)]
    pub http_threads: usize,
    /// How much lower the threads driving sessions are scheduled than those accepting
    /// messages (nice 0–19; 0: the same): a busy gateway accepts first, and a session that
    /// falls behind takes more messages per turn. Tools a session runs inherit it.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(0..=19))]
    pub run_nice: i32,
    /// How a local session directory's appends are made durable: `shared` (one `syncfs` for
    /// every session written at once: the disk's rate with many sessions; it also writes
    /// back other programs' dirty data on that file system) or `per-file` (an `fdatasync` per
    /// append). `shared` falls back to `per-file`, saying so, where `syncfs` does not report
    /// write errors (Linux before 5.8). PostgreSQL stores ignore it.
    #[arg(long, value_enum, default_value = "shared")]
    pub sync: SyncMode,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `lazarus serve --sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SyncMode {
    Shared,
    PerFile,
}

pub fn run(args: ServeArgs) -> Result<i32> {
    // Arguments first: nothing is written (no token file) for a command that will refuse.
    auth::check_listen(args.listen, args.allow_remote)?;
    if args.max_connections == Some(0) {
        anyhow::bail!("--max-connections must be at least 1");
    }
    for (flag, d) in [
        ("--header-timeout", args.header_timeout),
        ("--idle-timeout", args.idle_timeout),
    ] {
        if d.is_zero() {
            anyhow::bail!("{flag} must be more than 0 (a connection would be closed at once)");
        }
    }
    let mut toolbox = args.model.toolbox()?;
    let builtin = toolbox.clone();
    let mcp = crate::mcp::configured(&args.model.mcp_config, args.model.no_mcp)?;
    args.store.check()?;
    let state = crate::paths::state_dir();
    let token_file = args
        .token_file
        .clone()
        .unwrap_or_else(|| auth::default_token_file(&state));
    let (token, source) =
        auth::load_or_create_token(std::env::var("LAZARUS_TOKEN").ok(), &token_file)?;
    match source {
        TokenSource::Env => eprintln!("token: from LAZARUS_TOKEN"),
        TokenSource::File(p) => eprintln!("token: {}", p.display()),
        TokenSource::Created(p) => eprintln!("token: created {} (mode 0600)", p.display()),
    }
    if !args.listen.ip().is_loopback() {
        auth::check_remote_token(&token)?;
    }
    let workspace_root = args
        .workspace_root
        .clone()
        .unwrap_or_else(|| state.join("workspaces"));
    let mut runner = args
        .model
        .runner_config(workspace_root.clone(), !args.no_run)?;
    runner.max_turns = args.model.max_turns;
    // the gateway's own state: its token, the sessions, every session's workspace (a
    // session's own workspace is granted back to its calls)
    runner.sandbox = std::sync::Arc::new(
        runner
            .sandbox
            .as_ref()
            .clone()
            .deny([token_file.clone(), workspace_root.clone()])
            .deny(args.store.local_dir()?),
    );
    eprintln!("{}", runner.sandbox.describe());
    // The MCP servers, shared by every session, live on a runtime of their own (the
    // gateway's are made inside `lazarus_gateway::run`); one that fails to start stops the
    // gateway before it listens. A stdio server runs in the workspace root.
    let mcp_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mcp")
        .enable_all()
        .build()
        .context("starting the MCP runtime")?;
    std::fs::create_dir_all(&workspace_root)
        .with_context(|| format!("creating the workspace root {}", workspace_root.display()))?;
    let mcp_source =
        mcp_runtime.block_on(crate::mcp::start(&mcp, &workspace_root, &runner.sandbox))?;
    if let Some(source) = &mcp_source {
        toolbox.add_source(source.clone());
    }
    // the world sessions run in here: new ones record it, and one made elsewhere runs here
    // only when its recorded world agrees (a different one is left to its owner)
    let grants = crate::approvals::grants()
        .map(|g| g.into_iter().map(|g| g.tool).collect())
        .unwrap_or_default();
    runner.api_key_env = Some(args.model.api_key_var().to_string());
    if lazarus_telemetry::live::enabled() {
        runner.trace_context = Some(lazarus_telemetry::spans::traceparent);
    }
    let mut world = runner.world(
        &builtin,
        mcp.servers.iter().map(|s| s.world_entry()).collect(),
        grants,
        "serve",
        lazarus_session::record::WorldReason::Created,
    );
    if let Some(source) = &mcp_source {
        source.record_protocol_versions(&mut world.tools.mcp);
    }
    let store_flag = match args.store.choice()? {
        crate::paths::StoreChoice::Local(dir) => Some(format!(
            "--session-dir {}",
            crate::term::shell_quote(&dir.canonicalize().unwrap_or(dir).display().to_string())
        )),
        crate::paths::StoreChoice::Postgres(url) => Some(format!(
            "--store {}",
            crate::term::shell_quote(&crate::term::without_password(&url))
        )),
    };
    let shared = args.store.is_postgres()?;
    let store: std::sync::Arc<dyn lazarus_session::Store> = match args.store.choice()? {
        crate::paths::StoreChoice::Local(_) if args.sync == SyncMode::Shared => {
            let local = args.store.local("serve")?;
            match local.clone().with_shared_sync() {
                Ok(s) => std::sync::Arc::new(s),
                Err(e) => {
                    eprintln!("sync: per-file fdatasync ({e})");
                    std::sync::Arc::new(local)
                }
            }
        }
        _ => std::sync::Arc::from(args.store.open()?),
    };
    eprintln!("store: {}", store.location());
    let max_connections = args
        .max_connections
        .unwrap_or_else(lazarus_gateway::fds::default_max_connections);
    let cfg = lazarus_gateway::Config {
        listen: args.listen,
        allow_remote: args.allow_remote,
        allowed_hosts: args.allowed_host.clone(),
        store,
        takeover_interval: (shared && !args.takeover_interval.is_zero())
            .then_some(args.takeover_interval),
        workspace_root,
        allowed_workspaces: args.allow_workspace.clone(),
        world,
        store_flag,
        token,
        drain_timeout: args.drain_timeout,
        limits: lazarus_gateway::Limits {
            max_body_bytes: args.max_body_bytes,
            max_text_bytes: args.max_text_bytes,
            max_running: args.max_running,
            max_queued: args.max_queued,
            max_open_sessions: args.max_open_sessions.unwrap_or_else(|| {
                lazarus_gateway::fds::default_max_open_sessions(!shared, max_connections)
            }),
            max_streams: args.max_streams,
            max_connections,
            header_timeout: args.header_timeout,
            idle_timeout: args.idle_timeout,
            idle_close: (!args.idle_close.is_zero()).then_some(args.idle_close),
            ..Default::default()
        },
        runner,
        toolbox,
        no_run: args.no_run,
        run_threads: args.run_threads,
        http_threads: args.http_threads,
        run_nice: args.run_nice,
    };
    lazarus_gateway::run(cfg).context("gateway")?;
    drop(mcp_source);
    mcp_runtime.shutdown_timeout(Duration::from_secs(2));
    Ok(0)
}
