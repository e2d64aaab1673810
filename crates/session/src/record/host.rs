//! The records a host framework writes through the `lazarus` Python package (docs/python.md):
//! an OpenAI Agents SDK history and its announced tool calls, LangGraph's checkpoints and
//! writes. Lazarus's own runner never writes or acts on them.

use serde::{Deserialize, Deserializer, Serialize};

use super::Record;

/// What every host kind begins with.
pub(super) const PREFIX: &str = "host_";

/// A host framework's record: one enum, so what treats them alike (replay's dispatch, the web
/// view, ATIF) names them once.
#[derive(Debug, Clone, PartialEq)]
pub enum Host {
    Item(HostItem),
    Pop(HostPop),
    Clear(HostClear),
    CallIntent(HostCallIntent),
    CallOutcome(HostCallOutcome),
    Checkpoint(HostCheckpoint),
    Writes(HostWrites),
}

impl Host {
    /// The `kind` member written for this record.
    pub fn kind(&self) -> &'static str {
        match self {
            Host::Item(_) => "host_item",
            Host::Pop(_) => "host_pop",
            Host::Clear(_) => "host_clear",
            Host::CallIntent(_) => "host_call_intent",
            Host::CallOutcome(_) => "host_call_outcome",
            Host::Checkpoint(_) => "host_checkpoint",
            Host::Writes(_) => "host_writes",
        }
    }

    pub(super) fn data_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        match self {
            Host::Item(d) => serde_json::to_vec(d),
            Host::Pop(d) => serde_json::to_vec(d),
            Host::Clear(d) => serde_json::to_vec(d),
            Host::CallIntent(d) => serde_json::to_vec(d),
            Host::CallOutcome(d) => serde_json::to_vec(d),
            Host::Checkpoint(d) => serde_json::to_vec(d),
            Host::Writes(d) => serde_json::to_vec(d),
        }
    }

    pub(super) fn deserialize_kind<'de, D: Deserializer<'de>>(
        kind: &str,
        d: D,
    ) -> Result<Self, D::Error> {
        Ok(match kind {
            "host_item" => Host::Item(Deserialize::deserialize(d)?),
            "host_pop" => Host::Pop(Deserialize::deserialize(d)?),
            "host_clear" => Host::Clear(Deserialize::deserialize(d)?),
            "host_call_intent" => Host::CallIntent(Deserialize::deserialize(d)?),
            "host_call_outcome" => Host::CallOutcome(Deserialize::deserialize(d)?),
            "host_checkpoint" => Host::Checkpoint(Deserialize::deserialize(d)?),
            "host_writes" => Host::Writes(Deserialize::deserialize(d)?),
            other => return Err(super::unknown_kind(other)),
        })
    }
}

macro_rules! host_record_from {
    ($($variant:ident($ty:ty)),* $(,)?) => {$(
        impl From<$ty> for Record {
            fn from(d: $ty) -> Record {
                Record::Host(Host::$variant(d))
            }
        }
    )*};
}

host_record_from!(
    Item(HostItem),
    Pop(HostPop),
    Clear(HostClear),
    CallIntent(HostCallIntent),
    CallOutcome(HostCallOutcome),
    Checkpoint(HostCheckpoint),
    Writes(HostWrites),
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
