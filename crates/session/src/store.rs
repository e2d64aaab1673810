//! The `Store` trait: what every backend (local files, PostgreSQL) offers, and the live
//! [`Session`] handle through which all records are written.

use std::sync::Arc;

use std::borrow::Cow;

use serde::Serialize;

use crate::id::SessionId;
use crate::inbox::{Delivery, Drained, InboxMessage};
use crate::record::{Control, Input, Record};
use crate::state::{SessionState, Status};

pub use crate::error::{Result, SessionError};
pub use crate::list::time_sort_key;

/// Where a durable record landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stored {
    pub seq: u64,
    pub ts: String,
}

/// The backend side of a live session: appends one encoded record durably, and reads and
/// consumes the session's inbox (see [`crate::inbox`]).
pub trait RecordSink: Send + Sync {
    /// Appends `kind`/`data_json` as the next record; returns once durable.
    fn append(&self, kind: &str, data_json: &[u8]) -> Result<Stored>;
    /// Appends like [`RecordSink::append`] but returns before the record is durable: await
    /// the [`lazarus_ledger::Deferred`] before acknowledging. `Ok(None)`: this backend or
    /// this moment cannot defer (use `append`).
    fn append_deferred(
        &self,
        _kind: &str,
        _data_json: &[u8],
    ) -> Result<Option<lazarus_ledger::Deferred>> {
        Ok(None)
    }
    /// Returns once every record written so far is durable (a deferred append in flight is
    /// waited for; its failure is the error): before an answer that relies on a record
    /// already written, such as a duplicate's.
    fn settle(&self) -> Result<()> {
        Ok(())
    }
    /// Whether every record written so far is durable now (what [`RecordSink::settle`] would
    /// return at once, with `Ok`).
    fn is_settled(&self) -> bool {
        true
    }
    /// Human-readable location (path or URL) for messages.
    fn location(&self) -> String;
    /// Up to `limit` messages waiting in the session's inbox, oldest first.
    fn inbox_waiting(&self, limit: usize) -> Result<Vec<InboxMessage>>;
    /// Consumes waiting message `message_id`, which the log already holds (gone already is
    /// fine).
    fn inbox_consume(&self, message_id: &str) -> Result<()>;
    /// Called when a drain found the inbox empty (the local store removes its empty spool
    /// directory here).
    fn inbox_tidy(&self) -> Result<()> {
        Ok(())
    }
}

/// What opening a session for writing found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OpenReport {
    /// Crash debris cut from the end.
    pub truncated_bytes: u64,
    /// Where the cut bytes were saved (a file name in the session directory), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated_saved_to: Option<String>,
    /// Records replayed into the state.
    pub records_replayed: u64,
    /// The writer before this one died holding the session (its lock or lease was taken
    /// over): who it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_holder: Option<lazarus_ledger::Holder>,
}

/// Answer to appending an input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputAck {
    /// Seq of the record holding this input (the original one for a duplicate).
    pub seq: u64,
    pub duplicate: bool,
    /// Timestamp of the record written now (`None` for a duplicate: nothing was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<String>,
}

/// A session open for writing: the only writer, with its replayed state kept current.
///
/// **The inbox rule.** A writable session is only ever handed out after its inbox was
/// drained ([`Session::from_parts`] does it, and every store builds its sessions through it),
/// and [`Session::append_input`] / [`Session::append_control`] drain it again before they
/// record anything of their own: a message accepted into the inbox is recorded before
/// anything accepted after it, whoever becomes the writer.
pub struct Session {
    sink: Box<dyn RecordSink>,
    state: SessionState,
    report: OpenReport,
    /// What it drained by itself (at open, before an input of its own), until someone takes
    /// it to show it.
    drained_at_open: Vec<Drained>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.state.id())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A writable session from a backend sink and the state replayed from it, after draining
    /// its inbox: what waits there was accepted before anything this writer will record.
    /// The only way to build a [`Session`].
    pub fn from_parts(
        sink: Box<dyn RecordSink>,
        state: SessionState,
        report: OpenReport,
    ) -> Result<Self> {
        let mut s = Session {
            sink,
            state,
            report,
            drained_at_open: Vec::new(),
        };
        s.drained_at_open = s.drain_inbox()?;
        Ok(s)
    }

    /// What this session drained by itself — at open, and before an input of its own — that
    /// nobody took yet (for whoever shows records as they are written).
    pub fn take_drained(&mut self) -> Vec<Drained> {
        std::mem::take(&mut self.drained_at_open)
    }

    pub fn id(&self) -> &str {
        self.state.id()
    }

    pub fn state(&self) -> &SessionState {
        &self.state
    }

    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    pub fn location(&self) -> String {
        self.sink.location()
    }

    /// Checks `rec` against the state, writes it durably, then applies it.
    /// A record that does not fit is refused before anything is written.
    pub fn append(&mut self, rec: Record) -> Result<Stored> {
        self.state.check(&rec).map_err(SessionError::Refused)?;
        let json = rec.data_json()?;
        let stored = self.sink.append(rec.kind(), &json)?;
        self.state.apply(stored.seq, rec);
        Ok(stored)
    }

    /// Records an external input once: a redelivered `input_id` is a no-op answering the
    /// original record's seq. This is the one holder of the exactly-once rule for inputs (G6):
    /// every path that records an input (CLI, runner, gateway) goes through here or
    /// [`Session::append_control`]. Messages waiting in the inbox are recorded first (they
    /// were accepted earlier); [`Session::drain_inbox`] says which.
    pub fn append_input(&mut self, input_id: &str, source: &str, text: &str) -> Result<InputAck> {
        self.drain_before_own()?;
        self.append_once(
            input_id,
            Record::Input(Input {
                input_id: input_id.to_string(),
                source: source.to_string(),
                text: text.to_string(),
            }),
        )
    }

    /// [`Session::append_input`] for an async server: the input is written and applied, and
    /// the returned [`lazarus_ledger::Deferred`] resolves once it is durable (acknowledge only
    /// then; until then every other append of this session waits for it). `Ok(None)` when it
    /// cannot go this way — a backend that cannot defer, messages waiting in the inbox, a
    /// duplicate, a deferred append still in flight — and nothing was done: use
    /// [`Session::append_input`].
    pub fn try_append_input_deferred(
        &mut self,
        input_id: &str,
        source: &str,
        text: &str,
    ) -> Result<Option<(InputAck, lazarus_ledger::Deferred)>> {
        if self.state.input_ids.contains_key(input_id) || !self.sink.inbox_waiting(1)?.is_empty() {
            return Ok(None);
        }
        let rec = Record::Input(Input {
            input_id: input_id.to_string(),
            source: source.to_string(),
            text: text.to_string(),
        });
        self.state.check(&rec).map_err(SessionError::Refused)?;
        let json = rec.data_json()?;
        let Some(deferred) = self.sink.append_deferred(rec.kind(), &json)? else {
            return Ok(None);
        };
        let a = deferred.appended().clone();
        self.state.apply(a.seq, rec);
        Ok(Some((
            InputAck {
                seq: a.seq,
                duplicate: false,
                ts: Some(a.ts),
            },
            deferred,
        )))
    }

    /// A resend of an input this session holds, answered without waiting: the original's
    /// ack when `input_id` is recorded and every record written is durable already; `None`
    /// when it is not a duplicate or something is still on its way to the disk (then
    /// [`Session::append_input`] answers, once it is).
    pub fn duplicate_if_settled(&self, input_id: &str) -> Option<InputAck> {
        let &seq = self.state.input_ids.get(input_id)?;
        self.sink.is_settled().then_some(InputAck {
            seq,
            duplicate: true,
            ts: None,
        })
    }

    /// Records a control input (e.g. `resume`) once per `input_id`.
    pub fn append_control(
        &mut self,
        input_id: &str,
        action: &str,
        reason: Option<&str>,
    ) -> Result<InputAck> {
        self.drain_before_own()?;
        self.append_once(
            input_id,
            Record::Control(Control {
                input_id: input_id.to_string(),
                action: action.to_string(),
                reason: reason.map(str::to_string),
            }),
        )
    }

    /// Drains the session's inbox: every waiting message, oldest first, becomes the input (or
    /// control) record it carries through the exactly-once rule of [`Session::append_input`]
    /// (a message whose id the log holds already is only consumed), then leaves the inbox.
    /// The append is the commit point: a crash after it leaves a message the next drain only
    /// consumes; a crash before it leaves the message waiting. Returns what was taken, in
    /// order; messages delivered while it runs are taken too.
    pub fn drain_inbox(&mut self) -> Result<Vec<Drained>> {
        let mut out = Vec::new();
        loop {
            let waiting = self.sink.inbox_waiting(crate::inbox::DRAIN_BATCH)?;
            if waiting.is_empty() {
                self.sink.inbox_tidy()?;
                return Ok(out);
            }
            for msg in waiting {
                let ack = self
                    .append_once(msg.message_id(), msg.record().clone())
                    .map_err(|e| match e {
                        SessionError::Refused(why) => SessionError::InboxMessageRefused {
                            id: self.state.id().to_string(),
                            location: self.sink.location(),
                            message_id: msg.message_id().to_string(),
                            why: Box::new(why),
                        },
                        other => other,
                    })?;
                self.sink.inbox_consume(msg.message_id())?;
                out.push(Drained {
                    message_id: msg.message_id().to_string(),
                    kind: msg.kind(),
                    data: msg.record().data_value(),
                    seq: ack.seq,
                    duplicate: ack.duplicate,
                    ts: ack.ts,
                });
            }
        }
    }

    /// Records an inbox message (an input or a control input) as this writer's own: after
    /// what waits in the inbox, once per message id.
    pub fn append_message(&mut self, msg: &InboxMessage) -> Result<InputAck> {
        self.drain_before_own()?;
        self.append_once(msg.message_id(), msg.record().clone())
    }

    /// The inbox rule before an input of this writer's own: what waits was accepted first.
    /// What it records is kept with the drain at open, for whoever shows records.
    fn drain_before_own(&mut self) -> Result<()> {
        let drained = self.drain_inbox()?;
        self.drained_at_open.extend(drained);
        Ok(())
    }

    fn append_once(&mut self, input_id: &str, rec: Record) -> Result<InputAck> {
        if let Some(&seq) = self.state.input_ids.get(input_id) {
            // The original may still be on its way to the disk (a deferred append), or may
            // have failed to get there: a duplicate is answered only once it is durable.
            self.sink.settle()?;
            return Ok(InputAck {
                seq,
                duplicate: true,
                ts: None,
            });
        }
        let stored = self.append(rec)?;
        Ok(InputAck {
            seq: stored.seq,
            duplicate: false,
            ts: Some(stored.ts),
        })
    }
}

/// A stored record as data (for listings, APIs and `--json` output).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredRecord {
    pub seq: u64,
    pub ts: String,
    pub kind: String,
    pub data: serde_json::Value,
}

/// One line of `sessions list` (the same fields in every `--json` output and the HTTP API;
/// see `docs/json.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    pub id: SessionId,
    /// The first input, shortened to one line (`None` before any input).
    pub title: Option<String>,
    pub status: Status,
    pub created_at: String,
    /// Time of the last record.
    pub updated_at: String,
    /// Records after the header.
    pub records: u64,
    /// Bytes stored.
    pub bytes: u64,
    /// The session this one was forked from.
    pub parent: Option<String>,
    /// The workspace recorded when the session was created (the runner's `meta.workspace`).
    pub workspace: Option<String>,
    /// Kind of the last record.
    pub last_kind: String,
    /// Why the session is `corrupt` (what, where, what to do); `None` otherwise.
    pub error: Option<String>,
    /// Application metadata from the header (e.g. the workspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// Messages waiting in the session's inbox: accepted (acknowledged to whoever sent them),
    /// not yet recorded. They are recorded, in the order they were accepted, before anything
    /// else the next writer records.
    pub waiting: u64,
    /// When the oldest waiting message was delivered (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<String>,
    /// Who holds the session's writer now, if anyone (the status is `running` while a live
    /// one does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<HolderView>,
}

/// A session's writer as listings show it: who, since when, and whether it is known alive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HolderView {
    pub pid: u32,
    pub host: String,
    pub since: String,
    /// `alive` (this host, its process runs), `dead` (this host, its process is gone: the
    /// next writer takes over at once) or `unknown` (another host: its lease tells).
    pub alive: lazarus_ledger::holder::Liveness,
}

impl HolderView {
    pub fn of(h: &lazarus_ledger::Holder) -> Self {
        HolderView {
            pid: h.pid,
            host: h.host.clone(),
            since: h.since.clone(),
            alive: h.liveness(),
        }
    }
}

impl std::fmt::Display for HolderView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use lazarus_ledger::holder::Liveness;
        write!(
            f,
            "pid {} on host {} since {} ({})",
            self.pid,
            self.host,
            self.since,
            match self.alive {
                Liveness::Alive => "alive",
                Liveness::Dead => "its process is gone",
                Liveness::Unknown => "on another host",
            }
        )
    }
}

/// Longest title, in characters.
pub const TITLE_CHARS_MAX: usize = 80;

/// A listing title from an input's text: its first non-empty line, control characters
/// replaced, at most [`TITLE_CHARS_MAX`] characters (`…` when cut).
pub fn title_of(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(TITLE_CHARS_MAX)
        .collect();
    if line.chars().count() > TITLE_CHARS_MAX {
        out.pop();
        out.push('…');
    }
    out
}

impl SessionSummary {
    /// The line of a session that cannot be read: named by its file (or key), with why.
    pub fn corrupt(id: SessionId, error: String) -> Self {
        SessionSummary {
            id,
            title: None,
            status: Status::Corrupt,
            created_at: String::new(),
            updated_at: String::new(),
            records: 0,
            bytes: 0,
            parent: None,
            workspace: None,
            last_kind: String::new(),
            error: Some(error),
            meta: None,
            waiting: 0,
            waiting_since: None,
            holder: None,
        }
    }

    /// Whether the session owes work, counting what waits in its inbox: the one answer that
    /// `rm`, `prune` and a gateway act on. A running session is its writer's business.
    pub fn owes_work(&self) -> bool {
        self.status.owes_work() || self.waiting > 0
    }
}

/// Options for a new session.
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Chosen id, or `None` for a fresh UUID v7.
    pub id: Option<SessionId>,
    /// Application metadata kept in the header (e.g. workspace, system prompt).
    pub meta: Option<serde_json::Value>,
}

/// A place where sessions live. One conformance suite (`conformance`) holds every
/// implementation to the same contract.
pub trait Store: Send + Sync {
    /// Creates a new session and returns it open for writing. Never overwrites.
    fn create(&self, opts: CreateOptions) -> Result<Session>;
    /// Opens a session for writing: takes its single-writer lock, cuts crash debris,
    /// replays and validates every record.
    fn open(&self, id: &SessionId) -> Result<Session>;
    /// Replays a session without writing (no lock).
    fn load(&self, id: &SessionId) -> Result<SessionState>;
    /// Records with seq > `after`, at most `limit`.
    fn records(&self, id: &SessionId, after: u64, limit: usize) -> Result<Vec<StoredRecord>>;
    /// Summary of one session, its status by the one rule (see [`SessionSummary::status`]).
    fn summary(&self, id: &SessionId) -> Result<SessionSummary>;
    /// Every session, with its status by the one rule.
    fn list(&self) -> Result<Vec<SessionSummary>>;
    /// The sessions `q` selects, in its order, its page only, each handed to `visit` as it
    /// is built (a store builds no row it does not hand out); returns how many there were.
    /// The rows are [`Store::list`]'s, filtered and ordered.
    fn list_rows(
        &self,
        q: &crate::list::ListQuery,
        visit: &mut dyn FnMut(&SummaryView<'_>),
    ) -> Result<crate::list::ListCounts> {
        let list = self.list()?;
        Ok(list_rows_of(&list, q, visit))
    }
    /// The id of every session (cheaper than [`Store::list`]: no status, no inbox).
    fn ids(&self) -> Result<Vec<SessionId>> {
        Ok(self.list()?.into_iter().map(|s| s.id).collect())
    }
    /// Creates a child of `id` holding everything up to the end of turn `at_turn`.
    /// The parent is not touched.
    fn fork(
        &self,
        id: &SessionId,
        at_turn: u64,
        new_id: Option<&SessionId>,
    ) -> Result<SessionSummary>;
    /// `id` and its ancestors, nearest first.
    fn lineage(&self, id: &SessionId) -> Result<Vec<SessionId>>;
    /// Writes the session's exact JSON Lines (header included, crash debris excluded) to
    /// `out`; returns the bytes written. The same bytes a local session file holds.
    fn export_to(&self, id: &SessionId, out: &mut dyn std::io::Write) -> Result<u64>;
    /// Creates a session from exported JSON Lines, after checking every line (framing, seqs,
    /// meaning). Never overwrites an existing session. Lossless: exporting it again gives
    /// the same bytes.
    fn import(&self, jsonl: &[u8]) -> Result<SessionSummary>;
    /// Human-readable location of the store.
    fn location(&self) -> String;
    /// Delivers `msg` to the inbox of session `id`, durably, without its writer (see
    /// [`crate::inbox`]): any process may call this at any time, and the session's writer
    /// records the message when it drains the inbox ([`Session::drain_inbox`]). A message id
    /// that is waiting already is a [`Delivery::duplicate`]; nothing is added. `NotFound` for
    /// a session that does not exist.
    fn deliver(&self, id: &SessionId, msg: &InboxMessage) -> Result<Delivery>;
    /// Up to `limit` messages waiting in the inbox of `id`, oldest first (no lock taken).
    fn inbox(&self, id: &SessionId, limit: usize) -> Result<Vec<InboxMessage>>;
    /// What waits in the inbox of `id`: accepted, not yet recorded (no lock taken).
    fn waiting(&self, id: &SessionId) -> Result<crate::inbox::Waiting>;
    /// Tells whoever serves this store (a gateway) that session `id` owes work it was not told
    /// of — an input recorded by another process while nobody held the session — so it runs
    /// it. The local store leaves an empty spool directory (found by [`Store::sessions_with_mail`],
    /// removed by the next drain); a shared store's gateways find such sessions by their
    /// takeover pass, so it does nothing.
    fn ring(&self, _id: &SessionId) -> Result<()> {
        Ok(())
    }
    /// Calls `wake` soon after a delivery to any session's inbox (with its id), and with
    /// `None` when deliveries may have been missed (look at every inbox), for as long as the
    /// store lives. Returns false when the store cannot signal mail (then only
    /// [`Store::sessions_with_mail`], polled, finds it). PostgreSQL: LISTEN/NOTIFY.
    fn watch_mail(&self, _wake: MailWake) -> bool {
        false
    }
    /// Sessions whose inbox may hold a message (cheap: one directory read, one index scan;
    /// a session listed may turn out to have none).
    fn sessions_with_mail(&self) -> Result<Vec<SessionId>>;
    /// Sets the title listings show for `id` (`None`: back to the first input's). A title is
    /// a label kept beside the session, not part of its log: it needs no writer (a running
    /// session can be renamed), an export does not carry it, a fork starts without it.
    /// `title` is shortened as [`title_of`] does; an empty one is refused.
    fn rename(&self, id: &SessionId, title: Option<&str>) -> Result<()>;
}

/// Checks and shortens a title given by a person: [`title_of`], refused when empty.
pub fn checked_title(title: &str) -> Result<String> {
    let t = title_of(title);
    if t.is_empty() {
        return Err(SessionError::Backend(
            "a title needs at least one visible character".into(),
        ));
    }
    Ok(t)
}

/// What [`Store::watch_mail`] calls: `Some(id)` after a delivery to session `id`, `None`
/// for "deliveries may have been missed".
pub type MailWake = Arc<dyn Fn(Option<&str>) + Send + Sync>;

/// A shared store handle.
pub type SharedStore = Arc<dyn Store>;

/// `meta` as a row holds it: the JSON text kept by a cache, or a parsed value.
#[derive(Debug, Clone, Copy)]
pub enum MetaView<'a> {
    Raw(&'a serde_json::value::RawValue),
    Value(&'a serde_json::Value),
}

impl Serialize for MetaView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MetaView::Raw(r) => r.serialize(s),
            MetaView::Value(v) => v.serialize(s),
        }
    }
}

/// One row of a listing, borrowed from wherever the store keeps it: the same fields, in the
/// same order and JSON, as [`SessionSummary`] (`docs/json.md`).
#[derive(Debug, Clone, Serialize)]
pub struct SummaryView<'a> {
    pub id: &'a str,
    pub title: Option<Cow<'a, str>>,
    pub status: Status,
    pub created_at: &'a str,
    pub updated_at: &'a str,
    pub records: u64,
    pub bytes: u64,
    pub parent: Option<&'a str>,
    pub workspace: Option<&'a str>,
    pub last_kind: &'a str,
    pub error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<MetaView<'a>>,
    pub waiting: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<Cow<'a, HolderView>>,
}

impl SessionSummary {
    /// This summary as a listing row.
    pub fn view(&self) -> SummaryView<'_> {
        SummaryView {
            id: self.id.as_str(),
            title: self.title.as_deref().map(Cow::Borrowed),
            status: self.status,
            created_at: &self.created_at,
            updated_at: &self.updated_at,
            records: self.records,
            bytes: self.bytes,
            parent: self.parent.as_deref(),
            workspace: self.workspace.as_deref(),
            last_kind: &self.last_kind,
            error: self.error.as_deref(),
            meta: self.meta.as_ref().map(MetaView::Value),
            waiting: self.waiting,
            waiting_since: self.waiting_since.as_deref().map(Cow::Borrowed),
            holder: self.holder.as_ref().map(Cow::Borrowed),
        }
    }
}

impl SummaryView<'_> {
    /// The owned summary of this row (`None` only for an id that is not a session id, which
    /// no store hands out).
    pub fn to_summary(&self) -> Option<SessionSummary> {
        Some(SessionSummary {
            id: crate::SessionId::parse(self.id).ok()?,
            title: self.title.as_deref().map(str::to_string),
            status: self.status,
            created_at: self.created_at.to_string(),
            updated_at: self.updated_at.to_string(),
            records: self.records,
            bytes: self.bytes,
            parent: self.parent.map(str::to_string),
            workspace: self.workspace.map(str::to_string),
            last_kind: self.last_kind.to_string(),
            error: self.error.map(str::to_string),
            meta: match self.meta {
                Some(MetaView::Raw(r)) => serde_json::from_str(r.get()).ok(),
                Some(MetaView::Value(v)) => Some(v.clone()),
                None => None,
            },
            waiting: self.waiting,
            waiting_since: self.waiting_since.as_deref().map(str::to_string),
            holder: self.holder.as_deref().cloned(),
        })
    }
}

/// [`Store::list_rows`] over owned summaries: what a store without a compact listing
/// of its own answers.
pub fn list_rows_of(
    list: &[SessionSummary],
    q: &crate::list::ListQuery,
    visit: &mut dyn FnMut(&SummaryView<'_>),
) -> crate::list::ListCounts {
    let mut keyed: Vec<((u128, u128), u32)> = list
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            q.matches(s.status, s.id.as_str(), s.workspace.as_deref(), || {
                s.title.as_deref().map(Cow::Borrowed)
            })
        })
        .map(|(i, s)| {
            (
                crate::list::order_key(q.order, &s.created_at, &s.updated_at),
                i as u32,
            )
        })
        .collect();
    let range = q.window(keyed.len());
    crate::list::sort_window(&mut keyed, &range, |i| list[i as usize].id.as_str());
    for &(_, i) in &keyed[range] {
        visit(&list[i as usize].view());
    }
    crate::list::ListCounts {
        total: list.len(),
        matched: keyed.len(),
    }
}
