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
//! The file is binary and read in place (one read, a checksum, no parse): a header, one
//! fixed-size record per session (numbers, and strings as offsets into the text after the
//! records), the record numbers sorted by id (a lookup is a binary search), then the text.
//! Records are written in the order the listing met the sessions (the directory's), so the
//! next listing finds each at its own position first. Anything that does not check — magic,
//! layout, status rule, checksum, an offset out of bounds, text that is not UTF-8 — and the
//! whole file is ignored.
//!
//! The file is derived data: written by listings of directories where replaying costs
//! something ([`super::listing::STATUS_CACHE_MIN_SESSIONS`] sessions or more, or a listing that
//! replayed [`super::listing::STATUS_CACHE_MIN_REPLAYED_BYTES`]) — atomically, a temporary file
//! renamed over it, not fsynced —, never by writers, and ignored when unreadable. Losing it
//! costs replays, never a wrong answer.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::state::Status;

/// Name of the cache file in a session directory (a session id never starts with `.`).
pub(crate) const FILE_NAME: &str = ".status-cache";

/// The version of the status rule the cached statuses were computed by: a file of another
/// (an older build's rule, which e.g. did not count a host program's calls in doubt) is
/// ignored, and every session replayed again. Raise it whenever
/// [`crate::SessionState::status`] changes its answer for a log.
const STATUS_RULE: u32 = 2;

/// The file's first bytes, and the version of its layout.
const MAGIC: &[u8; 8] = b"LZSTATUS";
const LAYOUT: u32 = 1;

/// Largest cache file read, in bytes (about 1,000,000 sessions); a larger one is ignored.
const FILE_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// `magic, layout u32, rule u32, count u32, crc32c u32` ([`checksum`]).
const HEADER: usize = 24;
/// One session's record: nine strings (offset u32, length u32), eight numbers, the status.
const RECORD: usize = 144;
/// A string's length meaning "none".
const NONE: u32 = u32::MAX;

/// What identifies the ledger a status was computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub created_at: String,
    pub size: u64,
    pub last_seq: u64,
}

/// One session's replay as this process computed it, and the listing line read with it.
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
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Line {
    pub file: FileKey,
    /// The first input's text, shortened.
    pub first_input: Option<String>,
    pub updated_at: String,
    pub last_kind: String,
    pub parent: Option<String>,
    /// The header's `meta` as JSON text: parsed only into the line that shows it.
    pub meta: Option<String>,
    /// `meta.workspace`, for filters that must look at every session.
    pub workspace: Option<String>,
}

/// An entry as the file holds it, borrowed from the file's bytes (or from an [`Entry`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EntryRef<'a> {
    pub id: &'a str,
    pub created_at: &'a str,
    pub size: u64,
    pub last_seq: u64,
    pub status: Status,
    pub error: Option<&'a str>,
    pub line: Option<LineRef<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LineRef<'a> {
    pub file: FileKey,
    pub first_input: Option<&'a str>,
    pub updated_at: &'a str,
    pub last_kind: &'a str,
    pub parent: Option<&'a str>,
    pub meta: Option<&'a str>,
    pub workspace: Option<&'a str>,
}

impl Entry {
    pub(crate) fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            id: &self.id,
            created_at: &self.key.created_at,
            size: self.key.size,
            last_seq: self.key.last_seq,
            status: self.status,
            error: self.error.as_deref(),
            line: self.line.as_ref().map(|l| LineRef {
                file: l.file,
                first_input: l.first_input.as_deref(),
                updated_at: &l.updated_at,
                last_kind: &l.last_kind,
                parent: l.parent.as_deref(),
                meta: l.meta.as_deref(),
                workspace: l.workspace.as_deref(),
            }),
        }
    }
}

/// A status as one byte: an exhaustive match, so a new status cannot be forgotten here.
fn status_code(s: Status) -> u8 {
    match s {
        Status::New => 0,
        Status::Idle => 1,
        Status::Pending => 2,
        Status::Running => 3,
        Status::Interrupted => 4,
        Status::InDoubt => 5,
        Status::Stopped => 6,
        Status::Failed => 7,
        Status::Corrupt => 8,
        Status::AwaitingApproval => 9,
        Status::NeedsOwner => 10,
    }
}

const STATUSES: [Status; 11] = [
    Status::New,
    Status::Idle,
    Status::Pending,
    Status::Running,
    Status::Interrupted,
    Status::InDoubt,
    Status::Stopped,
    Status::Failed,
    Status::Corrupt,
    Status::AwaitingApproval,
    Status::NeedsOwner,
];

/// A cache file's bytes, checked once: every record is read from them in place.
#[derive(Debug, Default)]
struct CacheFile {
    /// The header, the records and the order by id.
    bytes: Vec<u8>,
    /// The text the records' strings are slices of (UTF-8 checked once: a string is then a
    /// slice between char boundaries, never validated again).
    text: String,
    count: usize,
}

impl CacheFile {
    /// The file's bytes as a cache, if everything checks: `bytes` up to the text, then the
    /// text (read apart, so that it becomes a `String` without a copy).
    fn check(bytes: Vec<u8>, text: Vec<u8>) -> Option<CacheFile> {
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            return None;
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
        if u32_at(8) != LAYOUT || u32_at(12) != STATUS_RULE {
            return None;
        }
        let count = u32_at(16) as usize;
        let text_at = HEADER.checked_add(count.checked_mul(RECORD + 4)?)?;
        if text_at != bytes.len() || checksum(&bytes, &text) != u32_at(20) {
            return None;
        }
        // all text is UTF-8, and every string a sub-slice of it between char boundaries
        // (then no string read later can fail); every status known; the order in range
        let text = String::from_utf8(text).ok()?;
        for i in 0..count {
            let at = HEADER + i * RECORD;
            let has_line = match bytes[at + 137] {
                0 => false,
                1 => true,
                _ => return None,
            };
            if bytes[at + 136] as usize >= STATUSES.len() {
                return None;
            }
            for k in 0..9 {
                let off = u32_at(at + 8 * k) as usize;
                let len = u32_at(at + 8 * k + 4);
                // id and created_at always, updated_at and last_kind with a line
                let required = k < 2 || (has_line && (k == 4 || k == 5));
                if len == NONE {
                    if required {
                        return None;
                    }
                    continue;
                }
                let end = off.checked_add(len as usize)?;
                if end > text.len() || !text.is_char_boundary(off) || !text.is_char_boundary(end) {
                    return None;
                }
            }
            let o = u32_at(HEADER + count * RECORD + i * 4) as usize;
            if o >= count {
                return None;
            }
        }
        Some(CacheFile { bytes, text, count })
    }

    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes[at..at + 8].try_into().unwrap_or([0; 8]))
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap_or([0; 4]))
    }

    /// The string whose (offset, length) is at `at`: `Some(None)` for none, `None` when it
    /// does not check.
    fn string(&self, at: usize) -> Option<Option<&str>> {
        let (off, len) = (self.u32_at(at) as usize, self.u32_at(at + 4));
        if len == NONE {
            return Some(None);
        }
        self.text.get(off..off.checked_add(len as usize)?).map(Some)
    }

    /// The id of record `i`, as bytes (only compared).
    fn id(&self, i: usize) -> &[u8] {
        if i >= self.count {
            return b"";
        }
        let at = HEADER + i * RECORD;
        let (off, len) = (self.u32_at(at) as usize, self.u32_at(at + 4) as usize);
        self.text
            .as_bytes()
            .get(off..off.saturating_add(len))
            .unwrap_or_default()
    }

    /// Record number `i` of the order by id.
    fn order(&self, i: usize) -> Option<u32> {
        (i < self.count).then(|| self.u32_at(HEADER + self.count * RECORD + i * 4))
    }

    /// Which record holds `id`: the one at `hint` (where the last listing met it), else a
    /// binary search of the order by id.
    fn find(&self, id: &str, hint: usize) -> Option<usize> {
        let id = id.as_bytes();
        if hint < self.count && self.id(hint) == id {
            return Some(hint);
        }
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let r = self.order(mid)? as usize;
            match self.id(r).cmp(id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(r),
            }
        }
        None
    }

    /// The file key of record `i`'s line, if it has one (numbers only: no string read).
    fn file_key(&self, i: usize) -> Option<FileKey> {
        if i >= self.count {
            return None;
        }
        let at = HEADER + i * RECORD;
        let n = |k: usize| self.u64_at(at + 72 + 8 * k);
        (self.bytes[at + 137] == 1).then(|| FileKey {
            ino: n(2),
            size: n(3),
            ctime: (n(4) as i64, n(5) as i64),
            mtime: (n(6) as i64, n(7) as i64),
        })
    }

    fn status(&self, i: usize) -> Option<Status> {
        let at = HEADER + i.checked_mul(RECORD)?;
        STATUSES.get(*self.bytes.get(at + 136)? as usize).copied()
    }

    /// Record `i`, borrowed.
    fn entry(&self, i: usize) -> Option<EntryRef<'_>> {
        if i >= self.count {
            return None;
        }
        let at = HEADER + i * RECORD;
        let s = |k: usize| self.string(at + 8 * k);
        let n = |k: usize| self.u64_at(at + 72 + 8 * k);
        let status = *STATUSES.get(self.bytes[at + 136] as usize)?;
        let line = match self.bytes[at + 137] {
            0 => None,
            1 => Some(LineRef {
                file: FileKey {
                    ino: n(2),
                    size: n(3),
                    ctime: (n(4) as i64, n(5) as i64),
                    mtime: (n(6) as i64, n(7) as i64),
                },
                first_input: s(3)?,
                updated_at: s(4)??,
                last_kind: s(5)??,
                parent: s(6)?,
                meta: s(7)?,
                workspace: s(8)?,
            }),
            _ => return None,
        };
        Some(EntryRef {
            id: s(0)??,
            created_at: s(1)??,
            error: s(2)?,
            size: n(0),
            last_seq: n(1),
            status,
            line,
        })
    }
}

/// The checksum of a cache file: its header's numbers (layout, rule, count) and everything
/// after the header.
fn checksum(bytes: &[u8], text: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[8..20]), &bytes[HEADER..]);
    crc32c::crc32c_append(crc, text)
}

/// Writes `entries` as a cache file's bytes, in their order.
fn encode<'a>(entries: &[EntryRef<'a>]) -> Option<Vec<u8>> {
    let count = entries.len();
    let mut records = Vec::with_capacity(count * RECORD);
    let mut text: Vec<u8> = Vec::with_capacity(count * 160);
    let mut put = |records: &mut Vec<u8>, s: Option<&str>| -> Option<()> {
        let (off, len) = match s {
            Some(s) => {
                let off = u32::try_from(text.len()).ok()?;
                let len = u32::try_from(s.len()).ok().filter(|&l| l != NONE)?;
                text.extend_from_slice(s.as_bytes());
                (off, len)
            }
            None => (0, NONE),
        };
        records.extend_from_slice(&off.to_le_bytes());
        records.extend_from_slice(&len.to_le_bytes());
        Some(())
    };
    for e in entries {
        let l = e.line.as_ref();
        put(&mut records, Some(e.id))?;
        put(&mut records, Some(e.created_at))?;
        put(&mut records, e.error)?;
        put(&mut records, l.and_then(|l| l.first_input))?;
        put(&mut records, l.map(|l| l.updated_at))?;
        put(&mut records, l.map(|l| l.last_kind))?;
        put(&mut records, l.and_then(|l| l.parent))?;
        put(&mut records, l.and_then(|l| l.meta))?;
        put(&mut records, l.and_then(|l| l.workspace))?;
        let f = l.map(|l| l.file).unwrap_or(FileKey {
            ino: 0,
            size: 0,
            ctime: (0, 0),
            mtime: (0, 0),
        });
        for n in [
            e.size,
            e.last_seq,
            f.ino,
            f.size,
            f.ctime.0 as u64,
            f.ctime.1 as u64,
            f.mtime.0 as u64,
            f.mtime.1 as u64,
        ] {
            records.extend_from_slice(&n.to_le_bytes());
        }
        records.extend_from_slice(&[
            status_code(e.status),
            u8::from(l.is_some()),
            0,
            0,
            0,
            0,
            0,
            0,
        ]);
    }
    let mut order: Vec<u32> = (0..u32::try_from(count).ok()?).collect();
    order.sort_unstable_by(|&a, &b| entries[a as usize].id.cmp(entries[b as usize].id));
    let mut out = Vec::with_capacity(HEADER + records.len() + 4 * count + text.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&LAYOUT.to_le_bytes());
    out.extend_from_slice(&STATUS_RULE.to_le_bytes());
    out.extend_from_slice(&u32::try_from(count).ok()?.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&records);
    for o in order {
        out.extend_from_slice(&o.to_le_bytes());
    }
    out.extend_from_slice(&text);
    let crc = checksum(&out, &[]);
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    Some(out)
}

/// The cache of one session directory: the file as it was read, and what this process
/// computed since.
#[derive(Debug, Default)]
pub(crate) struct StatusCache {
    path: PathBuf,
    file: CacheFile,
    fresh: HashMap<String, Entry>,
    changed: bool,
}

impl StatusCache {
    /// Reads the cache of `dir` (empty when missing, unreadable or not checking).
    pub(crate) fn load(dir: &Path) -> Self {
        let path = dir.join(FILE_NAME);
        let file = read_file(&path).unwrap_or_default();
        StatusCache {
            path,
            file,
            fresh: HashMap::new(),
            changed: false,
        }
    }

    /// Sessions the file holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.file.count
    }

    /// Whether the directory has a cache already (then it is kept up to date).
    pub(crate) fn has_entries(&self) -> bool {
        self.file.count > 0 || !self.fresh.is_empty()
    }

    /// The newest answer for `id`: this process's, else the file's (at `hint` first).
    fn lookup(&self, id: &str, hint: usize) -> Option<EntryRef<'_>> {
        if let Some(e) = self.fresh.get(id) {
            return Some(e.as_ref());
        }
        self.file.entry(self.file.find(id, hint)?)
    }

    /// The cached replay of `id` (status, and why when corrupt), if it was made from the
    /// ledger `key` identifies.
    pub(crate) fn get(&self, id: &str, key: &Key) -> Option<(Status, Option<&str>)> {
        let e = self.lookup(id, usize::MAX)?;
        (e.created_at == key.created_at && e.size == key.size && e.last_seq == key.last_seq)
            .then_some((e.status, e.error))
    }

    /// The file's record of `id` with its line, if that line was read from the very file
    /// `file` identifies; with the record's number. `hint`: where to look first.
    pub(crate) fn get_line(&self, id: &str, file: &FileKey, hint: usize) -> Option<(u32, Status)> {
        let i = self.file.find(id, hint)?;
        (self.file.file_key(i)? == *file).then_some((u32::try_from(i).ok()?, self.file.status(i)?))
    }

    /// Whether the file holds a record of `id` (looked for at `hint` first).
    pub(crate) fn holds(&self, id: &str, hint: usize) -> bool {
        self.file.find(id, hint).is_some()
    }

    /// `created_at` and the line's `updated_at` of record `i` (only these two read: a
    /// listing orders every session by one of them).
    pub(crate) fn times(&self, i: u32) -> Option<(&str, &str)> {
        let at = HEADER + (i as usize).checked_mul(RECORD)?;
        if i as usize >= self.file.count {
            return None;
        }
        Some((
            self.file.string(at + 8)??,
            self.file.string(at + 32)?.unwrap_or(""),
        ))
    }

    /// Record `i` of the file (a number [`StatusCache::get_line`] gave).
    pub(crate) fn record(&self, i: u32) -> Option<EntryRef<'_>> {
        self.file.entry(i as usize)
    }

    /// Remembers a replay's answer.
    pub(crate) fn put(&mut self, entry: Entry) {
        if self.lookup(&entry.id, usize::MAX) != Some(entry.as_ref()) {
            self.fresh.insert(entry.id.clone(), entry);
            self.changed = true;
        }
    }

    /// Whether the file holds sessions other than `present` of them (a listing that met
    /// `present` sessions, `found` of them in the file): then they are forgotten on save.
    pub(crate) fn note_present(&mut self, found: usize) {
        self.changed |= found != self.file.count;
    }

    /// Writes the cache back if anything changed: the sessions `order` names (a listing's,
    /// in the order it met them), or with `None` every session the file or this process
    /// knows. Best effort: a failure costs replays later.
    pub(crate) fn save(&mut self, order: Option<&[&str]>) {
        if !self.changed {
            return;
        }
        let entries: Vec<EntryRef<'_>> = match order {
            Some(ids) => ids
                .iter()
                .filter_map(|id| self.lookup(id, usize::MAX))
                .collect(),
            None => (0..self.file.count)
                .filter_map(|i| self.file.entry(i))
                .filter(|e| !self.fresh.contains_key(e.id))
                .chain(self.fresh.values().map(Entry::as_ref))
                .collect(),
        };
        let written = encode(&entries)
            .ok_or_else(|| std::io::Error::other("the cache does not fit its layout"))
            .and_then(|bytes| self.write(&bytes));
        if let Err(e) = written {
            tracing::debug!(file = %self.path.display(), error = %e, "cannot write the status cache (listings replay more)");
        }
        self.changed = false;
    }

    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = self
            .path
            .with_file_name(format!("{FILE_NAME}.{}.tmp", std::process::id()));
        let mut f = lazarus_ledger::fs::create_exclusive(&tmp, false).or_else(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                std::fs::remove_file(&tmp)?;
                lazarus_ledger::fs::create_exclusive(&tmp, false)
            } else {
                Err(e)
            }
        })?;
        let written = f
            .write_all(bytes)
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// The cache file at `path`, in one read, if it checks.
fn read_file(path: &Path) -> Option<CacheFile> {
    let f = lazarus_ledger::fs::open_regular(path, false, false).ok()?;
    let len = f.metadata().ok()?.len();
    if len > FILE_BYTES_MAX {
        return None;
    }
    let len = usize::try_from(len).ok()?;
    let mut f = std::io::Read::take(f, FILE_BYTES_MAX);
    // the header, then the records and the order, then the text: three reads
    let mut bytes = vec![0u8; HEADER];
    std::io::Read::read_exact(&mut f, &mut bytes).ok()?;
    let count = u32::from_le_bytes(bytes[16..20].try_into().ok()?) as usize;
    let text_at = HEADER.checked_add(count.checked_mul(RECORD + 4)?)?;
    if text_at > len {
        return None;
    }
    bytes.resize(text_at, 0);
    std::io::Read::read_exact(&mut f, &mut bytes[HEADER..]).ok()?;
    let mut text = Vec::with_capacity(len - text_at + 1);
    std::io::Read::read_to_end(&mut f, &mut text).ok()?;
    CacheFile::check(bytes, text)
}

#[cfg(test)]
#[path = "status_cache_tests.rs"]
mod tests;
