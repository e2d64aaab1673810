//! `lazarus._native`: a Lazarus session held open by a Python program, for the package's
//! framework adapters (`lazarus.agents`, `lazarus.langgraph`). Every write is a record of the
//! ledger, durable when the call returns (G1); the session's one writer is this object while
//! it is open (G5): a second process gets `LockedError` naming the holder.
//!
//! The Rust side keeps the records and the state replay builds from them (`SessionState::host`);
//! the Python side speaks the frameworks' protocols over it. Rooms: `store` (where sessions
//! live, and a host's names for them), `session` (one session: its history and its graph),
//! `blob` (the allowlist a value must pass before LangGraph's loader sees it).

use lazarus_session::SessionError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

mod blob;
mod session;
mod store;

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
create_exception!(
    _native,
    UnsafeValueError,
    LazarusError,
    "A stored value names a type outside the allowlist (or is of a kind that runs code when \
     loaded): it was not loaded, nothing of it ran."
);

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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::NativeStore>()?;
    m.add_class::<session::NativeSession>()?;
    m.add_class::<blob::NativeAllowlist>()?;
    m.add_function(wrap_pyfunction!(store::session_id_for, m)?)?;
    let py = m.py();
    m.add("LazarusError", py.get_type::<LazarusError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("UnsafeValueError", py.get_type::<UnsafeValueError>())?;
    Ok(())
}
