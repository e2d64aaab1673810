//! The inbox: how anyone delivers an input to a session, at any time, exactly once, without
//! holding its writer.
//!
//! A session has one writer (a `lazarus run`, a gateway); everyone else — `lazarus sessions
//! send`, another gateway, boot-resume — *delivers* a message to the session's inbox with
//! [`crate::Store::deliver`]. Delivery is durable when it returns (that is what a gateway's
//! `202` means) and is keyed by the message id: delivering the same id again is a duplicate,
//! never a second message. The writer *drains* the inbox ([`crate::Session::drain_inbox`]):
//! oldest first, each message becomes the `input` (or `control`) record it carries, through
//! the session's one exactly-once rule for inputs, and leaves the inbox in the same durable
//! step. A crash between the two never loses a message (it is still waiting) nor records it
//! twice (the log already holds its id, and the next drain only marks it consumed).
//!
//! "The same durable step": the record's append is the commit point. Consuming the message
//! afterwards (removing its spool file, deleting its row) is tidying: a message whose id the
//! log already holds is only consumed by the next drain, never recorded again.
//!
//! Each store keeps its inbox its own way: the local store as one spool file per message id
//! beside the ledger (see `docs/FORMAT.md` § Inbox), PostgreSQL as rows of an `inbox` table.

use serde::Serialize;

use crate::record::{Approval, Control, Input, Record};

/// Longest message id, in bytes.
pub const MESSAGE_ID_BYTES_MAX: usize = 256;

/// Most messages one session's inbox holds; a delivery beyond it is refused
/// ([`crate::SessionError::InboxFull`]: a gateway answers 429 with `Retry-After`), never
/// dropped.
pub const INBOX_MESSAGES_MAX: u64 = 1000;

/// Most bytes (of stored messages) one session's inbox holds; likewise refused beyond it.
pub const INBOX_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// What waits in a session's inbox: accepted, not yet recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// Messages waiting.
    pub messages: u64,
    /// Their stored size, in bytes.
    pub bytes: u64,
    /// When the oldest waiting message was delivered (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest: Option<String>,
    /// Stored messages that failed their check and were set aside (kept, not delivered).
    pub set_aside: u64,
}

/// Checks a message id as it enters (an HTTP body, a CLI flag): 1 to
/// [`MESSAGE_ID_BYTES_MAX`] bytes, no control characters. The error says so.
pub fn check_message_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MESSAGE_ID_BYTES_MAX || id.chars().any(char::is_control) {
        return Err(format!(
            "a message id must be 1 to {MESSAGE_ID_BYTES_MAX} bytes without control characters"
        ));
    }
    Ok(())
}

/// A message for a session's inbox: the input (or control input) record it becomes once the
/// writer drains it. Its message id is the record's `input_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxMessage {
    record: Record,
}

impl InboxMessage {
    /// A user (or API) message.
    pub fn input(message_id: &str, source: &str, text: &str) -> Self {
        InboxMessage {
            record: Record::Input(Input {
                input_id: message_id.to_string(),
                source: source.to_string(),
                text: text.to_string(),
            }),
        }
    }

    /// A control input (e.g. a `resume` event).
    pub fn control(message_id: &str, action: &str, reason: Option<&str>) -> Self {
        InboxMessage {
            record: Record::Control(Control {
                input_id: message_id.to_string(),
                action: action.to_string(),
                reason: reason.map(str::to_string),
            }),
        }
    }

    /// A person's decision on a call waiting for approval; its message id is the decision's
    /// `input_id` (one per call).
    pub fn approval(approval: Approval) -> Self {
        InboxMessage {
            record: Record::Approval(approval),
        }
    }

    /// Decodes a message stored as its record's kind and data (what a spool file or an inbox
    /// row holds). Only `input`, `control` and `approval` are messages.
    pub fn from_parts(kind: &str, data_json: &[u8]) -> Result<Self, String> {
        let record = match kind {
            "input" => Record::Input(serde_json::from_slice(data_json).map_err(|e| e.to_string())?),
            "control" => {
                Record::Control(serde_json::from_slice(data_json).map_err(|e| e.to_string())?)
            }
            "approval" => {
                Record::Approval(serde_json::from_slice(data_json).map_err(|e| e.to_string())?)
            }
            other => {
                return Err(format!(
                    "an inbox holds inputs, controls and approvals, not {other:?}"
                ));
            }
        };
        let m = InboxMessage { record };
        check_message_id(m.message_id())?;
        Ok(m)
    }

    /// The message id (the dedup key).
    pub fn message_id(&self) -> &str {
        match &self.record {
            Record::Input(i) => &i.input_id,
            Record::Control(c) => &c.input_id,
            Record::Approval(a) => &a.input_id,
            _ => "",
        }
    }

    /// `input`, `control` or `approval`.
    pub fn kind(&self) -> &'static str {
        self.record.kind()
    }

    /// The record this message becomes.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The record's data as compact JSON (what is stored, and later appended).
    pub fn data_json(&self) -> Vec<u8> {
        // Input, Control and Approval are plain structs of strings: serializing cannot fail.
        self.record.data_json().unwrap_or_else(|_| b"{}".to_vec())
    }
}

/// What [`crate::Store::deliver`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub message_id: String,
    /// A message with this id is waiting already: nothing was added. (A redelivery of an id
    /// the log holds is placed, and the drain only consumes it: it is never recorded twice.)
    pub duplicate: bool,
}

/// One message a drain took out of the inbox.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drained {
    pub message_id: String,
    /// `input` or `control`.
    pub kind: &'static str,
    /// The record's data (what the log holds at `seq`).
    pub data: serde_json::Value,
    /// Where it is recorded (the original record for a redelivered id).
    pub seq: u64,
    /// The log held this id already: nothing was written, the message was only consumed.
    pub duplicate: bool,
    /// Timestamp of the record written now (`None` for a duplicate).
    pub ts: Option<String>,
}

/// How many waiting messages a drain reads at once.
pub const DRAIN_BATCH: usize = 64;
