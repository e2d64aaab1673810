//! Errors of the session layer: what went wrong, where, and what to do.

use crate::state::ReplayError;

/// Errors of the session layer.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Ledger(#[from] lazarus_ledger::LedgerError),
    #[error(
        "{location}: seq {seq}: {source}; the log is not a valid session (run `lazarus sessions verify`)"
    )]
    Replay {
        location: String,
        seq: u64,
        #[source]
        source: ReplayError,
    },
    #[error("record refused, nothing was written: {0}")]
    Refused(ReplayError),
    #[error("no session {id:?} in {location}")]
    NotFound { id: String, location: String },
    #[error("session {id:?} already exists in {location}; a session is never overwritten")]
    AlreadyExists { id: String, location: String },
    #[error(
        "session {id:?} in {location} is in use by {}; only one writer at a time (stop that process, or read without writing)",
        lazarus_ledger::holder::describe(&.holder.as_deref().cloned())
    )]
    Locked {
        id: String,
        location: String,
        /// Boxed: the error stays small on every path that returns it.
        holder: Option<Box<lazarus_ledger::Holder>>,
        /// For a lease (the PostgreSQL store): milliseconds until it runs out unless its
        /// holder renews it. `None` for a lock that lives exactly as long as its process.
        expires_in_ms: Option<u32>,
    },
    /// An append stated a seq that is not the session's next free one (taken by another
    /// writer, or out of order). Nothing was written; the writer must reopen.
    #[error(
        "session {id:?} in {location}: seq {seq} is not the next free seq (already taken, or out of order); nothing was written, reopen the session"
    )]
    Conflict {
        id: String,
        location: String,
        seq: u64,
    },
    /// The writer can no longer write: its lease was taken by another writer (it was not
    /// renewed in time), or an append failed in a way that leaves its view of the log
    /// uncertain. The failed append may or may not have committed; every acknowledged one has.
    /// Reopening the session is safe: inputs are deduplicated by their ids.
    #[error(
        "session {id:?} in {location}: this writer can no longer write ({cause}); reopen the session (acknowledged records are safe)"
    )]
    WriterLost {
        id: String,
        location: String,
        cause: String,
    },
    /// The session's inbox is at its limit: nothing was added; retry once its writer has
    /// recorded what waits (a gateway answers 429 with `Retry-After`).
    #[error(
        "the inbox of session {id:?} in {location} holds {messages} messages ({bytes} bytes), at its limit of {max_messages} messages or {max_bytes} bytes; nothing was added: retry once its writer has recorded them"
    )]
    InboxFull {
        id: String,
        location: String,
        messages: u64,
        bytes: u64,
        max_messages: u64,
        max_bytes: u64,
    },
    /// A message waiting in the inbox does not fit the session (only a message that did not
    /// come through a door's check can: a hand-made spool file or row). It stays waiting:
    /// nothing accepted is dropped; the writer records nothing until it is removed.
    #[error(
        "message {message_id:?} in the inbox of session {id:?} in {location} cannot be recorded: {why}; it stays in the inbox (nothing was written): remove it (its spool file, or its row of the inbox table) to let the session go on"
    )]
    InboxMessageRefused {
        id: String,
        location: String,
        message_id: String,
        why: Box<ReplayError>,
    },
    #[error("cannot fork {id:?} at turn {turn}: {reason}")]
    BadForkPoint {
        id: String,
        turn: u64,
        reason: String,
    },
    /// The store cannot be reached or has no connection to spare (database down, restarting,
    /// out of connections): nothing was written; retry in a moment (a gateway answers 503
    /// with `Retry-After`).
    #[error("{location}: unavailable ({cause}); nothing was written, retry in a moment")]
    Unavailable { location: String, cause: String },
    #[error("{0}")]
    Backend(String),
    #[error("cannot encode record: {0}")]
    Encode(#[from] serde_json::Error),
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;
