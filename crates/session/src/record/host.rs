//! The records a host framework writes through the `lazarus` Python package (docs/python.md):
//! an OpenAI Agents SDK history and its announced tool calls, LangGraph's checkpoints and
//! writes. Lazarus's own runner never writes or acts on them.

use serde::{Deserialize, Deserializer, Serialize};

use super::Record;

/// What every host kind begins with (the tail rules tell a host's records by it).
pub const HOST_KIND_PREFIX: &str = "host_";

/// The host kinds, each once: the enum, its `kind` names, its encoding and decoding, and
/// `Record::from` for each record type.
macro_rules! host_kinds {
    ($($variant:ident($ty:ty) = $kind:literal),* $(,)?) => {
        /// A host framework's record: one enum, so what treats them alike (replay's dispatch,
        /// the web view, ATIF) names them once.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Host {
            $($variant($ty),)*
        }

        impl Host {
            /// The `kind` member written for this record.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Host::$variant(_) => $kind,)*
                }
            }

            pub(super) fn data_json(&self) -> Result<Vec<u8>, serde_json::Error> {
                match self {
                    $(Host::$variant(d) => serde_json::to_vec(d),)*
                }
            }

            pub(super) fn deserialize_kind<'de, D: Deserializer<'de>>(
                kind: &str,
                d: D,
            ) -> Result<Self, D::Error> {
                Ok(match kind {
                    $($kind => Host::$variant(Deserialize::deserialize(d)?),)*
                    other => return Err(super::unknown_kind(other)),
                })
            }
        }

        $(impl From<$ty> for Record {
            fn from(d: $ty) -> Record {
                Record::Host(Host::$variant(d))
            }
        })*
    };
}

host_kinds!(
    Item(HostItem) = "host_item",
    Items(HostItems) = "host_items",
    Pop(HostPop) = "host_pop",
    Clear(HostClear) = "host_clear",
    CallIntent(HostCallIntent) = "host_call_intent",
    CallOutcome(HostCallOutcome) = "host_call_outcome",
    Checkpoint(HostCheckpoint) = "host_checkpoint",
    Writes(HostWrites) = "host_writes",
    PendingWrites(HostPendingWrites) = "host_pending_writes",
    Forget(HostForget) = "host_forget",
);

/// One item of a host framework's conversation history (an OpenAI Agents SDK
/// `TResponseInputItem`), kept verbatim: a session a Python program writes through the
/// `lazarus` package. Lazarus's own runner never writes or acts on these kinds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostItem {
    /// A JSON object, exactly as the host gave it.
    pub item: serde_json::Value,
}

/// Several items of the history added at once (one `add_items` call: a turn's input, calls,
/// results and answer), each verbatim, in one record: durable together with one sync, and
/// after a crash all there or none (record kinds revision 6). Each counts as an item recorded
/// at this record's seq.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostItems {
    /// JSON objects, exactly as the host gave them, oldest first.
    pub items: Vec<serde_json::Value>,
}

/// The newest item of the host's history left it (the host popped it): the item recorded at
/// `seq`. Nothing is deleted: the item stays in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostPop {
    pub seq: u64,
}

/// Every item of the host's history recorded at or before `through_seq` left it (the host
/// cleared the session). Nothing is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostClear {
    pub through_seq: u64,
}

/// A host's tool is about to run (its hooks said so before the tool started), keyed by the
/// host's own call id: without an outcome after it, the call may have run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCallIntent {
    pub call_id: String,
    pub tool: String,
    /// The arguments as the host had them (JSON text), when it had them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// How a host's tool call ended, as its hooks reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCallOutcome {
    pub call_id: String,
    pub result: String,
}

/// A value as the host's serializer wrote it (LangGraph's `dumps_typed`): its type tag and
/// its bytes in base64. Lazarus keeps it verbatim and never decodes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostBlob {
    #[serde(rename = "type")]
    pub type_tag: String,
    pub b64: String,
}

/// A graph checkpoint a host framework saved (LangGraph's `put`), in namespace `ns`:
/// the checkpoint without its channel values, its metadata, and the values of the channels
/// that changed since its parent (`channels`). The others are found at the version the
/// checkpoint names, in an earlier `host_checkpoint` of the same namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCheckpoint {
    pub ns: String,
    pub checkpoint_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    pub checkpoint: HostBlob,
    pub metadata: HostBlob,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<HostChannelValue>,
}

/// One channel's value at one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostChannelValue {
    pub channel: String,
    pub version: String,
    pub value: HostBlob,
}

/// Writes a task made against a checkpoint before the next one (LangGraph's `put_writes`):
/// kept per task and index, so a task's writes are recorded once however often they are put.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostWrites {
    pub ns: String,
    pub checkpoint_id: String,
    pub task_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_path: String,
    pub writes: Vec<HostWrite>,
}

/// One write of a task: its index (negative for the special channels, as LangGraph numbers
/// them), its channel and its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostWrite {
    pub idx: i64,
    pub channel: String,
    pub value: HostBlob,
}

/// Writes a task made against a checkpoint, recorded in the order they arrive, whether or not
/// that checkpoint is recorded yet (record kinds revision 6). LangGraph puts a step's writes
/// while the checkpoint they name may still be on its way (`durability="async"`), or never
/// comes (`"exit"` saves only the last one): its own savers key writes by checkpoint id, task
/// and index and accept them in any order. The same data as [`HostWrites`], which needs its
/// checkpoint first; the package writes this kind since revision 6.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HostPendingWrites(pub HostWrites);

/// Checkpoints that leave a host's graph, with their writes (LangGraph's `prune` and
/// `delete_for_runs`; record kinds revision 6). Nothing is deleted: the ledger keeps the
/// records, as it does after a `host_clear`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostForget {
    pub checkpoints: Vec<HostCheckpointRef>,
    /// Why, in the host's words (`prune keep_latest`, `delete_for_runs`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// A checkpoint by namespace and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCheckpointRef {
    pub ns: String,
    pub checkpoint_id: String,
}
