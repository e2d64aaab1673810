//! Where sessions live (a directory of ledgers, or PostgreSQL), and a host program's names for
//! them: any string, mapped to a session id (`SessionId::for_host_name`), the name itself kept
//! in the header's `meta.host_id` when it is not the id.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use lazarus_session::{CreateOptions, LocalStore, SessionError, SessionId, Store};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::session::{Inner, NativeSession};
use crate::{LazarusError, py_err};

/// Where sessions live: a directory of ledgers, or a PostgreSQL database (`postgres://…`).
/// One per program: a PostgreSQL store's connections are pooled here.
#[pyclass(module = "lazarus._native", frozen)]
pub(crate) struct NativeStore {
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

/// The session id for a host's name of a session (any string), and whether it was mapped.
#[pyfunction]
pub(crate) fn session_id_for(name: &str) -> (String, bool) {
    let (id, mapped) = SessionId::for_host_name(name);
    (id.into_string(), mapped)
}

/// The host's name a session's header records (`meta.host_id`), else its id.
fn name_in(id: &SessionId, meta: Option<&serde_json::Value>) -> String {
    meta.and_then(|m| m.get("host_id"))
        .and_then(|n| n.as_str())
        .map_or_else(|| id.to_string(), str::to_string)
}

/// Refuses a session whose header names another host name than the one asked for (a session
/// made under that id by someone else): its history is not this one's.
fn check_name(
    store: &Arc<dyn Store>,
    id: &SessionId,
    meta: Option<&serde_json::Value>,
    name: &str,
) -> PyResult<()> {
    let recorded = name_in(id, meta);
    if recorded == name {
        return Ok(());
    }
    Err(LazarusError::new_err(format!(
        "session {id} in {} is the one named {recorded:?}, not {name:?}: nothing of it was read or written",
        store.location()
    )))
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

/// Opens the session named `name` for writing (created, with `meta.host` = `host` and the
/// name in `meta.host_id` when it is not the id, when missing).
fn open_held(store: &Arc<dyn Store>, name: &str, host: &str) -> PyResult<NativeSession> {
    let (id, mapped) = SessionId::for_host_name(name);
    let id = &id;
    // Whose it is, before taking it: an open for writing records what waits in the inbox and
    // cuts crash debris, which is not ours to do to another program's session.
    let mut titled = false;
    match store.summary(id) {
        Ok(s) => {
            check_host(store, id, s.meta.as_ref(), host)?;
            check_name(store, id, s.meta.as_ref(), name)?;
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
                meta: Some(if mapped {
                    serde_json::json!({ "host": host, "host_id": name })
                } else {
                    serde_json::json!({ "host": host })
                }),
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
    let meta = session.state().header.meta.as_ref();
    if let Err(e) =
        check_host(store, id, meta, host).and_then(|()| check_name(store, id, meta, name))
    {
        lazarus_session::handoff::close(&**store, session).map_err(py_err)?;
        return Err(e);
    }
    Ok(NativeSession {
        id: id.to_string(),
        name: name.to_string(),
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

    /// Opens the session a host calls `name` (any string: see `session_id_for`) for writing,
    /// created when missing; see `NativeSession`.
    fn open(&self, py: Python<'_>, name: &str, host: &str) -> PyResult<NativeSession> {
        py.detach(|| open_held(&self.store, name, host))
    }

    /// The session a host calls `name` as it is now, read-only (no writer taken, so another
    /// process may hold it); `None` when there is no such session.
    fn load(&self, py: Python<'_>, name: &str) -> PyResult<Option<NativeSession>> {
        let (id, _) = SessionId::for_host_name(name);
        py.detach(|| match self.store.load(&id) {
            Ok(state) => {
                check_name(&self.store, &id, state.header.meta.as_ref(), name)?;
                Ok(Some(NativeSession {
                    id: id.to_string(),
                    name: name.to_string(),
                    store: self.store.clone(),
                    inner: Mutex::new(Inner::Snapshot(Box::new(state))),
                    titled: AtomicBool::new(true),
                }))
            }
            Err(SessionError::NotFound { .. }) => Ok(None),
            Err(e) => Err(py_err(e)),
        })
    }

    /// The names (`meta.host_id`, else the id) of the sessions `host` wrote (`meta.host`).
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
                .map(|s| name_in(&s.id, s.meta.as_ref()))
                .collect())
        })
    }
}
