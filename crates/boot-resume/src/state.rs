//! The "never resume twice" state file, the single-instance lock and the decision log.
//! All three are private (0600 in 0700 directories: the log holds user text) and opened
//! with `O_NOFOLLOW | O_NONBLOCK`.
use crate::fsutil;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest state file read (each entry is a few hundred bytes).
pub const MAX_STATE_BYTES: u64 = 64 << 20;

/// State, lock and log errors.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing a file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What file.
        what: &'static str,
        /// Path.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// The state file does not parse.
    #[error(
        "state file {path} is corrupt ({source}); move it away to start afresh (sessions may then be resumed again)"
    )]
    Corrupt {
        /// Path.
        path: PathBuf,
        /// Parse error.
        source: serde_json::Error,
    },
}

/// What identifies one interruption: the tail as it was when we resumed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// File size.
    pub size: u64,
    /// Modification time (ns).
    pub mtime_ns: i64,
    /// Last record id.
    pub last_record_id: Option<String>,
}

/// What we remember about one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The interruption this entry is about.
    pub fingerprint: Fingerprint,
    /// The idempotency key used for it.
    pub idempotency_key: String,
    /// Attempts made for this interruption.
    pub attempts: u32,
    /// Whether an injection was accepted (exit 0, HTTP 2xx, or the session's own record of
    /// the resume message). Never set for a failed or unconfirmed injection.
    pub resumed: bool,
    /// When the last attempt was made (RFC 3339).
    pub last_attempt: String,
    /// The last error, if the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The last failure cannot go away by retrying (missing directory, refused value,
    /// a rejected request): not retried until the session changes.
    #[serde(default)]
    pub permanent_failure: bool,
}

/// The state file contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Format version (1).
    pub version: u32,
    /// Entries by session key (`format\tsession\tpath`).
    pub sessions: BTreeMap<String, Entry>,
}

impl State {
    /// The key of a session.
    pub fn key(format: &str, session: &str, path: &str) -> String {
        format!("{format}\t{session}\t{path}")
    }

    /// Loads the state file; a missing file is an empty state.
    pub fn load(path: &Path) -> Result<State, StateError> {
        match fsutil::read_small(path, MAX_STATE_BYTES) {
            Ok(b) => {
                let mut s: State =
                    serde_json::from_slice(&b).map_err(|source| StateError::Corrupt {
                        path: path.to_path_buf(),
                        source,
                    })?;
                s.version = 1;
                Ok(s)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State {
                version: 1,
                sessions: BTreeMap::new(),
            }),
            Err(source) => Err(StateError::Io {
                what: "cannot read state file",
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes the state atomically (0600 temp file, fsync, rename, directory fsync).
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let io = |what, source| StateError::Io {
            what,
            path: path.to_path_buf(),
            source,
        };
        let mut body = serde_json::to_vec_pretty(self)
            .map_err(|e| io("cannot encode state file", std::io::Error::other(e)))?;
        body.push(b'\n');
        fsutil::write_atomic(path, &body).map_err(|e| io("cannot write state file", e))
    }
}

/// Holds the single-instance lock until dropped (the lock dies with the process).
#[derive(Debug)]
pub struct InstanceLock {
    _file: File,
}

/// Tries to take the lock at `path`; `Ok(None)` if another instance holds it.
pub fn try_lock(path: &Path) -> Result<Option<InstanceLock>, StateError> {
    let io = |what, source| StateError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    if let Some(d) = path.parent() {
        fsutil::private_dir(d).map_err(|e| io("cannot create directory for lock file", e))?;
    }
    let f = fsutil::open_private(path, false).map_err(|e| io("cannot open lock file", e))?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {
            let _ = f.set_len(0);
            let _ = (&f).write_all(format!("{}\n", std::process::id()).as_bytes());
            Ok(Some(InstanceLock { _file: f }))
        }
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
        Err(e) => Err(io("cannot lock", e.into())),
    }
}

/// Appends one JSON object per line to the decision log (if any).
#[derive(Debug, Default)]
pub struct DecisionLog {
    file: Option<File>,
}

impl DecisionLog {
    /// Opens `path` for appending (0600; directories 0700).
    pub fn open(path: &Path) -> Result<DecisionLog, StateError> {
        let io = |what, source| StateError::Io {
            what,
            path: path.to_path_buf(),
            source,
        };
        if let Some(d) = path.parent() {
            fsutil::private_dir(d).map_err(|e| io("cannot create directory for log file", e))?;
        }
        let f = fsutil::open_private(path, true).map_err(|e| io("cannot open log file", e))?;
        Ok(DecisionLog { file: Some(f) })
    }

    /// A log that discards everything.
    pub fn none() -> DecisionLog {
        DecisionLog { file: None }
    }

    /// Whether events are written anywhere (a dry run without `--log-file` writes none).
    pub fn enabled(&self) -> bool {
        self.file.is_some()
    }

    /// Logs one event: `{"ts":..., "event":..., ...fields}`.
    pub fn log(&mut self, event: &str, fields: serde_json::Value) {
        let Some(f) = &mut self.file else { return };
        let mut obj = serde_json::Map::new();
        obj.insert("ts".into(), jiff::Timestamp::now().to_string().into());
        obj.insert("event".into(), event.into());
        if let serde_json::Value::Object(m) = fields {
            obj.extend(m);
        }
        let mut line = serde_json::Value::Object(obj).to_string();
        line.push('\n');
        let _ = f.write_all(line.as_bytes());
    }
}
