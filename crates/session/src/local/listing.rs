//! Listing local sessions. Each session's line comes from its header and tail (one open),
//! its status from the one rule (`running` while a live writer holds it, else what a replay
//! of its log says: [`crate::SessionState::status`], cached in [`super::status_cache`] so
//! only sessions that changed are replayed), and what waits in its inbox.

use std::collections::HashSet;
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags};

use lazarus_ledger::{HeadAndTail, read_head_and_tail};

use super::LocalStore;
use super::page::{Listing, Live, Names, Part, Row, Src};
use super::status_cache::{Entry, FileKey, Key, Line, StatusCache};
use crate::id::SessionId;
use crate::inbox::Waiting;
use crate::list::{ListCounts, ListQuery};
use crate::state::Status;
use crate::store::{HolderView, Result, SessionError, SessionSummary, SummaryView};

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
        if let Some((status, error)) = cache.get(id, &key) {
            return (status, error.map(str::to_string), None);
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
        let meta = header
            .meta
            .as_ref()
            .and_then(|m| serde_json::to_string(m).ok());
        let workspace = header
            .meta
            .as_ref()
            .and_then(|m| m["workspace"].as_str())
            .map(str::to_string);
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
            meta,
            workspace,
        };
        // The line is kept for the next listing when the stat taken before the read shows
        // the size that was read (else the file changed in between: read it again then).
        let keep_line = holder.is_none()
            && around.file.is_some_and(|f| f.size == tail.size)
            && around.cache.get_line(&id, &line.file, usize::MAX).is_none();
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
            .and_then(|m| serde_json::from_str(m).ok());
        SessionSummary {
            id,
            title,
            status,
            created_at: key.created_at.clone(),
            updated_at: line.updated_at.clone(),
            records: key.last_seq,
            bytes: key.size,
            parent: line.parent.clone(),
            workspace: line.workspace.clone(),
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
            cache.save(None);
        }
        Ok(summary)
    }

    /// Every session of the directory, in creation order.
    pub(super) fn list_all(&self) -> Result<Vec<SessionSummary>> {
        let mut out = Vec::new();
        let q = ListQuery::default();
        self.list_rows_local(&q, &mut |v| out.extend(v.to_summary()))?;
        Ok(out)
    }

    /// The rows of `q`'s page (see [`crate::Store::list_rows`]): every session's line from
    /// its stat and the cache (or its ledger, when it changed), filtered and ordered on that
    /// compact line, and only the page's rows built.
    pub(super) fn list_rows_local(
        &self,
        q: &ListQuery,
        visit: &mut dyn FnMut(&SummaryView<'_>),
    ) -> Result<ListCounts> {
        let started = std::time::Instant::now();
        let listing = self.scan()?;
        let scanned = started.elapsed();
        let counts = listing.visit(q, visit);
        tracing::debug!(
            sessions = counts.total,
            matched = counts.matched,
            scanned = ?scanned,
            shown = ?started.elapsed(),
            "listed {}",
            self.dir.display()
        );
        // Freeing 10⁵ rows and the cache takes milliseconds nobody needs to wait for.
        if listing.rows.len() > BIG_CACHE_ENTRIES {
            let Listing {
                names,
                cache,
                rows,
                owned,
                ..
            } = listing;
            std::thread::spawn(move || drop((names, cache, rows, owned)));
        }
        Ok(counts)
    }

    /// Every session's compact line: the directory read once, each ledger stat'ed, a line
    /// taken from the cache while the stat shows the file it was read from, read (and
    /// replayed when its status is not cached) otherwise. The cache is written back when
    /// anything changed.
    fn scan(&self) -> Result<Listing<'_>> {
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
        // The cache is read while the directory is (two cores: ~15 ms of 10⁵ sessions'
        // listing); what it says is only taken against stats made after both.
        let dir = self.dir.clone();
        let loading = std::thread::Builder::new()
            .name("status-cache".into())
            .spawn(move || StatusCache::load(&dir))
            .ok();
        let mut names = Names::default();
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
                    names.push(stem);
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
        let mut cache = match loading.map(std::thread::JoinHandle::join) {
            Some(Ok(cache)) => cache,
            _ => StatusCache::load(&self.dir),
        };
        let loaded = started.elapsed();
        // A stat each (and a read for each session that changed), a few threads at once:
        // the cost is system calls.
        let n = names.len();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8)
            .min(n.div_ceil(4096).max(1));
        let chunk = n.div_ceil(threads).max(1);
        let parts: Vec<Part> = std::thread::scope(|scope| {
            let (cache, names, dir_fd) = (&cache, &names, &dir_fd);
            let (spools, titles, maybe_held) = (&spools, &titles, &maybe_held);
            let workers: Vec<_> = (0..n)
                .step_by(chunk)
                .map(|from| {
                    scope.spawn(move || {
                        let mut part = Part::default();
                        let mut buf = String::new();
                        for i in from..(from + chunk).min(n) {
                            let stem = names.get(i);
                            let live = Live {
                                spool: spools.contains(stem),
                                title_file: titles.contains(stem),
                                may_be_held: maybe_held.contains(stem),
                            };
                            buf.clear();
                            buf.push_str(stem);
                            buf.push_str(".jsonl");
                            // stat first, read after: a line kept for this stat was read no
                            // earlier than it
                            let file =
                                rustix::fs::statat(dir_fd, buf.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                                    .ok()
                                    .and_then(|st| FileKey::of(&st));
                            // the ledger unchanged since a listing read it: not opened
                            if !live.may_be_held
                                && let Some(f) = &file
                                && let Some((rec, status)) = cache.get_line(stem, f, i)
                            {
                                part.found += 1;
                                part.rows.push(Row {
                                    name: i as u32,
                                    src: Src::Cached(rec),
                                    status,
                                    live,
                                });
                                continue;
                            }
                            if self
                                .read_row(&mut part, cache, i, stem, file, live)
                                .is_err()
                            {
                                break;
                            }
                        }
                        part
                    })
                })
                .collect();
            workers.into_iter().filter_map(|w| w.join().ok()).collect()
        });
        let lined = started.elapsed();
        let mut listing = Listing {
            store: self,
            names,
            cache: StatusCache::default(),
            rows: Vec::with_capacity(n),
            owned: Vec::new(),
        };
        let mut fresh = Vec::new();
        let mut found = 0;
        for p in parts {
            if let Some(cause) = p.short {
                return Err(SessionError::Unavailable {
                    location: self.dir.display().to_string(),
                    cause: format!("out of file descriptors while listing: {cause}"),
                });
            }
            let base = listing.owned.len() as u32;
            listing.rows.extend(p.rows.into_iter().map(|mut r| {
                if let Src::Owned(k) = &mut r.src {
                    *k += base;
                }
                r
            }));
            listing.owned.extend(p.owned);
            fresh.extend(p.fresh);
            found += p.found;
        }
        // A directory of a few small sessions replays in no time: it keeps no cache file.
        let replayed: u64 = fresh.iter().map(|e| e.key.size).sum();
        if listing.rows.len() >= STATUS_CACHE_MIN_SESSIONS
            || replayed >= STATUS_CACHE_MIN_REPLAYED_BYTES
            || cache.has_entries()
        {
            for e in fresh {
                cache.put(e);
            }
            cache.note_present(found);
            let order: Vec<&str> = listing
                .rows
                .iter()
                .map(|r| listing.names.get(r.name as usize))
                .collect();
            cache.save(Some(&order));
        }
        listing.cache = cache;
        tracing::debug!(
            sessions = listing.rows.len(),
            read_dir = ?read_dir,
            cache_loaded = ?loaded,
            lines = ?lined,
            cache_saved = ?started.elapsed(),
            "scanned {}",
            self.dir.display()
        );
        Ok(listing)
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

impl LocalStore {
    /// The row of session `stem` (number `i`) from its ledger, into `part`; `Err` when out of
    /// descriptors.
    fn read_row(
        &self,
        part: &mut Part,
        cache: &StatusCache,
        i: usize,
        stem: &str,
        file: Option<FileKey>,
        live: Live,
    ) -> Result<(), ()> {
        let Ok(id) = SessionId::parse(stem) else {
            return Ok(());
        };
        if cache.holds(stem, i) {
            part.found += 1;
        }
        let around = Around {
            cache,
            spool: live.spool,
            title_file: live.title_file,
            may_be_held: live.may_be_held,
            file,
        };
        let summary = match self.summary_with(&self.path_of(&id), &around) {
            Ok((s, entry)) => {
                part.fresh.extend(entry);
                s
            }
            Err(e) if out_of_descriptors(&e) => {
                part.short = Some(e.to_string());
                return Err(());
            }
            // Listed, with why: a damaged session is not hidden.
            Err(e) => SessionSummary::corrupt(id, e.to_string()),
        };
        part.rows.push(Row {
            name: i as u32,
            src: Src::Owned(part.owned.len() as u32),
            status: summary.status,
            live,
        });
        part.owned.push(summary);
        Ok(())
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
