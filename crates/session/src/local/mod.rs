//! The embedded default store: one ledger file per session in a directory. Listings live in
//! `listing`, the cache of replayed statuses they keep in `status_cache`.

mod check;
mod default_dir;
mod listing;
mod page;
mod status_cache;

pub use default_dir::{default_session_dir, state_dir};

use std::io::Read;
use std::path::{Path, PathBuf};

use lazarus_ledger::{
    Durability, Header, LedgerError, Options, Parent, Problem, Reader, Writer, ledger_path,
};

use crate::id::SessionId;
use crate::inbox::{Delivery, InboxMessage, Waiting};
use crate::record::{FORMAT, ForkPoint, Record};
use crate::state::{ReplayError, SessionState};
use crate::store::{
    CreateOptions, OpenReport, RecordSink, Result, Session, SessionError, SessionSummary, Store,
    Stored, StoredRecord,
};

/// Sessions as `<dir>/<id>.jsonl` files.
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
    opts: Options,
}

impl LocalStore {
    /// A store in `dir` (created with mode 0700 if missing), per-record durability.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::with_durability(dir, Durability::PerRecord)
    }

    pub fn with_durability(dir: &Path, durability: Durability) -> Result<Self> {
        create_dir_private(dir)?;
        Ok(LocalStore {
            dir: dir.to_path_buf(),
            opts: Options {
                durability,
                format: Some(FORMAT.to_string()),
                ..Options::default()
            },
        })
    }

    /// A store over `opts.fs` as it is, without touching the real disk: for tests that put
    /// the power-cut simulator under the store (`opts.lock` false there: one process).
    #[doc(hidden)]
    pub fn with_options(dir: &Path, opts: Options) -> Self {
        LocalStore {
            dir: dir.to_path_buf(),
            opts: Options {
                format: Some(FORMAT.to_string()),
                ..opts
            },
        }
    }

    /// This store with per-record appends made durable by one `syncfs` shared by all the
    /// sessions being written at once ([`lazarus_ledger::shared_sync`]): for a server with
    /// many sessions open. The sync thread is started here; refused where `syncfs` cannot be
    /// trusted (the error says why).
    pub fn with_shared_sync(mut self) -> Result<Self> {
        let shared =
            lazarus_ledger::SharedSync::start(self.opts.fs.clone(), &self.dir).map_err(|e| {
                SessionError::Backend(format!(
                    "{}: cannot share one syncfs between sessions here ({e}); use per-file \
                     fdatasync instead",
                    self.dir.display()
                ))
            })?;
        self.opts.shared_sync = Some(shared);
        Ok(self)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Ledger options used for every session here.
    pub fn ledger_options(&self) -> &Options {
        &self.opts
    }

    /// Path of a session's file.
    pub fn path_of(&self, id: &SessionId) -> PathBuf {
        ledger_path(&self.dir, id)
    }

    fn not_found(&self, id: &str) -> SessionError {
        SessionError::NotFound {
            id: id.to_string(),
            location: self.dir.display().to_string(),
        }
    }

    /// Removes a session: its ledger, the bytes ever cut from it (`<id>.jsonl.cut-*`), then
    /// its lock file. The writer lock is held throughout, so a session with a live writer is
    /// refused ([`SessionError::Locked`]) and nobody opens it halfway through. Sessions
    /// forked from it hold their own copy of its prefix and are not touched.
    pub fn remove(&self, id: &SessionId) -> Result<()> {
        let path = self.path_of(id);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.not_found(id)),
            Err(e) => {
                return Err(SessionError::Ledger(LedgerError::Io {
                    op: "stat",
                    path,
                    source: e,
                }));
            }
            Ok(_) => {}
        }
        let lock_path = lazarus_ledger::lock_path(&self.dir, id);
        let lock = lazarus_ledger::lock::WriterLock::acquire(&lock_path, &path)
            .map_err(|e| self.map_ledger(id, e))?;
        let io = |op: &'static str, p: &Path, source| {
            SessionError::Ledger(LedgerError::Io {
                op,
                path: p.to_path_buf(),
                source,
            })
        };
        std::fs::remove_file(&path).map_err(|e| io("remove", &path, e))?;
        let cut_prefix = format!("{id}.jsonl{}", lazarus_ledger::layout::CUT_MARKER);
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                if e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&cut_prefix))
                {
                    let p = e.path();
                    std::fs::remove_file(&p).map_err(|e| io("remove", &p, e))?;
                }
            }
        }
        match std::fs::remove_file(self.title_path(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("remove", &self.title_path(id), e));
            }
            _ => {}
        }
        crate::spool::remove_all(&self.dir, id)
            .map_err(|e| io("remove", &crate::spool::inbox_path(&self.dir, id), e))?;
        std::fs::remove_file(&lock_path).map_err(|e| io("remove", &lock_path, e))?;
        drop(lock);
        lazarus_ledger::fs::sync_dir(&self.dir).map_err(|e| io("fsync", &self.dir, e))?;
        Ok(())
    }

    /// Path of the title a person gave session `id` (`sessions rename`).
    fn title_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.title"))
    }

    /// The title a person gave session `id`, if any (a file that cannot be read is ignored:
    /// the listing falls back to the first input).
    fn read_title(&self, id: &str) -> Option<String> {
        let f = lazarus_ledger::fs::open_regular(&self.title_path(id), false, false).ok()?;
        let mut text = String::new();
        f.take(4096).read_to_string(&mut text).ok()?;
        let t = crate::store::title_of(&text);
        (!t.is_empty()).then_some(t)
    }

    fn inbox_error(&self, id: &str, source: std::io::Error) -> SessionError {
        SessionError::Ledger(LedgerError::Io {
            op: "read the inbox",
            path: crate::spool::inbox_path(&self.dir, id),
            source,
        })
    }

    /// The status replay of `id` (the one rule of a session's status needs the whole log).
    pub(crate) fn replay_for_status(&self, id: &SessionId) -> Result<SessionState> {
        self.replay(id)
    }

    /// The session-level error for a ledger error about session `id`.
    fn map_ledger(&self, id: &str, e: LedgerError) -> SessionError {
        match e {
            LedgerError::NotFound { .. } => self.not_found(id),
            LedgerError::AlreadyExists { .. } => SessionError::AlreadyExists {
                id: id.to_string(),
                location: self.dir.display().to_string(),
            },
            LedgerError::Locked { holder, .. } => SessionError::Locked {
                id: id.to_string(),
                location: self.dir.display().to_string(),
                holder: holder.map(Box::new),
                expires_in_ms: None,
            },
            e => SessionError::Ledger(e),
        }
    }

    /// Replays `id` fully with a validating reader, also returning raw access for fork.
    fn replay(&self, id: &SessionId) -> Result<SessionState> {
        let path = self.path_of(id);
        let mut reader = Reader::open(&path, &self.opts).map_err(|e| self.map_ledger(id, e))?;
        let mut state = SessionState::new(reader.header().clone());
        let mut replay_error = None;
        let read = reader.for_each_record::<Record, _>(|_, seq, rec| {
            if let Err(e) = state.check(&rec) {
                let problem = Problem::Invalid(e.to_string());
                replay_error = Some((seq, e));
                return Err(problem);
            }
            state.apply(seq, rec);
            Ok(())
        });
        match (read, replay_error) {
            (Ok(()), _) => Ok(state),
            (Err(_), Some((seq, source))) => Err(SessionError::Replay {
                location: path.display().to_string(),
                seq,
                source,
            }),
            (Err(e), None) => Err(e.into()),
        }
    }
}

fn create_dir_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            SessionError::Backend(format!(
                "cannot create session directory {}: {e}",
                dir.display()
            ))
        })
}

struct LocalSink {
    writer: Writer,
    fs: lazarus_ledger::fs::SharedFs,
    dir: PathBuf,
    id: SessionId,
    line_max: usize,
}

impl LocalSink {
    fn spool_error(&self, op: &'static str, source: std::io::Error) -> SessionError {
        SessionError::Ledger(LedgerError::Io {
            op,
            path: crate::spool::inbox_path(&self.dir, &self.id),
            source,
        })
    }
}

impl RecordSink for LocalSink {
    fn append(&self, kind: &str, data_json: &[u8]) -> Result<Stored> {
        let a = self.writer.append_json(kind, data_json)?;
        Ok(Stored {
            seq: a.seq,
            ts: a.ts,
        })
    }
    fn append_deferred(
        &self,
        kind: &str,
        data_json: &[u8],
    ) -> Result<Option<lazarus_ledger::Deferred>> {
        Ok(self.writer.append_json_deferred(kind, data_json)?)
    }
    fn settle(&self) -> Result<()> {
        Ok(self.writer.wait_durable()?)
    }
    fn is_settled(&self) -> bool {
        self.writer.is_settled()
    }
    fn location(&self) -> String {
        self.writer.path().display().to_string()
    }
    fn inbox_waiting(&self, limit: usize) -> Result<Vec<InboxMessage>> {
        crate::spool::waiting(&*self.fs, &self.dir, &self.id, limit, self.line_max)
            .map_err(|e| self.spool_error("read the inbox", e))
    }
    fn inbox_consume(&self, message_id: &str) -> Result<()> {
        crate::spool::consume(&*self.fs, &self.dir, &self.id, message_id)
            .map_err(|e| self.spool_error("consume an inbox message", e))
    }
    fn inbox_tidy(&self) -> Result<()> {
        crate::spool::tidy(&*self.fs, &self.dir, &self.id)
            .map_err(|e| self.spool_error("tidy the inbox", e))
    }
}

impl LocalStore {
    fn sink(&self, writer: Writer, id: &SessionId) -> Box<dyn RecordSink> {
        Box::new(LocalSink {
            writer,
            fs: self.opts.fs.clone(),
            dir: self.dir.clone(),
            id: id.clone(),
            line_max: self.opts.line_bytes_max,
        })
    }
}

impl Store for LocalStore {
    fn create(&self, opts: CreateOptions) -> Result<Session> {
        let id = opts.id.unwrap_or_else(SessionId::new_v7);
        let mut header = Header::new(FORMAT, &id);
        header.meta = opts.meta;
        let writer = Writer::create(&self.dir, header.clone(), b"", self.opts.clone())
            .map_err(|e| self.map_ledger(&id, e))?;
        Session::from_parts(
            self.sink(writer, &id),
            SessionState::new(header),
            OpenReport::default(),
        )
    }

    fn open(&self, id: &SessionId) -> Result<Session> {
        let path = ledger_path(&self.dir, id);
        // The header is immutable once written; read it first so replay knows the lineage.
        let header = Reader::open(&path, &self.opts)
            .map_err(|e| self.map_ledger(id, e))?
            .header()
            .clone();
        let mut state = SessionState::new(header);
        let mut replay_error: Option<(u64, ReplayError)> = None;
        let result =
            Writer::open_replaying::<Record, _>(&self.dir, id, self.opts.clone(), |_, seq, rec| {
                if let Err(e) = state.check(&rec) {
                    replay_error = Some((seq, e.clone()));
                    return Err(Problem::Invalid(e.to_string()));
                }
                state.apply(seq, rec);
                Ok(())
            });
        let (writer, recovery) = match result {
            Ok(ok) => ok,
            Err(e) => {
                if let Some((seq, source)) = replay_error {
                    return Err(SessionError::Replay {
                        location: path.display().to_string(),
                        seq,
                        source,
                    });
                }
                return Err(self.map_ledger(id, e));
            }
        };
        let report = OpenReport {
            truncated_bytes: recovery.cut.as_ref().map_or(0, |c| c.bytes),
            truncated_saved_to: recovery
                .saved_to
                .as_ref()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned()),
            records_replayed: recovery.records,
            previous_holder: recovery.previous_holder,
        };
        Session::from_parts(self.sink(writer, id), state, report)
    }

    fn load(&self, id: &SessionId) -> Result<SessionState> {
        self.replay(id)
    }

    fn records(&self, id: &SessionId, after: u64, limit: usize) -> Result<Vec<StoredRecord>> {
        let path = self.path_of(id);
        let mut reader =
            Reader::open_after(&path, &self.opts, after).map_err(|e| self.map_ledger(id, e))?;
        let mut out = Vec::new();
        while out.len() < limit {
            let Some((_, env)) = reader.next_record::<serde_json::Value>()? else {
                break;
            };
            out.push(StoredRecord {
                seq: env.seq,
                ts: env.ts.to_string(),
                kind: env.kind.to_string(),
                data: env.data,
            });
        }
        Ok(out)
    }

    fn summary(&self, id: &SessionId) -> Result<SessionSummary> {
        self.summary_of_one(id).map_err(|e| match e {
            SessionError::Ledger(e) => self.map_ledger(id, e),
            e => e,
        })
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        self.list_all()
    }

    fn list_rows(
        &self,
        q: &crate::list::ListQuery,
        visit: &mut dyn FnMut(&crate::store::SummaryView<'_>),
    ) -> Result<crate::list::ListCounts> {
        self.list_rows_local(q, visit)
    }

    fn ids(&self) -> Result<Vec<SessionId>> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| self.list_error(&e))?;
        Ok(entries
            .flatten()
            .filter_map(|e| listing::stem_id(&e.path()))
            .collect())
    }

    fn fork(
        &self,
        id: &SessionId,
        at_turn: u64,
        new_id: Option<&SessionId>,
    ) -> Result<SessionSummary> {
        let state = self.replay(id)?;
        let boundary =
            state
                .fork_boundary(at_turn)
                .map_err(|reason| SessionError::BadForkPoint {
                    id: id.to_string(),
                    turn: at_turn,
                    reason,
                })?;
        let path = self.path_of(id);
        let mut reader = Reader::open(&path, &self.opts)?;
        let mut prefix = Vec::new();
        while let Some((_, seq, line)) = reader.next_line()? {
            if seq > boundary {
                break;
            }
            prefix.extend_from_slice(line);
            prefix.push(b'\n');
        }
        let child_id = new_id.cloned().unwrap_or_else(SessionId::new_v7);
        let mut header = Header::new(FORMAT, &child_id);
        header.parent = Some(Parent {
            id: id.to_string(),
            seq: boundary,
        });
        header.meta = state.header.meta.clone();
        let writer = Writer::create(&self.dir, header, &prefix, self.opts.clone())
            .map_err(|e| self.map_ledger(&child_id, e))?;
        let fork = Record::Fork(ForkPoint {
            parent: id.to_string(),
            parent_seq: boundary,
            at_turn,
        });
        writer.append_json(fork.kind(), &fork.data_json()?)?;
        drop(writer);
        self.summary(&child_id)
    }

    fn lineage(&self, id: &SessionId) -> Result<Vec<SessionId>> {
        let mut out = vec![id.clone()];
        let mut current = id.clone();
        for _ in 0..10_000 {
            let path = self.path_of(&current);
            let reader =
                Reader::open(&path, &self.opts).map_err(|e| self.map_ledger(&current, e))?;
            match &reader.header().parent {
                Some(p) => {
                    // read from a header: checked as it enters
                    let parent = SessionId::parse(&p.id)?;
                    if out.contains(&parent) {
                        return Err(SessionError::Backend(format!(
                            "fork lineage of {id:?} loops at {parent:?}"
                        )));
                    }
                    out.push(parent.clone());
                    current = parent;
                }
                None => return Ok(out),
            }
        }
        Err(SessionError::Backend(format!(
            "fork lineage of {id:?} is deeper than 10,000"
        )))
    }

    fn export_to(&self, id: &SessionId, out: &mut dyn std::io::Write) -> Result<u64> {
        let path = self.path_of(id);
        let mut reader = Reader::open(&path, &self.opts).map_err(|e| self.map_ledger(id, e))?;
        let io = |e: std::io::Error| SessionError::Backend(format!("export of {id}: {e}"));
        // The header line, then every good record line (a torn tail is not part of the log).
        let mut header_line = Vec::new();
        {
            use std::io::BufRead;
            let f = std::fs::File::open(&path).map_err(io)?;
            std::io::BufReader::new(f)
                .take(self.opts.line_bytes_max as u64 + 1)
                .read_until(b'\n', &mut header_line)
                .map_err(io)?;
        }
        out.write_all(&header_line).map_err(io)?;
        let mut n = header_line.len() as u64;
        while let Some((_, _, line)) = reader.next_line()? {
            out.write_all(line).map_err(io)?;
            out.write_all(b"\n").map_err(io)?;
            n += line.len() as u64 + 1;
        }
        out.flush().map_err(io)?;
        Ok(n)
    }

    fn import(&self, jsonl: &[u8]) -> Result<SessionSummary> {
        // Check meaning before anything is written: replay the lines into a state.
        let header = {
            let (mut sc, header) = lazarus_ledger::scan::Scanner::from_start(
                Path::new("<import>"),
                jsonl,
                self.opts.line_bytes_max,
                self.opts.format.as_deref(),
            )?;
            let mut state = SessionState::new(header.clone());
            while let Some((_, env)) = sc.next_record::<Record>()? {
                let seq = env.seq;
                state
                    .check(&env.data)
                    .map_err(|source| SessionError::Replay {
                        location: "import".into(),
                        seq,
                        source,
                    })?;
                state.apply(seq, env.data);
            }
            if let Some(cut) = sc.cut() {
                return Err(SessionError::Backend(format!(
                    "import: line {} (offset {}): {}; nothing was written",
                    cut.line, cut.offset, cut.reason
                )));
            }
            header
        };
        // The imported file names its id: it enters here.
        let id = SessionId::parse(&header.id)?;
        Writer::import(&self.dir, jsonl, self.opts.clone()).map_err(|e| self.map_ledger(&id, e))?;
        self.summary(&id)
    }

    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn deliver(&self, id: &SessionId, msg: &InboxMessage) -> Result<Delivery> {
        let path = self.path_of(id);
        let io = |op: &'static str, path: PathBuf, source| {
            SessionError::Ledger(LedgerError::Io { op, path, source })
        };
        match self.opts.fs.file_len(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.not_found(id)),
            Err(e) => return Err(io("stat", path, e)),
        }
        let delivered = crate::spool::deliver(&*self.opts.fs, &self.dir, id, msg).map_err(|e| {
            io(
                "deliver a message to",
                crate::spool::inbox_path(&self.dir, id),
                e,
            )
        })?;
        let duplicate = match delivered {
            crate::spool::Delivered::Placed => false,
            crate::spool::Delivered::Duplicate => true,
            crate::spool::Delivered::Full { messages, bytes } => {
                return Err(SessionError::InboxFull {
                    id: id.to_string(),
                    location: self.dir.display().to_string(),
                    messages,
                    bytes,
                    max_messages: crate::inbox::INBOX_MESSAGES_MAX,
                    max_bytes: crate::inbox::INBOX_BYTES_MAX,
                });
            }
        };
        Ok(Delivery {
            message_id: msg.message_id().to_string(),
            duplicate,
        })
    }

    fn rename(&self, id: &SessionId, title: Option<&str>) -> Result<()> {
        let path = self.path_of(id);
        let io = |op: &'static str, path: PathBuf, source| {
            SessionError::Ledger(LedgerError::Io { op, path, source })
        };
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.not_found(id)),
            Err(e) => return Err(io("stat", path, e)),
        }
        let target = self.title_path(id);
        match title {
            Some(t) => {
                let t = crate::store::checked_title(t)?;
                let opts = lazarus_ledger::durable_replace::ReplaceOptions {
                    refuse_hard_links: true,
                    refuse_symlinks: true,
                    ..Default::default()
                };
                lazarus_ledger::durable_replace::replace_file(&target, t.as_bytes(), &opts)
                    .map_err(|e| io("write the title", target, e))
            }
            None => match std::fs::remove_file(&target) {
                Ok(()) => lazarus_ledger::fs::sync_dir(&self.dir)
                    .map_err(|e| io("fsync", self.dir.clone(), e)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io("remove the title", target, e)),
            },
        }
    }

    fn ring(&self, id: &SessionId) -> Result<()> {
        crate::spool::ring(&*self.opts.fs, &self.dir, id).map_err(|e| {
            SessionError::Ledger(LedgerError::Io {
                op: "make the inbox of",
                path: crate::spool::inbox_path(&self.dir, id),
                source: e,
            })
        })
    }

    fn sessions_with_mail(&self) -> Result<Vec<SessionId>> {
        crate::spool::sessions_with_spool(&self.dir).map_err(|e| {
            SessionError::Ledger(LedgerError::Io {
                op: "read the session directory",
                path: self.dir.clone(),
                source: e,
            })
        })
    }

    fn inbox(&self, id: &SessionId, limit: usize) -> Result<Vec<InboxMessage>> {
        crate::spool::waiting(
            &*self.opts.fs,
            &self.dir,
            id,
            limit,
            self.opts.line_bytes_max,
        )
        .map_err(|e| self.inbox_error(id, e))
    }

    fn waiting(&self, id: &SessionId) -> Result<Waiting> {
        if self.opts.fs.file_len(&self.path_of(id)).is_err() {
            return Err(self.not_found(id));
        }
        self.waiting_in(id).map_err(|e| self.inbox_error(id, e))
    }
}
