//! Row-level steps shared by the store's operations: insert a session row, replay a
//! session on a connection, turn a listing row into a summary.

use futures_util::{TryStreamExt, pin_mut};
use lazarus_ledger::{Header, LedgerError};
use lazarus_session::{HolderView, SessionError, SessionId, SessionState, SessionSummary, Status};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use crate::ctx::{Ctx, slice_iter};
use crate::error::PgError;
use crate::lines::{Replay, check_line};

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

/// Builds the listing row of session `id` from its records, in transaction `tx` (after a
/// create, an import or a fork wrote them; an append updates the row itself).
pub(crate) async fn rebuild_listing(
    ctx: &Ctx,
    tx: &tokio_postgres::Transaction<'_>,
    id: &str,
) -> std::result::Result<(), PgError> {
    tx.execute(&ctx.sql.rebuild_listing, &[&id])
        .await
        .map_err(ctx.db("write the listing row"))?;
    Ok(())
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

/// What a listing shows beside a session's listing row: who holds its lease (a live one,
/// and since when), what waits in its inbox (how many, since when) and the title a person
/// gave it. The `summary` statement returns these after the listing columns; a listing reads
/// them with statements of their own.
#[derive(Debug, Default, Clone)]
pub(crate) struct Beside {
    pub holder: Option<String>,
    pub taken_at: Option<String>,
    pub waiting: i64,
    pub waiting_since: Option<String>,
    pub title: Option<String>,
}

impl Beside {
    /// From the columns after the listing's (12..=16) of the `summary` statement.
    pub(crate) fn from_summary_row(r: &Row) -> Beside {
        Beside {
            holder: r.get(12),
            taken_at: r.get(13),
            waiting: r.get(14),
            waiting_since: r.get(15),
            title: r.get(16),
        }
    }
}

/// A listing row `r` (the `listing` table of migration 4, kept by the statements that write
/// records): `id, created_at, parent_id, meta (JSON text), last seq, last kind, end_offset,
/// updated_at, first input line, cached status (status_seq, status, error)`, with what is
/// `beside` it. `updated_at` is '' when a rebuild could not read the newest line's `ts`
/// where the frame puts it: the line is read then.
///
/// The status is the one rule: `running` while a live writer holds the lease (not one known
/// gone), else what a replay of the log says — cached in the listing row for the newest seq,
/// replayed (and cached) when the session changed since.
pub(crate) async fn summary_from_row(
    ctx: &Ctx,
    c: &Client,
    r: &Row,
    beside: Beside,
) -> std::result::Result<SessionSummary, PgError> {
    let id: &str = r.get(0);
    let seq: i64 = r.get(4);
    let mut updated_at: String = r.get(7);
    if updated_at.is_empty() {
        let line: Vec<u8> = c
            .query_one(&ctx.sql.line_at, &[&id, &seq])
            .await
            .map_err(ctx.db("read the last record"))?
            .get(0);
        let location = ctx.session_location(id);
        let end: i64 = r.get(6);
        let start = (end - line.len() as i64 - 1).max(0) as u64;
        updated_at = check_line(&location, seq as u64, start, &line)?
            .ts
            .to_string();
    }
    let holder = lease_holder(&beside);
    let (status, error) = if is_running(&holder) {
        (Status::of_held(r.get(5)), None)
    } else if let Some(cached) = cached_status(r) {
        cached
    } else {
        replay_status(ctx, c, id, seq).await?
    };
    build_summary(r, beside, holder, updated_at, status, error)
}

/// The summary of listing row `r` when it needs nothing more from the database (its status
/// is cached or it is running, and its `updated_at` was read); `None` when it does: then
/// [`summary_from_row`].
pub(crate) fn summary_from_row_now(
    r: &Row,
    beside: &mut Beside,
) -> Option<std::result::Result<SessionSummary, PgError>> {
    let updated_at: &str = r.get(7);
    if updated_at.is_empty() {
        return None;
    }
    let holder = lease_holder(beside);
    let (status, error) = if is_running(&holder) {
        (Status::of_held(r.get(5)), None)
    } else {
        cached_status(r)?
    };
    let updated_at = updated_at.to_string();
    Some(build_summary(
        r,
        std::mem::take(beside),
        holder,
        updated_at,
        status,
        error,
    ))
}

/// Who holds the session's live lease, if anyone.
fn lease_holder(beside: &Beside) -> Option<lazarus_ledger::holder::Holder> {
    crate::holder::LockHolder {
        holder: beside.holder.clone()?,
        since: beside.taken_at.clone().unwrap_or_default(),
        expires_at: String::new(),
        epoch: 0,
        expires_in_ms: 1,
    }
    .holder()
}

/// Running: a live lease held by a writer not known gone.
fn is_running(holder: &Option<lazarus_ledger::holder::Holder>) -> bool {
    holder
        .as_ref()
        .is_some_and(|h| h.liveness() != lazarus_ledger::holder::Liveness::Dead)
}

fn build_summary(
    r: &Row,
    beside: Beside,
    holder: Option<lazarus_ledger::holder::Holder>,
    updated_at: String,
    status: Status,
    error: Option<String>,
) -> std::result::Result<SessionSummary, PgError> {
    let id: &str = r.get(0);
    let title = beside.title.or_else(|| {
        let line = r.get::<_, Option<&[u8]>>(8)?;
        let first = lazarus_ledger::frame::decode_line::<FirstInput>(line).ok()?;
        Some(lazarus_session::title_of(&first.data.text))
    });
    let meta: Option<serde_json::Value> = r
        .get::<_, Option<&str>>(3)
        .and_then(|m| serde_json::from_str(m).ok());
    let workspace = meta
        .as_ref()
        .and_then(|m| m["workspace"].as_str())
        .map(str::to_string);
    let seq: i64 = r.get(4);
    let end: i64 = r.get(6);
    Ok(SessionSummary {
        // read from the database: checked as it enters
        id: SessionId::parse(id)?,
        title,
        status,
        created_at: r.get(1),
        updated_at,
        records: seq as u64,
        bytes: end as u64,
        parent: r.get(2),
        workspace,
        last_kind: r.get(5),
        error,
        meta,
        waiting: u64::try_from(beside.waiting).unwrap_or(0),
        waiting_since: beside.waiting_since,
        holder: holder.as_ref().map(HolderView::of),
    })
}

/// Of a session's first input, only what its title is made of.
#[derive(serde::Deserialize)]
struct FirstInput<'a> {
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

impl<'de: 'a, 'a> lazarus_ledger::frame::Payload<'de> for FirstInput<'a> {
    fn deserialize_kind<D: serde::Deserializer<'de>>(
        _kind: &str,
        data: D,
    ) -> Result<Self, D::Error> {
        serde::Deserialize::deserialize(data)
    }
}

/// The status listing row `r` caches, when it was replayed for the newest record.
fn cached_status(r: &Row) -> Option<(Status, Option<String>)> {
    if r.get::<_, Option<i64>>(9) != Some(r.get::<_, i64>(4)) {
        return None;
    }
    use serde::de::IntoDeserializer;
    let word: &str = r.get::<_, Option<&str>>(10)?;
    let status = <Status as serde::Deserialize>::deserialize(IntoDeserializer::<
        serde::de::value::Error,
    >::into_deserializer(word))
    .ok()?;
    Some((status, r.get(11)))
}

/// The status a replay of session `id` (newest record `seq`) gives, cached in its listing
/// row for that seq. A log the replay refuses is `corrupt`, with why.
async fn replay_status(
    ctx: &Ctx,
    c: &Client,
    id: &str,
    seq: i64,
) -> std::result::Result<(Status, Option<String>), PgError> {
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
        .map(|r| inbox_message(ctx, id, r.get(0), r.get(1)))
        .collect()
}

/// An inbox row of session `id` (its `kind` and `data`) as the message it carries.
pub(crate) fn inbox_message(
    ctx: &Ctx,
    id: &str,
    kind: &str,
    data: &[u8],
) -> std::result::Result<lazarus_session::InboxMessage, PgError> {
    lazarus_session::InboxMessage::from_parts(kind, data).map_err(|why| {
        PgError::Session(lazarus_session::SessionError::Backend(format!(
            "{}: an inbox row does not decode ({why}); delete it from the inbox table",
            ctx.session_location(id)
        )))
    })
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
