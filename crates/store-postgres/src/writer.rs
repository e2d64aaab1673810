//! The single writer of one session: a dedicated connection holding the session's advisory
//! lock for its whole life. Every append runs on that connection, so an append can only
//! succeed while the lock is held (the fence): if the connection dies, the lock dies with it
//! and every later append fails until the session is reopened.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lazarus_ledger::frame;
use lazarus_ledger::writer::LINE_BYTES_MAX_DEFAULT;
use lazarus_ledger::{Holder, LedgerError};
use lazarus_session::store::RecordSink;
use lazarus_session::{Result, SessionError, Stored};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use crate::Ctx;
use crate::error::PgError;
use crate::rt::Rt;
use crate::schema::{LOCK_HOLDER, TRY_LOCK, UNLOCK};

/// Who holds a session's writer lock, as PostgreSQL reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// The holder's `application_name` (`lazarus pid=<pid> host=<host>` for Lazarus).
    pub application_name: String,
    /// The holding connection's server process id (for `pg_terminate_backend`).
    pub backend_pid: i32,
    /// When the holding connection was opened (RFC 3339, UTC): a writer opens its own
    /// connection right before taking the lock.
    pub since: String,
    /// The client address of the holding connection (`local` for a Unix socket).
    pub client_addr: String,
}

impl LockHolder {
    /// The Lazarus process holding the lock, parsed from its application name.
    pub fn holder(&self) -> Option<Holder> {
        let rest = self.application_name.strip_prefix("lazarus ")?;
        let mut pid = None;
        let mut host = None;
        for part in rest.split(' ') {
            if let Some(p) = part.strip_prefix("pid=") {
                pid = p.parse::<u32>().ok();
            } else if let Some(h) = part.strip_prefix("host=") {
                host = Some(h.to_string());
            }
        }
        Some(Holder {
            pid: pid?,
            host: host?,
            since: self.since.clone(),
        })
    }
}

pub(crate) async fn lock_holder(
    client: &Client,
    ctx: &Ctx,
    key: &str,
) -> std::result::Result<Option<LockHolder>, PgError> {
    let row = client
        .query_opt(LOCK_HOLDER, &[&key])
        .await
        .map_err(|e| PgError::db(&ctx.location, "look up the lock holder", &e))?;
    Ok(row.map(|r| LockHolder {
        application_name: r.get::<_, Option<String>>(0).unwrap_or_default(),
        backend_pid: r.get(1),
        since: r.get::<_, Option<String>>(2).unwrap_or_default(),
        client_addr: r.get(3),
    }))
}

/// The "in use by …" error, the same one the local store gives.
pub(crate) fn locked_error(id: &str, location: &str, holder: Option<&LockHolder>) -> PgError {
    PgError::Session(SessionError::Locked {
        id: id.to_string(),
        location: location.to_string(),
        holder: holder.and_then(LockHolder::holder),
    })
}

/// A dedicated (unpooled) connection, its connection task and server pid.
pub(crate) struct Conn {
    pub client: Client,
    pub task: JoinHandle<()>,
    pub backend_pid: i32,
}

/// Someone else holds a session's lock: who, and whether the session exists.
pub(crate) struct Busy {
    pub holder: Option<LockHolder>,
    pub exists: bool,
}

/// Opens a dedicated connection and takes the advisory lock of session `id` on it.
/// `Ok(Err(busy))` when someone else holds it.
pub(crate) async fn connect_locked(
    ctx: &Ctx,
    id: &str,
) -> std::result::Result<std::result::Result<Conn, Busy>, PgError> {
    let key = ctx.lock_key(id);
    let (client, connection) = ctx
        .pg
        .connect(ctx.tls.clone())
        .await
        .map_err(|e| PgError::db(&ctx.location, "connect", &e))?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "writer connection ended");
        }
    });
    let row = client
        .query_one(TRY_LOCK, &[&key.as_str()])
        .await
        .map_err(|e| PgError::db(&ctx.location, "take the session lock", &e))?;
    let locked: bool = row.get(0);
    let backend_pid: i32 = row.get(1);
    if !locked {
        let holder = lock_holder(&client, ctx, &key).await.unwrap_or(None);
        let exists: bool = client
            .query_one(&ctx.sql.exists, &[&id])
            .await
            .map_err(|e| PgError::db(&ctx.location, "look up the session", &e))?
            .get(0);
        drop(client);
        return Ok(Err(Busy { holder, exists }));
    }
    Ok(Ok(Conn {
        client,
        task,
        backend_pid,
    }))
}

/// Releases the lock and closes the connection (best effort, bounded in time).
pub(crate) async fn release(conn: Conn, key: String) {
    let Conn { client, task, .. } = conn;
    if !client.is_closed() {
        let _ =
            tokio::time::timeout(Duration::from_secs(5), client.query_one(UNLOCK, &[&key])).await;
    }
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
}

struct Live {
    client: Client,
    append: Statement,
    task: JoinHandle<()>,
}

struct Inner {
    live: Option<Live>,
    next_seq: u64,
    /// Bytes of the session's export so far (where the next line starts).
    size: u64,
    /// Why this writer may no longer write.
    lost: Option<String>,
    buf: Vec<u8>,
}

/// The writer of one session (the [`RecordSink`] behind a PostgreSQL [`Session`]).
///
/// It owns its connection and a current-thread runtime that only the appending thread
/// drives: an append is one statement, one round trip, and no thread hand-off.
///
/// [`Session`]: lazarus_session::Session
pub struct PgWriter {
    ctx: Arc<Ctx>,
    id: String,
    key: String,
    location: String,
    backend_pid: i32,
    inner: Mutex<Inner>,
    // Declared last: dropped after the connection.
    rt: Rt,
}

impl std::fmt::Debug for PgWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWriter")
            .field("id", &self.id)
            .field("backend_pid", &self.backend_pid)
            .finish_non_exhaustive()
    }
}

/// A session's lock, held on a fresh dedicated connection driven by its own writer
/// runtime, before it becomes a [`PgWriter`]. Dropping it releases the lock.
pub(crate) struct Locked {
    pub ctx: Arc<Ctx>,
    pub id: String,
    pub conn: Option<Conn>,
    pub rt: Rt,
}

impl Locked {
    /// Connects and takes the lock of session `id`; `Ok(Err(busy))` when someone holds it.
    pub(crate) fn take(
        ctx: Arc<Ctx>,
        id: &str,
    ) -> std::result::Result<std::result::Result<Locked, Busy>, PgError> {
        let rt = Rt::current_thread()?;
        let got = rt.run_here(connect_locked(&ctx, id))?;
        Ok(got.map(|conn| Locked {
            ctx,
            id: id.to_string(),
            conn: Some(conn),
            rt,
        }))
    }

    /// The writer, appending from `next_seq` on, after `size` bytes.
    pub(crate) fn into_writer(
        mut self,
        next_seq: u64,
        size: u64,
    ) -> std::result::Result<PgWriter, PgError> {
        let conn = self.conn.take().expect("connection present until used");
        let ctx = self.ctx.clone();
        let prepared = self.rt.run_here(async {
            conn.client
                .prepare(&ctx.sql.append)
                .await
                .map_err(|e| PgError::db(&ctx.location, "prepare append", &e))
        });
        let append = match prepared {
            Ok(stmt) => stmt,
            Err(e) => {
                self.conn = Some(conn);
                return Err(e);
            }
        };
        let rt = std::mem::replace(&mut self.rt, Rt::empty());
        let key = ctx.lock_key(&self.id);
        let location = ctx.session_location(&self.id);
        Ok(PgWriter {
            ctx,
            id: std::mem::take(&mut self.id),
            key,
            location,
            backend_pid: conn.backend_pid,
            inner: Mutex::new(Inner {
                live: Some(Live {
                    client: conn.client,
                    append,
                    task: conn.task,
                }),
                next_seq,
                size,
                lost: None,
                buf: Vec::new(),
            }),
            rt,
        })
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let key = self.ctx.lock_key(&self.id);
            let _ = self.rt.run_here(async move {
                release(conn, key).await;
                Ok(())
            });
        }
    }
}

impl PgWriter {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The server process id of the connection holding the lock.
    pub fn backend_pid(&self) -> i32 {
        self.backend_pid
    }

    /// The seq the next append will take.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// A setting of the writer's own connection (for tests and diagnostics).
    #[doc(hidden)]
    pub fn connection_setting(&self, name: &str) -> Result<String> {
        let guard = self.lock();
        let Some(live) = &guard.live else {
            return Err(SessionError::Backend("the writer is closed".into()));
        };
        let r = self.rt.run_here(async {
            live.client
                .query_one("SELECT current_setting($1)", &[&name])
                .await
                .map_err(|e| PgError::db(&self.ctx.location, "read a setting", &e))
        })?;
        Ok(r.get(0))
    }

    /// Why this writer can no longer write, if it can't.
    pub fn lost(&self) -> Option<String> {
        self.lock().lost.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends the next record; returns once it is committed.
    pub fn append_json(&self, kind: &str, data_json: &[u8]) -> Result<Stored> {
        let seq = self.lock().next_seq;
        self.append_at(seq, kind, data_json)
    }

    /// Appends a record stating the seq it expects to take. A seq that is not the session's
    /// next free one fails with [`SessionError::Conflict`] and writes
    /// nothing: a taken seq is refused by the table's primary key, a seq beyond the end (a
    /// gap) before anything is sent. The writer must then be reopened, since the log is not
    /// what it believed.
    pub fn append_at(&self, seq: u64, kind: &str, data_json: &[u8]) -> Result<Stored> {
        if data_json.first() != Some(&b'{') || data_json.contains(&b'\n') {
            return Err(SessionError::Ledger(LedgerError::Serialize(
                "record data must be one-line compact JSON object text".into(),
            )));
        }
        let mut guard = self.lock();
        let inner = &mut *guard;
        if let Some(cause) = &inner.lost {
            return Err(self.lost_error(cause.clone()));
        }
        let Some(live) = &inner.live else {
            return Err(SessionError::Backend(format!(
                "session {:?}: the writer is closed",
                self.id
            )));
        };
        if seq > inner.next_seq {
            inner.lost = Some(format!("append conflict at seq {seq}"));
            return Err(self.conflict(seq));
        }
        let ts = frame::format_ts(jiff::Timestamp::now());
        let buf = &mut inner.buf;
        frame::encode_line(buf, seq, &ts, kind, data_json);
        buf.pop(); // the newline is not stored
        if buf.len() > LINE_BYTES_MAX_DEFAULT {
            return Err(SessionError::Ledger(LedgerError::RecordTooLarge {
                len: buf.len(),
                max: LINE_BYTES_MAX_DEFAULT,
            }));
        }
        let end = inner.size + buf.len() as u64 + 1;
        let (seq_i, end_i) = (seq as i64, end as i64);
        let line: &[u8] = buf;
        let params: [&(dyn ToSql + Sync); 5] = [&self.id, &seq_i, &kind, &line, &end_i];
        let r = self
            .rt
            .run_here(async { Ok(live.client.execute(&live.append, &params).await) });
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                inner.lost = Some(e.to_string());
                return Err(e.into());
            }
        };
        match r {
            Ok(1) => {
                inner.next_seq = seq + 1;
                inner.size = end;
                Ok(Stored { seq, ts })
            }
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                inner.lost = Some(format!("append conflict at seq {seq}"));
                Err(self.conflict(seq))
            }
            Ok(n) => {
                let cause = format!("append of seq {seq} inserted {n} rows");
                inner.lost = Some(cause.clone());
                Err(self.lost_error(cause))
            }
            Err(e) => {
                let cause = crate::error::describe(&e);
                inner.lost = Some(cause.clone());
                Err(self.lost_error(cause))
            }
        }
    }

    fn lost_error(&self, cause: String) -> SessionError {
        PgError::WriterLost {
            id: self.id.clone(),
            location: self.ctx.location.clone(),
            cause,
        }
        .into()
    }

    fn conflict(&self, seq: u64) -> SessionError {
        SessionError::Conflict {
            id: self.id.clone(),
            location: self.ctx.location.clone(),
            seq,
        }
    }
}

impl RecordSink for PgWriter {
    fn append(&self, kind: &str, data_json: &[u8]) -> Result<Stored> {
        self.append_json(kind, data_json)
    }

    fn location(&self) -> String {
        self.location.clone()
    }

    fn inbox_waiting(&self, limit: usize) -> Result<Vec<lazarus_session::InboxMessage>> {
        let guard = self.lock();
        let live = self.live(&guard)?;
        let ctx = &self.ctx;
        let id = &self.id;
        self.rt
            .run_here(async { crate::rows::inbox_waiting(ctx, &live.client, id, limit).await })
            .map_err(Into::into)
    }

    fn inbox_consume(&self, message_id: &str) -> Result<()> {
        let guard = self.lock();
        let live = self.live(&guard)?;
        let ctx = &self.ctx;
        let id = &self.id;
        self.rt
            .run_here(async {
                live.client
                    .execute(&ctx.sql.inbox_consume, &[id, &message_id])
                    .await
                    .map_err(ctx.db("consume an inbox message"))
            })
            .map(|_| ())
            .map_err(Into::into)
    }
}

impl PgWriter {
    /// The live connection, or why this writer may not use it.
    fn live<'a>(&self, inner: &'a Inner) -> Result<&'a Live> {
        if let Some(cause) = &inner.lost {
            return Err(self.lost_error(cause.clone()));
        }
        inner.live.as_ref().ok_or_else(|| {
            SessionError::Backend(format!("session {:?}: the writer is closed", self.id))
        })
    }
}

impl Drop for PgWriter {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        let Some(live) = inner.live.take() else {
            return;
        };
        // Release the lock now, so the session is free the moment the writer is gone (closing
        // the connection also releases it, but the server notices that asynchronously).
        let conn = Conn {
            client: live.client,
            task: live.task,
            backend_pid: self.backend_pid,
        };
        let key = self.key.clone();
        let _ = self.rt.run_here(async move {
            release(conn, key).await;
            Ok(())
        });
    }
}
