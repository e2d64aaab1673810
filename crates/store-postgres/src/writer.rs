//! The single writer of one session: a dedicated connection holding the session's advisory
//! lock for its whole life. Every append runs on that connection, so an append can only
//! succeed while the lock is held (the fence): if the connection dies, the lock dies with it
//! and every later append fails until the session is reopened.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lazarus_ledger::frame;
use lazarus_ledger::writer::LINE_BYTES_MAX_DEFAULT;
use lazarus_ledger::{LedgerError, lock::Holder};
use lazarus_session::store::RecordSink;
use lazarus_session::{Result, SessionError, Stored};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

use crate::error::PgError;
use crate::lines::tail_digest_json;
use crate::schema::{LOCK_HOLDER, TRY_LOCK, UNLOCK};
use crate::{Ctx, Shared};

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
pub(crate) fn locked_error(session_location: &str, holder: Option<&LockHolder>) -> PgError {
    PgError::ledger(LedgerError::Locked {
        path: session_location.into(),
        holder: lazarus_ledger::error::HolderDisplay(holder.and_then(LockHolder::holder)),
    })
}

/// A dedicated (unpooled) connection, its connection task and server pid.
pub(crate) struct Conn {
    pub client: Client,
    pub task: JoinHandle<()>,
    pub backend_pid: i32,
}

/// Opens a dedicated connection and takes the advisory lock of `key` on it.
/// `Ok(Err(holder))` when someone else holds it.
pub(crate) async fn connect_locked(
    ctx: &Ctx,
    key: &str,
) -> std::result::Result<std::result::Result<Conn, Option<LockHolder>>, PgError> {
    let (client, connection) = ctx
        .pg
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| PgError::db(&ctx.location, "connect", &e))?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "writer connection ended");
        }
    });
    let row = client
        .query_one(TRY_LOCK, &[&key])
        .await
        .map_err(|e| PgError::db(&ctx.location, "take the session lock", &e))?;
    let locked: bool = row.get(0);
    let backend_pid: i32 = row.get(1);
    if !locked {
        let holder = lock_holder(&client, ctx, key).await.unwrap_or(None);
        drop(client);
        return Ok(Err(holder));
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
    client: Arc<Client>,
    append: Statement,
    task: JoinHandle<()>,
}

struct Inner {
    live: Option<Live>,
    next_seq: u64,
    /// Why this writer may no longer write.
    lost: Option<String>,
    buf: Vec<u8>,
}

/// The writer of one session (the [`RecordSink`] behind a PostgreSQL [`Session`]).
///
/// [`Session`]: lazarus_session::Session
pub struct PgWriter {
    shared: Arc<Shared>,
    id: String,
    key: String,
    location: String,
    backend_pid: i32,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PgWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWriter")
            .field("id", &self.id)
            .field("backend_pid", &self.backend_pid)
            .finish_non_exhaustive()
    }
}

impl PgWriter {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: &str,
        conn: Conn,
        append: Statement,
        next_seq: u64,
    ) -> PgWriter {
        let key = shared.ctx.lock_key(id);
        let location = shared.ctx.session_location(id);
        PgWriter {
            shared,
            id: id.to_string(),
            key,
            location,
            backend_pid: conn.backend_pid,
            inner: Mutex::new(Inner {
                live: Some(Live {
                    client: Arc::new(conn.client),
                    append,
                    task: conn.task,
                }),
                next_seq,
                lost: None,
                buf: Vec::new(),
            }),
        }
    }

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
    /// next free one (taken, or beyond the end) fails with a conflict
    /// ([`is_conflict`](crate::is_conflict)) and writes nothing; the writer must then be
    /// reopened, since the log is not what it believed.
    pub fn append_at(&self, seq: u64, kind: &str, data_json: &[u8]) -> Result<Stored> {
        if data_json.first() != Some(&b'{') || data_json.contains(&b'\n') {
            return Err(SessionError::Ledger(LedgerError::Serialize(
                "record data must be one-line compact JSON object text".into(),
            )));
        }
        let mut inner = self.lock();
        if let Some(cause) = &inner.lost {
            return Err(PgError::WriterLost {
                id: self.id.clone(),
                location: self.shared.ctx.location.clone(),
                cause: cause.clone(),
            }
            .into());
        }
        let Some(live) = &inner.live else {
            return Err(SessionError::Backend(format!(
                "session {:?}: the writer is closed",
                self.id
            )));
        };
        let (client, stmt) = (live.client.clone(), live.append.clone());
        let ts = frame::format_ts(jiff::Timestamp::now());
        let mut buf = std::mem::take(&mut inner.buf);
        frame::encode_line(&mut buf, seq, &ts, kind, data_json);
        buf.pop(); // the newline is not stored
        if buf.len() > LINE_BYTES_MAX_DEFAULT {
            let len = buf.len();
            inner.buf = buf;
            return Err(SessionError::Ledger(LedgerError::RecordTooLarge {
                len,
                max: LINE_BYTES_MAX_DEFAULT,
            }));
        }
        let digest = tail_digest_json(data_json);
        let id = self.id.clone();
        let kind_s = kind.to_string();
        let ts_s = ts.clone();
        let line = buf;
        let result = self.shared.rt.run(async move {
            let size = line.len() as i64 + 1;
            let r = client
                .execute(
                    &stmt,
                    &[&id, &(seq as i64), &kind_s, &digest, &ts_s, &size, &line],
                )
                .await;
            Ok((r, line))
        });
        let (r, line) = match result {
            Ok(x) => x,
            Err(e) => {
                inner.lost = Some(e.to_string());
                return Err(e.into());
            }
        };
        inner.buf = line;
        match r {
            Ok(1) => {
                inner.next_seq = seq + 1;
                Ok(Stored { seq, ts })
            }
            Ok(_) => {
                inner.lost = Some(format!("append conflict at seq {seq}"));
                Err(self.conflict(seq))
            }
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                inner.lost = Some(format!("append conflict at seq {seq}"));
                Err(self.conflict(seq))
            }
            Err(e) => {
                let cause = crate::error::describe(&e);
                inner.lost = Some(cause.clone());
                Err(PgError::WriterLost {
                    id: self.id.clone(),
                    location: self.shared.ctx.location.clone(),
                    cause,
                }
                .into())
            }
        }
    }

    fn conflict(&self, seq: u64) -> SessionError {
        PgError::Conflict {
            id: self.id.clone(),
            location: self.shared.ctx.location.clone(),
            seq,
        }
        .into()
    }
}

impl RecordSink for PgWriter {
    fn append(&self, kind: &str, data_json: &[u8]) -> Result<Stored> {
        self.append_json(kind, data_json)
    }

    fn location(&self) -> String {
        self.location.clone()
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
        let key = self.key.clone();
        let _ = self.shared.rt.run(async move {
            match Arc::try_unwrap(live.client) {
                Ok(client) => {
                    release(
                        Conn {
                            client,
                            task: live.task,
                            backend_pid: 0,
                        },
                        key,
                    )
                    .await
                }
                Err(client) => {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        client.query_one(UNLOCK, &[&key]),
                    )
                    .await;
                }
            }
            Ok(())
        });
    }
}
