//! The record kinds of a session ledger. Every kind is documented with an example line in
//! `docs/FORMAT.md` and pinned by golden files in `tests/golden/`.
//!
//! Data structs deny unknown fields: a field this build does not know is an explicit error,
//! never silently dropped. The one deliberate exception is `provider_extra` in a model
//! response, which keeps whatever the model provider sent that Lazarus does not model.

use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};

mod host;
mod mcp;
mod world;
pub use host::*;
pub use mcp::*;
pub use world::*;

/// The format name in every session header.
pub const FORMAT: &str = "lazarus.session";

/// The input id for a message sent without one: SHA-256 over the session id, the source and
/// the text (each length-prefixed, so no two different triples share a digest), as
/// `sha256-<64 hex digits>`. Re-sending the same text to the same session is then recorded
/// once, also across crashes of the sender; a different text never shares its id. (Ids of the
/// older form `sha-<crc><len>` in existing sessions are ordinary ids and read back as such.)
pub fn derived_input_id(session_id: &str, source: &str, text: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [session_id, source, text] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256-");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// One record of a session (everything but the header).
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Input(Input),
    Control(Control),
    TurnStart(TurnStart),
    Response(Response),
    ToolIntent(ToolIntent),
    ToolStart(ToolStart),
    ToolOutcome(ToolOutcome),
    Fork(ForkPoint),
    Resume(ResumeReceipt),
    Interrupted(Interrupted),
    Compaction(Compaction),
    Import(Import),
    ApprovalRequest(ApprovalRequest),
    Approval(Approval),
    /// A record a host framework wrote through the Python package (`host_*` kinds).
    Host(Host),
    /// What the session runs with, from here on (it changed, or was recorded for the first
    /// time); the header's `meta.world` holds the one it was made with.
    World(Box<World>),
    /// A resumer could not honour the session's world and left it alone.
    NeedsOwner(NeedsOwner),
    /// A started MCP call became a task on its server: the handle (revision 5).
    ToolTask(ToolTask),
    /// A recorded task's status changed.
    ToolTaskStatus(ToolTaskStatus),
    /// A header record; only valid as line 1, so seeing one here is an error the ledger names.
    #[doc(hidden)]
    Header,
}

/// The kind names, in the order documented in FORMAT.md.
pub const KINDS: &[&str] = &[
    "input",
    "control",
    "turn_start",
    "response",
    "tool_intent",
    "tool_start",
    "tool_outcome",
    "fork",
    "resume",
    "interrupted",
    "compaction",
    "import",
    "approval_request",
    "approval",
    "host_item",
    "host_pop",
    "host_clear",
    "host_call_intent",
    "host_call_outcome",
    "host_checkpoint",
    "host_writes",
    "world",
    "needs_owner",
    "tool_task",
    "tool_task_status",
    "host_pending_writes",
    "host_forget",
    "host_items",
];

impl Record {
    /// The `kind` member written for this record.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Input(_) => "input",
            Record::Control(_) => "control",
            Record::TurnStart(_) => "turn_start",
            Record::Response(_) => "response",
            Record::ToolIntent(_) => "tool_intent",
            Record::ToolStart(_) => "tool_start",
            Record::ToolOutcome(_) => "tool_outcome",
            Record::Fork(_) => "fork",
            Record::Resume(_) => "resume",
            Record::Interrupted(_) => "interrupted",
            Record::Compaction(_) => "compaction",
            Record::Import(_) => "import",
            Record::ApprovalRequest(_) => "approval_request",
            Record::Approval(_) => "approval",
            Record::Host(h) => h.kind(),
            Record::World(_) => "world",
            Record::NeedsOwner(_) => "needs_owner",
            Record::ToolTask(_) => "tool_task",
            Record::ToolTaskStatus(_) => "tool_task_status",
            Record::Header => "header",
        }
    }

    /// The record's data as compact JSON object text.
    pub fn data_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        match self {
            Record::Input(d) => serde_json::to_vec(d),
            Record::Control(d) => serde_json::to_vec(d),
            Record::TurnStart(d) => serde_json::to_vec(d),
            Record::Response(d) => serde_json::to_vec(d),
            Record::ToolIntent(d) => serde_json::to_vec(d),
            Record::ToolStart(d) => serde_json::to_vec(d),
            Record::ToolOutcome(d) => serde_json::to_vec(d),
            Record::Fork(d) => serde_json::to_vec(d),
            Record::Resume(d) => serde_json::to_vec(d),
            Record::Interrupted(d) => serde_json::to_vec(d),
            Record::Compaction(d) => serde_json::to_vec(d),
            Record::Import(d) => serde_json::to_vec(d),
            Record::ApprovalRequest(d) => serde_json::to_vec(d),
            Record::Approval(d) => serde_json::to_vec(d),
            Record::Host(h) => h.data_json(),
            Record::World(d) => serde_json::to_vec(d),
            Record::NeedsOwner(d) => serde_json::to_vec(d),
            Record::ToolTask(d) => serde_json::to_vec(d),
            Record::ToolTaskStatus(d) => serde_json::to_vec(d),
            Record::Header => Ok(b"{}".to_vec()),
        }
    }

    /// The record's data as a JSON value (for printing).
    pub fn data_value(&self) -> serde_json::Value {
        self.data_json()
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    }
}

impl<'de> lazarus_ledger::Payload<'de> for Record {
    fn deserialize_kind<D: Deserializer<'de>>(kind: &str, d: D) -> Result<Self, D::Error> {
        Ok(match kind {
            "input" => Record::Input(Deserialize::deserialize(d)?),
            "control" => Record::Control(Deserialize::deserialize(d)?),
            "turn_start" => Record::TurnStart(Deserialize::deserialize(d)?),
            "response" => Record::Response(Deserialize::deserialize(d)?),
            "tool_intent" => Record::ToolIntent(Deserialize::deserialize(d)?),
            "tool_start" => Record::ToolStart(Deserialize::deserialize(d)?),
            "tool_outcome" => Record::ToolOutcome(Deserialize::deserialize(d)?),
            "fork" => Record::Fork(Deserialize::deserialize(d)?),
            "resume" => Record::Resume(Deserialize::deserialize(d)?),
            "interrupted" => Record::Interrupted(Deserialize::deserialize(d)?),
            "compaction" => Record::Compaction(Deserialize::deserialize(d)?),
            "import" => Record::Import(Deserialize::deserialize(d)?),
            "approval_request" => Record::ApprovalRequest(Deserialize::deserialize(d)?),
            "approval" => Record::Approval(Deserialize::deserialize(d)?),
            k if k.starts_with(HOST_KIND_PREFIX) => Record::Host(Host::deserialize_kind(k, d)?),
            "world" => Record::World(Box::new(Deserialize::deserialize(d)?)),
            "needs_owner" => Record::NeedsOwner(Deserialize::deserialize(d)?),
            "tool_task" => Record::ToolTask(Deserialize::deserialize(d)?),
            "tool_task_status" => Record::ToolTaskStatus(Deserialize::deserialize(d)?),
            "header" => {
                IgnoredAny::deserialize(d)?;
                Record::Header
            }
            other => return Err(unknown_kind(other)),
        })
    }
}

/// The error for a kind this build does not know (a newer program wrote it: the ledger tells
/// it from damage by [`lazarus_ledger::frame::NEWER_VERSION`]).
fn unknown_kind<E: serde::de::Error>(kind: &str) -> E {
    E::custom(format_args!(
        "unknown record kind {kind:?} (this build knows {}); {}?",
        KINDS.join(", "),
        lazarus_ledger::frame::NEWER_VERSION
    ))
}

/// An external input (a user or API message). `input_id` makes redelivery a no-op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub input_id: String,
    /// Who sent it: `user` (terminal), `api` (gateway), …
    pub source: String,
    pub text: String,
}

/// A control input: a system event such as `resume`. Deduplicated by `input_id` like inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Control {
    pub input_id: String,
    /// `resume`, `stop`, …
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A model request is about to be made for turn `turn`. Written before the HTTP request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnStart {
    /// 1, 2, 3, … without gaps.
    pub turn: u64,
    /// Seq of the previous turn's `turn_start` (None for turn 1): the chain replay checks.
    pub prev_seq: Option<u64>,
    /// Seqs of the inputs this turn consumes (delivered to the model for the first time).
    #[serde(default)]
    pub inputs: Vec<u64>,
}

/// One item of model output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Item {
    Text {
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        /// The arguments exactly as the model wrote them (JSON text, possibly invalid).
        arguments: String,
    },
    Reasoning {
        text: String,
    },
    /// Reasoning the provider must get back exactly as it sent it, on the API that issued
    /// it: an OpenAI Responses `reasoning` item (with its `encrypted_content`) or an
    /// Anthropic `thinking` block (with its `signature`) or `redacted_thinking` block. `item`
    /// is the provider's item verbatim and is what is sent back; `text` is its readable part
    /// (summary or thinking text; empty when redacted), for people.
    ProviderReasoning {
        /// `responses` or `anthropic`: the wire protocol that issued the item. It is sent
        /// back only on that protocol (another one would refuse it).
        api: String,
        text: String,
        item: serde_json::Value,
    },
}

/// Token counts reported by the provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Of `prompt_tokens`, how many were read from the provider's prompt cache (chat and
    /// Responses: `cached_tokens` of the details; Anthropic: `cache_read_input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// Why a model request failed for good (after retries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub message: String,
    /// A retry later may succeed (429, 5xx, connection errors).
    pub transient: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// One HTTP attempt of a model request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attempt {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Backoff waited before this attempt.
    pub waited_ms: u64,
}

/// The model's answer to turn `turn` (or the failure that ended it). At most one per turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    pub turn: u64,
    pub items: Vec<Item>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The provider's finish reason, verbatim (`stop`, `tool_calls`, `length`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Provider fields Lazarus does not model, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_extra: Option<serde_json::Map<String, serde_json::Value>>,
    /// Earlier attempts that failed and were retried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
}

impl Response {
    /// The tool calls of this response, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.items.iter().filter_map(|i| match i {
            Item::ToolCall {
                call_id,
                name,
                arguments,
            } => Some((call_id.as_str(), name.as_str(), arguments.as_str())),
            _ => None,
        })
    }

    /// The text of this response, concatenated.
    pub fn text(&self) -> String {
        self.items
            .iter()
            .filter_map(|i| match i {
                Item::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A tool is about to be called. Written before anything of the tool runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolIntent {
    pub call_id: String,
    pub turn: u64,
    pub tool: String,
    /// Arguments as JSON text, exactly as the model wrote them.
    pub arguments: String,
    /// Whether running the call twice is harmless.
    pub idempotent: bool,
    /// Same key on a re-run of the same call.
    pub idempotency_key: String,
    /// The facts `idempotent` was decided from, for tools whose answer is not fixed by their
    /// code (an MCP server's identity, the tool's annotations, whether the server was
    /// trusted). Resume decides from these, never from what is true later. Absent for the
    /// built-in tools (and in ledgers written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_basis: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A process group, identified so a reused pid is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessRef {
    pub pgid: i32,
    /// Start time of the group leader (clock ticks since boot, from /proc).
    pub start_time_ticks: u64,
}

/// The tool's side effect is about to begin (for a shell: its process group exists and is
/// held at a gate until this record is durable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStart {
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessRef>,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    Ok,
    Error,
    Timeout,
    Cancelled,
    /// Interrupted with its effect unknown (closed at resume; not re-run).
    InDoubt,
    /// Never started (e.g. the session stopped before it ran); safe to say it did not happen.
    NotRun,
}

/// The result of a tool call, with the text the model sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOutcome {
    pub call_id: String,
    pub status: OutcomeStatus,
    pub result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// Written in a fork right after the copied prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkPoint {
    pub parent: String,
    /// Last parent seq copied.
    pub parent_seq: u64,
    /// The turn boundary forked at (0 = before the first turn).
    pub at_turn: u64,
}

/// The receipt every resume leaves (G9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeReceipt {
    /// `run`, `gateway-start`, `event`, `boot-resume`, …
    pub trigger: String,
    /// Crash debris cut from the end of the file at open.
    pub truncated_bytes: u64,
    /// The file beside the session that holds the cut bytes (never deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated_saved_to: Option<String>,
    pub records_replayed: u64,
    /// Finished calls whose recorded result is reused.
    pub calls_reused: u64,
    /// Interrupted idempotent calls run again (same idempotency key).
    pub calls_rerun: u64,
    /// Interrupted non-idempotent calls closed as in doubt.
    pub calls_in_doubt: u64,
    /// Calls never started (intent only, or no intent) that will run now.
    pub calls_not_started: u64,
    /// Leftover process groups of interrupted calls that were terminated.
    #[serde(default)]
    pub processes_terminated: u64,
    pub inputs_pending: u64,
    /// The open turn (started, no response) that will be requested again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_turn: Option<u64>,
    /// After the resume actions: every tool call of every response has exactly one outcome.
    pub every_call_has_one_result: bool,
    /// How the runner that resumed confined `shell` commands (absent in older receipts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxRecord>,
    /// The MCP calls among the counts above (absent when the resume touched none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpCalls>,
    /// Calls that waited for a person since the previous receipt: who decided, and how
    /// long the call waited (absent when none did).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalWait>,
    /// The world the resume ran in: the seq of the `world` record in force (0: the one the
    /// header recorded). Absent in older receipts and for a session that records none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_seq: Option<u64>,
    /// Each call closed in doubt, and why it was not run again (absent when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_doubt: Vec<InDoubtCall>,
}

/// A call a resume closed in doubt, and the fact that kept it from running again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InDoubtCall {
    pub call_id: String,
    pub tool: String,
    /// E.g. `shell is not idempotent: …`, `MCP server files is not trusted: …`.
    pub why: String,
}

/// One call that waited for approval, as a resume receipt tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalWait {
    pub call_id: String,
    pub tool: String,
    /// `allow` or `deny`; absent while it still waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// From the request to the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
}

/// How `shell` commands were confined.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxRecord {
    /// `workspace-write`, `read-only` or `off`.
    pub mode: String,
    /// Whether shell commands could use the network.
    pub network: bool,
    /// What enforced it (e.g. `Landlock ABI 7, network namespace, PID namespace`), or why
    /// shell calls were refused, or `unconfined`.
    pub detail: String,
}

/// The session was stopped (signal, shutdown, user) at this point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interrupted {
    /// `sigint`, `sigterm`, `shutdown`, `user`, …
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
}

/// The model context was compacted: from here on, requests send `summary` in place of the
/// context entries recorded at seqs `from_seq..=through_seq`, followed by everything after
/// `through_seq` verbatim (the kept tail). Nothing is removed from the ledger: compaction
/// changes what is sent, never what is kept. Written between turns, after the summarising
/// request answered; a crash before it leaves no trace (the compaction runs again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compaction {
    /// `auto` (the next request would pass the threshold; written while work is owed,
    /// right before the next `turn_start`) or `manual` (`lazarus sessions compact`, on a
    /// session that owes no work).
    pub trigger: String,
    /// First seq summarised (1, or the previous compaction's `through_seq` + 1).
    pub from_seq: u64,
    /// Last seq summarised; the context after it is sent verbatim.
    pub through_seq: u64,
    /// The summary the model wrote (it also covers the previous compaction's summary).
    pub summary: String,
    /// Estimated tokens of the next request before and after (request bytes / 4).
    pub tokens_before: u64,
    pub tokens_after: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Failed attempts of the summarising request before the one that answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
}

/// Where an imported session came from: the first record after the header of a session
/// `lazarus sessions import --from AGENT` wrote from another agent's log (at most once).
/// Provenance only: replay does not act on it, and the conversation follows as ordinary
/// records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Import {
    /// `claude-code`, `codex`, `pi` or `openclaw`.
    pub agent: String,
    /// The agent's version, when the source says it (Claude Code's `version`, Codex's
    /// `cli_version`; pi and OpenClaw name only their file format's version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The source's own format version, when it has one (pi's header `version`, OpenClaw's
    /// database schema version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<String>,
    /// The source path as given (for OpenClaw: the database file).
    pub source: String,
    /// The source's own session id or key, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_session: Option<String>,
    /// Bytes of the source that were read (for OpenClaw: of the session's event rows).
    pub bytes: u64,
    /// SHA-256 of those bytes, lowercase hex: importing the same source again is refused.
    pub sha256: String,
    /// What of the source did not become records, and why (bookkeeping, torn tails, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
    /// Sessions imported beside this one from the source's sub-agent transcripts (Claude
    /// Code), or from the other branches of its session tree (pi, OpenClaw: forks of this one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
}

/// Something of an imported source that did not become records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropped {
    /// What it was (a record type, `torn tail`, …).
    pub what: String,
    /// How many of them.
    pub count: u64,
    /// Why it was not kept.
    pub why: String,
}

/// A tool call waits for a person's decision: written before its intent, so the call cannot
/// start until an [`Approval`] allowing it is recorded after this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    pub call_id: String,
    pub tool: String,
    /// Arguments as JSON text, exactly as the model wrote them.
    pub arguments: String,
    /// The approval mode in force (`untrusted` or `on-request`).
    pub mode: String,
    /// Why it needs approval (the mode's rule, or the model's justification).
    pub reason: String,
    /// When it was asked (RFC 3339, UTC, ms).
    pub requested_at: String,
}

/// What a person decided about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

/// How far an allowing decision reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// This call only.
    Once,
    /// Every later call of the same tool in this session (replayed on resume).
    Session,
    /// Every later call of the same tool, in every session (kept in the policy file too).
    Always,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Session => "session",
            Scope::Always => "always",
        }
    }
}

/// A person's decision on an [`ApprovalRequest`]. An input with an id (G6): delivered twice,
/// it is recorded once; a call takes one decision, ever.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// The dedup key: [`approval_input_id`] of the call.
    pub input_id: String,
    pub call_id: String,
    pub decision: Decision,
    pub scope: Scope,
    /// Why (shown to the model when the call is denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided: `cli`, `token:<name>` (the HTTP API), `web`, or `grant:<scope>` for a
    /// call a grant allowed without asking.
    pub by: String,
    /// When it was decided (RFC 3339, UTC, ms).
    pub decided_at: String,
}

/// The input id of the decision on `call_id`: one per call, so every delivery of a decision
/// on the same call is the same input (recorded once), whatever it says.
pub fn approval_input_id(call_id: &str) -> String {
    format!("approval/{call_id}")
}
