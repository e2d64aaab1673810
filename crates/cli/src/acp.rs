//! `lazarus acp`: Lazarus as an Agent Client Protocol agent on stdio (the `lazarus-acp`
//! crate), for editors and `acpx`. Wiring only: the model, sandbox and approval settings of
//! `run`, the store, and a runner per session in the world the editor names (its `cwd` and
//! `mcpServers`, with the configuration file's servers).
//!
//! Standard output is the protocol: everything else this command says goes to stderr.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use futures_util::future::BoxFuture;
use lazarus_acp::{Host, Prepared};
use lazarus_agent::runner::{ApprovalMode, Runner};
use lazarus_session::SharedStore;
use lazarus_session::record::WorldReason;

use crate::args::{ModelArgs, StoreArgs, given};

const AFTER_HELP: &str = "\
Examples (the editor starts it; it speaks ACP v1 on standard input and output):
  Zed settings.json:  \"agent_servers\": {\"Lazarus\": {\"command\": \"lazarus\", \"args\": [\"acp\"]}}
  acpx:               acpx --agent 'lazarus acp' 'fix the failing test'
  another agent:      lazarus acp --wrap -- gemini --acp
                      lazarus acp --wrap -- opencode acp

Every ACP session is a Lazarus session: `lazarus sessions list` shows it, and it survives
kill -9 (session/load replays it; a call cut off is shown failed, in doubt). Calls that are
not read-only ask the editor first (--ask-for-approval untrusted unless given).

With --wrap, another ACP agent answers and Lazarus is a durable proxy in front of it: every
message is journaled (a Lazarus session per ACP session, `lazarus sessions list` shows them),
and when the agent dies it is started again, its sessions taken back, and the calls it was
running named in doubt to it and to the editor. See docs/acp.md.";

/// Arguments of `lazarus acp`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct AcpArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Be a durable proxy in front of another ACP agent, whose command follows `--`
    #[arg(long)]
    pub wrap: bool,
    /// The wrapped agent's command and arguments (with --wrap)
    #[arg(last = true, value_name = "AGENT")]
    pub agent: Vec<String>,
}

/// The `lazarus run` flags that mean nothing to a proxy (the wrapped agent has its own).
const NOT_FOR_WRAP: &[&str] = &[
    "model",
    "base_url",
    "api",
    "system_prompt",
    "tools",
    "sandbox",
    "ask_for_approval",
];

/// What the CLI gives the ACP agent: its store and a runner per session.
struct CliHost {
    store: SharedStore,
    model: ModelArgs,
    /// The session files (local store): denied to the calls' shell.
    session_dir: Option<std::path::PathBuf>,
}

impl Host for CliHost {
    fn store(&self) -> SharedStore {
        self.store.clone()
    }

    fn prepare<'a>(
        &'a self,
        workspace: &'a Path,
        mcp: Vec<lazarus_mcp::config::Server>,
    ) -> BoxFuture<'a, Result<Prepared, String>> {
        Box::pin(async move {
            self.prepare_now(workspace, mcp)
                .await
                .map_err(|e| format!("{e:#}"))
        })
    }
}

impl CliHost {
    async fn prepare_now(
        &self,
        workspace: &Path,
        client: Vec<lazarus_mcp::config::Server>,
    ) -> Result<Prepared> {
        let mut cfg = self.model.runner_config(workspace.to_path_buf(), false)?;
        cfg.api_key_env = Some(self.model.api_key_var().to_string());
        cfg.sandbox = Arc::new(cfg.sandbox.as_ref().clone().deny(self.session_dir.clone()));
        let mut toolbox = self.model.toolbox()?;
        let builtin = toolbox.clone();
        // the configuration file's servers, then the editor's
        let mut servers = crate::mcp::configured(&[], false)?;
        for s in client {
            if servers.servers.iter().any(|o| o.name == s.name) {
                anyhow::bail!(
                    "MCP server {:?} is configured in the configuration file and by the editor; rename one",
                    s.name
                );
            }
            servers.servers.push(s);
        }
        let source = crate::mcp::start(&servers, workspace, &cfg.sandbox).await?;
        if let Some(s) = &source {
            toolbox.add_source(s.clone());
        }
        let grants = crate::approvals::grants()
            .map(|g| g.into_iter().map(|g| g.tool).collect())
            .unwrap_or_default();
        let world = cfg.world(
            &builtin,
            servers.servers.iter().map(|s| s.world_entry()).collect(),
            grants,
            "acp",
            WorldReason::Created,
        );
        let runner = Runner::new(cfg)?.with_toolbox(toolbox).with_world(world);
        Ok(Prepared {
            runner,
            keep: Box::new(source),
        })
    }
}

pub fn run(mut args: AcpArgs) -> Result<i32> {
    args.store.check()?;
    match (args.wrap, args.agent.is_empty()) {
        (true, true) => anyhow::bail!(
            "--wrap needs the agent's command after `--`: lazarus acp --wrap -- gemini --acp"
        ),
        (false, false) => anyhow::bail!(
            "an agent command ({:?}) without --wrap: to put Lazarus in front of it, lazarus acp --wrap -- {}",
            args.agent.join(" "),
            args.agent.join(" ")
        ),
        (true, false) => return wrap(args),
        (false, true) => {}
    }
    // the editor's person is asked: calls that are not read-only wait for a decision, unless
    // the command line or the configuration file says otherwise
    if !given("ask_for_approval")
        && crate::config::load()
            .ok()
            .and_then(|c| c.approval.as_ref())
            .is_none()
    {
        args.model.ask_for_approval = ApprovalMode::Untrusted;
    }
    // one model for every session of this process, asked of the server once
    if args.model.model.as_deref().is_none_or(str::is_empty) {
        args.model.model = Some(args.model.model_name()?);
    }
    let store: SharedStore = Arc::from(args.store.open()?);
    let host = Arc::new(CliHost {
        store,
        session_dir: args.store.local_dir()?,
        model: args.model,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (out, drained) = lazarus_acp::stdio::Stdout::new().context("starting the stdout writer")?;
    let transport = lazarus_acp::stdio::lines(out);
    let served = rt.block_on(lazarus_acp::serve(host, transport));
    // what was answered last is on its way out: let it leave before the process does
    drop(rt);
    drained.wait(std::time::Duration::from_secs(5));
    served.map_err(|e| anyhow::anyhow!("ACP connection: {e}"))?;
    Ok(0)
}

/// `lazarus acp --wrap -- AGENT ARGS…`.
fn wrap(args: AcpArgs) -> Result<i32> {
    if let Some(flag) = NOT_FOR_WRAP.iter().find(|f| given(f)) {
        anyhow::bail!(
            "--{} does not apply with --wrap: the wrapped agent runs with its own settings (give them in its command after `--`)",
            flag.replace('_', "-")
        );
    }
    let store: SharedStore = Arc::from(args.store.open()?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let cfg = lazarus_acp::proxy::ProxyConfig {
        agent: args.agent,
        store,
    };
    let (out, drained) = lazarus_acp::stdio::Stdout::new().context("starting the stdout writer")?;
    let ran = rt.block_on(lazarus_acp::proxy::run(cfg, tokio::io::stdin(), out));
    drop(rt);
    // what the proxy wrote last leaves before the process does
    drained.wait(std::time::Duration::from_secs(5));
    ran.map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(0)
}
