//! Errors of the PostgreSQL store, and how they become [`SessionError`]s.

use lazarus_session::SessionError;

/// Errors of this backend. Everything crosses the `Store` trait as a [`SessionError`]:
/// [`PgError::Session`] as itself, the rest as [`SessionError::Backend`] with the message.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The writer's connection (which holds the session's lock) failed: the lock is gone with
    /// it, so this writer may never write again. The failed append may or may not have
    /// committed; every acknowledged one has.
    #[error(
        "session {id:?} in {location}: the writer lost its database connection ({cause}); its single-writer lock died with it, so this writer can no longer write: reopen the session (acknowledged records are safe)"
    )]
    WriterLost {
        id: String,
        location: String,
        cause: String,
    },
    #[error(
        "the database schema in {location} is at version {found}, newer than this build of Lazarus supports ({supported}); upgrade Lazarus (nothing was changed)"
    )]
    SchemaTooNew {
        location: String,
        found: i32,
        supported: i32,
    },
    #[error(
        "the database schema in {location} is at version {found}, older than this build needs ({supported}); run `lazarus db migrate` (or connect with migrations enabled)"
    )]
    SchemaTooOld {
        location: String,
        found: i32,
        supported: i32,
    },
    #[error("PostgreSQL at {location}: {op}: {message}")]
    Db {
        location: String,
        op: &'static str,
        message: String,
        /// The SQLSTATE, when the server answered with an error.
        code: Option<String>,
    },
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl PgError {
    pub(crate) fn db(location: &str, op: &'static str, e: &tokio_postgres::Error) -> PgError {
        PgError::Db {
            location: location.to_string(),
            op,
            message: describe(e),
            code: e.code().map(|c| c.code().to_string()),
        }
    }

    pub(crate) fn pool(location: &str, e: &deadpool_postgres::PoolError) -> PgError {
        let message = match e {
            deadpool_postgres::PoolError::Backend(e) => describe(e),
            other => other.to_string(),
        };
        PgError::Db {
            location: location.to_string(),
            op: "get a connection",
            message,
            code: None,
        }
    }

    pub(crate) fn ledger(e: lazarus_ledger::LedgerError) -> PgError {
        PgError::Session(SessionError::Ledger(e))
    }
}

impl From<PgError> for SessionError {
    fn from(e: PgError) -> SessionError {
        match e {
            PgError::Session(e) => e,
            other => SessionError::Backend(other.to_string()),
        }
    }
}

/// A readable one-line description of a driver error, with the server's message and code.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
        if let Some(d) = db.detail() {
            s.push_str(" (");
            s.push_str(d);
            s.push(')');
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}
