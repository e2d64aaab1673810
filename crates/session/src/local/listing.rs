//! Listing local sessions. Each session's line comes from its header and tail (one open),
//! its status from the one rule (`running` while a live writer holds it, else what a replay
//! of its log says: [`crate::SessionState::status`], cached in [`super::status_cache`] so
//! only sessions that changed are replayed), and what waits in its inbox.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use lazarus_ledger::{HeadAndTail, read_head_and_tail};

use super::LocalStore;
use super::status_cache::{Entry, Key, StatusCache};
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
        };
        (status, error, Some(entry))
    }

    /// A session's line in a listing, and a new cache entry when its log was replayed.
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
        let holder = lazarus_ledger::lock::held_by(&lock);
        let (status, error, entry) = match &holder {
            // a flock is held by a live process: its writer's status is its own business
            Some(_) => (Status::Running, None, None),
            None => self.ledger_status(
                &id,
                Key {
                    created_at: header.created_at.clone(),
                    size: tail.size,
                    last_seq: tail.last_seq,
                },
                around.cache,
            ),
        };
        let waiting = if around.spool {
            self.waiting_in(&id).unwrap_or_else(|e| {
                tracing::warn!(session = %id, error = %e, "cannot read the inbox");
                Waiting::default()
            })
        } else {
            Waiting::default()
        };
        let title = match self.read_title(&id) {
            Some(t) => Some(t),
            None => first
                .filter(|(kind, _)| kind == "input")
                .and_then(|(_, data)| data["text"].as_str().map(crate::store::title_of)),
        };
        let workspace = header
            .meta
            .as_ref()
            .and_then(|m| m["workspace"].as_str())
            .map(str::to_string);
        let summary = SessionSummary {
            id,
            title,
            status,
            created_at: header.created_at.clone(),
            updated_at: tail.last_ts,
            records: tail.last_seq,
            bytes: tail.size,
            parent: header.parent.as_ref().map(|p| p.id.clone()),
            workspace,
            last_kind: tail.last_kind,
            error,
            meta: header.meta.clone(),
            waiting: waiting.messages,
            waiting_since: waiting.oldest,
            holder: holder.flatten().as_ref().map(HolderView::of),
        };
        Ok((summary, entry))
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
        let entries = std::fs::read_dir(&self.dir).map_err(|e| self.list_error(&e))?;
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut spools: HashSet<String> = HashSet::new();
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(".jsonl") {
                if SessionId::parse(stem).is_ok() {
                    paths.push(e.path());
                }
            } else if let Some(stem) = name.strip_suffix(crate::spool::INBOX_SUFFIX) {
                spools.insert(stem.to_string());
            }
        }
        let mut cache = StatusCache::load(&self.dir);
        // Headers and tails, a few threads at once: the cost is system calls (and a replay
        // for each session that changed since the last listing).
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8)
            .min(paths.len().div_ceil(256).max(1));
        let chunk = paths.len().div_ceil(threads).max(1);
        let (mut out, fresh, short): (Vec<SessionSummary>, Vec<Entry>, Option<String>) =
            std::thread::scope(|scope| {
                let cache = &cache;
                let spools = &spools;
                let workers: Vec<_> = paths
                    .chunks(chunk)
                    .map(|part| {
                        scope.spawn(move || {
                            let mut lines = Vec::with_capacity(part.len());
                            let mut fresh = Vec::new();
                            let mut short = None;
                            for path in part {
                                let Some(id) = stem_id(path) else { continue };
                                let around = Around {
                                    cache,
                                    spool: spools.contains(id.as_str()),
                                };
                                match self.summary_with(path, &around) {
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
                    (Vec::new(), Vec::new(), None),
                    |(mut l, mut f, s), (l2, f2, s2)| {
                        l.extend(l2);
                        f.extend(f2);
                        (l, f, s.or(s2))
                    },
                )
            });
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
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
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
