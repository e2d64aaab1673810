//! The host readers against sessions the real frameworks wrote (`tests/fixtures/host`, made by
//! `scripts/python-fixtures.py` with LangGraph 1.2 and the OpenAI Agents SDK through the
//! `lazarus` package): every value LangGraph wrote decodes to what LangGraph's own loader made
//! of it, the thread reads as its steps, and what lies outside the allowlist is labelled.

use std::path::PathBuf;

use lazarus_session::host_blob::{self, Allowlist, NOT_DECODED};
use lazarus_session::host_view::{self, ConvItem};
use lazarus_session::{LocalStore, SessionId, Store};
use serde_json::Value;

const THREAD: &str = "h.user_42_weather.fa0736964c72c6c2605d483556f23d98";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host")
}

/// A copy of the fixture directory (a store may write its caches beside what it reads).
fn store() -> (tempfile::TempDir, LocalStore) {
    let d = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.path().join(e.file_name())).unwrap();
    }
    let s = LocalStore::open(d.path()).unwrap();
    (d, s)
}

/// Whether LangGraph's reading `py` is contained in ours: the same scalars, lists and keys,
/// and for a constructed value its type and the fields Python showed.
fn agrees(ours: &Value, py: &Value) -> bool {
    match (ours, py) {
        (Value::Object(o), Value::Object(p)) => p
            .iter()
            .all(|(k, pv)| o.get(k).is_some_and(|ov| agrees(ov, pv))),
        (Value::Array(o), Value::Array(p)) => {
            o.len() == p.len() && o.iter().zip(p).all(|(a, b)| agrees(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

#[test]
fn every_value_langgraph_wrote_decodes_as_its_own_loader_read_it() {
    let text = std::fs::read_to_string(fixtures().join("langgraph-values.json")).unwrap();
    let values: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(
        values.len() > 40,
        "the fixture holds {} values",
        values.len()
    );
    // the program's own type (the fixture's generator named it, as a program would)
    let allow = Allowlist::with([("__main__".to_string(), "Reading".to_string())]);
    let mut types = std::collections::BTreeSet::new();
    for v in &values {
        let b64 = v["b64"].as_str().unwrap();
        let tag = v["type"].as_str().unwrap();
        let ours = host_blob::view(tag, b64, &allow);
        assert!(
            agrees(&ours, &v["python"]),
            "seq {}: ours {ours}\nLangGraph's {}",
            v["seq"],
            v["python"]
        );
        let bytes = host_blob::decode_b64(b64).unwrap();
        assert_eq!(host_blob::check(tag, &bytes, &allow), Ok(()), "{ours}");
        collect_types(&ours, &mut types);
    }
    // the kinds of value a real graph writes were all there
    for t in [
        "langchain_core.messages.human.HumanMessage",
        "langchain_core.messages.ai.AIMessage",
        "langgraph.types.Interrupt",
        "langgraph.types.Send",
        "__main__.Reading",
    ] {
        assert!(types.contains(t), "no {t} among {types:?}");
    }
}

fn collect_types(v: &Value, into: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            if let Some(t) = o.get("$type").and_then(Value::as_str) {
                into.insert(t.to_string());
            }
            o.values().for_each(|x| collect_types(x, into));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_types(x, into)),
        _ => {}
    }
}

#[test]
fn the_thread_reads_as_its_steps_with_nodes_values_writes_and_interrupts() {
    let (_d, store) = store();
    let st = store.load(&SessionId::parse(THREAD).unwrap()).unwrap();
    let meta = st.header.meta.clone().unwrap();
    assert_eq!(meta["host_id"], "user:42/weather");
    let steps = host_view::graph_steps(&st.host.graph, &Allowlist::strict());
    let root: Vec<_> = steps.iter().filter(|s| s.ns.is_empty()).collect();
    let ran: Vec<String> = root.iter().flat_map(|s| s.ran.clone()).collect();
    for node in ["agent", "search", "approve"] {
        assert!(ran.iter().any(|n| n == node), "{node} not among {ran:?}");
    }
    assert!(
        ran.iter().any(|n| n.starts_with("send")),
        "the Send tasks: {ran:?}"
    );
    // a subgraph's steps are in their own namespace
    assert!(
        steps.iter().any(|s| s.ns.starts_with("search:")),
        "no subgraph steps"
    );
    // the interrupt and its question, where the graph stopped to ask
    let asked = root
        .iter()
        .flat_map(|s| &s.interrupts)
        .find(|i| i.to_string().contains("Send the answer?"));
    assert!(asked.is_some(), "no interrupt among {root:#?}");
    // the messages channel as JSON: the human question, then the answers
    let last_real = root.iter().rev().find(|s| s.step != Some(99)).unwrap();
    let messages = &last_real
        .values
        .iter()
        .find(|(c, _)| c == "messages")
        .unwrap()
        .1;
    let contents: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        contents,
        vec![
            "Is it sunny in Paris?",
            "Let me look that up.",
            "Sent (yes)."
        ]
    );
    let facts = &last_real
        .values
        .iter()
        .find(|(c, _)| c == "facts")
        .unwrap()
        .1;
    assert_eq!(facts["when"], "2026-12-02");
    assert_eq!(facts["id"], "01234567-89ab-cdef-0123-456789abcdef");
    // the program's own type, outside the strict list: shown labelled, its data as it is
    let reading = &last_real
        .values
        .iter()
        .find(|(c, _)| c == "reading")
        .unwrap()
        .1;
    assert!(
        reading[NOT_DECODED]
            .as_str()
            .unwrap()
            .contains("__main__.Reading"),
        "{reading}"
    );
    assert_eq!(reading["raw"]["args"]["sensor"], "roof");
    // someone else's checkpoint naming os.system: labelled, never an error
    let poisoned = root.iter().find(|s| s.step == Some(99)).unwrap();
    let m = &poisoned
        .values
        .iter()
        .find(|(c, _)| c == "messages")
        .unwrap()
        .1;
    assert!(
        m[0][NOT_DECODED].as_str().unwrap().contains("os.system"),
        "{m}"
    );
}

#[test]
fn the_agents_session_reads_as_a_conversation_with_its_call_in_doubt() {
    let (_d, store) = store();
    let st = store.load(&SessionId::literal("chat-paris")).unwrap();
    let items: Vec<ConvItem> = st
        .host
        .items
        .iter()
        .map(|(_, v)| host_view::conv_item(v))
        .collect();
    assert!(matches!(&items[0], ConvItem::User(t) if t == "What is the weather in Paris?"));
    assert!(matches!(&items[1], ConvItem::Call { name, .. } if name == "get_weather"));
    assert!(matches!(&items[2], ConvItem::Output { output, .. } if output == "sunny, 21 C"));
    assert!(matches!(&items[3], ConvItem::Assistant(t) if t == "It is sunny, 21 C."));
    let doubt: Vec<&str> = st.host.in_doubt().map(|(id, _)| id).collect();
    assert_eq!(doubt, vec!["call_b"]);
}
