//! `<dir>/.status-cache`: the status each session's replay gave, so a listing replays only
//! the sessions that changed since.
//!
//! A session's status has one rule, [`crate::SessionState::status`], which needs the whole
//! log (an input answered three turns ago, a call still without an outcome): the last record
//! alone cannot tell. Replaying every session for every listing would be slow, so the
//! listing keeps what each replay said here, keyed by the ledger's identity at that moment
//! (creation time, size and last seq). Any append changes the size, any re-creation the
//! creation time: an entry that does not match is ignored and the session replayed again.
//!
//! The file is derived data: written by listings of directories where replaying costs
//! something ([`super::listing::STATUS_CACHE_MIN_SESSIONS`] sessions or more, or a listing that
//! replayed [`super::listing::STATUS_CACHE_MIN_REPLAYED_BYTES`]) — atomically, a temporary file
//! renamed over it, not fsynced —, never by writers, and ignored when unreadable. Losing it
//! costs replays, never a wrong answer.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::state::Status;

/// Name of the cache file in a session directory (a session id never starts with `.`).
pub(crate) const FILE_NAME: &str = ".status-cache";

/// Largest cache file read, in bytes (about 2,000,000 sessions); a larger one is ignored.
const FILE_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// What identifies the ledger a status was computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Key {
    pub created_at: String,
    pub size: u64,
    pub last_seq: u64,
}

/// One session's cached replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub id: String,
    #[serde(flatten)]
    pub key: Key,
    pub status: Status,
    /// Why the replay refused the session (status `corrupt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The cache of one session directory.
#[derive(Debug, Default)]
pub(crate) struct StatusCache {
    path: PathBuf,
    entries: HashMap<String, Entry>,
    changed: bool,
}

impl StatusCache {
    /// Reads the cache of `dir` (empty when missing or unreadable).
    pub(crate) fn load(dir: &Path) -> Self {
        let path = dir.join(FILE_NAME);
        let entries = read_entries(&path).unwrap_or_default();
        StatusCache {
            path,
            entries,
            changed: false,
        }
    }

    /// Whether the directory has a cache already (then it is kept up to date).
    pub(crate) fn has_entries(&self) -> bool {
        !self.entries.is_empty()
    }

    /// The cached replay of `id`, if it was made from the ledger `key` identifies.
    pub(crate) fn get(&self, id: &str, key: &Key) -> Option<&Entry> {
        self.entries.get(id).filter(|e| &e.key == key)
    }

    /// Remembers a replay's answer.
    pub(crate) fn put(&mut self, entry: Entry) {
        if self.entries.get(&entry.id) != Some(&entry) {
            self.entries.insert(entry.id.clone(), entry);
            self.changed = true;
        }
    }

    /// Forgets sessions that are gone (a listing saw every session of the directory).
    pub(crate) fn retain(&mut self, present: &std::collections::HashSet<&str>) {
        let before = self.entries.len();
        self.entries.retain(|id, _| present.contains(id.as_str()));
        self.changed |= self.entries.len() != before;
    }

    /// Writes the cache back if anything changed. Best effort: a failure costs replays later.
    pub(crate) fn save(&mut self) {
        if !self.changed {
            return;
        }
        if let Err(e) = self.write() {
            tracing::debug!(file = %self.path.display(), error = %e, "cannot write the status cache (listings replay more)");
        }
        self.changed = false;
    }

    fn write(&self) -> std::io::Result<()> {
        let tmp = self
            .path
            .with_file_name(format!("{FILE_NAME}.{}.tmp", std::process::id()));
        let mut out = Vec::with_capacity(self.entries.len() * 128);
        for e in self.entries.values() {
            serde_json::to_writer(&mut out, e).map_err(std::io::Error::other)?;
            out.push(b'\n');
        }
        let mut f = lazarus_ledger::fs::create_exclusive(&tmp, false).or_else(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                std::fs::remove_file(&tmp)?;
                lazarus_ledger::fs::create_exclusive(&tmp, false)
            } else {
                Err(e)
            }
        })?;
        let written = f
            .write_all(&out)
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

fn read_entries(path: &Path) -> Option<HashMap<String, Entry>> {
    let f = lazarus_ledger::fs::open_regular(path, false, false).ok()?;
    if f.metadata().ok()?.len() > FILE_BYTES_MAX {
        return None;
    }
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, FILE_BYTES_MAX), &mut text).ok()?;
    let mut out = HashMap::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        // a line that does not parse is skipped: its session is replayed again
        if let Ok(e) = serde_json::from_slice::<Entry>(line) {
            out.insert(e.id.clone(), e);
        }
    }
    Some(out)
}
