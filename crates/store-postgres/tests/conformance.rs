//! The `Store` conformance suite, unchanged, against PostgreSQL: every check in its own
//! fresh schema. Needs `LAZARUS_TEST_PG` (see `scripts/pg-test-server.sh`).

mod common;

use lazarus_session::Store;

#[test]
fn conformance_postgres() {
    let Some(url) = common::pg_url("conformance_postgres") else {
        return;
    };
    let factory = || -> Box<dyn Store> { Box::new(common::fresh_store(&url)) };
    lazarus_session::conformance::run_all(&factory);
}
