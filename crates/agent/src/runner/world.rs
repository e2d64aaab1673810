//! The world a runner runs a session in, and the one rule every resumer shares: a session
//! runs only in the world it recorded (its workspace, tools, MCP servers, approval and
//! sandbox policy, model). A session that recorded none adopts the runner's (a `world`
//! record); a runner told to change it records the change; any other difference refuses the
//! drive before anything is written ([`RunError::World`]).

use lazarus_session::record::{
    Difference, Record, World, WorldApproval, WorldMcpServer, WorldProvider, WorldReason,
    WorldSandbox, WorldTools,
};

use super::{Observer, RunError, Runner, RunnerConfig, SharedSession, append, lock};
use crate::tools::Toolbox;

/// Why a runner will not drive a session: the session's world and this runner's differ
/// (each difference names the recorded value first), or the session is not Lazarus's to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldRefusal {
    pub session: String,
    /// What differs; empty when `other` says why.
    pub differences: Vec<Difference>,
    /// A reason that is not a difference (another program's session, an unreadable world).
    pub other: Option<String>,
}

impl std::fmt::Display for WorldRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(o) = &self.other {
            return write!(f, "session {}: {o}", self.session);
        }
        let what: Vec<String> = self.differences.iter().map(|d| d.what.clone()).collect();
        write!(
            f,
            "session {} was recorded in another world: {}",
            self.session,
            what.join("; ")
        )
    }
}

impl RunnerConfig {
    /// The world this configuration runs a session in: its workspace, `builtin`'s registered
    /// tools (the built-ins offered; its sources are described by `mcp`), `mcp` (every MCP server, as the session's world records it),
    /// the approval mode with `grants` (the `always` grants in force), the sandbox and the
    /// model. `by` says who runs it (`run`, `serve`, …).
    pub fn world(
        &self,
        builtin: &Toolbox,
        mcp: Vec<WorldMcpServer>,
        grants: Vec<String>,
        by: &str,
        reason: WorldReason,
    ) -> World {
        let sb = &self.sandbox;
        let env = &sb.env;
        let builtin = builtin.registered_names();
        World {
            reason,
            by: by.to_string(),
            workspace: Some(self.workspace.to_string_lossy().into_owned()),
            tools: WorldTools { builtin, mcp },
            approval: WorldApproval {
                mode: self.approval.mode.as_str().to_string(),
                grants,
            },
            sandbox: WorldSandbox {
                mode: sb.policy.mode.as_str().to_string(),
                network: sb.policy.network,
                max_processes: sb.policy.max_processes,
                allow_unix_sockets: sb
                    .unix_sockets
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect(),
                // the values set may be secrets: their names only
                environment: serde_json::json!({
                    "inherit": env.inherit,
                    "ignore_default_excludes": env.ignore_default_excludes,
                    "exclude": env.exclude,
                    "set": env.set.keys().collect::<Vec<_>>(),
                    "include_only": env.include_only,
                }),
                allow_vcs_write: sb.vcs_writable,
            },
            provider: Some(WorldProvider {
                api: self.provider.api.as_str().to_string(),
                base_url: self.provider.base_url.clone(),
                model: self.model.clone(),
                context_window: self.compaction.context_window,
                api_key_env: self.api_key_env.clone(),
            }),
            changed: Vec::new(),
        }
    }
}

impl Runner {
    /// Runs sessions only in `world`: a drive first checks that the session recorded the same
    /// one (or records it: adopted by a session that had none, or `Changed`, a person's
    /// explicit change), and refuses otherwise. Without it a runner checks nothing (a
    /// library caller that manages worlds itself).
    pub fn with_world(mut self, world: World) -> Self {
        self.world = Some(world);
        self
    }

    /// The world this runner runs sessions in, if it was given one.
    pub fn world(&self) -> Option<&World> {
        self.world.as_ref()
    }

    /// What `session` would need to run here: `Ok(None)` it may run as it is; `Ok(Some(w))`
    /// it may once `w` is recorded (adopted, or a change); `Err` why it may not.
    pub fn world_check(
        &self,
        state: &lazarus_session::SessionState,
    ) -> Result<Option<World>, WorldRefusal> {
        let refuse = |other: String| WorldRefusal {
            session: state.id().to_string(),
            differences: Vec::new(),
            other: Some(other),
        };
        if let Some(host) = state.host_program() {
            return Err(refuse(format!(
                "written through the Python package (host: {host}); the program that wrote it resumes it, not Lazarus's runner"
            )));
        }
        if let Some(why) = &state.world_unreadable {
            return Err(refuse(why.clone()));
        }
        let Some(mine) = &self.world else {
            return Ok(None);
        };
        let Some(recorded) = &state.world else {
            let mut adopted = mine.clone();
            adopted.reason = WorldReason::Adopted;
            adopted.changed.clear();
            return Ok(Some(adopted));
        };
        let differences = recorded.world.differences(mine);
        if differences.is_empty() {
            return Ok(None);
        }
        if mine.reason == WorldReason::Changed {
            let mut changed = mine.clone();
            let mut facets: Vec<String> = differences.iter().map(|d| d.facet.to_string()).collect();
            facets.dedup();
            changed.changed = facets;
            return Ok(Some(changed));
        }
        Err(WorldRefusal {
            session: state.id().to_string(),
            differences,
            other: None,
        })
    }

    /// The check of [`Runner::world_check`] at the start of a drive, recording what it asks.
    pub(super) fn enter_world(
        &self,
        session: &SharedSession,
        observer: &mut Observer<'_>,
    ) -> Result<(), RunError> {
        let verdict = self.world_check(lock(session).state());
        match verdict {
            Ok(None) => Ok(()),
            Ok(Some(w)) => append(session, Record::World(Box::new(w)), observer).map(|_| ()),
            Err(refusal) => Err(RunError::World(refusal)),
        }
    }
}
