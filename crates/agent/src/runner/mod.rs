//! The turn loop: run a session until it is idle, and resume one exactly where it stopped.
//!
//! Order of durable steps (what makes resume exact):
//! 1. an input is recorded before it is used;
//! 2. `turn_start` is recorded before the model request;
//! 3. the `response` is recorded before any tool runs;
//! 4. `tool_intent` is recorded before the tool starts, `tool_start` (with the process group)
//!    right before its side effect begins — a shell command waits at a gate until then;
//! 5. `tool_outcome` with the result text is recorded after.
//!
//! On resume: recorded inputs are never recorded again; a turn with a recorded response is
//! never requested again, an open turn is; finished calls keep their recorded result; a call
//! that started without an outcome is re-run only when its tool is idempotent, otherwise it
//! is closed "in doubt" (its leftover process group terminated) and the model is told so; a
//! call that never started simply runs. A `resume` receipt records all of it.
//!
//! With approvals on, a call that needs a person's decision gets an `approval_request`
//! before its intent and waits (the drive ends `AwaitingApproval`) until an `approval`
//! allows or denies it; a denied call never starts.
//!
//! Rooms: `config` (what a run is told and reports), `turns` (the loop), `resume` (settling
//! a cut-off session, the receipt), `dispatch` (one tool call in the durable order),
//! `approval` (who must allow a call first), `transcript` (ledger state <-> model messages
//! and records), `compaction`.

mod approval;
mod compaction;
mod config;
mod dispatch;
mod resume;
mod transcript;
mod turns;
mod world;

pub use approval::{
    AlwaysGrants, ApprovalMode, ApprovalPolicy, ESCALATE_ARG, JUSTIFICATION_ARG, denied_result,
};
pub use compaction::{CompactionPolicy, SUMMARY_PROMPT};
pub use config::{Observer, RunError, RunEvent, RunOutcome, RunnerConfig, StopReason};
pub use resume::sandbox_record;
pub use world::WorldRefusal;

use std::sync::{Arc, Mutex, MutexGuard};

use lazarus_session::Session;
use lazarus_session::record::Record;

use crate::provider::OpenAiClient;
use crate::tools::Toolbox;

/// A session shared between its runner and whoever feeds it inputs (the gateway).
pub type SharedSession = Arc<Mutex<Session>>;

/// What the summary of a compaction is introduced with, in the user message that carries it.
pub const COMPACTED_PREFIX: &str =
    "[The earlier conversation was compacted to save context. Its summary:]\n";

/// The text a call closed "in doubt" returns to the model (the session crate's, so an import
/// tells the model exactly what a resume does).
pub use lazarus_session::IN_DOUBT_NOTICE;

/// Runs sessions.
#[derive(Debug, Clone)]
pub struct Runner {
    client: OpenAiClient,
    toolbox: Toolbox,
    cfg: RunnerConfig,
    /// Calls that absorbed repeats of themselves (text calls of a base model), by
    /// `<session>/<call id>`, until their result is recorded with a note saying so.
    repeats: Arc<Mutex<std::collections::HashMap<String, usize>>>,
    /// The world it runs sessions in ([`Runner::with_world`]); `None`: unchecked.
    world: Option<lazarus_session::record::World>,
}

fn lock(s: &SharedSession) -> MutexGuard<'_, Session> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

fn append(
    session: &SharedSession,
    rec: Record,
    observer: &mut Observer<'_>,
) -> Result<u64, RunError> {
    let kind = rec.kind();
    let data = rec.data_value();
    let stored = lock(session).append(rec)?;
    observer(RunEvent::Record {
        seq: stored.seq,
        ts: &stored.ts,
        kind,
        data,
    });
    Ok(stored.seq)
}

/// Records what waits in the session's inbox (messages delivered by `sessions send`, another
/// gateway, boot-resume while this process holds the session), each once, and shows what the
/// session drained by itself (at open, before an input of its own) that nobody showed yet.
fn drain_inbox(session: &SharedSession, observer: &mut Observer<'_>) -> Result<(), RunError> {
    let drained = {
        let mut s = lock(session);
        let mut d = s.take_drained();
        d.extend(s.drain_inbox()?);
        d
    };
    for d in drained.into_iter().filter(|d| !d.duplicate) {
        observer(RunEvent::Record {
            seq: d.seq,
            ts: d.ts.as_deref().unwrap_or_default(),
            kind: d.kind,
            data: d.data,
        });
    }
    Ok(())
}

impl Runner {
    pub fn new(cfg: RunnerConfig) -> Result<Self, RunError> {
        Ok(Runner {
            client: OpenAiClient::new(cfg.provider.clone())?,
            toolbox: Toolbox::standard(),
            cfg,
            repeats: Arc::default(),
            world: None,
        })
    }

    /// Replaces the tools (tests register their own).
    pub fn with_toolbox(mut self, toolbox: Toolbox) -> Self {
        self.toolbox = toolbox;
        self
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.cfg
    }
}
