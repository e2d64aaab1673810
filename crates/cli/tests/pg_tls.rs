//! Finding 7: TLS to PostgreSQL with libpq's sslmode and sslrootcert, against the test
//! server (scripts/pg-test-server.sh: a certificate for 127.0.0.1 and localhost signed by a
//! throwaway CA; the role `lazarus_tls` may only connect over TLS).

use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn required() -> bool {
    ["CI", "LAZARUS_REQUIRE_PG"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false"))
}

/// The test server's URL and its CA files, or a loud skip (a failure where PostgreSQL must be
/// tested).
fn server() -> Option<(String, String, String)> {
    let vars = [
        "LAZARUS_TEST_PG",
        "LAZARUS_TEST_PG_CA",
        "LAZARUS_TEST_PG_OTHER_CA",
    ];
    let got: Vec<Option<String>> = vars.iter().map(|v| std::env::var(v).ok()).collect();
    if got.iter().any(Option::is_none) {
        assert!(
            !required(),
            "{vars:?} are not all set, but CI / LAZARUS_REQUIRE_PG say PostgreSQL (with TLS) must be tested here; start it with scripts/pg-test-server.sh start"
        );
        eprintln!("\n*** SKIPPED pg_tls: {vars:?} not set (scripts/pg-test-server.sh start) ***\n");
        return None;
    }
    let mut it = got.into_iter().flatten();
    Some((it.next()?, it.next()?, it.next()?))
}

fn list(url: &str) -> Output {
    Command::new(BIN)
        .args(["sessions", "list", "--json", "--store", url])
        .env_remove("LAZARUS_SESSION_DIR")
        .env_remove("LAZARUS_STORE")
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `postgres://USER@HOST:PORT/postgres?PARAMS&schema=…` from the test server's URL.
fn url(base: &str, user: &str, host: &str, params: &str, schema: &str) -> String {
    let port = base.rsplit(':').next().unwrap().split('/').next().unwrap();
    format!("postgres://{user}@{host}:{port}/postgres?{params}&schema={schema}")
}

#[test]
fn sslmodes_against_a_server_with_a_self_signed_ca() {
    let Some((base, ca, other_ca)) = server() else {
        return;
    };
    let schema = format!("tls_{:08x}", rand::random::<u32>());
    let ok = |u: String| {
        let o = list(&u);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{u}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let fails = |u: String, says: &str| {
        let o = list(&u);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{u} must fail: {err}");
        assert!(err.contains(says), "{u}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    };
    let host = "127.0.0.1";
    // lazarus_tls may connect only over TLS: these prove the connection was encrypted
    ok(url(&base, "lazarus_tls", host, "sslmode=require", &schema));
    ok(url(&base, "lazarus_tls", host, "sslmode=prefer", &schema));
    ok(url(
        &base,
        "lazarus_tls",
        host,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
        &schema,
    ));
    ok(url(
        &base,
        "lazarus_tls",
        host,
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
        &schema,
    ));
    // ... and refused without it
    fails(
        url(&base, "lazarus_tls", host, "sslmode=disable", &schema),
        "lazarus_tls",
    );
    // plain connections still work for other roles
    ok(url(&base, "postgres", host, "sslmode=disable", &schema));

    // a CA that did not sign the server's certificate
    fails(
        url(
            &base,
            "lazarus_tls",
            host,
            &format!("sslmode=verify-ca&sslrootcert={other_ca}"),
            &schema,
        ),
        "certificate",
    );
    // a name the certificate does not hold: verify-full refuses, verify-ca (chain only) accepts
    let misnamed = |mode: &str| {
        url(
            &base,
            "lazarus_tls",
            "wrong-name.invalid",
            &format!("sslmode={mode}&sslrootcert={ca}&hostaddr=127.0.0.1"),
            &schema,
        )
    };
    fails(misnamed("verify-full"), "certificate");
    ok(misnamed("verify-ca"));
    // the root certificate file must exist for the verifying modes; a bad mode is named
    fails(
        url(
            &base,
            "lazarus_tls",
            host,
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            &schema,
        ),
        "sslrootcert",
    );
    fails(
        url(&base, "postgres", host, "sslmode=allow", &schema),
        "sslmode",
    );
}
