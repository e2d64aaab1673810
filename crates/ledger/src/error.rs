//! Errors of the ledger. Each one says what happened, where, and what to do.

use std::fmt;
use std::path::PathBuf;

use crate::holder::{Holder, describe};

/// Everything that can go wrong in the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid session id {id:?}: {reason}")]
    InvalidId { id: String, reason: &'static str },
    #[error("session file {path} already exists; a session is never overwritten (pick another id)")]
    AlreadyExists { path: PathBuf },
    #[error("no session file at {path}")]
    NotFound { path: PathBuf },
    #[error(
        "session {path} is in use by {}; only one writer at a time (stop that process, or read without writing)",
        describe(.holder)
    )]
    Locked {
        path: PathBuf,
        holder: Option<Holder>,
    },
    #[error("{0}")]
    Corrupt(Box<Corruption>),
    #[error("{path}: unsupported session format version {found}; this build reads {supported}")]
    UnsupportedVersion {
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    #[error("{path}: unsupported format {found:?}; this build reads {expected:?}")]
    WrongFormat {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error(
        "record of {len} bytes exceeds the line limit of {max} bytes; split the data or raise line_bytes_max"
    )]
    RecordTooLarge { len: usize, max: usize },
    #[error("record data is not a JSON object or cannot be serialized: {0}")]
    Serialize(String),
    #[error(
        "writer for {path} is poisoned by an earlier failed fsync ({cause}); drop it and reopen the session, which re-reads the file from disk"
    )]
    Poisoned { path: PathBuf, cause: String },
    #[error(
        "{path}: no complete header line; the session's creation was interrupted (run `lazarus sessions repair` to set the bytes aside)"
    )]
    NoHeader { path: PathBuf },
    #[error(
        "{path} is {what}, not a regular file; a session file must be a regular file (remove or rename it, and see what put it there)"
    )]
    NotRegularFile { path: PathBuf, what: String },
    #[error(
        "{path} was created for record-by-record appends; open it with per-record durability (group commit would leave more unsynced than its crash window allows)"
    )]
    DurabilityMismatch { path: PathBuf },
}

impl LedgerError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LedgerError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The error for a failed open of an existing file at `path`.
    pub(crate) fn open_failed(path: &std::path::Path, e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::NotFound {
            return LedgerError::NotFound {
                path: path.to_path_buf(),
            };
        }
        if let Some(not_regular) = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<crate::fs::NotRegularFile>())
        {
            return LedgerError::NotRegularFile {
                path: path.to_path_buf(),
                what: not_regular.0.to_string(),
            };
        }
        LedgerError::io("open", path, e)
    }

    /// The corruption details, if this is a corruption error.
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            LedgerError::Corrupt(c) => Some(c),
            _ => None,
        }
    }
}

/// A bad line: where it is and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    pub path: PathBuf,
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the start of the line.
    pub offset: u64,
    pub problem: Problem,
    /// Why this is corruption rather than crash debris, when that is not obvious.
    pub context: Option<String>,
}

impl Corruption {
    pub fn new(path: impl Into<PathBuf>, line: u64, offset: u64, problem: Problem) -> Self {
        Corruption {
            path: path.into(),
            line,
            offset,
            problem,
            context: None,
        }
    }

    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: line {} (byte offset {}): {}",
            self.path.display(),
            self.line,
            self.offset,
            self.problem
        )?;
        if let Some(c) = &self.context {
            write!(f, " ({c})")?;
        }
        if let Problem::Newer(_) = self.problem {
            return write!(
                f,
                "; a newer Lazarus (or the `lazarus` Python package) wrote it: upgrade `lazarus` to read this session (do not repair it: that would cut those records away)"
            );
        }
        write!(
            f,
            "; run `lazarus sessions verify` for details and `lazarus sessions repair` to cut the log back to the last good record (removed bytes are saved beside the file)"
        )
    }
}

/// What was wrong with a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("checksum mismatch: expected crc {expected}, line carries {found}")]
    CrcMismatch { expected: String, found: String },
    #[error("malformed line: {0}")]
    Malformed(String),
    #[error("line contains NUL bytes")]
    NulBytes,
    #[error("sequence gap: expected seq {expected}, found {found}")]
    SeqGap { expected: u64, found: u64 },
    #[error("duplicate or reordered record: expected seq {expected}, found {found}")]
    SeqNotIncreasing { expected: u64, found: u64 },
    #[error("header record found at line {line}; only line 1 may be a header")]
    MisplacedHeader { line: u64 },
    #[error("line 1 is not a header record (kind {found:?})")]
    MissingHeader { found: String },
    #[error("line of {len} bytes exceeds the limit of {max} bytes")]
    LineTooLong { len: u64, max: u64 },
    #[error("torn tail: {bytes} bytes after the last complete line")]
    TornTail { bytes: u64 },
    #[error("invalid record: {0}")]
    Invalid(String),
    /// A checksum-valid record of a kind this build does not know: a newer program wrote it.
    /// Never damage: repair refuses to cut it, and the advice is to upgrade.
    #[error("a record this build cannot read: {0}")]
    Newer(String),
}

pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
