//! Row-level steps shared by the store's operations: insert a session row, replay a
//! session on a connection, turn a listing row into a summary.

use futures_util::{TryStreamExt, pin_mut};
use lazarus_ledger::{Header, LedgerError};
use lazarus_session::state::status_from_tail;
use lazarus_session::{SessionError, SessionId, SessionState, SessionSummary, Status};
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

/// A listing row: `id, created_at, parent_id, meta, running, seq, kind, end_offset, line,
/// first line, inbox not empty, title given by a person`
/// (`line` NULL when too long to send with the listing: it is read on its own).
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
    let running: bool = r.get(4);
    let status = match status_from_tail(env.kind, &env.data) {
        _ if running => Status::Running,
        // a message waits in its inbox: work is owed
        Status::New | Status::Idle if r.get::<_, bool>(10) => Status::Pending,
        s => s,
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
        error: None,
        meta,
    })
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
