//! # lazarus-store-postgres
//!
//! The session [`Store`] on PostgreSQL, held to the same conformance suite as the local
//! file store. See `docs/postgres.md` for the schema, the locking and the fencing.
//!
//! * Records are rows keyed by `(session_id, seq)`; each keeps the exact line (CRC included)
//!   a local ledger file would hold, so [`PgStore::export`] gives back byte for byte the JSONL
//!   of a local session, and [`PgStore::import_lines`] takes one in.
//! * An append inserts the record with the seq it expects, in a batch with other sessions'
//!   records (one statement, one commit: group commit) on a pooled connection: a taken seq is
//!   refused by the primary key ([`SessionError::Conflict`]) and never overwrites; the
//!   writer never skips a seq. Listings read each session's newest record through the
//!   primary key (one index probe per session, no scan).
//! * One writer per session: a writer holds the session's **lease** (a row with a token, an
//!   epoch and an expiry, renewed by the store's heartbeat) and every append is fenced by it
//!   in the same statement. A writer pins no connection: the pool bounds the connections of
//!   a process however many sessions it has open. A lease not renewed runs out and may be
//!   taken by another writer (the epoch goes up; the old writer's appends insert nothing); a
//!   second writer meanwhile gets "in use by pid … on host … since …".
//!
//! The trait is synchronous; each store runs a small tokio runtime of its own and may be
//! called from any thread, including from inside another runtime (`spawn_blocking` or even
//! an async task: the call then blocks that thread while the store's runtime does the I/O).

use std::sync::Arc;

use lazarus_session::{OpenReport, Result, SessionError, SessionId, SessionState};

mod batch;
mod commit;
mod ctx;
mod error;
mod holder;
mod lines;
mod mail;
mod options;
mod peek;
mod rows;
mod rt;
mod schema;
mod store;
pub mod tls;
mod transfer;
mod writer;

pub use error::PgError;
pub use options::{DEFAULT_SCHEMA, PgOptions};
pub use schema::{SCHEMA_VERSION, validate_schema_name};
pub use writer::{LockHolder, PgWriter};

use ctx::Ctx;
use options::{describe_location, split_schema_param};
use rows::replay_on;
use rt::Rt;
use schema::Sql;
use writer::Lease;

pub(crate) struct Shared {
    pub ctx: Arc<Ctx>,
    /// The leases of this store's writers, renewed together.
    pub leases: Arc<writer::Leases>,
    /// The queue of this store's appends, committed in batches (group commit).
    pub commit: commit::Committer,
    /// The queue of its writers' inbox looks before their own inputs, served in batches.
    pub peek: peek::Peeker,
    // Declared last: dropped after the pool's last user.
    pub rt: Rt,
}

/// Sessions in a PostgreSQL database. Cheap to clone (clones share the runtime and pool).
#[derive(Clone)]
pub struct PgStore {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.shared.ctx.location)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally with `?schema=NAME` and
    /// `lease_ttl_ms=N`), applying migrations, with default options.
    pub fn connect(url: &str) -> Result<PgStore> {
        let (url, schema) = split_schema_param(url);
        let (url, ttl) = options::split_param(&url, "lease_ttl_ms");
        let mut opts = PgOptions::default();
        if let Some(s) = schema {
            opts.schema = s;
        }
        if let Some(ms) = ttl {
            let ms: u64 = ms.parse().ok().filter(|&ms| ms >= 100).ok_or_else(|| {
                PgError::Config(format!(
                    "invalid lease_ttl_ms={ms:?} in the PostgreSQL URL: a whole number of milliseconds, at least 100"
                ))
            })?;
            opts.lease_ttl = std::time::Duration::from_millis(ms);
        }
        Self::connect_with(&url, opts)
    }

    /// Connects with explicit options (a `schema=` in the URL is not read here; `sslmode`
    /// and `sslrootcert` are, with libpq's meanings: see [`tls`]).
    pub fn connect_with(url: &str, opts: PgOptions) -> Result<PgStore> {
        validate_schema_name(&opts.schema)?;
        let (url, tls) = tls::split_tls_params(url)?;
        let mut pg: tokio_postgres::Config = url.parse().map_err(|e| {
            PgError::Config(format!("invalid PostgreSQL URL: {}", error::describe(&e)))
        })?;
        pg.ssl_mode(tls::pg_mode(tls.mode));
        let connector = tls::connector(&tls)?;
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
            connector.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(mgr)
            .max_size(opts.pool_size.max(1))
            .post_create(deadpool_postgres::Hook::async_fn(|client, _| {
                Box::pin(async move {
                    client
                        .simple_query(schema::CONNECTION_SETUP)
                        .await
                        .map(|_| ())
                        .map_err(|e| {
                            deadpool_postgres::HookError::message(format!(
                                "cannot set up the connection: {}",
                                error::describe(&e)
                            ))
                        })
                })
            }))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .create_timeout(Some(opts.connect_timeout))
            .build()
            .map_err(|e| PgError::Config(format!("cannot build the connection pool: {e}")))?;
        let mut listen_cfg = pg.clone();
        listen_cfg.application_name(format!(
            "lazarus mail listener pid={} host={}",
            std::process::id(),
            lazarus_ledger::lock::hostname()
        ));
        let mail = mail::ListenTo {
            config: listen_cfg,
            connector: connector.clone(),
            channel: mail::channel(&opts.schema),
            location: location.clone(),
        };
        let ctx = Arc::new(Ctx {
            pool,
            sql: Sql::new(&opts.schema),
            schema: opts.schema.clone(),
            location,
            mail,
        });
        let leases = writer::Leases::new(opts.lease_ttl);
        rt.spawn(writer::heartbeat(ctx.clone(), Arc::downgrade(&leases)));
        let commit = commit::committer(&rt, ctx.clone(), opts.append_slots());
        let peek = peek::peeker(&rt, ctx.clone(), opts.peek_slots());
        let store = PgStore {
            shared: Arc::new(Shared {
                ctx,
                leases,
                commit,
                peek,
                rt,
            }),
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

    pub(crate) fn run<T, F, Fut>(&self, f: F) -> Result<T>
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
    pub fn open_writer(&self, id: &SessionId) -> Result<(PgWriter, SessionState, OpenReport)> {
        let ctx = self.shared.ctx.clone();
        let lease = match Lease::take(&self.shared, id)? {
            Ok(l) => l,
            Err(busy) if !busy.exists => return Err(ctx.not_found(id).into()),
            Err(busy) => {
                return Err(writer::locked_error(id, &ctx.location, busy.holder.as_ref()).into());
            }
        };
        // Replayed after the lease is ours: every append of an earlier writer is visible.
        let sid = id.to_string();
        let (state, size) = self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            replay_on(&ctx, &c, &sid).await
        })?;
        let report = OpenReport {
            truncated_bytes: 0,
            truncated_saved_to: None,
            records_replayed: state.last_seq,
            previous_holder: lease.previous.clone(),
        };
        let w = lease.into_writer(state.last_seq + 1, size);
        Ok((w, state, report))
    }

    /// Who holds the lease of session `id` now, if anyone.
    pub fn lock_holder(&self, id: &SessionId) -> Result<Option<LockHolder>> {
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            writer::lock_holder(&c, &ctx, &id).await
        })
    }

    /// A setting of a pooled connection (for tests and diagnostics).
    #[doc(hidden)]
    pub fn connection_setting(&self, name: &str) -> Result<String> {
        let name = name.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let r = c
                .query_one("SELECT current_setting($1)", &[&name])
                .await
                .map_err(ctx.db("read a setting"))?;
            Ok(r.get(0))
        })
    }

    pub(crate) fn location_of(&self, id: &str) -> String {
        self.shared.ctx.session_location(id)
    }
}
