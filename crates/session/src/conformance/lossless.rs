//! Nothing lost on the way through a store: provider fields round trip unchanged, and an
//! export imported elsewhere is the same session byte for byte (a damaged one is refused).

use serde_json::json;

use crate::SessionId;
use crate::record::{Item, Record, Response, TurnStart};
use crate::store::SessionError;

use super::{Factory, create, run_one_tool_turn};

pub(super) fn provider_fields_round_trip(f: Factory) {
    let store = f();
    let mut s = create(&*store, "s1");
    let inp = s.append_input("m", "user", "hi").unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![inp.seq],
    }))
    .unwrap();
    let extra = json!({"system_fingerprint": "fp_1", "x_vendor": {"nested": [1, 2, {"k": null}]}});
    let resp = Response {
        turn: 1,
        items: vec![Item::Reasoning { text: "hmm".into() }],
        usage: None,
        stop_reason: Some("stop".into()),
        failure: None,
        model: None,
        provider_extra: extra.as_object().cloned(),
        attempts: vec![],
    };
    s.append(Record::Response(resp.clone())).unwrap();
    drop(s);
    let recs = store.records(&SessionId::literal("s1"), 0, 10).unwrap();
    let stored = recs.iter().find(|r| r.kind == "response").unwrap();
    assert_eq!(
        stored.data,
        serde_json::to_value(&resp).unwrap(),
        "provider_fields_round_trip"
    );
    assert_eq!(
        store
            .load(&SessionId::literal("s1"))
            .unwrap()
            .last_response
            .unwrap()
            .stop_reason
            .as_deref(),
        Some("stop")
    );
}

pub(super) fn export_import_is_lossless(f: Factory) {
    let a = f();
    let mut s = create(&*a, "p");
    run_one_tool_turn(&mut s);
    drop(s);
    a.fork(
        &SessionId::literal("p"),
        1,
        Some(&SessionId::literal("child")),
    )
    .unwrap();
    let mut exported = Vec::new();
    let n = a
        .export_to(&SessionId::literal("child"), &mut exported)
        .unwrap();
    assert_eq!(n as usize, exported.len());
    assert_eq!(
        a.summary(&SessionId::literal("child")).unwrap().bytes,
        n,
        "export_import_is_lossless: size"
    );
    let b = f();
    let imported = b.import(&exported).unwrap();
    assert_eq!(imported.id, "child");
    assert_eq!(imported.parent.as_deref(), Some("p"));
    let mut again = Vec::new();
    b.export_to(&SessionId::literal("child"), &mut again)
        .unwrap();
    assert_eq!(again, exported, "export_import_is_lossless: same bytes");
    assert_eq!(
        b.load(&SessionId::literal("child")).unwrap().context,
        a.load(&SessionId::literal("child")).unwrap().context
    );
    // never overwrites; bad input changes nothing
    assert!(matches!(
        b.import(&exported),
        Err(SessionError::AlreadyExists { .. })
    ));
    let mut broken = exported.clone();
    let k = broken.len() / 2;
    broken[k] ^= 0x20;
    let c = f();
    assert!(c.import(&broken).is_err(), "a damaged export is refused");
    assert!(
        c.list().unwrap().is_empty(),
        "nothing written by a refused import"
    );
    assert!(c.import(b"not json\n").is_err());
}
