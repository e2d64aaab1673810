//! # lazarus-store-postgres
//!
//! The session [`Store`] on PostgreSQL, held to the same conformance suite as the local
//! file store. See `docs/postgres.md` for the schema, the locking and the fencing.
//!
//! * Records are rows keyed by `(session_id, seq)`; each keeps the exact line (CRC included)
//!   a local ledger file would hold, so [`PgStore::export`] gives back byte for byte the JSONL
//!   of a local session, and [`PgStore::import_lines`] takes one in.
//! * An append is one INSERT of the record with the seq it expects, on the writer's locked
//!   connection: a taken seq fails the primary key ([`SessionError::Conflict`]) and
//!   never overwrites; the writer never skips a seq. Listings read each session's newest
//!   record through the primary key (one index probe per session, no scan).
//! * One writer per session: a writer holds the session's advisory lock on its own
//!   connection for its whole life, and appends on that connection only (the fence). The
//!   lock dies with the connection; a second writer gets "in use by pid … on host … since …".
//!
//! The trait is synchronous; each store runs a small tokio runtime of its own and may be
//! called from any thread, including from inside another runtime (`spawn_blocking` or even
//! an async task: the call then blocks that thread while the store's runtime does the I/O).

use std::sync::Arc;
use std::time::Duration;

use futures_util::{TryStreamExt, pin_mut};
use lazarus_ledger::frame;
use lazarus_ledger::{Header, LedgerError, Parent, Problem};
use lazarus_session::record::ForkPoint;
use lazarus_session::state::status_from_tail;
use lazarus_session::{
    CreateOptions, FORMAT, OpenReport, Record, Result, Session, SessionError, SessionState,
    SessionSummary, Status, Store, StoredRecord,
};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, IsolationLevel, Row};

mod error;
mod lines;
mod rt;
mod schema;
mod writer;

pub use error::PgError;
pub use schema::{SCHEMA_VERSION, validate_schema_name};
pub use writer::{LockHolder, PgWriter};

use lines::{Replay, check_end, check_line, corrupt, parse_header};
use rt::Rt;
use schema::Sql;
use writer::Locked;

/// The schema used when none is given.
pub const DEFAULT_SCHEMA: &str = "lazarus";

/// How a [`PgStore`] connects.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// PostgreSQL schema holding the tables (created if missing). Default `lazarus`.
    pub schema: String,
    /// Pooled connections for readers, create-free work, fork and import. Writers use one
    /// dedicated connection each, on top of these. Default 16.
    pub pool_size: usize,
    /// Worker threads of the store's own tokio runtime. Default 2.
    pub runtime_workers: usize,
    /// Apply missing migrations on connect (default). When false, a schema older than this
    /// build is refused instead. A newer one is always refused.
    pub migrate: bool,
    /// Connect timeout, unless the URL sets one. Default 10 s.
    pub connect_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: DEFAULT_SCHEMA.to_string(),
            pool_size: 16,
            runtime_workers: 2,
            migrate: true,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// What futures need: cloneable, without the runtime (so a future never drops the runtime).
pub(crate) struct Ctx {
    pub pool: deadpool_postgres::Pool,
    pub pg: tokio_postgres::Config,
    pub sql: Sql,
    pub schema: String,
    /// Store location for messages (no password).
    pub location: String,
}

impl Ctx {
    /// Text whose `hashtextextended` is the advisory lock key of session `id`. The schema is
    /// part of it, so the same id in two schemas of one database are two locks.
    pub(crate) fn lock_key(&self, id: &str) -> String {
        format!("{}{id}", self.lock_prefix())
    }

    pub(crate) fn lock_prefix(&self) -> String {
        format!("lazarus:{}:", self.schema)
    }

    pub(crate) fn session_location(&self, id: &str) -> String {
        format!("{}/{id}", self.location)
    }

    fn not_found(&self, id: &str) -> PgError {
        PgError::Session(SessionError::NotFound {
            id: id.to_string(),
            location: self.location.clone(),
        })
    }

    fn already_exists(&self, id: &str) -> PgError {
        PgError::Session(SessionError::AlreadyExists {
            id: id.to_string(),
            location: self.location.clone(),
        })
    }

    fn db(&self, op: &'static str) -> impl Fn(tokio_postgres::Error) -> PgError + '_ {
        move |e| PgError::db(&self.location, op, &e)
    }

    async fn conn(&self) -> std::result::Result<deadpool_postgres::Object, PgError> {
        self.pool
            .get()
            .await
            .map_err(|e| PgError::pool(&self.location, &e))
    }
}

pub(crate) struct Shared {
    pub ctx: Arc<Ctx>,
    // Declared last: dropped after the pool's last user.
    pub rt: Rt,
}

/// Sessions in a PostgreSQL database. Cheap to clone (clones share the runtime and pool).
#[derive(Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.shared.ctx.location)
            .finish_non_exhaustive()
    }
}

/// Splits a `schema=NAME` query parameter (ours, not libpq's) off a `postgres://` URL.
fn split_schema_param(url: &str) -> (String, Option<String>) {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return (url.to_string(), None);
    }
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix("schema=") {
            Some(v) => {
                schema = Some(v.to_string());
                false
            }
            None => !kv.is_empty(),
        })
        .collect();
    if rest.is_empty() {
        (base.to_string(), schema)
    } else {
        (format!("{base}?{}", rest.join("&")), schema)
    }
}

fn describe_location(cfg: &tokio_postgres::Config, schema: &str) -> String {
    use tokio_postgres::config::Host;
    let host = match cfg.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    let user = cfg.get_user().unwrap_or("");
    let db = cfg.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}/{schema}")
}

fn slice_iter<'a>(
    s: &'a [&'a (dyn ToSql + Sync)],
) -> impl ExactSizeIterator<Item = &'a dyn ToSql> + 'a {
    s.iter().map(|s| *s as _)
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally with `?schema=NAME`),
    /// applying migrations, with default options.
    pub fn connect(url: &str) -> Result<PgStore> {
        let (url, schema) = split_schema_param(url);
        let mut opts = PgOptions::default();
        if let Some(s) = schema {
            opts.schema = s;
        }
        Self::connect_with(&url, opts)
    }

    /// Connects with explicit options (a `schema=` in the URL is not read here).
    pub fn connect_with(url: &str, opts: PgOptions) -> Result<PgStore> {
        validate_schema_name(&opts.schema)?;
        let mut pg: tokio_postgres::Config = url.parse().map_err(|e| {
            PgError::Config(format!("invalid PostgreSQL URL: {}", error::describe(&e)))
        })?;
        pg.application_name(format!(
            "lazarus pid={} host={}",
            std::process::id(),
            lazarus_ledger::lock::hostname()
        ));
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(opts.connect_timeout);
        }
        let location = describe_location(&pg, &opts.schema);
        let rt = Rt::new(opts.runtime_workers)?;
        let mgr = deadpool_postgres::Manager::from_config(
            pg.clone(),
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(mgr)
            .max_size(opts.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .create_timeout(Some(opts.connect_timeout))
            .build()
            .map_err(|e| PgError::Config(format!("cannot build the connection pool: {e}")))?;
        let ctx = Arc::new(Ctx {
            pool,
            pg,
            sql: Sql::new(&opts.schema),
            schema: opts.schema.clone(),
            location,
        });
        let store = PgStore {
            shared: Arc::new(Shared { ctx, rt }),
        };
        let apply = opts.migrate;
        store.run(move |ctx| async move {
            let mut c = ctx.conn().await?;
            schema::check_durability(&c, &ctx.location).await;
            schema::migrate(&mut c, &ctx.schema, &ctx.location, apply).await?;
            Ok(())
        })?;
        Ok(store)
    }

    fn run<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(Arc<Ctx>) -> Fut,
        Fut: Future<Output = std::result::Result<T, PgError>> + Send + 'static,
        T: Send + 'static,
    {
        let fut = f(self.shared.ctx.clone());
        self.shared.rt.run(fut).map_err(SessionError::from)
    }

    /// The schema holding this store's tables.
    pub fn schema(&self) -> &str {
        &self.shared.ctx.schema
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<i32> {
        self.run(|ctx| async move {
            let c = ctx.conn().await?;
            let v: i32 = c
                .query_one(
                    &format!(
                        "SELECT coalesce(max(version), 0) FROM \"{}\".schema_version",
                        ctx.schema
                    ),
                    &[],
                )
                .await
                .map_err(ctx.db("read the schema version"))?
                .get(0);
            Ok(v)
        })
    }

    /// Opens a session for writing and returns the writer itself (what [`Store::open`]
    /// wraps in a [`Session`]), with the replayed state.
    pub fn open_writer(&self, id: &str) -> Result<(PgWriter, SessionState, OpenReport)> {
        lazarus_ledger::validate_id(id)?;
        let ctx = self.shared.ctx.clone();
        let mut locked = match Locked::take(ctx.clone(), id)? {
            Ok(l) => l,
            Err(busy) if !busy.exists => return Err(ctx.not_found(id).into()),
            Err(busy) => {
                return Err(writer::locked_error(id, &ctx.location, busy.holder.as_ref()).into());
            }
        };
        let Locked { rt, conn, .. } = &mut locked;
        let conn = conn.as_ref().expect("connection present");
        let (state, size) = rt.run_here(replay_on(&ctx, &conn.client, id))?;
        let report = OpenReport {
            truncated_bytes: 0,
            truncated_saved_to: None,
            records_replayed: state.last_seq,
        };
        let w = locked.into_writer(state.last_seq + 1, size)?;
        Ok((w, state, report))
    }

    /// Who holds the writer lock of session `id` now, if anyone.
    pub fn lock_holder(&self, id: &str) -> Result<Option<LockHolder>> {
        lazarus_ledger::validate_id(id)?;
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            writer::lock_holder(&c, &ctx, &ctx.lock_key(&id)).await
        })
    }

    /// The session's exact JSONL: every stored line in seq order, each followed by `\n` —
    /// byte for byte what a local session file holds. Every line is checked on the way.
    pub fn export(&self, id: &str) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.export_to(id, &mut out)?;
        Ok(out)
    }

    /// Writes the session's exact JSONL to `out` (in batches; memory stays bounded).
    /// Returns the bytes written.
    pub fn export_to(&self, id: &str, out: &mut dyn std::io::Write) -> Result<u64> {
        lazarus_ledger::validate_id(id)?;
        let location = self.shared.ctx.session_location(id);
        let mut next: i64 = 0;
        let mut written: u64 = 0;
        loop {
            let batch = self.fetch_lines(id, next - 1, 1024)?;
            if batch.is_empty() {
                if next == 0 {
                    return Err(self.shared.ctx.not_found(id).into());
                }
                return Ok(written);
            }
            for (seq, line, end) in batch {
                if seq != next {
                    return Err(corrupt(
                        &location,
                        next as u64,
                        written,
                        Problem::SeqGap {
                            expected: next as u64,
                            found: seq as u64,
                        },
                    ));
                }
                if seq == 0 {
                    parse_header(&location, id, &line)?;
                } else {
                    check_line(&location, seq as u64, written, &line)?;
                }
                check_end(&location, seq as u64, written, &line, end)?;
                out.write_all(&line)
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(|e| SessionError::Backend(format!("export {id}: write: {e}")))?;
                written += line.len() as u64 + 1;
                next += 1;
            }
        }
    }

    /// Lines with seq > `after` (use -1 to include the header), at most `limit`, with their
    /// end offsets.
    fn fetch_lines(&self, id: &str, after: i64, limit: i64) -> Result<Vec<(i64, Vec<u8>, i64)>> {
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let rows = c
                .query(&ctx.sql.records_after, &[&id, &after, &limit])
                .await
                .map_err(ctx.db("read records"))?;
            Ok(rows
                .into_iter()
                .map(|r| {
                    (
                        r.get::<_, i64>(0),
                        r.get::<_, Vec<u8>>(1),
                        r.get::<_, i64>(2),
                    )
                })
                .collect())
        })
    }

    /// Stores a whole session given as its JSONL (e.g. a local session file): every line is
    /// checked (CRC, framing, gap-free seqs, header, replay) and kept byte for byte, so
    /// `export` gives back exactly `jsonl`. Never overwrites an existing session.
    pub fn import_lines(&self, jsonl: &[u8]) -> Result<SessionSummary> {
        if jsonl.is_empty() {
            return Err(SessionError::Backend("import: no lines given".into()));
        }
        if jsonl.last() != Some(&b'\n') {
            return Err(SessionError::Backend(
                "import: the last line is not complete (torn tail); run `lazarus sessions repair` on the file first".into(),
            ));
        }
        let body = &jsonl[..jsonl.len() - 1];
        let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
        // The id comes from the header; check it before anything else.
        let first: frame::Envelope<serde_json::Value> =
            frame::decode_line(lines[0]).map_err(|p| corrupt("import", 0, 0, p))?;
        let id = first
            .data
            .get("id")
            .and_then(|v| v.as_str())
            .ok_or_else(|| corrupt("import", 0, 0, Problem::Invalid("header has no id".into())))?
            .to_string();
        lazarus_ledger::validate_id(&id)?;
        let location = self.shared.ctx.session_location(&id);
        let mut replay = Replay::new(&location, &id);
        let mut end: i64 = 0;
        for (i, line) in lines.iter().enumerate() {
            end += line.len() as i64 + 1;
            replay.feed(i as i64, line, end)?;
        }
        let header = replay.finish().expect("at least the header").header.clone();
        let mut end: i64 = 0;
        let rows: Vec<(i64, String, Vec<u8>, i64)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let kind = if i == 0 {
                    "header".to_string()
                } else {
                    frame::decode_envelope::<serde::de::IgnoredAny>(l)
                        .map(|e| e.kind.to_string())
                        .unwrap_or_default()
                };
                end += l.len() as i64 + 1;
                (i as i64, kind, l.to_vec(), end)
            })
            .collect();
        let id2 = id.clone();
        self.run(move |ctx| async move {
            let mut c = ctx.conn().await?;
            let tx = c.transaction().await.map_err(ctx.db("begin import"))?;
            tx.execute(schema::DURABLE_TX, &[])
                .await
                .map_err(ctx.db("begin import"))?;
            if !insert_session(&ctx, &tx, &header).await? {
                return Err(ctx.already_exists(&id2));
            }
            for chunk in rows.chunks(1000) {
                let seqs: Vec<i64> = chunk.iter().map(|r| r.0).collect();
                let kinds: Vec<String> = chunk.iter().map(|r| r.1.clone()).collect();
                let lines: Vec<Vec<u8>> = chunk.iter().map(|r| r.2.clone()).collect();
                let ends: Vec<i64> = chunk.iter().map(|r| r.3).collect();
                tx.execute(
                    &ctx.sql.insert_records,
                    &[&id2, &seqs, &kinds, &lines, &ends],
                )
                .await
                .map_err(ctx.db("import records"))?;
            }
            tx.commit().await.map_err(ctx.db("commit import"))?;
            Ok(())
        })?;
        self.summary(&id)
    }

    fn location_of(&self, id: &str) -> String {
        self.shared.ctx.session_location(id)
    }
}

/// Inserts a sessions row; false when the id exists already.
async fn insert_session(
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
async fn replay_on(
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

/// A listing row: `id, created_at, parent_id, meta, running, seq, kind, end_offset, line`
/// (`line` NULL when too long to send with the listing: it is read on its own).
async fn summary_from_row(
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
    let status = if running {
        Status::Running
    } else {
        status_from_tail(env.kind, &env.data)
    };
    Ok(SessionSummary {
        id,
        created_at: r.get(1),
        records: seq as u64,
        size: end as u64,
        status,
        parent: r.get(2),
        last_kind: env.kind.to_string(),
        updated_at: env.ts.to_string(),
        meta: r.get(3),
    })
}

impl Store for PgStore {
    fn create(&self, opts: CreateOptions) -> Result<Session> {
        let id = opts.id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        lazarus_ledger::validate_id(&id)?;
        let mut header = Header::new(FORMAT, &id);
        header.meta = opts.meta;
        let header_json = frame::data_to_json(&header).map_err(LedgerError::Serialize)?;
        let mut line = Vec::new();
        frame::encode_line(&mut line, 0, &header.created_at, "header", &header_json);
        line.pop();
        let size = line.len() as u64 + 1;
        let ctx = self.shared.ctx.clone();
        let mut locked = match Locked::take(ctx.clone(), &id)? {
            Ok(l) => l,
            Err(busy) if busy.exists => return Err(ctx.already_exists(&id).into()),
            Err(busy) => {
                // being created by someone else right now
                return Err(writer::locked_error(&id, &ctx.location, busy.holder.as_ref()).into());
            }
        };
        let Locked { rt, conn, .. } = &mut locked;
        let conn = conn.as_mut().expect("connection present");
        rt.run_here(async {
            let tx = conn
                .client
                .transaction()
                .await
                .map_err(ctx.db("begin create"))?;
            if !insert_session(&ctx, &tx, &header).await? {
                return Err(ctx.already_exists(&header.id));
            }
            tx.execute(
                &ctx.sql.insert_record,
                &[&header.id, &0i64, &"header", &line, &(size as i64)],
            )
            .await
            .map_err(ctx.db("insert the header"))?;
            tx.commit().await.map_err(ctx.db("commit create"))
        })?;
        let w = locked.into_writer(1, size)?;
        Ok(Session::new(
            Box::new(w),
            SessionState::new(header),
            OpenReport::default(),
        ))
    }

    fn open(&self, id: &str) -> Result<Session> {
        let (w, state, report) = self.open_writer(id)?;
        Ok(Session::new(Box::new(w), state, report))
    }

    fn load(&self, id: &str) -> Result<SessionState> {
        lazarus_ledger::validate_id(id)?;
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

    fn records(&self, id: &str, after: u64, limit: usize) -> Result<Vec<StoredRecord>> {
        lazarus_ledger::validate_id(id)?;
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

    fn summary(&self, id: &str) -> Result<SessionSummary> {
        lazarus_ledger::validate_id(id)?;
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let row = c
                .query_opt(&ctx.sql.summary, &[&ctx.lock_prefix(), &id])
                .await
                .map_err(ctx.db("read the session"))?;
            match row {
                Some(r) => summary_from_row(&ctx, &c, &r).await,
                None => Err(ctx.not_found(&id)),
            }
        })
    }

    fn list(&self) -> Result<Vec<SessionSummary>> {
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let rows = c
                .query(&ctx.sql.list, &[&ctx.lock_prefix()])
                .await
                .map_err(ctx.db("list sessions"))?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                match summary_from_row(&ctx, &c, r).await {
                    Ok(s) => out.push(s),
                    Err(e) => {
                        tracing::warn!(session = %r.get::<_, String>(0), error = %e, "unreadable session skipped in listing")
                    }
                }
            }
            Ok(out)
        })
    }

    fn fork(&self, id: &str, at_turn: u64, new_id: Option<&str>) -> Result<SessionSummary> {
        let state = self.load(id)?;
        let boundary =
            state
                .fork_boundary(at_turn)
                .map_err(|reason| SessionError::BadForkPoint {
                    id: id.to_string(),
                    turn: at_turn,
                    reason,
                })?;
        let child_id = new_id
            .map(str::to_string)
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        lazarus_ledger::validate_id(&child_id)?;
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
            tx.commit().await.map_err(ctx.db("commit fork"))?;
            Ok(())
        })?;
        self.summary(&child_id)
    }

    fn lineage(&self, id: &str) -> Result<Vec<String>> {
        lazarus_ledger::validate_id(id)?;
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let mut out = vec![id.clone()];
            let mut current = id.clone();
            for _ in 0..10_000 {
                let row = c
                    .query_opt(&ctx.sql.parent_of, &[&current])
                    .await
                    .map_err(ctx.db("read the lineage"))?;
                let Some(row) = row else {
                    return Err(ctx.not_found(&current));
                };
                match row.get::<_, Option<String>>(0) {
                    Some(p) => {
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

    fn export_to(&self, id: &str, out: &mut dyn std::io::Write) -> Result<u64> {
        PgStore::export_to(self, id, out)
    }

    fn import(&self, jsonl: &[u8]) -> Result<SessionSummary> {
        self.import_lines(jsonl)
    }

    fn location(&self) -> String {
        self.shared.ctx.location.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_param_is_split_off() {
        assert_eq!(
            split_schema_param("postgres://u@h:1/db?schema=abc"),
            ("postgres://u@h:1/db".to_string(), Some("abc".to_string()))
        );
        assert_eq!(
            split_schema_param("postgres://u@h:1/db?sslmode=disable&schema=x_1"),
            (
                "postgres://u@h:1/db?sslmode=disable".to_string(),
                Some("x_1".to_string())
            )
        );
        assert_eq!(
            split_schema_param("host=h user=u"),
            ("host=h user=u".to_string(), None)
        );
    }

    #[test]
    fn schema_names_are_checked() {
        for ok in ["lazarus", "t_1", "_x"] {
            assert!(validate_schema_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1a", "A", "a-b", "a\"b", "pg_x", &"a".repeat(64)] {
            assert!(validate_schema_name(bad).is_err(), "{bad}");
        }
    }
}
