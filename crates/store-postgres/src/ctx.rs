//! What every query needs (the pool, the schema's SQL, where the store is, for messages),
//! shared by the store and its writers.

use lazarus_session::SessionError;
use tokio_postgres::types::ToSql;

use crate::error::PgError;
use crate::schema::Sql;

/// What futures need: cloneable, without the runtime (so a future never drops the runtime).
pub(crate) struct Ctx {
    pub pool: deadpool_postgres::Pool,
    pub pg: tokio_postgres::Config,
    /// The TLS connector every connection uses (pool and writers alike).
    pub tls: tokio_postgres_rustls::MakeRustlsConnect,
    pub sql: Sql,
    pub schema: String,
    /// Store location for messages (no password).
    pub location: String,
}

impl Ctx {
    /// Text whose `hashtextextended` is the advisory lock key of session `id`. The schema is
    /// part of it, so the same id in two schemas of one database are two locks.
    pub(crate) fn lock_key(&self, id: &str) -> String {
        format!("{}{id}", self.lock_prefix())
    }

    pub(crate) fn lock_prefix(&self) -> String {
        format!("lazarus:{}:", self.schema)
    }

    pub(crate) fn session_location(&self, id: &str) -> String {
        format!("{}/{id}", self.location)
    }

    pub(crate) fn not_found(&self, id: &str) -> PgError {
        PgError::Session(SessionError::NotFound {
            id: id.to_string(),
            location: self.location.clone(),
        })
    }

    pub(crate) fn already_exists(&self, id: &str) -> PgError {
        PgError::Session(SessionError::AlreadyExists {
            id: id.to_string(),
            location: self.location.clone(),
        })
    }

    pub(crate) fn db(&self, op: &'static str) -> impl Fn(tokio_postgres::Error) -> PgError + '_ {
        move |e| PgError::db(&self.location, op, &e)
    }

    pub(crate) async fn conn(&self) -> std::result::Result<deadpool_postgres::Object, PgError> {
        self.pool
            .get()
            .await
            .map_err(|e| PgError::pool(&self.location, &e))
    }
}

pub(crate) fn slice_iter<'a>(
    s: &'a [&'a (dyn ToSql + Sync)],
) -> impl ExactSizeIterator<Item = &'a dyn ToSql> + 'a {
    s.iter().map(|s| *s as _)
}
