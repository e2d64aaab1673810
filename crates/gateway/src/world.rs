//! Whether this gateway can honour a session's world (see the session crate's
//! `record::world`): run it in the workspace it recorded, with the tools and MCP servers it
//! recorded (never fewer, never more) and under the same approval, sandbox and model — or
//! leave it alone, say why with a `needs_owner` record, and name the command that resumes it.
//!
//! A recorded workspace is honoured when it lies strictly beneath `--workspace-root` (reached
//! without symbolic links; made there if missing, as for the gateway's own sessions) or at or
//! beneath a directory of `--allow-workspace` (which must exist). A session that recorded no
//! world (imported, or older) adopts this gateway's, in the workspace the old rule gives it.

use std::path::{Component, Path, PathBuf};

use lazarus_session::record::{NeedsOwner, World, WorldReason};
use lazarus_session::{SessionId, SessionState};

use crate::hub::Hub;
pub use crate::registry::WorldVerdict;

/// The prefix of an MCP server's tool names as the model sees them (`mcp__<server>__<tool>`,
/// see `lazarus_mcp::names`): how a session's toolbox keeps its own servers' tools only.
fn mcp_prefix(server: &str) -> String {
    format!("mcp__{server}__")
}

impl Hub {
    /// The command that resumes `id` in its own world, from the store this gateway serves.
    pub fn resume_with(&self, id: &str) -> String {
        match &self.cfg.store_flag {
            Some(flag) => format!("lazarus run --session {id} {flag}"),
            None => format!("lazarus run --session {id}"),
        }
    }

    /// Who leaves a session alone: this gateway.
    fn leaver(&self) -> String {
        format!(
            "serve {}:{}",
            lazarus_ledger::holder::hostname(),
            std::process::id()
        )
    }

    /// Whether this gateway can run `state`'s session in its world, and where.
    pub fn world_verdict(&self, id: &SessionId, state: &SessionState) -> WorldVerdict {
        let leave = |reason: String| {
            WorldVerdict::Leave(NeedsOwner {
                by: self.leaver(),
                reason,
                resume_with: self.resume_with(id),
            })
        };
        if let Some(host) = state.host_program() {
            return WorldVerdict::Leave(NeedsOwner {
                by: self.leaver(),
                reason: format!(
                    "written by a {host} program through the Python package; that program resumes it, not a gateway"
                ),
                resume_with: format!("the {host} program that wrote it"),
            });
        }
        if let Some(why) = &state.world_unreadable {
            return leave(why.clone());
        }
        let base = &self.cfg.world;
        let Some(recorded) = &state.world else {
            // adopted: the workspace by the old rule (the header's, strictly beneath the
            // root, else <root>/<id>), this gateway's tools and policy
            let workspace = self
                .workspaces()
                .for_existing_session(state.header.meta.as_ref(), id);
            let mut world = base.clone();
            world.reason = WorldReason::Adopted;
            world.workspace = Some(workspace.to_string_lossy().into_owned());
            return WorldVerdict::Run {
                workspace,
                world: Box::new(world),
            };
        };
        let recorded = &recorded.world;
        let workspace = match recorded
            .workspace
            .as_deref()
            .map(|w| self.honoured_workspace(w))
        {
            Some(Ok(w)) => w,
            Some(Err(why)) => return leave(why),
            None => return leave("the session's world records no workspace".into()),
        };
        // the recorded tools, as far as this gateway has them (what it lacks is a difference)
        let mut here = base.clone();
        here.reason = recorded.reason;
        here.workspace = recorded.workspace.clone();
        here.tools
            .builtin
            .retain(|t| recorded.tools.builtin.contains(t));
        here.tools
            .mcp
            .retain(|s| recorded.tools.mcp.iter().any(|r| r.name == s.name));
        let differences = recorded.differences(&here);
        if !differences.is_empty() {
            let what: Vec<String> = differences.into_iter().map(|d| d.what).collect();
            return leave(format!(
                "this gateway cannot honour its world: {}",
                what.join("; ")
            ));
        }
        WorldVerdict::Run {
            workspace,
            world: Box::new(here),
        }
    }

    /// The recorded workspace `w`, if this gateway may run a session there: strictly beneath
    /// `--workspace-root` (made if missing) or at or beneath an `--allow-workspace` directory
    /// (existing), reached without symbolic links. `Err` says why not.
    fn honoured_workspace(&self, w: &str) -> Result<PathBuf, String> {
        let p = Path::new(w);
        if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(format!("workspace {w} is not an absolute path"));
        }
        if let Some(path) = self.workspaces().recorded_beneath_root(w) {
            return Ok(path);
        }
        for allowed in &self.cfg.allowed_workspaces {
            if p.starts_with(allowed) {
                // the recorded path was canonical; it must still be, and exist
                return match p.canonicalize() {
                    Ok(c) if c == p && c.is_dir() => Ok(c),
                    Ok(c) if c != p => Err(format!(
                        "workspace {w} now leads elsewhere ({}) through a symbolic link",
                        c.display()
                    )),
                    Ok(_) => Err(format!("workspace {w} is not a directory")),
                    Err(e) => Err(format!("workspace {w} cannot be used here: {e}")),
                };
            }
        }
        let mut roots = vec![self.cfg.workspace_root.display().to_string()];
        roots.extend(
            self.cfg
                .allowed_workspaces
                .iter()
                .map(|a| a.display().to_string()),
        );
        Err(format!(
            "workspace {w} is outside this gateway's roots ({}); start the gateway with --allow-workspace {w} to run it here",
            roots.join(", ")
        ))
    }

    /// The toolbox `world` allows of this gateway's: its built-in tools and its MCP servers'
    /// tools, nothing else.
    pub(crate) fn toolbox_for(&self, world: &World) -> lazarus_agent::tools::Toolbox {
        let prefixes: Vec<String> = world
            .tools
            .mcp
            .iter()
            .map(|s| mcp_prefix(&s.name))
            .collect();
        self.cfg
            .toolbox
            .restricted(&world.tools.builtin, move |name| {
                prefixes.iter().any(|p| name.starts_with(p.as_str()))
            })
    }
}
