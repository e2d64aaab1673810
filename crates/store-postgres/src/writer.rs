//! The single writer of one session, fenced by a **lease**: a row `(session, token, epoch,
//! expires_at)` taken through the connection pool and renewed by a heartbeat. A writer pins
//! no connection: its appends are queued with those of the store's other writers and
//! committed in batches (`commit`), each record carrying its lease's token and epoch into the
//! statement (`… JOIN leases ON token AND epoch … FOR SHARE`), so a writer that lost its lease
//! — expired and taken by another process — can never append: its record is not inserted. A
//! take waits for appends in flight under the old lease (the row lock), and appends that start
//! after a take see the new epoch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use lazarus_ledger::frame;
use lazarus_ledger::writer::LINE_BYTES_MAX_DEFAULT;
use lazarus_ledger::{Holder, LedgerError};
use lazarus_session::store::RecordSink;
use lazarus_session::{Result, SessionError, Stored};
use tokio_postgres::Client;

use crate::commit::Outcome;
use crate::error::PgError;
pub use crate::holder::LockHolder;
use crate::holder::holder_text;
use crate::{Ctx, Shared};

/// The lease row of session `id`, live or run out, if any.
pub(crate) async fn lease_row(
    client: &Client,
    ctx: &Ctx,
    id: &str,
) -> std::result::Result<Option<LockHolder>, PgError> {
    let row = client
        .query_opt(&ctx.sql.lease_holder, &[&id])
        .await
        .map_err(|e| PgError::db(&ctx.location, "look up the lease holder", &e))?;
    Ok(row.map(|r| LockHolder {
        holder: r.get(0),
        since: r.get(1),
        expires_at: r.get(2),
        epoch: r.get(3),
        expires_in_ms: r.get(4),
    }))
}

/// The live lease of session `id`, if any.
pub(crate) async fn lock_holder(
    client: &Client,
    ctx: &Ctx,
    id: &str,
) -> std::result::Result<Option<LockHolder>, PgError> {
    Ok(lease_row(client, ctx, id)
        .await?
        .filter(LockHolder::is_live))
}

/// The "in use by …" error, the same one the local store gives, with when the lease runs out.
pub(crate) fn locked_error(id: &str, location: &str, holder: Option<&LockHolder>) -> PgError {
    PgError::Session(SessionError::Locked {
        id: id.to_string(),
        location: location.to_string(),
        holder: holder.and_then(LockHolder::holder).map(Box::new),
        expires_in_ms: holder.map(|h| u32::try_from(h.expires_in_ms.max(0)).unwrap_or(u32::MAX)),
    })
}

/// Someone else holds a session's lease: who, and whether the session exists.
pub(crate) struct Busy {
    pub holder: Option<LockHolder>,
    pub exists: bool,
}

/// What a lease's heartbeat found.
#[derive(Debug, Default)]
pub(crate) struct LeaseState {
    /// Why the lease is gone (not renewed in time and taken, or removed).
    lost: Mutex<Option<String>>,
}

impl LeaseState {
    fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn set_lost(&self, why: String) {
        self.lost
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
    }
}

/// The leases this store holds, renewed together by one heartbeat statement.
pub(crate) struct Leases {
    pub ttl: Duration,
    held: Mutex<HashMap<String, Arc<LeaseState>>>,
}

impl Leases {
    pub(crate) fn new(ttl: Duration) -> Arc<Leases> {
        Arc::new(Leases {
            ttl,
            held: Mutex::new(HashMap::new()),
        })
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<LeaseState>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// How often the heartbeat renews: five times per lease lifetime, so a few missed beats
    /// (a slow server, a paused process) never lose a lease.
    pub(crate) fn beat(&self) -> Duration {
        (self.ttl / 5).max(Duration::from_millis(50))
    }
}

/// Renews every lease of the store every [`Leases::beat`] until the store is gone. A token
/// the renewal does not find was taken by someone else: its writer is marked lost. A failed
/// renewal (database down) is logged once per outage and tried again at the next beat.
pub(crate) async fn heartbeat(ctx: Arc<Ctx>, leases: Weak<Leases>) {
    let mut failing = false;
    loop {
        let Some(l) = leases.upgrade() else { return };
        let beat = l.beat();
        let ttl = l.ttl_ms();
        let tokens: Vec<String> = l.map().keys().cloned().collect();
        drop(l);
        if !tokens.is_empty() {
            let renewed = async {
                let c = ctx.conn().await?;
                let rows = c
                    .query(&ctx.sql.renew_leases, &[&tokens, &ttl])
                    .await
                    .map_err(ctx.db("renew leases"))?;
                Ok::<_, PgError>(
                    rows.iter()
                        .map(|r| r.get::<_, String>(0))
                        .collect::<Vec<_>>(),
                )
            }
            .await;
            match renewed {
                Ok(found) => {
                    if failing {
                        tracing::info!(location = %ctx.location, "lease renewal works again");
                        failing = false;
                    }
                    if found.len() < tokens.len()
                        && let Some(l) = leases.upgrade()
                    {
                        let map = l.map();
                        for t in tokens.iter().filter(|t| !found.contains(t)) {
                            if let Some(s) = map.get(t) {
                                s.set_lost(
                                    "its lease ran out and another writer took the session".into(),
                                );
                            }
                        }
                    }
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "cannot renew session leases; retrying every {} ms (a lease not renewed within its lifetime may be taken over)", beat.as_millis());
                        failing = true;
                    }
                }
            }
        }
        tokio::time::sleep(beat).await;
    }
}

/// A session's lease, before it becomes a [`PgWriter`]. Dropping it releases the lease.
pub(crate) struct Lease {
    pub shared: Arc<Shared>,
    pub id: String,
    token: String,
    epoch: i64,
    state: Arc<LeaseState>,
    released: bool,
    /// The holder before this one, which never released the lease: it died (or stopped
    /// renewing), and this lease was taken over from it.
    pub previous: Option<Holder>,
}

impl Lease {
    /// Takes the lease of session `id`: a free one, one run out, or a live one whose holder
    /// runs on this host and is gone (pid and start time: a reused pid does not count),
    /// which is taken over at once through the fencing epoch. `Ok(Err(busy))` when a live
    /// holder (or one on another host, until its lease runs out) has it.
    pub(crate) fn take(
        shared: &Arc<Shared>,
        id: &str,
    ) -> std::result::Result<std::result::Result<Lease, Busy>, PgError> {
        let token = uuid::Uuid::now_v7().to_string();
        let holder = holder_text();
        let ttl = shared.leases.ttl_ms();
        let ctx = shared.ctx.clone();
        let (sid, tok) = (id.to_string(), token.clone());
        let got = shared.rt.run(async move {
            let c = ctx.conn().await?;
            let before = lease_row(&c, &ctx, &sid).await?;
            let dead_here = before.as_ref().filter(|b| {
                b.is_live()
                    && b.holder()
                        .is_some_and(|h| h.liveness() == lazarus_ledger::holder::Liveness::Dead)
            });
            let row = match dead_here {
                // the holder's process is gone: fence it out now, not at the lease's end
                Some(b) => c
                    .query_opt(&ctx.sql.steal_lease, &[&sid, &tok, &holder, &ttl, &b.epoch])
                    .await
                    .map_err(ctx.db("take over the session lease"))?,
                None => c
                    .query_opt(&ctx.sql.take_lease, &[&sid, &tok, &holder, &ttl])
                    .await
                    .map_err(ctx.db("take the session lease"))?,
            };
            if let Some(r) = row {
                // a row left behind means its holder never released it
                let previous = before.and_then(|b| b.holder());
                return Ok(Ok((r.get::<_, i64>(0), previous)));
            }
            let holder = lock_holder(&c, &ctx, &sid).await.unwrap_or(None);
            let exists: bool = c
                .query_one(&ctx.sql.exists, &[&sid])
                .await
                .map_err(ctx.db("look up the session"))?
                .get(0);
            Ok(Err(Busy { holder, exists }))
        })?;
        Ok(got.map(|(epoch, previous)| {
            let state = Arc::new(LeaseState::default());
            shared.leases.map().insert(token.clone(), state.clone());
            Lease {
                shared: shared.clone(),
                id: id.to_string(),
                token,
                epoch,
                state,
                released: false,
                previous,
            }
        }))
    }

    /// The writer, appending from `next_seq` on, after `size` bytes.
    pub(crate) fn into_writer(self, next_seq: u64, size: u64) -> PgWriter {
        let location = self.shared.ctx.session_location(&self.id);
        PgWriter {
            id: self.id.clone(),
            location,
            inner: Mutex::new(Inner {
                next_seq,
                size,
                lost: None,
                buf: Vec::new(),
            }),
            lease: self,
        }
    }

    fn release(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        self.shared.leases.map().remove(&self.token);
        let ctx = self.shared.ctx.clone();
        let token = self.token.clone();
        // Best effort, bounded: a lease not released runs out by itself.
        let _ = self.shared.rt.run(async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                if let Ok(c) = ctx.conn().await {
                    let _ = c.execute(&ctx.sql.release_lease, &[&token]).await;
                }
            })
            .await;
            Ok(())
        });
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release();
    }
}

struct Inner {
    next_seq: u64,
    /// Bytes of the session's export so far (where the next line starts).
    size: u64,
    /// Why this writer may no longer write.
    lost: Option<String>,
    buf: Vec<u8>,
}

/// The writer of one session (the [`RecordSink`] behind a PostgreSQL [`Session`]).
///
/// It holds the session's lease and no connection: each append is queued for the store's
/// next batch (one statement and one commit for many sessions' records), fenced by the lease.
///
/// [`Session`]: lazarus_session::Session
pub struct PgWriter {
    id: String,
    location: String,
    inner: Mutex<Inner>,
    lease: Lease,
}

impl std::fmt::Debug for PgWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWriter")
            .field("id", &self.id)
            .field("epoch", &self.lease.epoch)
            .finish_non_exhaustive()
    }
}

impl PgWriter {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The fencing number of this writer's lease.
    pub fn epoch(&self) -> i64 {
        self.lease.epoch
    }

    /// The seq the next append will take.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// Why this writer can no longer write, if it can't.
    pub fn lost(&self) -> Option<String> {
        self.lock().lost.clone().or_else(|| self.lease.state.lost())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ctx(&self) -> &Arc<Ctx> {
        &self.lease.shared.ctx
    }

    /// Appends the next record; returns once it is committed.
    pub fn append_json(&self, kind: &str, data_json: &[u8]) -> Result<Stored> {
        let seq = self.lock().next_seq;
        self.append_at(seq, kind, data_json)
    }

    /// Appends a record stating the seq it expects to take. A seq that is not the session's
    /// next free one fails with [`SessionError::Conflict`] and writes nothing: a taken seq is
    /// refused by the table's primary key, a seq beyond the end (a gap) before anything is
    /// sent. The writer must then be reopened, since the log is not what it believed.
    pub fn append_at(&self, seq: u64, kind: &str, data_json: &[u8]) -> Result<Stored> {
        if data_json.first() != Some(&b'{') || data_json.contains(&b'\n') {
            return Err(SessionError::Ledger(LedgerError::Serialize(
                "record data must be one-line compact JSON object text".into(),
            )));
        }
        let mut guard = self.lock();
        let inner = &mut *guard;
        if let Some(cause) = inner.lost.clone().or_else(|| self.lease.state.lost()) {
            inner.lost = Some(cause.clone());
            return Err(self.lost_error(cause));
        }
        if seq > inner.next_seq {
            inner.lost = Some(format!("append conflict at seq {seq}"));
            return Err(self.conflict(seq));
        }
        let ts = frame::format_ts(jiff::Timestamp::now());
        inner.buf.clear();
        frame::encode_line(&mut inner.buf, seq, &ts, kind, data_json);
        inner.buf.pop(); // the newline is not stored
        if inner.buf.len() > LINE_BYTES_MAX_DEFAULT {
            return Err(SessionError::Ledger(LedgerError::RecordTooLarge {
                len: inner.buf.len(),
                max: LINE_BYTES_MAX_DEFAULT,
            }));
        }
        let end = inner.size + inner.buf.len() as u64 + 1;
        let append = crate::commit::Append {
            id: self.id.clone(),
            seq: seq as i64,
            kind: kind.to_string(),
            line: inner.buf.clone(),
            end: end as i64,
            token: self.lease.token.clone(),
            epoch: self.lease.epoch,
            ts: ts.to_string(),
        };
        // Queued with the appends of other sessions, committed in one batch (group commit);
        // answered once that commit returned.
        let answer = self.lease.shared.commit.submit(append);
        let outcome = self.lease.shared.rt.run(async move {
            answer.await.unwrap_or_else(|_| {
                Ok(Outcome::Unknown(
                    "the PostgreSQL store's append queue stopped while the append was queued"
                        .into(),
                ))
            })
        });
        // An error here means nothing was sent (no connection): the writer is intact.
        match outcome? {
            Outcome::Inserted => {
                inner.next_seq = seq + 1;
                inner.size = end;
                Ok(Stored { seq, ts })
            }
            Outcome::Fenced => {
                let cause = "another writer took its lease (this one was not renewed in time)";
                inner.lost = Some(cause.into());
                self.lease.state.set_lost(cause.into());
                Err(self.lost_error(cause.into()))
            }
            Outcome::SeqTaken => {
                inner.lost = Some(format!("append conflict at seq {seq}"));
                Err(self.conflict(seq))
            }
            Outcome::Unknown(cause) => {
                // The statement may or may not have committed (a connection cut at commit):
                // this writer's view of the log is no longer certain.
                inner.lost = Some(cause.clone());
                Err(self.lost_error(cause))
            }
        }
    }

    fn lost_error(&self, cause: String) -> SessionError {
        SessionError::WriterLost {
            id: self.id.clone(),
            location: self.ctx().location.clone(),
            cause,
        }
    }

    fn conflict(&self, seq: u64) -> SessionError {
        SessionError::Conflict {
            id: self.id.clone(),
            location: self.ctx().location.clone(),
            seq,
        }
    }

    /// Runs `f` with a pooled connection on the store's runtime.
    fn with_conn<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(Arc<Ctx>, deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = std::result::Result<T, PgError>> + Send + 'static,
        T: Send + 'static,
    {
        let ctx = self.ctx().clone();
        self.lease
            .shared
            .rt
            .run(async move {
                let c = ctx.conn().await?;
                f(ctx, c).await
            })
            .map_err(Into::into)
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
        // a writer that lost its lease drains nothing: its next append would insert nothing
        if let Some(cause) = self.lost() {
            return Err(self.lost_error(cause));
        }
        // batched with the looks of the store's other writers
        let answer = self.lease.shared.peek.submit(crate::peek::Peek {
            id: self.id.clone(),
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
        });
        let location = self.ctx().location.clone();
        Ok(self.lease.shared.rt.run(async move {
            answer.await.unwrap_or_else(|_| {
                Err(PgError::Unavailable {
                    location,
                    cause: "the PostgreSQL store's inbox queue stopped".into(),
                })
            })
        })?)
    }

    fn inbox_consume(&self, message_id: &str) -> Result<()> {
        let (id, message_id) = (self.id.clone(), message_id.to_string());
        self.with_conn(move |ctx, c| async move {
            c.execute(&ctx.sql.inbox_consume, &[&id, &message_id])
                .await
                .map_err(ctx.db("consume an inbox message"))
                .map(|_| ())
        })
    }
}
