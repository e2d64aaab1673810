//! A pi session tree with two branches (the real pi 0.73.1 capture `finished`, plus a second
//! answer to the same tool result, as `/tree` leaves it): the current branch is the session,
//! and with `branches` the other one becomes a fork of it at the last turn both share.

use std::path::PathBuf;

use lazarus_boot_resume::Format;
use lazarus_boot_resume::formats::{self, ReadOptions};
use lazarus_session::{LocalStore, SessionId, Store};
use serde_json::{Value, json};

fn source(dir: &std::path::Path) -> PathBuf {
    let caps = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures/real/pi/finished/home/.pi/agent/sessions");
    let sub = std::fs::read_dir(&caps)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(sub)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // the tool result's entry: a second answer hangs off it, written last (the leaf)
    let result = lines
        .iter()
        .find(|l| l["message"]["role"] == "toolResult")
        .unwrap();
    let other = json!({"type": "message", "id": "beefcafe", "parentId": result["id"],
        "timestamp": "2026-12-03T09:09:00.000Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Wrote it; nothing else to do."}],
            "api": "openai-completions", "provider": "scripted", "model": "scripted-model",
            "stopReason": "stop", "timestamp": 1796288940000u64}});
    let mut out = text.clone();
    out.push_str(&other.to_string());
    out.push('\n');
    let p = dir.join("tree.jsonl");
    std::fs::write(&p, out).unwrap();
    p
}

fn texts(store: &LocalStore, id: &str) -> Vec<String> {
    let st = store.load(&SessionId::parse(id).unwrap()).unwrap();
    st.context
        .iter()
        .filter_map(|e| match e {
            lazarus_session::ContextEntry::Assistant { items, .. } => Some(
                items
                    .iter()
                    .filter_map(|i| match i {
                        lazarus_session::record::Item::Text { text } => Some(text.clone()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect()
}

#[test]
fn the_other_branch_of_a_pi_tree_becomes_a_fork_at_the_last_shared_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path());
    let store = LocalStore::open(&tmp.path().join("s")).unwrap();
    // without --branches: the current branch only, the other counted as dropped
    let conv = formats::read(Format::Pi, &src, &ReadOptions::default()).unwrap();
    assert!(conv.branches.is_empty());
    assert_eq!(conv.dropped["entry on another branch"].0, 1);
    let opts = ReadOptions {
        branches: true,
        ..Default::default()
    };
    let conv = formats::read(Format::Pi, &src, &opts).unwrap();
    assert_eq!(conv.branches.len(), 1);
    let got = lazarus_interchange::import(&store, &conv, Some(SessionId::parse("tree").unwrap()))
        .unwrap();
    assert_eq!(texts(&store, "tree"), ["Wrote it; nothing else to do."]);
    assert_eq!(got.related.len(), 1);
    let fork = &got.related[0];
    assert_eq!(fork.id, "tree-branch-1");
    assert_eq!(texts(&store, "tree-branch-1"), ["Done: wrote out.txt."]);
    let st = store
        .load(&SessionId::parse("tree-branch-1").unwrap())
        .unwrap();
    assert_eq!(
        st.header.parent.as_ref().map(|p| p.id.as_str()),
        Some("tree")
    );
    assert_eq!(
        st.forked_at_turn,
        Some(1),
        "forked after the shared tool call's turn"
    );
    assert!(st.every_call_has_one_result());
    assert_eq!(
        store
            .lineage(&SessionId::parse("tree-branch-1").unwrap())
            .unwrap()
            .len(),
        2
    );
}
