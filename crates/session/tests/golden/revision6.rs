//! Record kinds revision 6 of the host sessions. A LangGraph thread (`graph6.jsonl`) whose id is
//! not a session id (its header keeps it, `meta.host_id`), a task's writes recorded before the
//! checkpoint they name (`host_pending_writes`, as LangGraph's default durability puts them),
//! and checkpoints that leave the thread (`host_forget`, its `prune`). An Agents SDK session
//! (`host6.jsonl`) whose turns are added whole (`host_items`).

use lazarus_ledger::Header;
use lazarus_session::record::*;
use lazarus_session::{LocalStore, Record, SessionId, Store};
use serde_json::json;

use super::{TS, encode};

/// `SessionId::for_host_name("user:42/chat")`.
pub const ID: &str = "h.user_42_chat.31ce09046ef3553dd436759a6bd8eae4";

pub fn graph_records() -> Vec<Record> {
    let blob = |b: &str| HostBlob {
        type_tag: "msgpack".into(),
        b64: b.into(),
    };
    let checkpoint = |id: &str, parent: Option<&str>, channel: &str, b64: &str| {
        Record::from(HostCheckpoint {
            ns: String::new(),
            checkpoint_id: id.into(),
            parent_id: parent.map(Into::into),
            checkpoint: blob("gqFpoWE="),
            metadata: blob("gaRzdGVwAA=="),
            channels: vec![HostChannelValue {
                channel: channel.into(),
                version: if id == "cp-3" { "2" } else { "1" }.into(),
                value: blob(b64),
            }],
        })
    };
    let writes = |cp: &str, task: &str, node: &str, b64: &str| {
        Record::from(HostPendingWrites(HostWrites {
            ns: String::new(),
            checkpoint_id: cp.into(),
            task_id: task.into(),
            task_path: format!("~__pregel_pull, {node}"),
            writes: vec![HostWrite {
                idx: 0,
                channel: "log".into(),
                value: blob(b64),
            }],
        }))
    };
    vec![
        checkpoint("cp-1", None, "__start__", "gA=="),
        // cp-2's writes came before cp-2 (LangGraph saves checkpoints in the background)
        writes("cp-2", "task-a", "a", "kaFh"),
        checkpoint("cp-2", Some("cp-1"), "log", "kA=="),
        writes("cp-2", "task-b", "b", "kaFi"),
        checkpoint("cp-3", Some("cp-2"), "log", "kqFhoWI="),
        Record::from(HostForget {
            checkpoints: ["cp-1", "cp-2"]
                .into_iter()
                .map(|c| HostCheckpointRef {
                    ns: String::new(),
                    checkpoint_id: c.into(),
                })
                .collect(),
            why: "prune keep_latest".into(),
        }),
    ]
}

pub fn render_graph() -> String {
    let header = Header {
        format: lazarus_session::FORMAT.into(),
        version: 1,
        id: ID.into(),
        created_at: TS.into(),
        parent: None,
        meta: Some(json!({"host": "langgraph", "host_id": "user:42/chat"})),
        unsynced_bytes_max: None,
    };
    encode(&header, &graph_records())
}

#[test]
fn golden_graph6_takes_writes_before_their_checkpoint_and_forgets_what_was_pruned() {
    assert_eq!(SessionId::for_host_name("user:42/chat").0, ID);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(format!("{ID}.jsonl")), render_graph()).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::parse(ID).unwrap()).unwrap();
    assert!(!st.owes_work());
    let g = &st.host.graph;
    let ids: Vec<&str> = g.checkpoints.keys().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids, vec!["cp-3"], "cp-1 and cp-2 were forgotten");
    assert!(g.writes.is_empty(), "their writes went with them");

    // before the forget: writes made against cp-2 before and after it was recorded
    let mut before = lazarus_session::SessionState::new(st.header.clone());
    for (i, r) in graph_records().into_iter().enumerate().take(5) {
        before.check(&r).unwrap();
        before.apply(i as u64 + 1, r);
    }
    let w = &before.host.graph.writes[&(String::new(), "cp-2".to_string())];
    let tasks: Vec<(&str, u64)> = w.iter().map(|((t, _), w)| (t.as_str(), w.seq)).collect();
    assert_eq!(
        tasks,
        vec![("task-a", 2), ("task-b", 4)],
        "in the order they came"
    );
    // writes for a checkpoint never recorded are kept too ("exit" saves only the last)
    let never = Record::from(HostPendingWrites(HostWrites {
        ns: "child:1".into(),
        checkpoint_id: "cp-never".into(),
        task_id: "t".into(),
        task_path: String::new(),
        writes: vec![],
    }));
    before.check(&never).unwrap();
    // revision 3's host_writes keeps its rule: its checkpoint first
    let Record::Host(Host::PendingWrites(HostPendingWrites(w))) = &graph_records()[1] else {
        unreachable!()
    };
    let mut early = lazarus_session::SessionState::new(st.header.clone());
    early.apply(1, graph_records()[0].clone());
    let err = early.check(&Record::from(w.clone())).unwrap_err();
    assert!(err.to_string().contains("no host_checkpoint"), "{err}");
    // a forget of a checkpoint the thread does not hold is refused, naming it
    let err = st.check(&graph_records()[5]).unwrap_err();
    assert!(
        err.to_string().contains("\"cp-1\"") && err.to_string().contains("does not hold"),
        "{err}"
    );
}

/// A turn added whole (a user message, a call, its output and the answer), one item alone,
/// and the newest item of the turn popped.
pub fn host_records() -> Vec<Record> {
    vec![
        Record::from(HostItems {
            items: vec![
                json!({"role": "user", "content": "What is the weather in Paris?"}),
                json!({"type": "function_call", "call_id": "call_w", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}),
                json!({"type": "function_call_output", "call_id": "call_w", "output": "sunny, 21 C"}),
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny, 21 C."}]}),
            ],
        }),
        Record::from(HostItem {
            item: json!({"role": "user", "content": "And tomorrow?"}),
        }),
        Record::from(HostPop { seq: 2 }),
        Record::from(HostPop { seq: 1 }),
    ]
}

pub fn render_host() -> String {
    let header = Header {
        format: lazarus_session::FORMAT.into(),
        version: 1,
        id: "golden-host6".into(),
        created_at: TS.into(),
        parent: None,
        meta: Some(json!({"host": "openai-agents"})),
        unsynced_bytes_max: None,
    };
    encode(&header, &host_records())
}

#[test]
fn golden_host6_adds_a_turn_whole_and_pops_its_items_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("golden-host6.jsonl"), render_host()).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("golden-host6")).unwrap();
    let items: Vec<(u64, &str)> = st
        .host
        .items
        .iter()
        .map(|(s, v)| (*s, v["type"].as_str().or(v["role"].as_str()).unwrap_or("")))
        .collect();
    assert_eq!(
        items,
        vec![
            (1, "user"),
            (1, "function_call"),
            (1, "function_call_output")
        ],
        "the turn's four items share its seq; the pops took the newest two"
    );
    // an empty batch, or one holding a non-object, is refused
    for bad in [vec![], vec![json!({"role": "user"}), json!("text")]] {
        let err = st
            .check(&Record::from(HostItems { items: bad }))
            .unwrap_err();
        assert!(err.to_string().contains("JSON object"), "{err}");
    }
}
