//! Shared helpers: the test database URL and fresh schemas.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use lazarus_store_postgres::{PgOptions, PgStore};

/// The test server URL from `LAZARUS_TEST_PG`, or `None` after a loud skip message. Where
/// the database must be there (`CI` or `LAZARUS_REQUIRE_PG` set, as `.ci/run` and
/// `scripts/test.sh` do), its absence fails the test instead.
pub fn pg_url(test: &str) -> Option<String> {
    match std::env::var("LAZARUS_TEST_PG") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if required() => panic!(
            "{test}: LAZARUS_TEST_PG is not set, but CI / LAZARUS_REQUIRE_PG say the \
             PostgreSQL store must be tested here (start one with scripts/pg-test-server.sh)"
        ),
        _ => {
            eprintln!(
                "\n\
                 ************************************************************************\n\
                 SKIPPED {test}: LAZARUS_TEST_PG is not set, so the PostgreSQL store was\n\
                 NOT tested. Start a throwaway server with\n\
                     eval \"$(scripts/pg-test-server.sh start)\"\n\
                 and run the tests again (.ci/run always sets it).\n\
                 ************************************************************************\n"
            );
            None
        }
    }
}

fn required() -> bool {
    ["CI", "LAZARUS_REQUIRE_PG"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false"))
}

/// A schema name no other test uses.
pub fn fresh_schema() -> String {
    format!("t_{}", uuid::Uuid::new_v4().simple())
}

pub fn options(schema: &str) -> PgOptions {
    PgOptions {
        schema: schema.to_string(),
        pool_size: 4,
        ..PgOptions::default()
    }
}

/// A store in a fresh, empty schema.
pub fn fresh_store(url: &str) -> PgStore {
    PgStore::connect_with(url, options(&fresh_schema())).expect("connect to the test server")
}

/// A second store (own runtime, pool and connections) on the same schema as `store`.
pub fn same_schema(url: &str, store: &PgStore) -> PgStore {
    PgStore::connect_with(url, options(store.schema())).expect("connect to the test server")
}

/// A plain client for poking at the database directly.
pub fn psql(url: &str) -> PlainClient {
    PlainClient::new(url)
}

/// A blocking tokio-postgres client with its own runtime.
pub struct PlainClient {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl PlainClient {
    pub fn new(url: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(async move {
                let _ = conn.await;
            });
            client
        });
        PlainClient { rt, client }
    }

    pub fn execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        self.rt.block_on(self.client.execute(sql, params))
    }

    pub fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        self.rt
            .block_on(self.client.query(sql, params))
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
    }
}

/// A throwaway PostgreSQL server of the test's own (scripts/pg-test-server.sh), stopped on drop.
pub struct Server {
    state: PathBuf,
    _dir: tempfile::TempDir,
}

pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-test-server.sh")
}

impl Server {
    /// Starts one; `env` adds settings (e.g. `LAZARUS_PG_MAX_CONNECTIONS`).
    pub fn start(env: &[(&str, &str)]) -> (Server, String) {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .envs(env.iter().copied())
            .env("LAZARUS_PG_STATE", &state)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let url = text
            .lines()
            .find_map(|l| l.strip_prefix("export LAZARUS_TEST_PG="))
            .expect("start prints the export line")
            .to_string();
        (Server { state, _dir: dir }, url)
    }

    /// Runs a command of the script (`restart`, `stop`) on this server.
    pub fn run(&self, cmd: &str) {
        let out = Command::new("bash")
            .arg(script())
            .arg(cmd)
            .env("LAZARUS_PG_STATE", &self.state)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.run("stop");
    }
}
