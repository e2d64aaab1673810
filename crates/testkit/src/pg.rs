//! The PostgreSQL server tests run against: `LAZARUS_TEST_PG` (a throwaway server, e.g.
//! `scripts/pg-test-server.sh start`), and a fresh schema on it per test.

/// The test server's URL, or `None` after a loud skip naming `what` was skipped; a failure
/// instead where `CI` or `LAZARUS_REQUIRE_PG` say PostgreSQL must be tested.
pub fn test_base(what: &str) -> Option<String> {
    if let Ok(base) = std::env::var("LAZARUS_TEST_PG") {
        return Some(base);
    }
    let required = ["CI", "LAZARUS_REQUIRE_PG"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false"));
    assert!(
        !required,
        "LAZARUS_TEST_PG is not set, but CI / LAZARUS_REQUIRE_PG say PostgreSQL must be tested here"
    );
    eprintln!(
        "\n*** SKIPPED {what}: LAZARUS_TEST_PG is not set (start one with scripts/pg-test-server.sh start) ***\n"
    );
    None
}

/// `base` with a fresh schema of its own (`t_` and 16 random hex digits) and `params`
/// appended (e.g. `&lease_ttl_ms=1000`).
pub fn fresh_schema_url(base: &str, params: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.write_u32(std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}schema=t_{:016x}{params}", h.finish())
}
