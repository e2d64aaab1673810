//! Row-level steps shared by the store's operations: insert a session row, replay a
//! session on a connection, turn a listing row into a summary.

use futures_util::{TryStreamExt, pin_mut};
use lazarus_ledger::{Header, LedgerError};
use lazarus_session::{HolderView, SessionError, SessionId, SessionState, SessionSummary, Status};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use crate::ctx::{Ctx, slice_iter};
use crate::error::PgError;
use crate::lines::{Replay, check_line, parse_header};

/// Inserts a sessions row; false when the id exists already.
pub(crate) async fn insert_session(
    ctx: &Ctx,
    c: &tokio_postgres::Transaction<'_>,
    header: &Header,
) -> std::result::Result<bool, PgError> {
    let header_json = serde_json::to_string(header).map_err(SessionError::from)?;
    let parent_id = header.parent.as_ref().map(|p| p.id.clone());
    let parent_seq = header.parent.as_ref().map(|p| p.seq as i64);
    let n = c
        .execute(
            &ctx.sql.insert_session,
            &[
                &header.id,
                &header_json,
                &header.created_at,
                &parent_id,
                &parent_seq,
            ],
        )
        .await
        .map_err(ctx.db("insert the session"))?;
    Ok(n == 1)
}

/// Replays session `id` with `client` (all records, one statement); also returns the
/// session's size in bytes.
pub(crate) async fn replay_on(
    ctx: &Ctx,
    client: &Client,
    id: &str,
) -> std::result::Result<(SessionState, u64), PgError> {
    if client
        .query_opt(&ctx.sql.session_exists, &[&id])
        .await
        .map_err(ctx.db("read the session"))?
        .is_none()
    {
        return Err(ctx.not_found(id));
    }
    let location = ctx.session_location(id);
    let mut replay = Replay::new(&location, id);
    let params: [&(dyn ToSql + Sync); 1] = [&id];
    let stream = client
        .query_raw(&ctx.sql.replay, slice_iter(&params))
        .await
        .map_err(ctx.db("read records"))?;
    pin_mut!(stream);
    while let Some(r) = stream.try_next().await.map_err(ctx.db("read records"))? {
        replay.feed(r.get(0), r.get(1), r.get(2))?;
    }
    let size = replay.offset();
    match replay.finish() {
        Some(state) => Ok((state, size)),
        None => Err(PgError::ledger(LedgerError::NoHeader {
            path: location.into(),
        })),
    }
}

/// A listing row: `id, created_at, parent_id, meta, lease holder (a live lease), seq, kind,
/// end_offset, line, first line, messages waiting, title given by a person, lease taken at,
/// oldest waiting message, cached status (last_seq, status, error)` (`line` NULL when too
/// long to send with the listing: it is read on its own).
///
/// The status is the one rule: `running` while a live writer holds the lease (not one known
/// gone), else what a replay of the log says — cached in `status_cache` for the newest seq,
/// replayed (and cached) when the session changed since.
pub(crate) async fn summary_from_row(
    ctx: &Ctx,
    c: &Client,
    r: &Row,
) -> std::result::Result<SessionSummary, PgError> {
    let id: String = r.get(0);
    let seq: i64 = r.get(5);
    let end: i64 = r.get(7);
    let line: Vec<u8> = match r.get::<_, Option<Vec<u8>>>(8) {
        Some(l) => l,
        None => c
            .query_one(&ctx.sql.line_at, &[&id, &seq])
            .await
            .map_err(ctx.db("read the last record"))?
            .get(0),
    };
    let location = ctx.session_location(&id);
    let start = (end - line.len() as i64 - 1).max(0) as u64;
    let env = if seq == 0 {
        parse_header(&location, &id, &line)?;
        check_line(&location, 0, 0, &line)?
    } else {
        check_line(&location, seq as u64, start, &line)?
    };
    let holder = r.get::<_, Option<String>>(4).and_then(|text| {
        crate::holder::LockHolder {
            holder: text,
            since: r.get::<_, Option<String>>(12).unwrap_or_default(),
            expires_at: String::new(),
            epoch: 0,
            expires_in_ms: 1,
        }
        .holder()
    });
    let running = holder
        .as_ref()
        .is_some_and(|h| h.liveness() != lazarus_ledger::holder::Liveness::Dead);
    let (status, error) = if running {
        (Status::Running, None)
    } else {
        ledger_status(ctx, c, &id, seq, r).await?
    };
    let title = r.get::<_, Option<String>>(11).or_else(|| {
        r.get::<_, Option<Vec<u8>>>(9).and_then(|l| {
            let e = lazarus_ledger::frame::decode_line::<serde_json::Value>(&l).ok()?;
            e.data["text"].as_str().map(lazarus_session::title_of)
        })
    });
    let meta: Option<serde_json::Value> = r.get(3);
    let workspace = meta
        .as_ref()
        .and_then(|m| m["workspace"].as_str())
        .map(str::to_string);
    Ok(SessionSummary {
        // read from the database: checked as it enters
        id: SessionId::parse(&id)?,
        title,
        status,
        created_at: r.get(1),
        updated_at: env.ts.to_string(),
        records: seq as u64,
        bytes: end as u64,
        parent: r.get(2),
        workspace,
        last_kind: env.kind.to_string(),
        error,
        meta,
        waiting: u64::try_from(r.get::<_, i64>(10)).unwrap_or(0),
        waiting_since: r.get(13),
        holder: holder.as_ref().map(HolderView::of),
    })
}

/// The status a replay of session `id` gives (newest record `seq`): from `status_cache` when
/// it was computed for that seq, else replayed now and cached. A log the replay refuses is
/// `corrupt`, with why.
async fn ledger_status(
    ctx: &Ctx,
    c: &Client,
    id: &str,
    seq: i64,
    r: &Row,
) -> std::result::Result<(Status, Option<String>), PgError> {
    if r.get::<_, Option<i64>>(14) == Some(seq)
        && let Some(Ok(status)) = r
            .get::<_, Option<String>>(15)
            .map(|s| serde_json::from_value::<Status>(serde_json::Value::String(s)))
    {
        return Ok((status, r.get(16)));
    }
    let (status, error) = match replay_on(ctx, c, id).await {
        Ok((state, _)) => (state.status(), None),
        Err(PgError::Session(e @ SessionError::Replay { .. })) => {
            (Status::Corrupt, Some(e.to_string()))
        }
        Err(PgError::Session(e @ SessionError::Ledger(_))) => {
            (Status::Corrupt, Some(e.to_string()))
        }
        Err(e) => return Err(e),
    };
    let text = status.to_string();
    // best effort: a cache row not written costs a replay next time
    if let Err(e) = c
        .execute(&ctx.sql.put_status, &[&id, &seq, &text, &error])
        .await
    {
        tracing::debug!(session = id, error = %e, "cannot cache the replayed status");
    }
    Ok((status, error))
}

/// Up to `limit` messages waiting in the inbox of session `id`, oldest first. A row that does
/// not decode is an error naming it (the inbox is written only through `deliver`).
pub(crate) async fn inbox_waiting(
    ctx: &Ctx,
    c: &Client,
    id: &str,
    limit: usize,
) -> std::result::Result<Vec<lazarus_session::InboxMessage>, PgError> {
    let rows = c
        .query(&ctx.sql.inbox_waiting, &[&id, &(limit as i64)])
        .await
        .map_err(ctx.db("read the inbox"))?;
    rows.iter()
        .map(|r| {
            let kind: String = r.get(0);
            let data: Vec<u8> = r.get(1);
            lazarus_session::InboxMessage::from_parts(&kind, &data).map_err(|why| {
                PgError::Session(lazarus_session::SessionError::Backend(format!(
                    "{}: an inbox row does not decode ({why}); delete it from the inbox table",
                    ctx.session_location(id)
                )))
            })
        })
        .collect()
}

/// What waits in the inbox of session `id` (a PostgreSQL inbox sets nothing aside: a row
/// that does not decode is an error when drained).
pub(crate) async fn inbox_stats(
    ctx: &Ctx,
    c: &Client,
    id: &str,
) -> std::result::Result<lazarus_session::Waiting, PgError> {
    let r = c
        .query_one(&ctx.sql.inbox_stats, &[&id])
        .await
        .map_err(ctx.db("read the inbox"))?;
    Ok(lazarus_session::Waiting {
        messages: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
        bytes: u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
        oldest: r.get(2),
        set_aside: 0,
    })
}
