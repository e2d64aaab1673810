//! Group commit of appends. Writers queue their records here; a batch of them — the records
//! of many sessions, at most one per session — goes to the server as **one statement and one
//! commit** (one WAL flush) on a pooled connection. Each record stays fenced by its own
//! writer's lease in that statement, and each writer learns its own outcome: a batch mixes
//! committed records, records whose lease was taken, and records whose seq was taken.
//!
//! A batch leaves as soon as a batch slot is free; while the slots are busy (a commit waits
//! for its WAL flush), the records that arrive meanwhile wait and leave together. So one
//! session alone pays one round trip, as before, and 64 sessions share a flush instead of
//! queuing for the pool's few connections one commit each.
//!
//! Durability: a writer is answered only after the batch's commit returned (its WAL flushed:
//! `synchronous_commit` stays on, see `schema::CONNECTION_SETUP`).

use std::sync::Arc;

use futures_util::FutureExt;
use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;

use crate::batch::{Item, Job, Queue};
use crate::ctx::Ctx;
use crate::error::{PgError, describe, is_connection_failure};

/// One record to append, with the lease that fences it.
pub(crate) struct Append {
    pub id: String,
    pub seq: i64,
    pub kind: String,
    /// The framed line, without its newline.
    pub line: Vec<u8>,
    /// Where the line ends in the session's export, newline included.
    pub end: i64,
    pub token: String,
    pub epoch: i64,
    pub ts: String,
}

impl Item for Append {
    /// At most one record per session in a batch (two writers of one session in one
    /// process: a lost one and its successor).
    fn key(&self) -> Option<&str> {
        Some(&self.id)
    }
    fn bytes(&self) -> usize {
        self.line.len()
    }
}

/// What became of one record of a batch.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Committed.
    Inserted,
    /// Not inserted: the lease is no longer this writer's (taken over, or released).
    Fenced,
    /// Not inserted: its seq is taken.
    SeqTaken,
    /// The statement failed in a way that does not say whether it committed (the connection
    /// was cut, the server went away): the writer can no longer trust its view of the log.
    Unknown(String),
}

/// `Err`: nothing was sent (no connection to be had); the writer is intact.
pub(crate) type Reply = Result<Outcome, PgError>;

/// The queue of a store's appends.
pub(crate) type Committer = Queue<Append, Reply>;

/// Starts the store's append queue: at most `slots` batches in flight, each on its own
/// pooled connection.
pub(crate) fn committer(rt: &crate::rt::Rt, ctx: Arc<Ctx>, slots: usize) -> Committer {
    Queue::start(rt, ctx, slots, |ctx, batch| {
        async move { commit(&ctx, batch).await }.boxed()
    })
}

/// Commits `batch` and answers each of its writers. A statement the server refused rolled
/// back as a whole (nothing of it committed): its records are then tried one by one, so a
/// record that cannot be written fails alone.
async fn commit(ctx: &Ctx, batch: Vec<Job<Append, Reply>>) {
    let (jobs, replies): (Vec<Append>, Vec<oneshot::Sender<Reply>>) =
        batch.into_iter().map(|j| (j.item, j.reply)).unzip();
    match run(ctx, &jobs).await {
        Ok(outcomes) => {
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
        }
        Err(Failure::NotSent(e)) => {
            for reply in replies {
                let _ = reply.send(Err(e.again()));
            }
        }
        Err(Failure::Refused(e)) if jobs.len() > 1 => {
            tracing::debug!(error = %e, records = jobs.len(), "an append batch was refused; trying its records one by one");
            for (job, reply) in jobs.into_iter().zip(replies) {
                let one = std::slice::from_ref(&job);
                let _ = reply.send(match run(ctx, one).await {
                    Ok(mut o) => Ok(o.pop().unwrap_or(Outcome::Unknown(
                        "the append statement returned no row".into(),
                    ))),
                    Err(Failure::NotSent(e)) => Err(e.again()),
                    Err(Failure::Refused(e) | Failure::Unknown(e)) => Ok(Outcome::Unknown(e)),
                });
            }
        }
        Err(Failure::Refused(e) | Failure::Unknown(e)) => {
            for reply in replies {
                let _ = reply.send(Ok(Outcome::Unknown(e.clone())));
            }
        }
    }
}

enum Failure {
    /// No connection: nothing was sent.
    NotSent(PgError),
    /// The server answered with an error: the statement rolled back.
    Refused(String),
    /// The connection broke: it may or may not have committed.
    Unknown(String),
}

/// One batch statement; an outcome per record, in order.
async fn run(ctx: &Ctx, jobs: &[Append]) -> Result<Vec<Outcome>, Failure> {
    let c = ctx.conn().await.map_err(Failure::NotSent)?;
    let failed = |e: tokio_postgres::Error| {
        if e.as_db_error().is_some() && !is_connection_failure(&e) {
            Failure::Refused(describe(&e))
        } else {
            Failure::Unknown(describe(&e))
        }
    };
    let stmt = c
        .prepare_cached(&ctx.sql.append_batch)
        .await
        // nothing of the batch was executed yet
        .map_err(|e| Failure::NotSent(PgError::db(&ctx.location, "prepare append", &e)))?;
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    let seqs: Vec<i64> = jobs.iter().map(|j| j.seq).collect();
    let kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
    let lines: Vec<&[u8]> = jobs.iter().map(|j| j.line.as_slice()).collect();
    let ends: Vec<i64> = jobs.iter().map(|j| j.end).collect();
    let tokens: Vec<&str> = jobs.iter().map(|j| j.token.as_str()).collect();
    let epochs: Vec<i64> = jobs.iter().map(|j| j.epoch).collect();
    let ts: Vec<&str> = jobs.iter().map(|j| j.ts.as_str()).collect();
    let params: [&(dyn ToSql + Sync); 8] =
        [&ids, &seqs, &kinds, &lines, &ends, &tokens, &epochs, &ts];
    let rows = c.query(&stmt, &params).await.map_err(failed)?;
    // one row per record: (ordinal from 1, leased, inserted)
    let mut out: Vec<Option<Outcome>> = jobs.iter().map(|_| None).collect();
    for r in &rows {
        let i: i64 = r.get(0);
        let (leased, inserted): (bool, bool) = (r.get(1), r.get(2));
        if let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| out.get_mut(i)) {
            *slot = Some(match (leased, inserted) {
                (true, true) => Outcome::Inserted,
                (true, false) => Outcome::SeqTaken,
                (false, _) => Outcome::Fenced,
            });
        }
    }
    // The statement committed; a record it did not report on is not known to be written.
    Ok(out
        .into_iter()
        .map(|o| {
            o.unwrap_or(Outcome::Unknown(
                "the append batch reported nothing for it".into(),
            ))
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    //! One batch mixing every outcome, sent straight to the server (needs `LAZARUS_TEST_PG`,
    //! see `scripts/pg-test-server.sh`; skipped loudly without it unless `CI` or
    //! `LAZARUS_REQUIRE_PG` is set).

    use super::*;
    use crate::{PgOptions, PgStore};
    use lazarus_session::{CreateOptions, SessionId, Store};

    /// The test server's URL, or `None` after a loud skip (a failure where it must be there).
    pub(crate) fn url(test: &str) -> Option<String> {
        match std::env::var("LAZARUS_TEST_PG") {
            Ok(u) if !u.is_empty() => Some(u),
            _ if ["CI", "LAZARUS_REQUIRE_PG"]
                .iter()
                .any(|v| std::env::var(v).is_ok_and(|v| !v.is_empty() && v != "0")) =>
            {
                panic!("{test}: LAZARUS_TEST_PG is not set but the PostgreSQL store must be tested")
            }
            _ => {
                eprintln!("\n*** SKIPPED {test}: LAZARUS_TEST_PG is not set: NOT tested ***\n");
                None
            }
        }
    }

    fn append(id: &str, seq: i64, end: i64, token: &str, epoch: i64) -> Append {
        Append {
            id: id.into(),
            seq,
            kind: "note".into(),
            line: format!("line of {id} at {seq}").into_bytes(),
            end,
            token: token.into(),
            epoch,
            ts: "2026-12-07T10:00:00.000Z".into(),
        }
    }

    /// `(seq, line)` of every record of `id`, and its listing row's `last_seq`.
    async fn records(ctx: &Ctx, id: &str) -> (Vec<(i64, Vec<u8>)>, i64) {
        let c = ctx.conn().await.unwrap();
        let s = &ctx.schema;
        let rows = c
            .query(
                &format!(
                    "SELECT seq, line FROM \"{s}\".records WHERE session_id = $1 ORDER BY seq"
                ),
                &[&id],
            )
            .await
            .unwrap();
        let last: i64 = c
            .query_one(
                &format!("SELECT last_seq FROM \"{s}\".listing WHERE session_id = $1"),
                &[&id],
            )
            .await
            .unwrap()
            .get(0);
        (rows.iter().map(|r| (r.get(0), r.get(1))).collect(), last)
    }

    #[test]
    fn one_batch_answers_each_record_by_its_own_lease_and_seq() {
        let Some(url) = url("one_batch_answers_each_record_by_its_own_lease_and_seq") else {
            return;
        };
        let store = PgStore::connect_with(
            &url,
            PgOptions {
                schema: format!("t_{}", uuid::Uuid::new_v4().simple()),
                pool_size: 2,
                ..PgOptions::default()
            },
        )
        .unwrap();
        for id in ["live", "stale", "taken", "gone", "bad"] {
            let s = store
                .create(CreateOptions {
                    id: Some(SessionId::parse(id).unwrap()),
                    meta: None,
                })
                .unwrap();
            drop(s); // the lease is released: the test writes its own below
        }
        let ctx = store.shared.ctx.clone();
        let outcomes = store.shared.rt.run(async move {
            let c = ctx.conn().await?;
            c.execute(
                &format!(
                    "INSERT INTO \"{}\".leases (session_id, token, epoch, holder, taken_at, expires_at)
                     SELECT id, 'tok-' || id, 7, 'test', now(), now() + interval '1 hour'
                     FROM unnest(ARRAY['live', 'stale', 'taken', 'bad']) id",
                    ctx.schema
                ),
                &[],
            )
            .await
            .unwrap();
            drop(c);
            let header_end = |id: &str| {
                let ctx = ctx.clone();
                let id = id.to_string();
                async move {
                    let c = ctx.conn().await.unwrap();
                    c.query_one(
                        &format!(
                            "SELECT end_offset FROM \"{}\".records WHERE session_id = $1 AND seq = 0",
                            ctx.schema
                        ),
                        &[&id],
                    )
                    .await
                    .unwrap()
                    .get::<_, i64>(0)
                }
            };
            let end = header_end("live").await + 100;
            let batch = [
                append("live", 1, end, "tok-live", 7),
                // its lease was taken over since: epoch 7 is another writer's now
                append("stale", 1, end, "tok-stale", 6),
                // the header's seq
                append("taken", 0, end, "tok-taken", 7),
                // no lease row at all (released)
                append("gone", 1, end, "tok-gone", 7),
            ];
            let mixed = run(&ctx, &batch).await.map_err(|_| ()).unwrap();
            let before = (
                records(&ctx, "stale").await,
                records(&ctx, "taken").await,
                records(&ctx, "gone").await,
            );
            // a record the server refuses (end_offset must be > 0) fails the statement: its
            // batch is tried one by one, and the good record beside it still commits
            let refused = run(
                &ctx,
                &[append("live", 2, end + 100, "tok-live", 7), append("bad", 1, 0, "tok-bad", 7)],
            )
            .await;
            assert!(matches!(refused, Err(Failure::Refused(_))), "the bad record fails the statement");
            let (tx1, rx1) = oneshot::channel();
            let (tx2, rx2) = oneshot::channel();
            commit(
                &ctx,
                vec![
                    Job { item: append("live", 2, end + 100, "tok-live", 7), reply: tx1 },
                    Job { item: append("bad", 1, 0, "tok-bad", 7), reply: tx2 },
                ],
            )
            .await;
            let split = (rx1.await.unwrap()?, rx2.await.unwrap()?);
            let after = (records(&ctx, "live").await, records(&ctx, "bad").await);
            Ok((mixed, before, split, after))
        });
        let (mixed, (stale, taken, gone), split, (live, bad)) = outcomes.unwrap();
        let kinds: Vec<String> = mixed.iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(
            kinds,
            ["Inserted", "Fenced", "SeqTaken", "Fenced"],
            "{mixed:?}"
        );
        // nothing of the fenced or taken records landed; the taken seq kept its bytes
        assert_eq!(stale.0.len(), 1, "stale: header only");
        assert_eq!(stale.1, 0, "stale's listing row untouched");
        assert_eq!(gone.0.len(), 1, "gone: header only");
        assert_eq!(taken.0.len(), 1);
        assert_ne!(
            taken.0[0].1, b"line of taken at 0",
            "a taken seq is never overwritten"
        );
        assert_eq!(taken.1, 0, "taken's listing row untouched");
        assert!(matches!(split.0, Outcome::Inserted), "{split:?}");
        assert!(matches!(split.1, Outcome::Unknown(_)), "{split:?}");
        assert_eq!(live.0.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(live.1, 2, "live's listing row follows its newest record");
        assert_eq!(bad.0.len(), 1, "bad: header only");
    }
}
