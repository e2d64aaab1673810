//! What `lazarus run` (and `resume`) runs a session with. A new session, or one that recorded
//! no world (imported, older), runs with the flags, environment and config file, and records
//! that. A session that recorded its world runs in it: whatever the command line does not
//! give is taken from the record (not from the environment, the config file or the current
//! directory), and what it gives must agree with it — unless `--change-world`, which records
//! the change as a `world` record. Every difference is refused before anything is written.

use std::path::PathBuf;

use anyhow::{Context, Result};
use lazarus_mcp::config::{Server, Servers};
use lazarus_session::record::{Difference, World};

use crate::args::{ModelArgs, given};

/// The flags that set each facet of a world.
const PROVIDER_FLAGS: &[&str] = &["api", "base_url", "model", "context_window"];

/// What a run runs a session with, before anything is started or written.
pub struct Plan {
    pub workspace: PathBuf,
    /// The model settings, with the recorded world's values where no flag was given.
    pub model: ModelArgs,
    /// The MCP servers to start.
    pub mcp: Servers,
    /// Servers of the config file the recorded world does not name: not started for it.
    pub not_in_world: Vec<String>,
    /// The session recorded its world and this run continues in it.
    pub recorded: bool,
}

/// The plan of a run with `model` (as parsed), `workspace_flag`, and `recorded`, the world
/// of the session it continues (if it recorded one).
pub fn plan(
    model: &ModelArgs,
    workspace_flag: Option<&PathBuf>,
    recorded: Option<&World>,
) -> Result<Plan> {
    let canonical = |w: &PathBuf| {
        w.canonicalize()
            .with_context(|| format!("workspace {} must exist", w.display()))
    };
    let Some(r) = recorded else {
        let workspace = match workspace_flag {
            Some(w) => canonical(w)?,
            None => canonical(&std::env::current_dir().context("current directory")?)?,
        };
        let mcp = crate::mcp::configured(&model.mcp_config, model.no_mcp)?;
        return Ok(Plan {
            workspace,
            model: model.clone(),
            mcp,
            not_in_world: Vec::new(),
            recorded: false,
        });
    };
    let mut m = model.clone();
    let workspace = match (workspace_flag, &r.workspace) {
        (Some(w), _) if given("workspace") => canonical(w)?,
        (_, Some(w)) => PathBuf::from(w).canonicalize().with_context(|| {
            format!(
                "the session's workspace {w} cannot be used; give --workspace DIR --change-world to move it"
            )
        })?,
        (w, None) => canonical(&match w {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("current directory")?,
        })?,
    };
    if let Some(p) = &r.provider {
        if !PROVIDER_FLAGS.iter().any(|f| given(f)) {
            m.api = p.api.parse().map_err(|e: String| {
                anyhow::anyhow!("the session's recorded API {:?}: {e}", p.api)
            })?;
            m.base_url = Some(p.base_url.clone());
            m.model = Some(p.model.clone());
            m.context_window = p.context_window;
        } else {
            // the flags given win; the rest of the provider as recorded
            if !given("api") {
                m.api = p.api.parse().map_err(|e: String| anyhow::anyhow!(e))?;
            }
            if !given("base_url") {
                m.base_url = Some(p.base_url.clone());
            }
            if !given("model") {
                m.model = Some(p.model.clone());
            }
            if !given("context_window") {
                m.context_window = p.context_window;
            }
        }
        if !given("api_key_env") && p.api_key_env.is_some() {
            m.api_key_env = p.api_key_env.clone();
        }
    }
    if !given("tools") {
        m.tools = r.tools.builtin.clone();
    }
    if !given("ask_for_approval") {
        m.ask_for_approval = lazarus_agent::runner::ApprovalMode::parse(&r.approval.mode)
            .map_err(|e| anyhow::anyhow!("the session's recorded approval mode: {e}"))?;
    }
    let sb = &r.sandbox;
    if !given("sandbox") {
        m.sandbox = sb
            .mode
            .parse()
            .map_err(|e: String| anyhow::anyhow!("the session's recorded sandbox mode: {e}"))?;
    }
    if !given("sandbox_network") {
        m.sandbox_network = sb.network;
    }
    if !given("sandbox_max_processes") {
        m.sandbox_max_processes = sb.max_processes;
    }
    if !given("sandbox_allow_vcs_write") {
        m.sandbox_allow_vcs_write = sb.allow_vcs_write;
    }
    if !given("sandbox_allow_unix_socket") {
        m.sandbox_allow_unix_socket = sb.allow_unix_sockets.iter().map(PathBuf::from).collect();
    }
    let (mcp, not_in_world) = if given("mcp_config") || given("no_mcp") {
        // the files given, and of the config file's servers those the world names
        let all = crate::mcp::configured(&m.mcp_config, m.no_mcp)?;
        let from_files: Vec<String> = m
            .mcp_config
            .iter()
            .filter_map(|f| f.canonicalize().ok())
            .map(|f| f.display().to_string())
            .collect();
        split(all.servers, |s| {
            from_files.contains(&s.source) || r.tools.mcp.iter().any(|w| w.name == s.name)
        })
    } else {
        // the world's servers, from the config file or the `.mcp.json` files they were
        // recorded from
        let config_file = crate::config::loaded_from()
            .unwrap_or_else(crate::config::path)
            .display()
            .to_string();
        let files: Vec<PathBuf> = r
            .tools
            .mcp
            .iter()
            .filter(|w| w.source != config_file && std::path::Path::new(&w.source).is_absolute())
            .map(|w| PathBuf::from(&w.source))
            .filter(|f| f.is_file())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let all = crate::mcp::configured(&files, false)?;
        split(all.servers, |s| {
            r.tools.mcp.iter().any(|w| w.name == s.name)
        })
    };
    Ok(Plan {
        workspace,
        model: m,
        mcp,
        not_in_world,
        recorded: true,
    })
}

/// The servers `keep` accepts, and the names of the others.
fn split(servers: Vec<Server>, keep: impl Fn(&Server) -> bool) -> (Servers, Vec<String>) {
    let (kept, left): (Vec<Server>, Vec<Server>) = servers.into_iter().partition(keep);
    (
        Servers { servers: kept },
        left.into_iter().map(|s| s.name).collect(),
    )
}

/// The error for a run whose world differs from the one `id` recorded.
pub fn refusal(id: &str, differences: &[Difference]) -> anyhow::Error {
    let list: Vec<String> = differences.iter().map(|d| format!("  - {d}")).collect();
    crate::Usage(format!(
        "session {id} runs in the world it recorded, and this run's differs:\n{}\n\
         Drop the flags that differ to continue it as recorded (its workspace, tools, MCP \
         servers, policy and model come from the record), configure what it needs again (an \
         MCP server: the same command and arguments under the same name), or add \
         --change-world to record these changes as its new world.",
        list.join("\n")
    ))
    .into()
}
