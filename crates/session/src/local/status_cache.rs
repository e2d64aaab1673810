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
//! With it, the rest of the session's listing line as read from the file (header, first
//! input, tail), keyed by what a stat shows of the file (inode, size, change and modification
//! times): a listing of 10⁵ sessions then stats each ledger instead of opening and reading it.
//! A writer killed at any point leaves a file whose size or times differ (it wrote), so its
//! line is read again.
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

/// The version of the status rule the cached statuses were computed by: a row of another
/// (an older build's rule, which e.g. did not count a host program's calls in doubt) is
/// ignored, and the session replayed again. Raise it whenever [`crate::SessionState::status`]
/// changes its answer for a log.
const STATUS_RULE: u32 = 2;

/// Largest cache file read, in bytes (about 2,000,000 sessions); a larger one is ignored.
const FILE_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// What identifies the ledger a status was computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub created_at: String,
    pub size: u64,
    pub last_seq: u64,
}

/// One session's cached replay, and the listing line read with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub id: String,
    pub key: Key,
    pub status: Status,
    /// Why the replay refused the session (status `corrupt`).
    pub error: Option<String>,
    /// What a listing read from the file besides the status, and the file it read it from:
    /// while a stat of the ledger still shows that file, a listing takes the line from here
    /// without opening the ledger.
    pub line: Option<Line>,
}

/// A ledger file as a stat sees it: any append changes its size and its change time (which
/// no program can set back), any replacement its inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileKey {
    pub ino: u64,
    pub size: u64,
    /// Change time, seconds and nanoseconds.
    pub ctime: (i64, i64),
    /// Modification time, seconds and nanoseconds.
    pub mtime: (i64, i64),
}

impl FileKey {
    /// From a `stat` that did not follow symlinks; `None` unless it is a regular file.
    pub(crate) fn of(st: &rustix::fs::Stat) -> Option<FileKey> {
        let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
        (kind == rustix::fs::FileType::RegularFile).then(|| FileKey {
            ino: unsigned(st.st_ino),
            size: unsigned(st.st_size),
            ctime: (signed(st.st_ctime), signed(st.st_ctime_nsec)),
            mtime: (signed(st.st_mtime), signed(st.st_mtime_nsec)),
        })
    }
}

/// A stat's field, whatever integer type the platform gives it in.
fn signed<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(0)
}

fn unsigned<T: TryInto<u64>>(n: T) -> u64 {
    n.try_into().unwrap_or(0)
}

/// The parts of a listing line that come from the ledger's bytes (its header, first record
/// and tail); the rest (a title file, the inbox, the writer) is looked at live.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub file: FileKey,
    /// The first input's text, shortened.
    pub first_input: Option<String>,
    pub updated_at: String,
    pub last_kind: String,
    pub parent: Option<String>,
    /// The header's `meta` as JSON text: parsed only into the line that shows it (parsing
    /// 10⁵ of them on every load, and freeing them, was a tenth of a listing).
    pub meta: Option<Box<serde_json::value::RawValue>>,
}

impl PartialEq for Line {
    fn eq(&self, other: &Line) -> bool {
        self.file == other.file
            && self.first_input == other.first_input
            && self.updated_at == other.updated_at
            && self.last_kind == other.last_kind
            && self.parent == other.parent
            && self.meta.as_ref().map(|m| m.get()) == other.meta.as_ref().map(|m| m.get())
    }
}

/// An entry as one line of the file: a JSON array, not an object (10⁵ of them are read for
/// every listing, and an array parses in about two thirds of the time):
/// `[rule, id, created_at, size, last_seq, status, error, line]` (`rule`: [`STATUS_RULE`]),
/// `line` being `null` or
/// `[ino, size, ctime_s, ctime_ns, mtime_s, mtime_ns, first_input, updated_at, last_kind,
/// parent, meta]`.
#[derive(Serialize)]
struct RowOut<'a>(
    u32,
    &'a str,
    &'a str,
    u64,
    u64,
    Status,
    &'a Option<String>,
    Option<LineOut<'a>>,
);

#[derive(Serialize)]
struct LineOut<'a>(
    u64,
    u64,
    i64,
    i64,
    i64,
    i64,
    &'a Option<String>,
    &'a str,
    &'a str,
    &'a Option<String>,
    &'a Option<Box<serde_json::value::RawValue>>,
);

#[derive(Deserialize)]
struct RowIn(
    u32,
    String,
    String,
    u64,
    u64,
    Status,
    Option<String>,
    Option<LineIn>,
);

#[derive(Deserialize)]
struct LineIn(
    u64,
    u64,
    i64,
    i64,
    i64,
    i64,
    Option<String>,
    String,
    String,
    Option<String>,
    Option<Box<serde_json::value::RawValue>>,
);

impl Entry {
    fn row(&self) -> RowOut<'_> {
        RowOut(
            STATUS_RULE,
            &self.id,
            &self.key.created_at,
            self.key.size,
            self.key.last_seq,
            self.status,
            &self.error,
            self.line.as_ref().map(|l| {
                LineOut(
                    l.file.ino,
                    l.file.size,
                    l.file.ctime.0,
                    l.file.ctime.1,
                    l.file.mtime.0,
                    l.file.mtime.1,
                    &l.first_input,
                    &l.updated_at,
                    &l.last_kind,
                    &l.parent,
                    &l.meta,
                )
            }),
        )
    }

    fn from_row(RowIn(_, id, created_at, size, last_seq, status, error, line): RowIn) -> Entry {
        Entry {
            id,
            key: Key {
                created_at,
                size,
                last_seq,
            },
            status,
            error,
            line: line.map(
                |LineIn(
                    ino,
                    fsize,
                    cs,
                    cn,
                    ms,
                    mn,
                    first_input,
                    updated_at,
                    last_kind,
                    parent,
                    meta,
                )| Line {
                    file: FileKey {
                        ino,
                        size: fsize,
                        ctime: (cs, cn),
                        mtime: (ms, mn),
                    },
                    first_input,
                    updated_at,
                    last_kind,
                    parent,
                    meta,
                },
            ),
        }
    }
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

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the directory has a cache already (then it is kept up to date).
    pub(crate) fn has_entries(&self) -> bool {
        !self.entries.is_empty()
    }

    /// The cached replay of `id`, if it was made from the ledger `key` identifies.
    pub(crate) fn get(&self, id: &str, key: &Key) -> Option<&Entry> {
        self.entries.get(id).filter(|e| &e.key == key)
    }

    /// The cached replay and line of `id`, if they were read from the very file `file`
    /// identifies.
    pub(crate) fn get_line(&self, id: &str, file: &FileKey) -> Option<(&Entry, &Line)> {
        let e = self.entries.get(id)?;
        let line = e.line.as_ref().filter(|l| &l.file == file)?;
        Some((e, line))
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
            serde_json::to_writer(&mut out, &e.row()).map_err(std::io::Error::other)?;
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
    // Parsed in pieces on up to four threads (a big directory's cache is tens of MB).
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(text.len() / (1024 * 1024) + 1);
    let pieces = split_at_lines(&text, threads);
    let parsed: Vec<Vec<Entry>> = std::thread::scope(|s| {
        let workers: Vec<_> = pieces
            .iter()
            .map(|piece| s.spawn(move || parse_piece(piece)))
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    });
    let mut out = HashMap::with_capacity(parsed.iter().map(Vec::len).sum());
    for e in parsed.into_iter().flatten() {
        out.insert(e.id.clone(), e);
    }
    Some(out)
}

fn parse_piece(piece: &[u8]) -> Vec<Entry> {
    piece
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        // a line that does not parse is skipped: its session is read and replayed again
        .filter_map(|line| serde_json::from_slice::<RowIn>(line).ok())
        // computed by another status rule: replayed again
        .filter(|row| row.0 == STATUS_RULE)
        .map(Entry::from_row)
        .collect()
}

/// `text` in about `n` pieces, each ending at a line's end.
fn split_at_lines(text: &[u8], n: usize) -> Vec<&[u8]> {
    let mut pieces = Vec::with_capacity(n);
    let mut rest = text;
    for k in (1..n).rev() {
        let want = rest.len() / (k + 1);
        let cut = match memchr::memchr(b'\n', &rest[want..]) {
            Some(i) => want + i + 1,
            None => rest.len(),
        };
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece);
        rest = tail;
    }
    pieces.push(rest);
    pieces
}
