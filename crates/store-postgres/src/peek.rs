//! The look into a session's inbox before each of its writer's own inputs (the inbox rule:
//! what waits was accepted first), batched across sessions: one statement answers the looks
//! of every writer waiting meanwhile. The look is a read: nothing is locked or written.

use std::sync::Arc;

use futures_util::FutureExt;
use lazarus_session::InboxMessage;

use crate::batch::{Item, Job, Queue};
use crate::ctx::Ctx;
use crate::error::PgError;

/// Up to `limit` messages waiting for session `id`, oldest first.
pub(crate) struct Peek {
    pub id: String,
    pub limit: i64,
}

impl Item for Peek {
    fn key(&self) -> Option<&str> {
        None
    }
    fn bytes(&self) -> usize {
        self.id.len()
    }
}

pub(crate) type Reply = Result<Vec<InboxMessage>, PgError>;

/// The queue of a store's inbox looks.
pub(crate) type Peeker = Queue<Peek, Reply>;

/// Starts the store's inbox-look queue: at most `slots` batches in flight.
pub(crate) fn peeker(rt: &crate::rt::Rt, ctx: Arc<Ctx>, slots: usize) -> Peeker {
    Queue::start(rt, ctx, slots, |ctx, batch| {
        async move { serve(&ctx, batch).await }.boxed()
    })
}

async fn serve(ctx: &Ctx, batch: Vec<Job<Peek, Reply>>) {
    match run(ctx, &batch).await {
        Ok(mut found) => {
            for (job, msgs) in batch.into_iter().zip(found.drain(..)) {
                let _ = job.reply.send(msgs);
            }
        }
        Err(e) => {
            for job in batch {
                let _ = job.reply.send(Err(e.again()));
            }
        }
    }
}

/// The messages of every look of `batch`, in order.
async fn run(ctx: &Ctx, batch: &[Job<Peek, Reply>]) -> Result<Vec<Reply>, PgError> {
    let c = ctx.conn().await?;
    let stmt = c
        .prepare_cached(&ctx.sql.inbox_peek)
        .await
        .map_err(ctx.db("read the inbox"))?;
    let ids: Vec<&str> = batch.iter().map(|j| j.item.id.as_str()).collect();
    let limits: Vec<i64> = batch.iter().map(|j| j.item.limit).collect();
    let rows = c
        .query(&stmt, &[&ids, &limits])
        .await
        .map_err(ctx.db("read the inbox"))?;
    let mut out: Vec<Reply> = batch.iter().map(|_| Ok(Vec::new())).collect();
    for r in &rows {
        let i: i64 = r.get(0);
        let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| out.get_mut(i)) else {
            continue;
        };
        let id = ids[usize::try_from(i - 1).unwrap_or(0)];
        let msg = crate::rows::inbox_message(ctx, id, r.get(1), r.get(2));
        match (slot.as_mut(), msg) {
            (Ok(msgs), Ok(m)) => msgs.push(m),
            (Ok(_), Err(e)) => *slot = Err(e),
            (Err(_), _) => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! One batch of looks into several inboxes (needs `LAZARUS_TEST_PG`, see
    //! `scripts/pg-test-server.sh`; skipped loudly without it unless `CI` or
    //! `LAZARUS_REQUIRE_PG` is set).

    use super::*;
    use crate::{PgOptions, PgStore};
    use lazarus_session::{SessionId, Store};

    #[test]
    fn one_batch_of_looks_gives_each_session_its_own_messages() {
        let Some(url) =
            crate::commit::tests::url("one_batch_of_looks_gives_each_session_its_own_messages")
        else {
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
        let sid = |id: &str| SessionId::parse(id).unwrap();
        for id in ["a", "b", "c"] {
            drop(
                store
                    .create(lazarus_session::CreateOptions {
                        id: Some(sid(id)),
                        meta: None,
                    })
                    .unwrap(),
            );
        }
        for (id, m) in [
            ("c", "c1"),
            ("a", "a1"),
            ("c", "c2"),
            ("a", "a2"),
            ("c", "c3"),
        ] {
            store
                .deliver(&sid(id), &InboxMessage::input(m, "api", m))
                .unwrap();
        }
        let ctx = store.shared.ctx.clone();
        let looks = [("a", 64), ("b", 64), ("c", 2), ("a", 1)];
        let answers = store
            .shared
            .rt
            .run(async move {
                let mut batch = Vec::new();
                let mut answers = Vec::new();
                for (id, limit) in looks {
                    let (reply, rx) = tokio::sync::oneshot::channel();
                    batch.push(Job {
                        item: Peek {
                            id: id.into(),
                            limit,
                        },
                        reply,
                    });
                    answers.push(rx);
                }
                serve(&ctx, batch).await;
                let mut out = Vec::new();
                for rx in answers {
                    let msgs = rx.await.unwrap()?;
                    out.push(
                        msgs.iter()
                            .map(|m| m.message_id().to_string())
                            .collect::<Vec<_>>(),
                    );
                }
                Ok(out)
            })
            .unwrap();
        assert_eq!(
            answers,
            [vec!["a1", "a2"], vec![], vec!["c1", "c2"], vec!["a1"]],
            "each look gets its own session's messages, oldest first, up to its limit"
        );
    }
}
