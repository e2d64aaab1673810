//! Lossless moves between backends: a local session file imported into PostgreSQL exports
//! back byte for byte, and a PostgreSQL session exported is a valid local session file.
//! Needs `LAZARUS_TEST_PG` (see `scripts/pg-test-server.sh`).

mod common;

use lazarus_session::SessionId;
use lazarus_session::record::{
    Item, OutcomeStatus, Response, ResumeReceipt, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};
use lazarus_session::{CreateOptions, LocalStore, Record, Session, SessionError, Store};
use serde_json::json;

/// A session id written in the test (checked; a bad one is a bug in the test).
#[allow(dead_code)]
fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

/// The same session, whatever the store: two turns with a tool call, a resume receipt,
/// provider fields, unicode and a long text.
fn build(store: &dyn Store, id: &str) -> Session {
    let mut s = store
        .create(CreateOptions {
            id: Some(sid(id)),
            meta: Some(json!({"workspace": "/w", "system": "be brief ✓"})),
        })
        .unwrap();
    let inp = s
        .append_input("m1", "user", "list files — all of them 🙂")
        .unwrap();
    let t1 = s
        .append(Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![inp.seq],
        }))
        .unwrap();
    let extra = json!({"system_fingerprint": "fp", "x": {"n": [1, 2.5, null, "\u{1}"]}});
    s.append(Record::Response(Response {
        turn: 1,
        items: vec![
            Item::Reasoning {
                text: "think\nthen act".into(),
            },
            Item::ToolCall {
                call_id: "c1".into(),
                name: "list_dir".into(),
                arguments: r#"{"path":"."}"#.into(),
            },
        ],
        usage: None,
        stop_reason: Some("tool_calls".into()),
        failure: None,
        model: Some("m".into()),
        provider_extra: extra.as_object().cloned(),
        attempts: vec![],
    }))
    .unwrap();
    s.append(Record::ToolIntent(ToolIntent {
        call_id: "c1".into(),
        turn: 1,
        tool: "list_dir".into(),
        arguments: r#"{"path":"."}"#.into(),
        idempotent: true,
        idempotency_key: format!("{id}:c1"),
        rerun_basis: None,
    }))
    .unwrap();
    s.append(Record::ToolStart(ToolStart {
        call_id: "c1".into(),
        process: None,
    }))
    .unwrap();
    s.append(Record::ToolOutcome(ToolOutcome {
        call_id: "c1".into(),
        status: OutcomeStatus::Ok,
        result: "a.txt\n".repeat(2000),
        exit_code: None,
        duration_ms: Some(3),
    }))
    .unwrap();
    s.append(Record::Resume(ResumeReceipt {
        trigger: "run".into(),
        records_replayed: 6,
        every_call_has_one_result: true,
        ..Default::default()
    }))
    .unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 2,
        prev_seq: Some(t1.seq),
        inputs: vec![],
    }))
    .unwrap();
    s.append(Record::Response(Response {
        turn: 2,
        items: vec![Item::Text {
            text: "Two thousand files.".into(),
        }],
        usage: None,
        stop_reason: Some("stop".into()),
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
    s
}

#[test]
fn local_file_imports_and_exports_byte_for_byte() {
    let url = match common::pg_url("local_file_imports_and_exports_byte_for_byte") {
        Some(u) => u,
        None => return,
    };
    let dir = tempfile::tempdir().unwrap();
    let local = LocalStore::open(dir.path()).unwrap();
    drop(build(&local, "s1"));
    local
        .fork(
            &SessionId::literal("s1"),
            1,
            Some(&SessionId::literal("child")),
        )
        .unwrap();
    let mut c = local.open(&SessionId::literal("child")).unwrap();
    c.append_input("m2", "user", "and now?").unwrap();
    drop(c);

    let pg = common::fresh_store(&url);
    for id in ["s1", "child"] {
        let bytes = std::fs::read(local.path_of(&sid(id))).unwrap();
        let summary = pg.import_lines(&bytes).unwrap();
        assert_eq!(summary.id, id);
        assert_eq!(
            pg.export(&sid(id)).unwrap(),
            bytes,
            "{id}: export == local file"
        );
        let ls = local.summary(&sid(id)).unwrap();
        assert_eq!(summary.bytes, ls.bytes, "{id}: size");
        assert_eq!(summary.records, ls.records);
        assert_eq!(summary.status, ls.status);
        assert_eq!(summary.parent, ls.parent);
        assert_eq!(summary.last_kind, ls.last_kind);
        assert_eq!(summary.updated_at, ls.updated_at);
        assert_eq!(summary.meta, ls.meta);
        assert_eq!(
            pg.records(&sid(id), 0, 100).unwrap(),
            local.records(&sid(id), 0, 100).unwrap()
        );
        let (a, b) = (pg.load(&sid(id)).unwrap(), local.load(&sid(id)).unwrap());
        assert_eq!(a.context, b.context);
        assert_eq!(a.input_ids, b.input_ids);
        assert_eq!(a.last_seq, b.last_seq);
        // never overwritten
        let err = pg.import_lines(&bytes).unwrap_err();
        assert!(matches!(err, SessionError::AlreadyExists { .. }), "{err}");
    }
    assert_eq!(
        pg.lineage(&SessionId::literal("child")).unwrap(),
        ["child", "s1"]
    );

    // the imported session goes on in PostgreSQL
    let mut s = pg.open(&SessionId::literal("s1")).unwrap();
    assert_eq!(s.open_report().records_replayed, 9);
    s.append_input("m3", "api", "more").unwrap();
    drop(s);

    // bad input changes nothing
    let good = std::fs::read(local.path_of(&sid("s1"))).unwrap();
    let torn = &good[..good.len() - 5];
    assert!(pg.import_lines(torn).is_err());
    let mut flipped = good.clone();
    let i = flipped.len() / 2;
    flipped[i] ^= 0x01;
    let renamed = String::from_utf8_lossy(&flipped).replace("\"id\":\"s1\"", "\"id\":\"s9\"");
    assert!(pg.import_lines(renamed.as_bytes()).is_err());
    assert!(pg.import_lines(b"").is_err());
    assert!(pg.import_lines(b"{}\n").is_err());
    assert!(matches!(
        pg.summary(&SessionId::literal("s9")),
        Err(SessionError::NotFound { .. })
    ));
}

#[test]
fn postgres_session_exports_to_a_valid_local_file() {
    let url = match common::pg_url("postgres_session_exports_to_a_valid_local_file") {
        Some(u) => u,
        None => return,
    };
    let pg = common::fresh_store(&url);
    drop(build(&pg, "s1"));
    pg.fork(
        &SessionId::literal("s1"),
        1,
        Some(&SessionId::literal("child")),
    )
    .unwrap();
    let mut c = pg.open(&SessionId::literal("child")).unwrap();
    c.append_input("m2", "user", "and now?").unwrap();
    drop(c);

    // the same session built locally: equal after decoding (timestamps differ)
    let dir = tempfile::tempdir().unwrap();
    let local = LocalStore::open(dir.path()).unwrap();
    drop(build(&local, "s1"));
    local
        .fork(
            &SessionId::literal("s1"),
            1,
            Some(&SessionId::literal("child")),
        )
        .unwrap();
    let mut c = local.open(&SessionId::literal("child")).unwrap();
    c.append_input("m2", "user", "and now?").unwrap();
    drop(c);

    let out = tempfile::tempdir().unwrap();
    for id in ["s1", "child"] {
        let bytes = pg.export(&sid(id)).unwrap();
        assert_eq!(
            pg.summary(&sid(id)).unwrap().bytes,
            bytes.len() as u64,
            "size"
        );
        let path = out.path().join(format!("{id}.jsonl"));
        std::fs::write(&path, &bytes).unwrap();
        let report =
            lazarus_ledger::verify_file(&path, &lazarus_ledger::Options::default()).unwrap();
        assert!(report.problems.is_empty(), "{id}: {report:?}");
        let strip = |recs: Vec<lazarus_session::StoredRecord>| {
            recs.into_iter()
                .map(|r| (r.seq, r.kind, r.data))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            strip(pg.records(&sid(id), 0, 100).unwrap()),
            strip(local.records(&sid(id), 0, 100).unwrap()),
            "{id}: same records as the local store writes"
        );
        let from_file = LocalStore::open(out.path()).unwrap();
        assert_eq!(
            from_file.load(&sid(id)).unwrap().context,
            pg.load(&sid(id)).unwrap().context
        );
    }
    // the fork's prefix is the parent's lines, byte for byte
    let parent = pg.export(&sid("s1")).unwrap();
    let child = pg.export(&sid("child")).unwrap();
    let p_lines: Vec<&[u8]> = parent.split(|&b| b == b'\n').collect();
    let c_lines: Vec<&[u8]> = child.split(|&b| b == b'\n').collect();
    let boundary = pg
        .load(&SessionId::literal("child"))
        .unwrap()
        .header
        .parent
        .unwrap()
        .seq as usize;
    assert_eq!(boundary, 7, "turn 1 ends right before turn 2's turn_start");
    assert_eq!(&p_lines[1..=boundary], &c_lines[1..=boundary]);
    assert!(
        std::str::from_utf8(c_lines[boundary + 1])
            .unwrap()
            .contains("\"kind\":\"fork\"")
    );
}
