//! Errors of the PostgreSQL store, and how they become [`SessionError`]s.

use lazarus_session::SessionError;

/// Errors of this backend. Everything crosses the `Store` trait as a [`SessionError`]:
/// [`PgError::Session`] as itself, the rest as [`SessionError::Backend`] with the message.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
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
    /// No connection could be had: the server is down or restarting, or has no connection
    /// to spare. Nothing was sent.
    #[error(
        "PostgreSQL at {location}: no connection ({cause}); nothing was written, retry in a moment"
    )]
    Unavailable { location: String, cause: String },
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl PgError {
    pub(crate) fn db(location: &str, op: &'static str, e: &tokio_postgres::Error) -> PgError {
        if is_connection_failure(e) {
            return PgError::Unavailable {
                location: location.to_string(),
                cause: format!("{op}: {}", describe(e)),
            };
        }
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
        PgError::Unavailable {
            location: location.to_string(),
            cause: message,
        }
    }

    pub(crate) fn ledger(e: lazarus_ledger::LedgerError) -> PgError {
        PgError::Session(SessionError::Ledger(e))
    }
}

impl PgError {
    /// The same error again, for another waiter of a batch that failed as a whole.
    pub(crate) fn again(&self) -> PgError {
        match self {
            PgError::Unavailable { location, cause } => PgError::Unavailable {
                location: location.clone(),
                cause: cause.clone(),
            },
            PgError::Db {
                location,
                op,
                message,
                code,
            } => PgError::Db {
                location: location.clone(),
                op,
                message: message.clone(),
                code: code.clone(),
            },
            other => PgError::Config(other.to_string()),
        }
    }
}

impl From<PgError> for SessionError {
    fn from(e: PgError) -> SessionError {
        match e {
            PgError::Session(e) => e,
            PgError::Unavailable { location, cause } => {
                SessionError::Unavailable { location, cause }
            }
            other => SessionError::Backend(other.to_string()),
        }
    }
}

/// The connection broke or the server will not serve now (shutting down, starting, killed
/// our backend: SQLSTATE classes 08 and 57P): the request may succeed on another connection
/// in a moment. Never used for an append whose outcome is unknown.
pub(crate) fn is_connection_failure(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.code().is_some_and(|c| {
            let c = c.code();
            c.starts_with("08") || c.starts_with("57P")
        })
        || (e.as_db_error().is_none() && e.to_string().contains("connect"))
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
