//! What every query needs (the pool, the schema's SQL, where the store is, for messages),
//! shared by the store and its writers.

use lazarus_session::SessionError;
use tokio_postgres::types::ToSql;

use crate::error::PgError;
use crate::schema::Sql;

/// What futures need: cloneable, without the runtime (so a future never drops the runtime).
pub(crate) struct Ctx {
    pub pool: deadpool_postgres::Pool,
    pub sql: Sql,
    pub schema: String,
    /// Store location for messages (no password).
    pub location: String,
    /// Where mail is signalled (LISTEN/NOTIFY), and how a listener connects.
    pub mail: crate::mail::ListenTo,
}

impl Ctx {
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

    /// A pooled connection. One whose server side is gone (killed, restarted) is dropped
    /// from the pool and another taken, so a dead connection fails no request it can avoid.
    pub(crate) async fn conn(&self) -> std::result::Result<deadpool_postgres::Object, PgError> {
        for _ in 0..4 {
            let c = self
                .pool
                .get()
                .await
                .map_err(|e| PgError::pool(&self.location, &e))?;
            if !c.is_closed() {
                return Ok(c);
            }
            drop(deadpool_postgres::Object::take(c));
        }
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
