//! `lazarus._native`: a Lazarus session held open by a Python program, for the package's
//! framework adapters (`lazarus.agents`, `lazarus.langgraph`). Every write is a record of the
//! ledger, durable when the call returns (G1); the session's one writer is this object while
//! it is open (G5): a second process gets `LockedError` naming the holder.
//!
//! The Rust side keeps the records and the state replay builds from them (`SessionState::host`);
//! the Python side speaks the frameworks' protocols over it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lazarus_session::record::{
    HostCallIntent, HostCallOutcome, HostCheckpoint, HostClear, HostItem, HostPop, HostWrites,
    Record,
};
use lazarus_session::state::SessionState;
use lazarus_session::{CreateOptions, LocalStore, Session, SessionError, SessionId, Store};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

create_exception!(
    _native,
    LazarusError,
    PyException,
    "An error of the Lazarus ledger."
);
create_exception!(
    _native,
    LockedError,
    LazarusError,
    "Another writer holds the session (its holder is named)."
);
create_exception!(
    _native,
    CorruptionError,
    LazarusError,
    "The session's ledger is damaged (file, line, offset are named); never read as empty."
);
create_exception!(_native, NotFoundError, LazarusError, "No such session.");

/// The Python exception for a session error, with the error's own words. Only damage is a
/// `CorruptionError`: a failed read or write (a full disk, a permission) or a record a newer
/// program wrote is not.
fn py_err(e: SessionError) -> PyErr {
    use lazarus_ledger::{LedgerError, Problem};
    let text = e.to_string();
    match e {
        SessionError::Locked { .. } => LockedError::new_err(text),
        SessionError::NotFound { .. } => NotFoundError::new_err(text),
        SessionError::Ledger(LedgerError::Corrupt(c))
            if !matches!(c.problem, Problem::Newer(_)) =>
        {
            CorruptionError::new_err(text)
        }
        SessionError::Ledger(LedgerError::NoHeader { .. }) | SessionError::Replay { .. } => {
            CorruptionError::new_err(text)
        }
        _ => LazarusError::new_err(text),
    }
}

/// Where sessions live: a directory of ledgers, or a PostgreSQL database (`postgres://…`).
/// One per program: a PostgreSQL store's connections are pooled here.
#[pyclass(module = "lazarus._native", frozen)]
struct NativeStore {
    store: Arc<dyn Store>,
}

fn open_store(directory: Option<PathBuf>, store: Option<String>) -> PyResult<Arc<dyn Store>> {
    Ok(match (directory, store) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "give directory or store, not both (store is a postgres:// URL)",
            ));
        }
        (_, Some(url)) => Arc::new(lazarus_store_postgres::PgStore::connect(&url).map_err(py_err)?),
        (Some(dir), None) => Arc::new(LocalStore::open(&dir).map_err(py_err)?),
        // where `lazarus` looks when told nothing, so `lazarus sessions list` shows it
        (None, None) => match env_nonempty("LAZARUS_STORE") {
            Some(url) => open_store(None, Some(url.to_string_lossy().into_owned()))?,
            None => open_store(
                Some(
                    env_nonempty("LAZARUS_SESSION_DIR")
                        .map_or_else(lazarus_session::local::default_session_dir, PathBuf::from),
                ),
                None,
            )?,
        },
    })
}

fn env_nonempty(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

fn parse_id(session_id: &str) -> PyResult<SessionId> {
    SessionId::parse(session_id).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Refuses a session another kind of program wrote (`meta.host`): its history is not
/// this host's.
fn check_host(
    store: &Arc<dyn Store>,
    id: &SessionId,
    meta: Option<&serde_json::Value>,
    host: &str,
) -> PyResult<()> {
    let written_by = meta.and_then(|m| m.get("host")).and_then(|h| h.as_str());
    if written_by == Some(host) {
        return Ok(());
    }
    let by = written_by.map_or_else(|| "lazarus itself".to_string(), |h| format!("{h:?}"));
    Err(LazarusError::new_err(format!(
        "session {id} in {} was written by {by}, not by {host:?}: use another session id",
        store.location()
    )))
}

/// Opens `id` for writing (created, with `meta.host` = `host`, when missing).
fn open_held(store: &Arc<dyn Store>, id: &SessionId, host: &str) -> PyResult<NativeSession> {
    // Whose it is, before taking it: an open for writing records what waits in the inbox and
    // cuts crash debris, which is not ours to do to another program's session.
    let mut titled = false;
    match store.summary(id) {
        Ok(s) => {
            check_host(store, id, s.meta.as_ref(), host)?;
            titled = s.title.is_some();
        }
        Err(SessionError::NotFound { .. }) => {}
        Err(e) => return Err(py_err(e)),
    }
    let session = match store.open(id) {
        Ok(s) => s,
        Err(SessionError::NotFound { .. }) => store
            .create(CreateOptions {
                id: Some(id.clone()),
                meta: Some(serde_json::json!({ "host": host })),
            })
            .or_else(|e| match e {
                // created meanwhile by another process: open it (or be told who holds it)
                SessionError::AlreadyExists { .. } => store.open(id),
                other => Err(other),
            })
            .map_err(py_err)?,
        Err(e) => return Err(py_err(e)),
    };
    // created meanwhile by another program: its header says whose it is
    if let Err(e) = check_host(store, id, session.state().header.meta.as_ref(), host) {
        lazarus_session::handoff::close(&**store, session).map_err(py_err)?;
        return Err(e);
    }
    Ok(NativeSession {
        id: id.to_string(),
        store: store.clone(),
        inner: Mutex::new(Inner::Held(Box::new(session))),
        titled: AtomicBool::new(titled),
    })
}

#[pymethods]
impl NativeStore {
    #[new]
    #[pyo3(signature = (directory=None, store=None))]
    fn new(py: Python<'_>, directory: Option<PathBuf>, store: Option<String>) -> PyResult<Self> {
        py.detach(|| {
            Ok(NativeStore {
                store: open_store(directory, store)?,
            })
        })
    }

    /// Where the sessions are (a directory, or the database without its password).
    #[getter]
    fn location(&self) -> String {
        self.store.location()
    }

    /// Opens `session_id` for writing, created when missing; see `NativeSession`.
    fn open(&self, py: Python<'_>, session_id: &str, host: &str) -> PyResult<NativeSession> {
        let id = parse_id(session_id)?;
        py.detach(|| open_held(&self.store, &id, host))
    }

    /// The session as it is now, read-only (no writer taken, so another process may hold
    /// it); `None` when there is no such session.
    fn load(&self, py: Python<'_>, session_id: &str) -> PyResult<Option<NativeSession>> {
        let id = parse_id(session_id)?;
        py.detach(|| match self.store.load(&id) {
            Ok(state) => Ok(Some(NativeSession {
                id: id.to_string(),
                store: self.store.clone(),
                inner: Mutex::new(Inner::Snapshot(Box::new(state))),
                titled: AtomicBool::new(true),
            })),
            Err(SessionError::NotFound { .. }) => Ok(None),
            Err(e) => Err(py_err(e)),
        })
    }

    /// The ids of the sessions `host` wrote (`meta.host`).
    fn session_ids(&self, py: Python<'_>, host: &str) -> PyResult<Vec<String>> {
        py.detach(|| {
            let all = self.store.list().map_err(py_err)?;
            Ok(all
                .into_iter()
                .filter(|s| {
                    s.meta
                        .as_ref()
                        .and_then(|m| m.get("host"))
                        .and_then(|h| h.as_str())
                        == Some(host)
                })
                .map(|s| s.id.to_string())
                .collect())
        })
    }
}

enum Inner {
    /// The writer, held until `close`.
    Held(Box<Session>),
    /// A read-only copy of the state (`NativeStore.load`).
    Snapshot(Box<SessionState>),
    Closed,
}

/// One session: held (its writer taken until `close`), or a read-only snapshot.
#[pyclass(module = "lazarus._native")]
struct NativeSession {
    id: String,
    store: Arc<dyn Store>,
    inner: Mutex<Inner>,
    /// It has a title in listings (known from the open; set once by `title_if_untitled`).
    titled: AtomicBool,
}

type Blob = (String, String);

fn blob(b: &lazarus_session::record::HostBlob) -> Blob {
    (b.type_tag.clone(), b.b64.clone())
}

impl NativeSession {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .lock()
            .map_err(|_| LazarusError::new_err("session lock poisoned"))
    }

    fn closed(&self) -> PyErr {
        LazarusError::new_err(format!("session {} is closed", self.id))
    }

    /// Runs `f` with the writer.
    fn with<R>(&self, f: impl FnOnce(&mut Session) -> Result<R, SessionError>) -> PyResult<R> {
        match &mut *self.lock()? {
            Inner::Held(s) => f(s).map_err(py_err),
            Inner::Snapshot(_) => Err(LazarusError::new_err(format!(
                "session {} was loaded read-only: open it to write",
                self.id
            ))),
            Inner::Closed => Err(self.closed()),
        }
    }

    /// Runs `f` on the state (the writer's, or the snapshot).
    fn read<R>(&self, f: impl FnOnce(&SessionState) -> R) -> PyResult<R> {
        match &*self.lock()? {
            Inner::Held(s) => Ok(f(s.state())),
            Inner::Snapshot(st) => Ok(f(st)),
            Inner::Closed => Err(self.closed()),
        }
    }
}

fn parse_record<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

#[pymethods]
impl NativeSession {
    #[getter]
    fn session_id(&self) -> String {
        self.id.clone()
    }

    /// What opening for writing found: `(truncated_bytes, saved_to, previous_holder)`, the
    /// crash debris cut from the end (never acknowledged), where it was saved, and the writer
    /// that died holding the session. `None` for a read-only session.
    #[allow(clippy::type_complexity)]
    fn open_report(&self) -> PyResult<Option<(u64, Option<String>, Option<String>)>> {
        Ok(match &*self.lock()? {
            Inner::Held(s) => {
                let r = s.open_report();
                Some((
                    r.truncated_bytes,
                    r.truncated_saved_to.clone(),
                    r.previous_holder.as_ref().map(|h| h.to_string()),
                ))
            }
            _ => None,
        })
    }

    /// Whether listings show a title for it (then `title_if_untitled` does nothing).
    #[getter]
    fn titled(&self) -> bool {
        self.titled.load(Ordering::Relaxed)
    }

    /// Gives the session the title listings show, unless it has one (a person's `sessions
    /// rename`, even one made since the open, stands). Returns whether it was set.
    fn title_if_untitled(&self, py: Python<'_>, title: &str) -> PyResult<bool> {
        let title = lazarus_session::title_of(title);
        if self.titled() || title.is_empty() {
            return Ok(false);
        }
        let id = parse_id(&self.id)?;
        let set = py.detach(|| {
            if self.store.summary(&id).map_err(py_err)?.title.is_some() {
                return Ok(false);
            }
            self.store.rename(&id, Some(&title)).map_err(py_err)?;
            Ok::<_, PyErr>(true)
        })?;
        self.titled.store(true, Ordering::Relaxed);
        Ok(set)
    }

    /// The items of the history now, oldest first, as JSON texts (the newest `limit`).
    #[pyo3(signature = (limit=None))]
    fn items(&self, limit: Option<usize>) -> PyResult<Vec<String>> {
        self.read(|st| {
            let items = &st.host.items;
            let from = limit.map_or(0, |n| items.len().saturating_sub(n));
            items[from..].iter().map(|(_, v)| v.to_string()).collect()
        })
    }

    /// Appends items (JSON object texts), each a durable record before this returns.
    fn add_items(&self, py: Python<'_>, items: Vec<String>) -> PyResult<()> {
        let parsed: Vec<serde_json::Value> = items
            .iter()
            .map(|t| parse_record("an item", t))
            .collect::<PyResult<_>>()?;
        py.detach(|| {
            self.with(|s| {
                for item in parsed {
                    s.append(Record::from(HostItem { item }))?;
                }
                Ok(())
            })
        })
    }

    /// Takes the newest item out of the history (a record says so) and returns it.
    fn pop_item(&self, py: Python<'_>) -> PyResult<Option<String>> {
        py.detach(|| {
            self.with(|s| {
                let Some((seq, item)) = s.state().host.items.last().cloned() else {
                    return Ok(None);
                };
                s.append(Record::from(HostPop { seq }))?;
                Ok(Some(item.to_string()))
            })
        })
    }

    /// Empties the history and the graph (a record says so; nothing is deleted).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            self.with(|s| {
                let through_seq = s.state().last_seq;
                s.append(Record::from(HostClear { through_seq }))?;
                Ok(())
            })
        })
    }

    /// Records that a tool call is about to run (before it runs).
    #[pyo3(signature = (call_id, tool, arguments=None))]
    fn call_intent(
        &self,
        py: Python<'_>,
        call_id: String,
        tool: String,
        arguments: Option<String>,
    ) -> PyResult<()> {
        py.detach(|| {
            self.with(|s| {
                s.append(Record::from(HostCallIntent {
                    call_id,
                    tool,
                    arguments,
                }))?;
                Ok(())
            })
        })
    }

    /// Records how a tool call ended.
    fn call_outcome(&self, py: Python<'_>, call_id: String, result: String) -> PyResult<()> {
        py.detach(|| {
            self.with(|s| {
                s.append(Record::from(HostCallOutcome { call_id, result }))?;
                Ok(())
            })
        })
    }

    /// The calls announced without an outcome: `(call_id, tool, arguments)`.
    fn in_doubt(&self) -> PyResult<Vec<(String, String, Option<String>)>> {
        self.read(|st| {
            st.host
                .in_doubt()
                .map(|(id, c)| (id.to_string(), c.tool.clone(), c.arguments.clone()))
                .collect()
        })
    }

    /// Records a graph checkpoint: `record` is a `host_checkpoint` record's JSON text.
    fn put_checkpoint(&self, py: Python<'_>, record: &str) -> PyResult<()> {
        let rec: HostCheckpoint = parse_record("a host_checkpoint record", record)?;
        py.detach(|| {
            self.with(|s| {
                s.append(Record::from(rec))?;
                Ok(())
            })
        })
    }

    /// Records a task's writes (`record`: a `host_writes` record's JSON text), as LangGraph's
    /// savers do: a write whose (task, index) is recorded already is left out, unless its
    /// index is negative (a special channel's, which the newest replaces); nothing is
    /// appended when nothing is left. Returns how many writes were recorded.
    fn put_writes(&self, py: Python<'_>, record: &str) -> PyResult<usize> {
        let mut rec: HostWrites = parse_record("a host_writes record", record)?;
        py.detach(|| {
            self.with(|s| {
                let key = (rec.ns.clone(), rec.checkpoint_id.clone());
                if let Some(known) = s.state().host.graph.writes.get(&key) {
                    let task = &rec.task_id;
                    rec.writes
                        .retain(|w| w.idx < 0 || !known.contains_key(&(task.clone(), w.idx)));
                }
                let n = rec.writes.len();
                if n > 0 {
                    s.append(Record::from(rec))?;
                }
                Ok(n)
            })
        })
    }

    /// The checkpoints of namespace `ns` (of every namespace when `None`), newest id first:
    /// `host_checkpoint` JSON texts without their channel values.
    #[pyo3(signature = (ns=None))]
    fn checkpoints(&self, ns: Option<&str>) -> PyResult<Vec<String>> {
        self.read(|st| {
            let mut all: Vec<&HostCheckpoint> = st
                .host
                .graph
                .checkpoints
                .iter()
                .filter(|((n, _), _)| ns.is_none_or(|want| n == want))
                .map(|(_, (_, c))| c)
                .collect();
            all.sort_by(|a, b| b.checkpoint_id.cmp(&a.checkpoint_id));
            all.iter()
                .filter_map(|c| serde_json::to_string(c).ok())
                .collect()
        })
    }

    /// One checkpoint of `ns` (the one with the greatest id when `checkpoint_id` is `None`),
    /// as in `checkpoints`; `None` when there is none.
    #[pyo3(signature = (ns, checkpoint_id=None))]
    fn checkpoint(&self, ns: &str, checkpoint_id: Option<&str>) -> PyResult<Option<String>> {
        self.read(|st| {
            let cps = &st.host.graph.checkpoints;
            let found = match checkpoint_id {
                Some(id) => cps.get(&(ns.to_string(), id.to_string())),
                None => cps
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .last()
                    .map(|(_, c)| c),
            };
            found.and_then(|(_, c)| serde_json::to_string(c).ok())
        })
    }

    /// The values of the channels at the versions given, `(channel, type, b64)`; a channel
    /// with no value at that version is left out.
    fn channel_values(
        &self,
        ns: &str,
        versions: Vec<(String, String)>,
    ) -> PyResult<Vec<(String, String, String)>> {
        self.read(|st| {
            let values = &st.host.graph.values;
            versions
                .into_iter()
                .filter_map(|(channel, version)| {
                    let (_, b) = values.get(&(ns.to_string(), channel.clone(), version))?;
                    let (t, d) = blob(b);
                    Some((channel, t, d))
                })
                .collect()
        })
    }

    /// The writes against checkpoint `checkpoint_id` of `ns`, by task and index:
    /// `(task_id, channel, type, b64, task_path, idx)`.
    #[allow(clippy::type_complexity)]
    fn writes(
        &self,
        ns: &str,
        checkpoint_id: &str,
    ) -> PyResult<Vec<(String, String, String, String, String, i64)>> {
        self.read(|st| {
            let key = (ns.to_string(), checkpoint_id.to_string());
            st.host
                .graph
                .writes
                .get(&key)
                .map_or_else(Vec::new, |by_task| {
                    by_task
                        .iter()
                        .map(|((task, idx), w)| {
                            let (t, d) = blob(&w.value);
                            (
                                task.clone(),
                                w.channel.clone(),
                                t,
                                d,
                                w.task_path.clone(),
                                *idx,
                            )
                        })
                        .collect()
                })
        })
    }

    /// Lets go of the writer (what was delivered to the inbox meanwhile is recorded first).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = std::mem::replace(&mut *self.lock()?, Inner::Closed);
        if let Inner::Held(s) = taken {
            py.detach(|| lazarus_session::handoff::close(&*self.store, *s).map_err(py_err))?;
        }
        Ok(())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeStore>()?;
    m.add_class::<NativeSession>()?;
    let py = m.py();
    m.add("LazarusError", py.get_type::<LazarusError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    Ok(())
}
