//! Shared helpers: the test database URL and fresh schemas.
#![allow(dead_code)]

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
