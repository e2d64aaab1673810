//! Embedded schema migrations and the SQL of the store, for one PostgreSQL schema.

use tokio_postgres::Client;

use crate::error::PgError;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = 6;

/// Migrations in order: (version, SQL with `{schema}` for the quoted schema name).
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_inbox.sql")),
    (3, include_str!("../migrations/0003_status_cache.sql")),
    (4, include_str!("../migrations/0004_listing.sql")),
    (5, include_str!("../migrations/0005_approvals.sql")),
    (6, include_str!("../migrations/0006_status_rule.sql")),
];

/// Checks a schema name: 1–63 bytes of `[a-z0-9_]`, starting with a letter or `_`.
pub fn validate_schema_name(name: &str) -> Result<(), PgError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("pg_");
    if ok {
        Ok(())
    } else {
        Err(PgError::Config(format!(
            "invalid schema name {name:?}: use 1-63 characters of a-z, 0-9 and _, not starting with a digit or pg_"
        )))
    }
}

async fn current_version(client: &Client, schema: &str, location: &str) -> Result<i32, PgError> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass(quote_ident($1) || '.schema_version') IS NOT NULL",
            &[&schema],
        )
        .await
        .map_err(|e| PgError::db(location, "read the schema version", &e))?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: i32 = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM \"{schema}\".schema_version"),
            &[],
        )
        .await
        .map_err(|e| PgError::db(location, "read the schema version", &e))?
        .get(0);
    Ok(v)
}

/// Warns when the server does not flush its WAL (`fsync = off`): nothing is durable then.
pub(crate) async fn check_durability(client: &Client, location: &str) {
    if let Ok(row) = client
        .query_one("SELECT current_setting('fsync')", &[])
        .await
    {
        let fsync: String = row.get(0);
        if fsync != "on" {
            tracing::warn!(
                location,
                "the PostgreSQL server runs with fsync = {fsync}: acknowledged records are NOT durable across a server crash"
            );
        }
    }
}

/// Brings `schema` to [`SCHEMA_VERSION`] (creating it if needed), or refuses a newer one.
/// Concurrent migrators are serialized by a transaction-scoped advisory lock. Returns the
/// version found before migrating.
pub(crate) async fn migrate(
    client: &mut Client,
    schema: &str,
    location: &str,
    apply: bool,
) -> Result<i32, PgError> {
    let found = current_version(client, schema, location).await?;
    if found > SCHEMA_VERSION {
        return Err(PgError::SchemaTooNew {
            location: location.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(found);
    }
    if !apply {
        return Err(PgError::SchemaTooOld {
            location: location.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let db = |op: &'static str| move |e: tokio_postgres::Error| PgError::db(location, op, &e);
    let tx = client.transaction().await.map_err(db("begin migration"))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&format!("lazarus-migrate:{schema}")],
    )
    .await
    .map_err(db("lock for migration"))?;
    let q = format!("\"{schema}\"");
    let has_schema: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .await
        .map_err(db("look up the schema"))?
        .get(0);
    if !has_schema {
        tx.batch_execute(&format!("CREATE SCHEMA {q}"))
            .await
            .map_err(db("create the schema"))?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {q}.schema_version (
            version integer PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now(),
            applied_by text NOT NULL
        )"
    ))
    .await
    .map_err(db("create schema_version"))?;
    // Someone may have migrated while we waited for the lock: read again under it.
    let now: i32 = tx
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {q}.schema_version"),
            &[],
        )
        .await
        .map_err(db("read the schema version"))?
        .get(0);
    if now > SCHEMA_VERSION {
        return Err(PgError::SchemaTooNew {
            location: location.to_string(),
            found: now,
            supported: SCHEMA_VERSION,
        });
    }
    let by = format!("lazarus-store-postgres {}", env!("CARGO_PKG_VERSION"));
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > now) {
        tx.batch_execute(&sql.replace("{schema}", &q))
            .await
            .map_err(db("apply a migration"))?;
        tx.execute(
            &format!("INSERT INTO {q}.schema_version (version, applied_by) VALUES ($1, $2)"),
            &[&version, &by],
        )
        .await
        .map_err(db("record a migration"))?;
    }
    tx.commit().await.map_err(db("commit migration"))?;
    Ok(found)
}

/// The statements of the store, with the schema name filled in.
#[derive(Debug)]
pub(crate) struct Sql {
    pub append_batch: String,
    pub rebuild_listing: String,
    pub take_lease: String,
    pub steal_lease: String,
    pub renew_leases: String,
    pub release_lease: String,
    pub lease_holder: String,
    pub insert_session: String,
    pub insert_record: String,
    pub insert_records: String,
    pub session_exists: String,
    pub replay: String,
    pub records_after: String,
    pub exists: String,
    pub summary: String,
    pub list: String,
    pub list_leases: String,
    pub list_inbox: String,
    pub list_titles: String,
    pub put_status: String,
    pub inbox_stats: String,
    pub lock_session: String,
    pub inbox_has: String,
    pub line_at: String,
    pub copy_prefix: String,
    pub parent_of: String,
    pub inbox_deliver: String,
    pub inbox_waiting: String,
    pub inbox_peek: String,
    pub inbox_consume: String,
    pub with_mail: String,
    pub set_title: String,
    pub clear_title: String,
}

/// Longest first input kept in a listing row (for the title); a longer one gives no title.
/// `rebuild_listing` in migration 4 says the same.
const FIRST_INPUT_MAX: usize = 64 * 1024;

/// A `timestamptz` as text the way the ledger writes times (UTC, milliseconds).
const TS: &str = "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'";

/// Run on every new pooled connection (in one round trip):
/// * `synchronous_commit` never `off`: an acknowledged append is flushed;
/// * `idle_session_timeout` 0: the server does not close idle pooled connections under us.
///
/// Stricter settings already in force are kept.
pub(crate) const CONNECTION_SETUP: &str = "SELECT count(set_config(name, want.v, false))
         FROM (VALUES ('synchronous_commit', 'on'), ('idle_session_timeout', '0')) AS want(name, v)
         JOIN pg_settings USING (name)
         WHERE CASE name
            WHEN 'synchronous_commit' THEN setting = 'off'
            ELSE setting <> '0' END";

/// Inside a transaction: commit it durably even if the session default is `off`.
pub(crate) const DURABLE_TX: &str = "SELECT set_config('synchronous_commit', 'on', true)
    WHERE current_setting('synchronous_commit') = 'off'";

impl Sql {
    pub(crate) fn new(schema: &str) -> Sql {
        let s = format!("\"{schema}\"");
        // A session's listing row (kept by the records' triggers, see migration 4), then
        // who holds its lease (a live one), what waits in its inbox and the title a person
        // gave it: see `rows::Listed` and `rows::Beside` for the column order.
        let listing = "l.session_id, l.created_at, l.parent_id, l.meta, l.last_seq, l.last_kind, \
                       l.end_offset, l.updated_at, l.first_input, l.status_seq, l.status, l.status_error";
        let taken_at = format!("to_char(le.taken_at AT TIME ZONE 'UTC', {TS})");
        let oldest = format!("to_char(ib.oldest AT TIME ZONE 'UTC', {TS})");
        Sql {
            // The appends of a batch (see `commit`): one statement, one commit, every
            // record fenced by its own writer's lease ($6 token, $7 epoch: a record whose
            // lease is not its writer's is not inserted) and each session's listing row
            // updated with its record ($8: the record's ts). A batch holds at most one record
            // per session. Lease rows are share-locked in session order (as the heartbeat
            // locks them), so a take waits for the appends in flight under the old lease and
            // appends after a take see the new epoch, without deadlocks between batches and
            // renewals. A taken seq inserts nothing (never overwrites). Returns, for every
            // record (its ordinal from 1): whether its lease was its writer's, and whether it
            // was inserted.
            append_batch: format!(
                "WITH d AS (
                    SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[],
                                         $5::bigint[], $6::text[], $7::bigint[], $8::text[])
                        WITH ORDINALITY AS d(session_id, seq, kind, line, end_offset, token, epoch, ts, i)),
                 ok AS (
                    SELECT d.* FROM d JOIN {s}.leases l
                        ON l.session_id = d.session_id AND l.token = d.token AND l.epoch = d.epoch
                    ORDER BY l.session_id
                    FOR SHARE OF l),
                 ins AS (
                    INSERT INTO {s}.records (session_id, seq, kind, line, end_offset)
                    SELECT session_id, seq, kind, line, end_offset FROM ok ORDER BY session_id
                    ON CONFLICT (session_id, seq) DO NOTHING
                    RETURNING session_id, seq),
                 tail AS (
                    UPDATE {s}.listing t SET last_seq = ok.seq, last_kind = ok.kind,
                        end_offset = ok.end_offset, updated_at = ok.ts,
                        first_input = CASE WHEN ok.seq = 1 AND ok.kind = 'input'
                                                AND octet_length(ok.line) <= {FIRST_INPUT_MAX}
                                           THEN ok.line ELSE t.first_input END
                    FROM ok JOIN ins ON ins.session_id = ok.session_id AND ins.seq = ok.seq
                    WHERE t.session_id = ok.session_id)
                 SELECT d.i, EXISTS (SELECT 1 FROM ok WHERE ok.i = d.i),
                        EXISTS (SELECT 1 FROM ins WHERE ins.session_id = d.session_id AND ins.seq = d.seq)
                 FROM d"
            ),
            // A session's listing row built from its records (after a create, an import or a
            // fork wrote them, in their transaction): the function of migration 4.
            rebuild_listing: format!("SELECT {s}.rebuild_listing(ARRAY[$1::text])"),
            // A free lease, or one run out, is taken: a new token, the epoch one up.
            take_lease: format!(
                "INSERT INTO {s}.leases AS l (session_id, token, epoch, holder, taken_at, expires_at)
                 VALUES ($1, $2, 1, $3, now(), now() + $4::bigint * interval '1 millisecond')
                 ON CONFLICT (session_id) DO UPDATE
                   SET token = excluded.token, epoch = l.epoch + 1, holder = excluded.holder,
                       taken_at = now(), expires_at = excluded.expires_at
                   WHERE l.expires_at <= now()
                 RETURNING epoch"
            ),
            // Rows locked in session order, as an append batch locks them (no deadlock).
            renew_leases: format!(
                "UPDATE {s}.leases l SET expires_at = now() + $2::bigint * interval '1 millisecond'
                 FROM (SELECT session_id FROM {s}.leases WHERE token = ANY($1)
                       ORDER BY session_id FOR NO KEY UPDATE) k
                 WHERE l.session_id = k.session_id AND l.token = ANY($1)
                 RETURNING l.token"
            ),
            release_lease: format!("DELETE FROM {s}.leases WHERE token = $1"),
            lease_holder: format!(
                "SELECT holder,
                        to_char(taken_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        epoch,
                        (extract(epoch FROM expires_at - now()) * 1000)::bigint
                 FROM {s}.leases WHERE session_id = $1"
            ),
            // A live lease whose holder is known gone: taken if it is still the one seen ($5,
            // its epoch), the epoch one up so the old holder's appends insert nothing.
            steal_lease: format!(
                "UPDATE {s}.leases
                 SET token = $2, epoch = epoch + 1, holder = $3, taken_at = now(),
                     expires_at = now() + $4::bigint * interval '1 millisecond'
                 WHERE session_id = $1 AND epoch = $5::bigint
                 RETURNING epoch"
            ),
            insert_session: format!(
                "INSERT INTO {s}.sessions (id, header, created_at, parent_id, parent_seq)
                 VALUES ($1, $2::text::jsonb, $3, $4, $5::bigint)
                 ON CONFLICT (id) DO NOTHING"
            ),
            insert_record: format!(
                "INSERT INTO {s}.records (session_id, seq, kind, line, end_offset)
                 VALUES ($1, $2::bigint, $3, $4, $5::bigint)"
            ),
            insert_records: format!(
                "INSERT INTO {s}.records (session_id, seq, kind, line, end_offset)
                 SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bytea[], $5::bigint[])"
            ),
            session_exists: format!("SELECT 1 FROM {s}.sessions WHERE id = $1"),
            replay: format!(
                "SELECT seq, line, end_offset FROM {s}.records WHERE session_id = $1 ORDER BY seq"
            ),
            records_after: format!(
                "SELECT seq, line, end_offset FROM {s}.records
                 WHERE session_id = $1 AND seq > $2::bigint ORDER BY seq LIMIT $3::bigint"
            ),
            exists: format!("SELECT EXISTS (SELECT 1 FROM {s}.sessions WHERE id = $1)"),
            summary: format!(
                "SELECT {listing}, le.holder, {taken_at}, coalesce(ib.n, 0), {oldest}, ti.title
                 FROM {s}.listing l
                 LEFT JOIN {s}.leases le ON le.session_id = l.session_id AND le.expires_at > now()
                 LEFT JOIN LATERAL (
                    SELECT count(*) AS n, min(i.delivered_at) AS oldest FROM {s}.inbox i
                    WHERE i.session_id = l.session_id) ib ON true
                 LEFT JOIN {s}.titles ti ON ti.session_id = l.session_id
                 WHERE l.session_id = $1"
            ),
            // The listing is four statements sent at once, joined by the caller: the three
            // small tables joined in SQL cost more than the scan of the big one, and a sort
            // of 10^5 wide rows spills to disk at the default `work_mem`.
            list: format!("SELECT {listing} FROM {s}.listing l"),
            list_leases: format!(
                "SELECT le.session_id, le.holder, {taken_at} FROM {s}.leases le
                 WHERE le.expires_at > now()"
            ),
            list_inbox: format!(
                "SELECT ib.session_id, ib.n, {oldest} FROM (
                    SELECT i.session_id, count(*) AS n, min(i.delivered_at) AS oldest
                    FROM {s}.inbox i GROUP BY i.session_id) ib"
            ),
            list_titles: format!("SELECT session_id, title FROM {s}.titles"),
            // Only over the seq it was replayed for: an append in between wins.
            put_status: format!(
                "UPDATE {s}.listing SET status_seq = $2::bigint, status = $3, status_error = $4
                 WHERE session_id = $1 AND last_seq = $2::bigint"
            ),
            inbox_stats: format!(
                "SELECT count(*), coalesce(sum(octet_length(data)), 0)::bigint,
                        to_char(min(delivered_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                 FROM {s}.inbox WHERE session_id = $1"
            ),
            lock_session: format!("SELECT 1 FROM {s}.sessions WHERE id = $1 FOR UPDATE"),
            inbox_has: format!(
                "SELECT 1 FROM {s}.inbox WHERE session_id = $1 AND message_id = $2"
            ),
            line_at: format!(
                "SELECT line FROM {s}.records WHERE session_id = $1 AND seq = $2::bigint"
            ),
            // Copies the parent's records 1..=$3 into the child, moving each end offset by
            // the difference of the two headers' sizes ($4 = child header line + newline).
            copy_prefix: format!(
                "WITH ph AS (
                    SELECT octet_length(line) + 1 AS n FROM {s}.records
                    WHERE session_id = $2 AND seq = 0),
                 c AS (
                    INSERT INTO {s}.records (session_id, seq, kind, line, end_offset)
                    SELECT $1, r.seq, r.kind, r.line, r.end_offset - ph.n + $4::bigint
                    FROM {s}.records r, ph
                    WHERE r.session_id = $2 AND r.seq >= 1 AND r.seq <= $3::bigint
                    RETURNING seq, end_offset)
                 SELECT count(*), coalesce(max(seq), 0), coalesce(max(end_offset), $4::bigint)
                 FROM c"
            ),
            parent_of: format!("SELECT parent_id FROM {s}.sessions WHERE id = $1"),
            // Only for a session that exists; no row back: the id is waiting already (or the
            // session is gone, which the caller tells apart).
            inbox_deliver: format!(
                "INSERT INTO {s}.inbox (session_id, message_id, kind, data)
                 SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM {s}.sessions WHERE id = $1)
                 ON CONFLICT (session_id, message_id) DO NOTHING RETURNING position"
            ),
            inbox_waiting: format!(
                "SELECT kind, data FROM {s}.inbox WHERE session_id = $1
                 ORDER BY position LIMIT $2::bigint"
            ),
            // What waits in the inboxes of several sessions ($1, each with its limit $2),
            // oldest first: (the session's ordinal from 1, kind, data). See `peek`.
            inbox_peek: format!(
                "SELECT s.i, m.kind, m.data
                 FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS s(id, lim, i)
                 CROSS JOIN LATERAL (SELECT kind, data, position FROM {s}.inbox
                     WHERE session_id = s.id ORDER BY position LIMIT s.lim) m
                 ORDER BY s.i, m.position"
            ),
            inbox_consume: format!(
                "DELETE FROM {s}.inbox WHERE session_id = $1 AND message_id = $2"
            ),
            with_mail: format!("SELECT DISTINCT session_id FROM {s}.inbox"),
            set_title: format!(
                "INSERT INTO {s}.titles (session_id, title)
                 SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM {s}.sessions WHERE id = $1)
                 ON CONFLICT (session_id) DO UPDATE SET title = excluded.title, set_at = now()"
            ),
            clear_title: format!("DELETE FROM {s}.titles WHERE session_id = $1"),
        }
    }
}
