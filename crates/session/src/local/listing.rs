//! Listing local sessions. Each session's line comes from its header and tail (one open),
//! its status from the one rule (`running` while a live writer holds it, else what a replay
//! of its log says: [`crate::SessionState::status`], cached in [`super::status_cache`] so
//! only sessions that changed are replayed), and what waits in its inbox.

use std::collections::HashSet;
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags};

use lazarus_ledger::{HeadAndTail, read_head_and_tail};

use super::LocalStore;
use super::status_cache::{Entry, FileKey, Key, Line, StatusCache};
use crate::id::SessionId;
use crate::inbox::Waiting;
use crate::state::Status;
use crate::store::{HolderView, Result, SessionError, SessionSummary};

/// Sessions up to this size are replayed directly for a single summary; bigger ones consult
/// the status cache first (reading it costs about as much as replaying this much).
const DIRECT_REPLAY_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// A directory keeps a status cache from this many sessions on (fewer replay in no time)…
pub(crate) const STATUS_CACHE_MIN_SESSIONS: usize = 64;

/// …or once a listing had to replay this many bytes.
pub(crate) const STATUS_CACHE_MIN_REPLAYED_BYTES: u64 = 4 * 1024 * 1024;

/// A cache with more entries than this is freed on a thread of its own after a listing.
const BIG_CACHE_ENTRIES: usize = 10_000;

/// The session id a ledger file is named for (already checked when the listing took it).
pub(super) fn stem_id(path: &Path) -> Option<SessionId> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    SessionId::parse(stem).ok()
}

/// What a listing line needs besides the ledger itself.
struct Around<'a> {
    cache: &'a StatusCache,
    /// Whether the session may have a spool (from the directory read, or one `stat`).
    spool: bool,
    /// Whether a title file may exist (from the directory read).
    title_file: bool,
    /// Whether a writer may hold the session: its lock file exists and, where the kernel's
    /// list of held locks could be read, is on it. Only then is the lock itself asked.
    may_be_held: bool,
    /// The ledger as a stat showed it before it was read (`None`: not looked at).
    file: Option<FileKey>,
}

impl LocalStore {
    /// The status a replay of the log gives (`Corrupt` with why when it refuses it), from
    /// the cache when it holds this very ledger; a new answer is returned for the cache.
    fn ledger_status(
        &self,
        id: &SessionId,
        key: Key,
        cache: &StatusCache,
    ) -> (Status, Option<String>, Option<Entry>) {
        if let Some(e) = cache.get(id, &key) {
            return (e.status, e.error.clone(), None);
        }
        let (status, error) = match self.replay_for_status(id) {
            Ok(st) => (st.status(), None),
            Err(e) => (Status::Corrupt, Some(e.to_string())),
        };
        let entry = Entry {
            id: id.to_string(),
            key,
            status,
            error: error.clone(),
            line: None,
        };
        (status, error, Some(entry))
    }

    /// A session's line in a listing, read from its ledger, and a new cache entry when its
    /// log was replayed or its line is new.
    fn summary_with(
        &self,
        path: &Path,
        around: &Around,
    ) -> Result<(SessionSummary, Option<Entry>)> {
        let HeadAndTail {
            header,
            first,
            tail,
        } = read_head_and_tail(path, &self.opts)?;
        // Read from storage: checked like any id that enters (the header names the file it
        // is in, so this fails only for a hand-edited file).
        let id = SessionId::parse(&header.id)?;
        let lock = lazarus_ledger::lock_path(&self.dir, &id);
        let holder = if around.may_be_held {
            lazarus_ledger::lock::held_by(&lock)
        } else {
            None
        };
        let key = Key {
            created_at: header.created_at.clone(),
            size: tail.size,
            last_seq: tail.last_seq,
        };
        let (status, error, fresh) = match &holder {
            // a flock is held by a live process: its writer's status is its own business
            Some(_) => (Status::of_held(&tail.last_kind), None, None),
            None => self.ledger_status(&id, key.clone(), around.cache),
        };
        let line = Line {
            file: around.file.unwrap_or(FileKey {
                ino: 0,
                size: tail.size,
                ctime: (0, 0),
                mtime: (0, 0),
            }),
            first_input: first
                .filter(|(kind, _)| kind == "input")
                .and_then(|(_, data)| data["text"].as_str().map(crate::store::title_of)),
            updated_at: tail.last_ts,
            last_kind: tail.last_kind,
            parent: header.parent.as_ref().map(|p| p.id.clone()),
            meta: header
                .meta
                .as_ref()
                .and_then(|m| serde_json::value::to_raw_value(m).ok()),
        };
        // The line is kept for the next listing when the stat taken before the read shows
        // the size that was read (else the file changed in between: read it again then).
        let keep_line = holder.is_none()
            && around.file.is_some_and(|f| f.size == tail.size)
            && around.cache.get_line(&id, &line.file).is_none();
        let entry = match fresh {
            Some(mut e) => {
                e.line = keep_line.then(|| line.clone());
                Some(e)
            }
            None if keep_line => Some(Entry {
                id: id.to_string(),
                key: key.clone(),
                status,
                error: error.clone(),
                line: Some(line.clone()),
            }),
            None => None,
        };
        let holder = holder.flatten();
        let summary = self.summary_from_line(id, (status, error), &key, &line, holder, around);
        Ok((summary, entry))
    }

    /// A listing line from what was read of the ledger (now or by an earlier listing) and
    /// what is looked at live: the title file, the inbox, the writer.
    fn summary_from_line(
        &self,
        id: SessionId,
        (status, error): (Status, Option<String>),
        key: &Key,
        line: &Line,
        holder: Option<lazarus_ledger::Holder>,
        around: &Around,
    ) -> SessionSummary {
        let waiting = if around.spool {
            self.waiting_in(&id).unwrap_or_else(|e| {
                tracing::warn!(session = %id, error = %e, "cannot read the inbox");
                Waiting::default()
            })
        } else {
            Waiting::default()
        };
        let title = around
            .title_file
            .then(|| self.read_title(&id))
            .flatten()
            .or_else(|| line.first_input.clone());
        let meta: Option<serde_json::Value> = line
            .meta
            .as_ref()
            .and_then(|m| serde_json::from_str(m.get()).ok());
        let workspace = meta
            .as_ref()
            .and_then(|m| m["workspace"].as_str())
            .map(str::to_string);
        SessionSummary {
            id,
            title,
            status,
            created_at: key.created_at.clone(),
            updated_at: line.updated_at.clone(),
            records: key.last_seq,
            bytes: key.size,
            parent: line.parent.clone(),
            workspace,
            last_kind: line.last_kind.clone(),
            error,
            meta,
            waiting: waiting.messages,
            waiting_since: waiting.oldest,
            holder: holder.as_ref().map(HolderView::of),
        }
    }

    /// One session's line: replayed directly when small, through the cache otherwise.
    pub(super) fn summary_of_one(&self, id: &SessionId) -> Result<SessionSummary> {
        let path = self.path_of(id);
        let size = std::fs::symlink_metadata(&path)
            .map(|m| m.len())
            .unwrap_or(0);
        let mut cache = if size > DIRECT_REPLAY_BYTES_MAX {
            StatusCache::load(&self.dir)
        } else {
            StatusCache::default()
        };
        let around = Around {
            cache: &cache,
            spool: crate::spool::may_have_waiting(&self.dir, id),
            title_file: true,
            may_be_held: true,
            file: None,
        };
        let (summary, entry) = self.summary_with(&path, &around)?;
        if let Some(e) = entry
            && size > DIRECT_REPLAY_BYTES_MAX
        {
            cache.put(e);
            cache.save();
        }
        Ok(summary)
    }

    /// Every session of the directory, in creation order.
    pub(super) fn list_all(&self) -> Result<Vec<SessionSummary>> {
        let started = std::time::Instant::now();
        // One descriptor for the directory: entries read without an allocation each, and
        // every ledger stat'ed by its name in it (no path walk).
        let dir_fd = rustix::fs::open(
            &self.dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.list_error(&e.into()))?;
        let entries =
            rustix::fs::Dir::read_from(&dir_fd).map_err(|e| self.list_error(&e.into()))?;
        // Which locks some process holds, from the kernel, read once (not every lock file
        // opened): `None` where it cannot tell, and then every lock file is asked.
        let flocked = lazarus_ledger::lock::flocked_inodes();
        let mut names: Vec<String> = Vec::new();
        let mut spools: HashSet<String> = HashSet::new();
        let mut titles: HashSet<String> = HashSet::new();
        // sessions whose lock file some process may hold
        let mut maybe_held: HashSet<String> = HashSet::new();
        for e in entries.flatten() {
            let Ok(name) = e.file_name().to_str() else {
                continue;
            };
            if let Some(stem) = name.strip_suffix(".jsonl") {
                if SessionId::parse(stem).is_ok() {
                    names.push(name.to_string());
                }
            } else if let Some(stem) = name.strip_suffix(".lock") {
                if flocked.as_ref().is_none_or(|held| held.contains(&e.ino())) {
                    maybe_held.insert(stem.to_string());
                }
            } else if let Some(stem) = name.strip_suffix(crate::spool::INBOX_SUFFIX) {
                spools.insert(stem.to_string());
            } else if let Some(stem) = name.strip_suffix(".title") {
                titles.insert(stem.to_string());
            }
        }
        let read_dir = started.elapsed();
        let mut cache = StatusCache::load(&self.dir);
        let loaded = started.elapsed();
        // Headers and tails, a few threads at once: the cost is system calls (and a replay
        // for each session that changed since the last listing).
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8)
            .min(names.len().div_ceil(256).max(1));
        let chunk = names.len().div_ceil(threads).max(1);
        let (mut out, fresh, short): (Vec<SessionSummary>, Vec<Entry>, Option<String>) =
            std::thread::scope(|scope| {
                let cache = &cache;
                let spools = &spools;
                let titles = &titles;
                let maybe_held = &maybe_held;
                let dir_fd = &dir_fd;
                let workers: Vec<_> = names
                    .chunks(chunk)
                    .map(|part| {
                        scope.spawn(move || {
                            let mut lines = Vec::with_capacity(part.len());
                            let mut fresh = Vec::new();
                            let mut short = None;
                            for name in part {
                                let path = self.dir.join(name);
                                let Some(id) = stem_id(&path) else { continue };
                                // stat first, read after: a line kept for this stat was read
                                // no earlier than it
                                let file = rustix::fs::statat(
                                    dir_fd,
                                    name.as_str(),
                                    AtFlags::SYMLINK_NOFOLLOW,
                                )
                                .ok()
                                .and_then(|st| FileKey::of(&st));
                                let around = Around {
                                    cache,
                                    spool: spools.contains(id.as_str()),
                                    title_file: titles.contains(id.as_str()),
                                    may_be_held: maybe_held.contains(id.as_str()),
                                    file,
                                };
                                // the ledger unchanged since a listing read it: not opened
                                if !around.may_be_held
                                    && let Some(f) = &file
                                    && let Some((e, line)) = cache.get_line(id.as_str(), f)
                                {
                                    lines.push(self.summary_from_line(
                                        id,
                                        (e.status, e.error.clone()),
                                        &e.key,
                                        line,
                                        None,
                                        &around,
                                    ));
                                    continue;
                                }
                                match self.summary_with(&path, &around) {
                                    Ok((s, entry)) => {
                                        lines.push(s);
                                        fresh.extend(entry);
                                    }
                                    // Out of descriptors is this process's state, not the
                                    // session's: the listing fails (retry), never calls it corrupt.
                                    Err(e) if out_of_descriptors(&e) => {
                                        short = Some(e.to_string());
                                        break;
                                    }
                                    // Listed, with why: a damaged session is not hidden.
                                    Err(e) => {
                                        lines.push(SessionSummary::corrupt(id, e.to_string()))
                                    }
                                }
                            }
                            (lines, fresh, short)
                        })
                    })
                    .collect();
                workers.into_iter().filter_map(|w| w.join().ok()).fold(
                    (Vec::with_capacity(names.len()), Vec::new(), None),
                    |(mut l, mut f, s), (l2, f2, s2)| {
                        l.extend(l2);
                        f.extend(f2);
                        (l, f, s.or(s2))
                    },
                )
            });
        let lined = started.elapsed();
        if let Some(cause) = short {
            return Err(SessionError::Unavailable {
                location: self.dir.display().to_string(),
                cause: format!("out of file descriptors while listing: {cause}"),
            });
        }
        // A directory of a few small sessions replays in no time: it keeps no cache file.
        let replayed: u64 = fresh.iter().map(|e| e.key.size).sum();
        if out.len() >= STATUS_CACHE_MIN_SESSIONS
            || replayed >= STATUS_CACHE_MIN_REPLAYED_BYTES
            || cache.has_entries()
        {
            for e in fresh {
                cache.put(e);
            }
            let present: HashSet<&str> = out.iter().map(|s| s.id.as_str()).collect();
            cache.retain(&present);
            cache.save();
        }
        // Freeing 10⁵ entries takes tens of milliseconds nobody needs to wait for.
        if cache.len() > BIG_CACHE_ENTRIES {
            std::thread::spawn(move || drop(cache));
        }
        let saved = started.elapsed();
        out.sort_by_cached_key(|s| (crate::store::time_sort_key(&s.created_at), s.id.clone()));
        tracing::debug!(
            sessions = out.len(),
            read_dir = ?read_dir,
            cache_loaded = ?loaded,
            lines = ?lined,
            cache_saved = ?saved,
            sorted = ?started.elapsed(),
            "listed {}",
            self.dir.display()
        );
        Ok(out)
    }

    /// Why the directory cannot be listed: out of descriptors is [`SessionError::Unavailable`]
    /// (retry in a moment), anything else names the directory.
    pub(super) fn list_error(&self, e: &std::io::Error) -> SessionError {
        if io_out_of_descriptors(e) {
            SessionError::Unavailable {
                location: self.dir.display().to_string(),
                cause: format!("out of file descriptors while listing: {e}"),
            }
        } else {
            SessionError::Backend(format!("cannot list {}: {e}", self.dir.display()))
        }
    }

    /// What waits in the inbox of `id`.
    pub(super) fn waiting_in(&self, id: &str) -> std::io::Result<Waiting> {
        crate::spool::stats(&*self.opts.fs, &self.dir, id, self.opts.line_bytes_max)
    }
}

/// `EMFILE` (this process's limit) or `ENFILE` (the system's).
fn io_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(24 | 23))
}

/// Whether `e` is a read that failed for want of a file descriptor.
fn out_of_descriptors(e: &SessionError) -> bool {
    match e {
        SessionError::Ledger(lazarus_ledger::LedgerError::Io { source, .. }) => {
            io_out_of_descriptors(source)
        }
        SessionError::Unavailable { .. } => true,
        _ => false,
    }
}
