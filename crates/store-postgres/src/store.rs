//! The [`Store`] trait on PostgreSQL.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{TryStreamExt, pin_mut};

use lazarus_ledger::frame;
use lazarus_ledger::{Header, LedgerError, Parent, Problem};
use lazarus_session::inbox::{INBOX_BYTES_MAX, INBOX_MESSAGES_MAX};
use lazarus_session::record::ForkPoint;
use lazarus_session::{
    CreateOptions, Delivery, FORMAT, InboxMessage, OpenReport, Record, Result, Session,
    SessionError, SessionId, SessionState, SessionSummary, Store, StoredRecord, Waiting,
};
use tokio_postgres::IsolationLevel;

use crate::PgStore;
use crate::ctx::slice_iter;
use crate::error::PgError;
use crate::lines::{check_line, corrupt};
use crate::rows::{
    Beside, insert_session, rebuild_listing, replay_on, summary_from_row, summary_from_row_now,
};
use crate::schema::{self};
use crate::writer::{self, Lease};

impl Store for PgStore {
    fn create(&self, opts: CreateOptions) -> Result<Session> {
        let id = opts.id.unwrap_or_else(SessionId::new_v7);
        let mut header = Header::new(FORMAT, &id);
        header.meta = opts.meta;
        let header_json = frame::data_to_json(&header).map_err(LedgerError::Serialize)?;
        let mut line = Vec::new();
        frame::encode_line(&mut line, 0, &header.created_at, "header", &header_json);
        line.pop();
        let size = line.len() as u64 + 1;
        let ctx = self.shared.ctx.clone();
        let lease = match Lease::take(&self.shared, &id)? {
            Ok(l) => l,
            Err(busy) if busy.exists => return Err(ctx.already_exists(&id).into()),
            Err(busy) => {
                // being created by someone else right now
                return Err(writer::locked_error(&id, &ctx.location, busy.holder.as_ref()).into());
            }
        };
        let h = header.clone();
        self.run(move |ctx| async move {
            let mut c = ctx.conn().await?;
            let tx = c.transaction().await.map_err(ctx.db("begin create"))?;
            if !insert_session(&ctx, &tx, &h).await? {
                return Err(ctx.already_exists(&h.id));
            }
            tx.execute(
                &ctx.sql.insert_record,
                &[&h.id, &0i64, &"header", &line, &(size as i64)],
            )
            .await
            .map_err(ctx.db("insert the header"))?;
            rebuild_listing(&ctx, &tx, &h.id).await?;
            tx.commit().await.map_err(ctx.db("commit create"))
        })?;
        let w = lease.into_writer(1, size);
        Session::from_parts(
            Box::new(w),
            SessionState::new(header),
            OpenReport::default(),
        )
    }

    fn open(&self, id: &SessionId) -> Result<Session> {
        let (w, state, report) = self.open_writer(id)?;
        Session::from_parts(Box::new(w), state, report)
    }

    fn load(&self, id: &SessionId) -> Result<SessionState> {
        let id = id.to_string();
        self.run(move |ctx| async move {
            let mut c = ctx.conn().await?;
            // One snapshot for the sessions row and the records.
            let tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(ctx.db("begin read"))?;
            let state = replay_on(&ctx, tx.client(), &id).await;
            let _ = tx.rollback().await;
            state.map(|(state, _)| state)
        })
    }

    fn records(&self, id: &SessionId, after: u64, limit: usize) -> Result<Vec<StoredRecord>> {
        let location = self.location_of(id);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after_i = i64::try_from(after).unwrap_or(i64::MAX);
        let id_s = id.to_string();
        let rows = self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let rows = c
                .query(&ctx.sql.records_after, &[&id_s, &after_i, &limit])
                .await
                .map_err(ctx.db("read records"))?;
            if rows.is_empty() {
                let exists: bool = c
                    .query_one(&ctx.sql.exists, &[&id_s])
                    .await
                    .map_err(ctx.db("look up the session"))?
                    .get(0);
                if !exists {
                    return Err(ctx.not_found(&id_s));
                }
            }
            Ok(rows
                .into_iter()
                .map(|r| {
                    (
                        r.get::<_, i64>(0),
                        r.get::<_, Vec<u8>>(1),
                        r.get::<_, i64>(2),
                    )
                })
                .collect::<Vec<_>>())
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for (expected, (seq, line, end)) in (after + 1..).zip(rows) {
            if seq as u64 != expected {
                return Err(corrupt(
                    &location,
                    expected,
                    0,
                    Problem::SeqGap {
                        expected,
                        found: seq as u64,
                    },
                ));
            }
            let start = (end - line.len() as i64 - 1).max(0) as u64;
            let env = check_line(&location, expected, start, &line)?;
            out.push(StoredRecord {
                seq: env.seq,
                ts: env.ts.to_string(),
                kind: env.kind.to_string(),
                data: env.data,
            });
        }
        Ok(out)
    }

    fn summary(&self, id: &SessionId) -> Result<SessionSummary> {
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let row = c
                .query_opt(&ctx.sql.summary, &[&id])
                .await
                .map_err(ctx.db("read the session"))?;
            match row {
                Some(r) => summary_from_row(&ctx, &c, &r, Beside::from_summary_row(&r)).await,
                None => Err(ctx.not_found(&id)),
            }
        })
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            // Four statements in flight at once on one connection (pipelined); the rows of
            // the big one are turned into summaries as they arrive, while the server sends
            // the rest. A row that needs the database again (a status to replay) waits for
            // the end of the stream.
            let (leases, inbox, titles, rows) = futures_util::try_join!(
                c.query(&ctx.sql.list_leases, &[]),
                c.query(&ctx.sql.list_inbox, &[]),
                c.query(&ctx.sql.list_titles, &[]),
                c.query_raw(&ctx.sql.list, slice_iter(&[])),
            )
            .map_err(ctx.db("list sessions"))?;
            let mut beside: HashMap<String, Beside> = HashMap::new();
            for r in &leases {
                let b = beside.entry(r.get(0)).or_default();
                b.holder = r.get(1);
                b.taken_at = r.get(2);
            }
            for r in &inbox {
                let b = beside.entry(r.get(0)).or_default();
                b.waiting = r.get(1);
                b.waiting_since = r.get(2);
            }
            for r in &titles {
                beside.entry(r.get(0)).or_default().title = r.get(1);
            }
            let mut out = Vec::new();
            let mut later = Vec::new();
            pin_mut!(rows);
            while let Some(r) = rows.try_next().await.map_err(ctx.db("list sessions"))? {
                let id: &str = r.get(0);
                let mut b = beside.remove(id).unwrap_or_default();
                match summary_from_row_now(&r, &mut b) {
                    Some(Ok(s)) => out.push(s),
                    Some(Err(e)) => skipped(id, &e),
                    None => later.push((r, b)),
                }
            }
            for (r, b) in later {
                match summary_from_row(&ctx, &c, &r, b).await {
                    Ok(s) => out.push(s),
                    Err(e) => skipped(r.get(0), &e),
                }
            }
            // in the local store's order; sorted here, as the statement's own sort of 10^5 wide
            // rows spills to disk at the default `work_mem`
            out.sort_by_cached_key(|s| {
                (
                    lazarus_session::store::time_sort_key(&s.created_at),
                    s.id.clone(),
                )
            });
            Ok(out)
        })
    }

    fn fork(
        &self,
        id: &SessionId,
        at_turn: u64,
        new_id: Option<&SessionId>,
    ) -> Result<SessionSummary> {
        let state = self.load(id)?;
        let boundary =
            state
                .fork_boundary(at_turn)
                .map_err(|reason| SessionError::BadForkPoint {
                    id: id.to_string(),
                    turn: at_turn,
                    reason,
                })?;
        let child_id = new_id.cloned().unwrap_or_else(SessionId::new_v7);
        let mut header = Header::new(FORMAT, &child_id);
        header.parent = Some(Parent {
            id: id.to_string(),
            seq: boundary,
        });
        header.meta = state.header.meta.clone();
        let header_json = frame::data_to_json(&header).map_err(LedgerError::Serialize)?;
        let mut header_line = Vec::new();
        frame::encode_line(
            &mut header_line,
            0,
            &header.created_at,
            "header",
            &header_json,
        );
        header_line.pop();
        let fork = Record::Fork(ForkPoint {
            parent: id.to_string(),
            parent_seq: boundary,
            at_turn,
        });
        let fork_json = fork.data_json()?;
        let fork_seq = boundary + 1;
        let fork_ts = frame::format_ts(jiff::Timestamp::now());
        let mut fork_line = Vec::new();
        frame::encode_line(&mut fork_line, fork_seq, &fork_ts, fork.kind(), &fork_json);
        fork_line.pop();
        let header_end = header_line.len() as i64 + 1;
        let parent = id.to_string();
        let location = self.location_of(id);
        self.run(move |ctx| async move {
            let mut c = ctx.conn().await?;
            let tx = c.transaction().await.map_err(ctx.db("begin fork"))?;
            tx.execute(schema::DURABLE_TX, &[])
                .await
                .map_err(ctx.db("begin fork"))?;
            let child = header.id.clone();
            if !insert_session(&ctx, &tx, &header).await? {
                return Err(ctx.already_exists(&child));
            }
            tx.execute(
                &ctx.sql.insert_record,
                &[&child, &0i64, &"header", &header_line, &header_end],
            )
            .await
            .map_err(ctx.db("insert the header"))?;
            let copied = tx
                .query_one(
                    &ctx.sql.copy_prefix,
                    &[&child, &parent, &(boundary as i64), &header_end],
                )
                .await
                .map_err(ctx.db("copy the parent's records"))?;
            let (n, max, end): (i64, i64, i64) = (copied.get(0), copied.get(1), copied.get(2));
            if n as u64 != boundary || max as u64 != boundary {
                return Err(PgError::Session(corrupt(
                    &location,
                    boundary,
                    0,
                    Problem::Invalid(format!(
                        "fork copied {n} records up to seq {max}, expected {boundary}"
                    )),
                )));
            }
            let fork_end = end + fork_line.len() as i64 + 1;
            tx.execute(
                &ctx.sql.insert_record,
                &[&child, &(fork_seq as i64), &"fork", &fork_line, &fork_end],
            )
            .await
            .map_err(ctx.db("insert the fork record"))?;
            rebuild_listing(&ctx, &tx, &child).await?;
            tx.commit().await.map_err(ctx.db("commit fork"))?;
            Ok(())
        })?;
        self.summary(&child_id)
    }

    fn lineage(&self, id: &SessionId) -> Result<Vec<SessionId>> {
        let id = id.clone();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let mut out = vec![id.clone()];
            let mut current = id.clone();
            for _ in 0..10_000 {
                let row = c
                    .query_opt(&ctx.sql.parent_of, &[&current.as_str()])
                    .await
                    .map_err(ctx.db("read the lineage"))?;
                let Some(row) = row else {
                    return Err(ctx.not_found(&current));
                };
                match row.get::<_, Option<String>>(0) {
                    Some(p) => {
                        // read from the database: checked as it enters
                        let p = SessionId::parse(&p)?;
                        if out.contains(&p) {
                            return Err(PgError::Session(SessionError::Backend(format!(
                                "fork lineage of {id:?} loops at {p:?}"
                            ))));
                        }
                        out.push(p.clone());
                        current = p;
                    }
                    None => return Ok(out),
                }
            }
            Err(PgError::Session(SessionError::Backend(format!(
                "fork lineage of {id:?} is deeper than 10,000"
            ))))
        })
    }

    fn export_to(&self, id: &SessionId, out: &mut dyn std::io::Write) -> Result<u64> {
        PgStore::export_to(self, id, out)
    }

    fn import(&self, jsonl: &[u8]) -> Result<SessionSummary> {
        self.import_lines(jsonl)
    }

    fn location(&self) -> String {
        self.shared.ctx.location.clone()
    }

    fn deliver(&self, id: &SessionId, msg: &InboxMessage) -> Result<Delivery> {
        let (id, message_id, kind, data) = (
            id.to_string(),
            msg.message_id().to_string(),
            msg.kind(),
            msg.data_json(),
        );
        self.run(move |ctx| async move {
            let mut c = ctx.conn().await?;
            // Deliveries to one session take turns on its row, so the inbox's limits hold.
            let tx = c.transaction().await.map_err(ctx.db("begin a delivery"))?;
            tx.batch_execute(crate::schema::DURABLE_TX)
                .await
                .map_err(ctx.db("begin a delivery"))?;
            if tx
                .query_opt(&ctx.sql.lock_session, &[&id])
                .await
                .map_err(ctx.db("look up the session"))?
                .is_none()
            {
                return Err(ctx.not_found(&id));
            }
            let waiting = if tx
                .query_opt(&ctx.sql.inbox_has, &[&id, &message_id])
                .await
                .map_err(ctx.db("look up the inbox"))?
                .is_some()
            {
                None
            } else {
                Some(crate::rows::inbox_stats(&ctx, tx.client(), &id).await?)
            };
            let Some(w) = waiting else {
                return Ok(Delivery {
                    message_id,
                    duplicate: true,
                });
            };
            if w.messages + 1 > INBOX_MESSAGES_MAX || w.bytes + data.len() as u64 > INBOX_BYTES_MAX
            {
                return Err(PgError::Session(SessionError::InboxFull {
                    id: id.clone(),
                    location: ctx.session_location(&id),
                    messages: w.messages,
                    bytes: w.bytes,
                    max_messages: INBOX_MESSAGES_MAX,
                    max_bytes: INBOX_BYTES_MAX,
                }));
            }
            let placed = tx
                .query_opt(&ctx.sql.inbox_deliver, &[&id, &message_id, &kind, &data])
                .await
                .map_err(ctx.db("deliver to the inbox"))?
                .is_some();
            if placed {
                // Sent when the delivery commits (never for one rolled back): the writer's
                // gateway drains the inbox at once instead of at its next poll.
                tx.execute("SELECT pg_notify($1, $2)", &[&ctx.mail.channel, &id])
                    .await
                    .map_err(ctx.db("signal a delivery"))?;
            }
            tx.commit().await.map_err(ctx.db("commit a delivery"))?;
            Ok(Delivery {
                message_id,
                duplicate: !placed,
            })
        })
    }

    fn waiting(&self, id: &SessionId) -> Result<Waiting> {
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let exists: bool = c
                .query_one(&ctx.sql.exists, &[&id])
                .await
                .map_err(ctx.db("look up the session"))?
                .get(0);
            if !exists {
                return Err(ctx.not_found(&id));
            }
            crate::rows::inbox_stats(&ctx, &c, &id).await
        })
    }

    fn rename(&self, id: &SessionId, title: Option<&str>) -> Result<()> {
        let title = title.map(lazarus_session::checked_title).transpose()?;
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let n = match &title {
                Some(t) => c
                    .execute(&ctx.sql.set_title, &[&id, t])
                    .await
                    .map_err(ctx.db("set the title"))?,
                None => {
                    c.execute(&ctx.sql.clear_title, &[&id])
                        .await
                        .map_err(ctx.db("clear the title"))?;
                    1
                }
            };
            let exists: bool = c
                .query_one(&ctx.sql.exists, &[&id])
                .await
                .map_err(ctx.db("look up the session"))?
                .get(0);
            if n == 0 || !exists {
                return Err(ctx.not_found(&id));
            }
            Ok(())
        })
    }

    fn watch_mail(&self, wake: lazarus_session::MailWake) -> bool {
        let weak = Arc::downgrade(&self.shared);
        let to = self.shared.ctx.mail.clone();
        self.shared.rt.spawn(crate::mail::listen(to, wake, move || {
            weak.strong_count() > 0
        }));
        true
    }

    fn sessions_with_mail(&self) -> Result<Vec<SessionId>> {
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let rows = c
                .query(&ctx.sql.with_mail, &[])
                .await
                .map_err(ctx.db("list inboxes"))?;
            rows.iter()
                .map(|r| Ok(SessionId::parse(r.get::<_, &str>(0))?))
                .collect()
        })
    }

    fn inbox(&self, id: &SessionId, limit: usize) -> Result<Vec<InboxMessage>> {
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            crate::rows::inbox_waiting(&ctx, &c, &id, limit).await
        })
    }
}

/// A session the listing cannot read: left out, and said in the log.
fn skipped(id: &str, e: &PgError) {
    tracing::warn!(session = id, error = %e, "unreadable session skipped in listing");
}
