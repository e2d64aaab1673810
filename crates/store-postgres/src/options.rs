//! How a [`crate::PgStore`] connects: its options, and what is read from the URL.

use std::time::Duration;

/// The schema used when none is given.
pub const DEFAULT_SCHEMA: &str = "lazarus";

/// How a [`PgStore`] connects.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// PostgreSQL schema holding the tables (created if missing). Default `lazarus`.
    pub schema: String,
    /// Pooled connections: everything (readers, writers, fork, import) shares them, so this
    /// bounds the server connections of the process however many sessions are open.
    /// Default 16.
    pub pool_size: usize,
    /// How long a writer's lease lasts unless renewed (the heartbeat renews it five times per
    /// lifetime). A writer that dies holding one leaves its session to others after at most
    /// this long. URL parameter `lease_ttl_ms=`. Default 5 s.
    pub lease_ttl: Duration,
    /// Batches of appends in flight at once, each on one pooled connection: the appends of
    /// all sessions are queued and committed together, one statement and one commit per
    /// batch (group commit). `0` (the default) means half the pool, at least 1.
    pub append_batches: usize,
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
            lease_ttl: Duration::from_secs(5),
            append_batches: 0,
            runtime_workers: 2,
            migrate: true,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

impl PgOptions {
    /// How many batches of appends may be in flight ([`PgOptions::append_batches`]).
    pub(crate) fn append_slots(&self) -> usize {
        match self.append_batches {
            0 => (self.pool_size / 2).max(1),
            n => n.min(self.pool_size.max(1)),
        }
    }

    /// How many batches of inbox looks may be in flight: a quarter of the pool, at least 1.
    pub(crate) fn peek_slots(&self) -> usize {
        (self.pool_size / 4).max(1)
    }
}

/// Splits a `schema=NAME` query parameter (ours, not libpq's) off a `postgres://` URL.
pub(crate) fn split_schema_param(url: &str) -> (String, Option<String>) {
    split_param(url, "schema")
}

/// Splits query parameter `name` (one of ours, not libpq's) off a `postgres://` URL.
pub(crate) fn split_param(url: &str, name: &str) -> (String, Option<String>) {
    let prefix = format!("{name}=");
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return (url.to_string(), None);
    }
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix(prefix.as_str()) {
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

pub(crate) fn describe_location(cfg: &tokio_postgres::Config, schema: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validate_schema_name;

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
