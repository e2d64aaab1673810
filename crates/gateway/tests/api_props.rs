//! Property test over the HTTP API (the always-on small sibling of the fuzz target in
//! `crates/gateway/fuzz`): requests built from the routes with hostile ids, cursors, headers
//! and bodies, sent in process to the real router over a temporary session directory. Every
//! answer must keep [`harness::check`]: a documented status, never 500, error objects, and
//! `Retry-After` on 429/503. `LAZARUS_API_PROP_CASES` sets the number of cases (300).

use lazarus_gateway::harness::{self, InProcess};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just("s0".to_string()),
        2 => Just("s1".to_string()),
        2 => "[A-Za-z0-9._-]{1,12}",
        1 => "[A-Za-z0-9]{120,140}",
        2 => prop::sample::select(vec![
            "..", ".", "%2e%2e", "a%2Fb", "%00", "-x", ".hidden", "%C3%A9", "%FF", "a%20b",
            "%2F", "s0%00", "s0.jsonl", "s0.lock", "a..b", "%", "%zz",
        ])
        .prop_map(str::to_string),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "0",
            "1",
            "2",
            "3",
            "18446744073709551615",
            "18446744073709551614",
            "18446744073709551616",
            "99999999999999999999999",
            "-1",
            "+5",
            " 1",
            "1e3",
            "abc",
            "",
            "0x10",
        ])
        .prop_map(str::to_string),
    ]
}

fn query() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        number().prop_map(|n| format!("?after={n}")),
        number().prop_map(|n| format!("?limit={n}")),
        (number(), number()).prop_map(|(a, l)| format!("?after={a}&limit={l}")),
        "[a-z=&%0-9]{0,20}".prop_map(|q| format!("?{q}")),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "/healthz",
            "/readyz",
            "/metrics",
            "/v1/sessions",
            "/v1",
            "/",
            "/v1/sessions/"
        ])
        .prop_map(str::to_string),
        id().prop_map(|i| format!("/v1/sessions/{i}")),
        (id(), query()).prop_map(|(i, q)| format!("/v1/sessions/{i}/records{q}")),
        (id(), query()).prop_map(|(i, q)| format!("/v1/sessions/{i}/stream{q}")),
        (
            id(),
            prop::sample::select(vec!["messages", "events", "fork", "nope", ""])
        )
            .prop_map(|(i, r)| format!("/v1/sessions/{i}/{r}")),
        "/[a-z0-9/%.]{0,30}",
    ]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,20}".prop_map(Value::String),
        "[\\x00-\\x1f]{1,4}".prop_map(Value::String),
        id().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    let keys = prop::sample::select(vec![
        "id",
        "workspace",
        "system_prompt",
        "text",
        "message_id",
        "type",
        "reason",
        "idempotency_key",
        "at_turn",
        "extra",
    ]);
    prop_oneof![
        Just(Vec::new()),
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::btree_map(keys, json_value(), 0..4)
            .prop_map(|m| { serde_json::to_vec(&m).unwrap() }),
        (id(), ".{1,40}").prop_map(|(m, t)| {
            serde_json::to_vec(&serde_json::json!({"message_id": m, "text": t})).unwrap()
        }),
        (any::<u64>(), id()).prop_map(|(n, i)| {
            serde_json::to_vec(&serde_json::json!({"at_turn": n, "id": i})).unwrap()
        }),
        Just(b"{\"type\":\"resume\"}".to_vec()),
        Just(b"{\"id\":".to_vec()),
    ]
}

fn text() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    prop_oneof![
        4 => ".{0,30}".prop_map(Value::String),
        1 => Just(Value::String(" \n\t".into())),
        1 => Just(Value::String("x".repeat(17 * 1024))),
        1 => json_value(),
    ]
}

/// A body shaped for `route`, sometimes with an unknown field or a wrong type.
fn shaped(route: &'static str) -> BoxedStrategy<Vec<u8>> {
    use serde_json::{Value, json};
    let fields: BoxedStrategy<Value> = match route {
        "create" => (
            prop::option::of(id().prop_map(Value::String)),
            prop::option::of(prop_oneof![
                "[a-z/.]{0,12}".prop_map(Value::String),
                Just(Value::String("/".into())),
                Just(Value::String("../x".into())),
            ]),
            prop::option::of(text()),
        )
            .prop_map(|(i, w, p)| {
                let mut m = serde_json::Map::new();
                i.map(|v| m.insert("id".into(), v));
                w.map(|v| m.insert("workspace".into(), v));
                p.map(|v| m.insert("system_prompt".into(), v));
                Value::Object(m)
            })
            .boxed(),
        "messages" => (prop::option::of(id().prop_map(Value::String)), text())
            .prop_map(|(m, t)| match m {
                Some(m) => json!({"message_id": m, "text": t}),
                None => json!({"text": t}),
            })
            .boxed(),
        "events" => (
            prop::sample::select(vec!["resume", "resume", "stop", ""]),
            prop::option::of(text()),
            prop::option::of(id().prop_map(Value::String)),
        )
            .prop_map(|(k, r, i)| {
                let mut m = serde_json::Map::new();
                m.insert("type".into(), json!(k));
                r.map(|v| m.insert("reason".into(), v));
                i.map(|v| m.insert("idempotency_key".into(), v));
                Value::Object(m)
            })
            .boxed(),
        _ => (number(), prop::option::of(id()))
            .prop_map(|(n, i)| {
                let at: Value = serde_json::from_str(&n).unwrap_or(Value::String(n));
                match i {
                    Some(i) => json!({"at_turn": at, "id": i}),
                    None => json!({"at_turn": at}),
                }
            })
            .boxed(),
    };
    prop_oneof![
        6 => fields.prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => body(),
        1 => json_value().prop_map(|v| serde_json::to_vec(&serde_json::json!({"extra": v})).unwrap()),
    ]
    .boxed()
}

/// (method, path, body) along the routes, the method sometimes wrong.
fn routed() -> impl Strategy<Value = (String, String, Vec<u8>)> {
    let get = |p: BoxedStrategy<String>| p.prop_map(|p| ("GET".to_string(), p, Vec::new()));
    let post = |p: BoxedStrategy<String>, r: &'static str| {
        (p, shaped(r)).prop_map(|(p, b)| ("POST".to_string(), p, b))
    };
    let exchange = prop_oneof![
        2 => get(path().boxed()),
        1 => get((id(), query()).prop_map(|(i, q)| format!("/v1/sessions/{i}/records{q}")).boxed()),
        1 => get((id(), query()).prop_map(|(i, q)| format!("/v1/sessions/{i}/stream{q}")).boxed()),
        1 => get(id().prop_map(|i| format!("/v1/sessions/{i}")).boxed()),
        2 => post(Just("/v1/sessions".to_string()).boxed(), "create"),
        3 => post(id().prop_map(|i| format!("/v1/sessions/{i}/messages")).boxed(), "messages"),
        2 => post(id().prop_map(|i| format!("/v1/sessions/{i}/events")).boxed(), "events"),
        2 => post(id().prop_map(|i| format!("/v1/sessions/{i}/fork")).boxed(), "fork"),
        1 => (path(), body()).prop_map(|(p, b)| ("POST".to_string(), p, b)),
    ];
    let other = prop::sample::select(vec![
        "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW",
    ]);
    (exchange, prop::option::weighted(0.1, other))
        .prop_map(|((m, p, b), o)| (o.map_or(m, str::to_string), p, b))
}

fn request() -> impl Strategy<Value = Vec<u8>> {
    let last_event_id = prop::option::weighted(0.3, number());
    let content_type = prop::option::weighted(
        0.3,
        prop::sample::select(vec![
            "application/json",
            "text/plain",
            "",
            "application/x-www-form-urlencoded",
        ]),
    );
    (
        prop::bool::weighted(0.95),
        routed(),
        last_event_id,
        content_type,
    )
        .prop_map(|(token, (m, p, b), lei, ct)| {
            let mut out = vec![u8::from(token)];
            out.extend_from_slice(format!("{m} {p}\n").as_bytes());
            if let Some(l) = lei {
                out.extend_from_slice(format!("Last-Event-ID: {l}\n").as_bytes());
            }
            if let Some(c) = ct {
                out.extend_from_slice(format!("Content-Type: {c}\n").as_bytes());
            }
            out.push(b'\n');
            out.extend_from_slice(&b);
            out
        })
}

#[test]
fn every_answer_is_documented_and_never_a_500() {
    let cases = std::env::var("LAZARUS_API_PROP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gw = rt.block_on(InProcess::start(dir.path())).unwrap();
    // sessions with records, so that reads, tails and forks have something to work on
    for (id, n) in [("s0", 3), ("s1", 0)] {
        let mut seed = vec![1u8];
        seed.extend_from_slice(format!("POST /v1/sessions\n\n{{\"id\":\"{id}\"}}").as_bytes());
        let req = harness::request_from_bytes(&seed).unwrap();
        assert_eq!(rt.block_on(gw.send(req)), Ok(201));
        for i in 0..n {
            let mut m = vec![1u8];
            m.extend_from_slice(
                format!(
                    "POST /v1/sessions/{id}/messages\n\n{{\"message_id\":\"m{i}\",\"text\":\"hi\"}}"
                )
                .as_bytes(),
            );
            let req = harness::request_from_bytes(&m).unwrap();
            assert_eq!(rt.block_on(gw.send(req)), Ok(202));
        }
    }
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let sent = std::cell::Cell::new(0usize);
    let decoded = std::cell::Cell::new(0usize);
    let statuses = std::cell::RefCell::new(std::collections::BTreeMap::<u16, usize>::new());
    runner
        .run(&request(), |bytes| {
            sent.set(sent.get() + 1);
            let Some(req) = harness::request_from_bytes(&bytes) else {
                return Ok(());
            };
            decoded.set(decoded.get() + 1);
            let status = rt.block_on(gw.send(req)).map_err(TestCaseError::fail)?;
            *statuses.borrow_mut().entry(status).or_default() += 1;
            Ok(())
        })
        .unwrap();
    // the generator is useful only if most of its requests reach the router
    let (sent, decoded) = (sent.get(), decoded.get());
    assert!(
        decoded * 10 >= sent * 9,
        "only {decoded} of {sent} generated requests could be decoded"
    );
    let statuses = statuses.into_inner();
    eprintln!("{sent} requests; answers by status: {statuses:?}");
    // and useful only if it reaches the handlers, not just the router's refusals
    for s in [200, 400, 401, 404, 405] {
        assert!(statuses.contains_key(&s), "no {s} among {statuses:?}");
    }
    assert!(
        statuses.contains_key(&201) || statuses.contains_key(&202),
        "nothing was ever created or accepted: {statuses:?}"
    );
    let health = harness::request_from_bytes(b"\x00GET /healthz\n\n").unwrap();
    assert_eq!(rt.block_on(gw.send(health)), Ok(200));
}

#[test]
fn the_decoder_reads_what_the_fuzz_seeds_say() {
    let req = harness::request_from_bytes(
        b"\x01POST /v1/sessions/a/messages?x=1\nLast-Event-ID: 5\nX-Bad Name: y\n\n{\"text\":\"hi\"}",
    )
    .unwrap();
    assert_eq!(req.method(), "POST");
    assert_eq!(req.uri(), "/v1/sessions/a/messages?x=1");
    assert_eq!(req.headers()["last-event-id"], "5");
    assert!(req.headers().contains_key("authorization"));
    assert_eq!(req.headers().len(), 2, "the invalid header name is dropped");
    assert!(harness::request_from_bytes(b"\x01GET http://elsewhere/x\n\n").is_none());
    assert!(harness::request_from_bytes(b"\x01G T /\n\n").is_none());
}
