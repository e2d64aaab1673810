//! The proxy's journal: one Lazarus session (`meta.host = "acp-proxy"`) per ACP session,
//! written by one thread so that forwarding never waits for the disk.
//!
//! Every message of a session, in both directions, is an *entry* (`{"from": "editor" |
//! "agent" | "proxy", "gen": N, "msg": …}`; `"replay": true` on what an agent's load
//! replayed); consecutive entries are written together as one `host_item` record
//! (`{"acp": [entry, …]}`), so a burst of streamed chunks costs one `fdatasync`, not one each.
//! A call's announcement is a `host_call_intent` (from then on it may have run) and its end
//! a `host_call_outcome`, in order with the entries around them.
//!
//! Nothing is acknowledged on the journal's behalf except through [`Journal::barrier`]: the
//! proxy waits for it before it forwards what acknowledges or authorizes something (a turn's
//! answer, a person's permission decision), so what the editor was told happened is on disk.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;

use lazarus_session::record::{HostCallIntent, HostCallOutcome, HostItem};
use lazarus_session::{CreateOptions, Record, SessionError, SessionId, SharedStore};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::calls::{Calls, Change, Ending};

/// The most bytes of entries one `host_item` holds (a line of the ledger is at most 16 MiB).
pub const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The largest message kept whole in the journal, in bytes; a larger one is recorded as its
/// size, method and id (it was forwarded whole).
pub const ENTRY_BYTES_MAX: usize = 8 * 1024 * 1024;

/// `meta.host` of a proxy's session.
pub const HOST: &str = "acp-proxy";

/// What the ledger of a session said when it was opened.
#[derive(Debug, Default)]
pub struct Opened {
    /// The calls, rebuilt from the entries.
    pub calls: Calls,
    /// The agent's id of the session now (another than the editor's when the agent could
    /// not load it and the proxy made a new one).
    pub agent_session_id: Option<String>,
    /// Entries recorded.
    pub entries: u64,
}

enum Op {
    Create {
        sid: String,
        meta: Value,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Open {
        sid: String,
        reply: oneshot::Sender<Result<Option<Opened>, String>>,
    },
    Entry {
        sid: String,
        entry: Value,
        len: usize,
    },
    Call {
        sid: String,
        rec: Box<Record>,
    },
    Barrier {
        reply: oneshot::Sender<Result<(), String>>,
    },
    Entries {
        sid: String,
        reply: oneshot::Sender<Vec<Value>>,
    },
    Title {
        sid: String,
        title: String,
    },
}

/// The journal's handle: cheap to use from the proxy's task.
pub struct Journal {
    tx: Option<mpsc::Sender<Op>>,
    thread: Option<JoinHandle<()>>,
}

/// The ledger id of the editor's session `sid`: `acp-SID` (a proxy in front of `lazarus acp`
/// on the same store must not take the inner session's id), or a name-based UUID when that
/// is not a valid id.
pub fn ledger_id(sid: &str) -> SessionId {
    SessionId::parse(&format!("acp-{sid}")).unwrap_or_else(|_| {
        let u = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, format!("acp:{sid}").as_bytes());
        SessionId::parse(&format!("acp-{u}")).unwrap_or_else(|_| SessionId::new_v7())
    })
}

impl Journal {
    pub fn start(store: SharedStore) -> std::io::Result<Journal> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("acp-journal".into())
            .spawn(move || Writer::new(store).run(rx))?;
        Ok(Journal {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    fn send(&self, op: Op) {
        if let Some(tx) = &self.tx {
            // the thread only ends when this handle drops
            let _ = tx.send(op);
        }
    }

    async fn ask<T>(&self, op: impl FnOnce(oneshot::Sender<T>) -> Op, gone: T) -> T {
        let (reply, rx) = oneshot::channel();
        self.send(op(reply));
        rx.await.unwrap_or(gone)
    }

    /// Makes the ledger of a new session (durable when this returns).
    pub async fn create(&self, sid: &str, meta: Value) -> Result<(), String> {
        let sid = sid.to_string();
        self.ask(
            |reply| Op::Create { sid, meta, reply },
            Err("the journal stopped".into()),
        )
        .await
    }

    /// Opens the ledger of `sid` for writing (`None`: there is none).
    pub async fn open(&self, sid: &str) -> Result<Option<Opened>, String> {
        let sid = sid.to_string();
        self.ask(
            |reply| Op::Open { sid, reply },
            Err("the journal stopped".into()),
        )
        .await
    }

    /// Records one entry; `len` is the message's size in bytes.
    pub fn entry(&self, sid: &str, entry: Value, len: usize) {
        self.send(Op::Entry {
            sid: sid.to_string(),
            entry,
            len,
        });
    }

    /// Records what a call change means: an intent, or an outcome.
    pub fn change(&self, sid: &str, calls: &Calls, change: Change) {
        let rec = match change {
            Change::Announced(i) => {
                let c = calls.get(i);
                Record::from(HostCallIntent {
                    call_id: c.ledger_id.clone(),
                    tool: c.tool.clone(),
                    arguments: c.arguments().map(|a| match a {
                        Value::String(s) => s,
                        other => other.to_string(),
                    }),
                })
            }
            Change::Ended(i) => {
                let c = calls.get(i);
                let result = match &c.ending {
                    Some(Ending::Completed(t)) => format!("completed: {t}"),
                    Some(Ending::Failed(t)) => format!("failed: {t}"),
                    Some(Ending::Closed(how)) => closed_text(*how).to_string(),
                    None => return,
                };
                Record::from(HostCallOutcome {
                    call_id: c.ledger_id.clone(),
                    result,
                })
            }
        };
        self.send(Op::Call {
            sid: sid.to_string(),
            rec: Box::new(rec),
        });
    }

    /// Waits until everything sent before is durable; the error names what could not be
    /// recorded.
    pub async fn barrier(&self) -> Result<(), String> {
        self.ask(
            |reply| Op::Barrier { reply },
            Err("the journal stopped".into()),
        )
        .await
    }

    /// Every entry of `sid` recorded so far (after what was sent before).
    pub async fn entries(&self, sid: &str) -> Vec<Value> {
        let sid = sid.to_string();
        self.ask(|reply| Op::Entries { sid, reply }, Vec::new())
            .await
    }

    /// Names the session after its first prompt (unless it has a title).
    pub fn title(&self, sid: &str, title: String) {
        self.send(Op::Title {
            sid: sid.to_string(),
            title,
        });
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The outcome text of a call the proxy closed.
pub fn closed_text(how: super::calls::Closed) -> &'static str {
    match how {
        super::calls::Closed::InDoubt => {
            "in doubt: the agent process stopped while this call may have been running; its effect is unknown (the agent and the editor were told)"
        }
        super::calls::Closed::NotRun => {
            "not run: the agent process stopped before this call was allowed to start"
        }
    }
}

struct Open {
    session: lazarus_session::Session,
    titled: bool,
}

struct Writer {
    store: SharedStore,
    sessions: HashMap<String, Open>,
    /// The first error met per session: what the next barrier reports.
    broken: HashMap<String, String>,
    /// Entries not yet written: (session, entries, bytes).
    pending: Option<(String, Vec<Value>, usize)>,
}

impl Writer {
    fn new(store: SharedStore) -> Self {
        Writer {
            store,
            sessions: HashMap::new(),
            broken: HashMap::new(),
            pending: None,
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Op>) {
        while let Ok(op) = rx.recv() {
            self.handle(op);
            // what else is queued goes in the same write
            while let Ok(op) = rx.try_recv() {
                self.handle(op);
            }
            self.flush();
        }
        self.flush();
    }

    fn handle(&mut self, op: Op) {
        match op {
            Op::Entry { sid, entry, len } => {
                let entry = if len > ENTRY_BYTES_MAX {
                    omitted(entry, len)
                } else {
                    entry
                };
                let same = matches!(&self.pending, Some((s, _, bytes)) if *s == sid && bytes + len <= BATCH_BYTES_MAX);
                if !same {
                    self.flush();
                    self.pending = Some((sid, Vec::new(), 0));
                }
                if let Some((_, entries, bytes)) = &mut self.pending {
                    entries.push(entry);
                    *bytes += len.min(ENTRY_BYTES_MAX);
                }
            }
            Op::Call { sid, rec } => {
                self.flush();
                self.append(&sid, *rec);
            }
            Op::Barrier { reply } => {
                self.flush();
                let err = self.broken.values().next().cloned();
                let _ = reply.send(err.map_or(Ok(()), Err));
            }
            Op::Create { sid, meta, reply } => {
                self.flush();
                let _ = reply.send(self.create(&sid, meta));
            }
            Op::Open { sid, reply } => {
                self.flush();
                let _ = reply.send(self.open(&sid));
            }
            Op::Entries { sid, reply } => {
                self.flush();
                let _ = reply.send(self.all_entries(&sid));
            }
            Op::Title { sid, title } => {
                self.flush();
                if let Some(o) = self.sessions.get_mut(&sid)
                    && !o.titled
                {
                    o.titled = true;
                    let id = ledger_id(&sid);
                    let has = self.store.summary(&id).ok().and_then(|s| s.title).is_some();
                    if !has && let Err(e) = self.store.rename(&id, Some(&title)) {
                        tracing::warn!("acp proxy: cannot title session {id}: {e}");
                    }
                }
            }
        }
    }

    fn flush(&mut self) {
        let Some((sid, entries, _)) = self.pending.take() else {
            return;
        };
        if entries.is_empty() {
            return;
        }
        let rec = Record::from(HostItem {
            item: json!({ "acp": entries }),
        });
        self.append(&sid, rec);
    }

    fn append(&mut self, sid: &str, rec: Record) {
        if self.broken.contains_key(sid) {
            return;
        }
        let Some(open) = self.sessions.get_mut(sid) else {
            // a message of a session the proxy never saw made or loaded (the agent's own
            // idea, or a bad id): there is no ledger to put it in
            tracing::debug!("acp proxy: no ledger for session {sid:?}: not recorded");
            return;
        };
        if let Err(e) = open.session.append(rec) {
            let why = format!(
                "session {} ({}): {e}",
                ledger_id(sid),
                open.session.location()
            );
            tracing::error!("acp proxy: cannot record: {why}");
            self.broken.insert(sid.to_string(), why);
        }
    }

    fn create(&mut self, sid: &str, meta: Value) -> Result<(), String> {
        let id = ledger_id(sid);
        match self.store.create(CreateOptions {
            id: Some(id),
            meta: Some(meta),
        }) {
            Ok(session) => {
                self.sessions.insert(
                    sid.to_string(),
                    Open {
                        session,
                        titled: false,
                    },
                );
                Ok(())
            }
            Err(SessionError::AlreadyExists { .. }) => match self.open(sid)? {
                Some(_) => Ok(()),
                None => Err(format!("session {sid:?}: made and gone at once")),
            },
            Err(e) => Err(e.to_string()),
        }
    }

    fn open(&mut self, sid: &str) -> Result<Option<Opened>, String> {
        let id = ledger_id(sid);
        if !self.sessions.contains_key(sid) {
            match self.store.open(&id) {
                Ok(session) => {
                    self.sessions.insert(
                        sid.to_string(),
                        Open {
                            session,
                            titled: true,
                        },
                    );
                }
                Err(SessionError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            }
        }
        let Some(open) = self.sessions.get(sid) else {
            return Ok(None);
        };
        let state = open.session.state();
        if state.host_program() != Some(HOST) {
            return Err(format!(
                "session {id} in {} is not an ACP proxy's session (its meta.host is {:?})",
                open.session.location(),
                state.host_program()
            ));
        }
        let meta = state.header.meta.as_ref();
        let acp = meta.and_then(|m| m.get("acp"));
        let mut opened = Opened {
            agent_session_id: acp
                .and_then(|a| a.get("agent_session_id"))
                .and_then(Value::as_str)
                .map(str::to_string),
            ..Opened::default()
        };
        for entry in entries_of(state) {
            opened.entries += 1;
            opened.calls.apply(entry);
            if entry.get("event").and_then(Value::as_str) == Some("reattached")
                && let Some(a) = entry.get("agent_session_id").and_then(Value::as_str)
            {
                opened.agent_session_id = Some(a.to_string());
            }
        }
        Ok(Some(opened))
    }

    fn all_entries(&self, sid: &str) -> Vec<Value> {
        match self.sessions.get(sid) {
            Some(o) => entries_of(o.session.state()).cloned().collect(),
            None => Vec::new(),
        }
    }
}

/// The entries of a proxy's session, in order.
pub fn entries_of(state: &lazarus_session::SessionState) -> impl Iterator<Item = &Value> {
    state
        .host
        .items
        .iter()
        .filter_map(|(_, item)| item.get("acp").and_then(Value::as_array))
        .flatten()
}

/// An entry too big to keep: its size and what it was.
fn omitted(entry: Value, len: usize) -> Value {
    let msg = entry.get("msg");
    json!({
        "from": entry.get("from"),
        "gen": entry.get("gen"),
        "omitted": {
            "bytes": len,
            "method": msg.and_then(|m| m.get("method")),
            "id": msg.and_then(|m| m.get("id")),
            "why": format!("larger than {ENTRY_BYTES_MAX} bytes: forwarded whole, not recorded"),
        },
    })
}
