//! Writes N small sessions (a finished tool turn each, every tenth one a fork of the one
//! before, every seventh cut off mid-turn) for timing listings:
//! `cargo run --release -p lazarus-session --example make_many -- DIR N`.
//! No fsync (Durability::None): this is throwaway benchmark data.

use lazarus_ledger::Durability;
use lazarus_session::record::*;
use lazarus_session::{CreateOptions, LocalStore, SessionId, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, n) = match args.as_slice() {
        [_, d, n] => (d.clone(), n.parse::<u64>()?),
        _ => return Err("usage: make_many DIR N".into()),
    };
    let store = LocalStore::with_durability(std::path::Path::new(&dir), Durability::None)?;
    for k in 0..n {
        let id = SessionId::parse(&format!("s{k:06}"))?;
        if k % 10 == 9 {
            let at_turn = if (k - 1) % 7 == 6 { 0 } else { 1 };
            let parent = SessionId::parse(&format!("s{:06}", k - 1))?;
            store.fork(&parent, at_turn, Some(&id))?;
            continue;
        }
        let mut s = store.create(CreateOptions {
            id: Some(id.clone()),
            meta: Some(serde_json::json!({"workspace": format!("/srv/projects/{id}")})),
        })?;
        let inp = s.append_input("m1", "user", &format!("look at file {k}"))?;
        let t = s.append(Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![inp.seq],
        }))?;
        s.append(Record::Response(Response {
            turn: 1,
            items: vec![Item::ToolCall {
                call_id: "c1".into(),
                name: "read_file".into(),
                arguments: format!(r#"{{"path":"src/file{k}.rs"}}"#),
            }],
            usage: None,
            stop_reason: Some("tool_calls".into()),
            failure: None,
            model: Some("m".into()),
            provider_extra: None,
            attempts: vec![],
        }))?;
        if k % 7 == 6 {
            continue; // cut off after the response
        }
        s.append(Record::ToolIntent(ToolIntent {
            call_id: "c1".into(),
            turn: 1,
            tool: "read_file".into(),
            arguments: format!(r#"{{"path":"src/file{k}.rs"}}"#),
            idempotent: true,
            idempotency_key: format!("{id}:c1"),
            rerun_basis: None,
        }))?;
        s.append(Record::ToolOutcome(ToolOutcome {
            call_id: "c1".into(),
            status: OutcomeStatus::Ok,
            result: "fn main() {}\n".repeat(5),
            exit_code: None,
            duration_ms: Some(1),
        }))?;
        s.append(Record::TurnStart(TurnStart {
            turn: 2,
            prev_seq: Some(t.seq),
            inputs: vec![],
        }))?;
        s.append(Record::Response(Response {
            turn: 2,
            items: vec![Item::Text {
                text: format!("file {k} is a stub"),
            }],
            usage: None,
            stop_reason: Some("stop".into()),
            failure: None,
            model: Some("m".into()),
            provider_extra: None,
            attempts: vec![],
        }))?;
    }
    Ok(())
}
