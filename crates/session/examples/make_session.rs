//! Writes a realistic session of N records ending mid-turn (for timing a resume):
//! `cargo run --release -p lazarus-session --example make_session -- DIR ID N`.

use lazarus_ledger::Durability;
use lazarus_session::record::*;
use lazarus_session::{CreateOptions, LocalStore, SessionId, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, id, n) = match args.as_slice() {
        [_, d, i, n] => (d.clone(), i.clone(), n.parse::<u64>()?),
        _ => return Err("usage: make_session DIR ID N".into()),
    };
    let store = LocalStore::with_durability(std::path::Path::new(&dir), Durability::None)?;
    let mut s = store.create(CreateOptions {
        id: Some(SessionId::parse(&id)?),
        meta: None,
    })?;
    let mut turn = 0u64;
    let mut prev = None;
    let mut k = 0u64;
    while s.state().last_seq + 6 < n {
        k += 1;
        let inp = s.append_input(
            &format!("m{k}"),
            "user",
            &format!("step {k}: look at file {k}"),
        )?;
        turn += 1;
        let t = s.append(Record::TurnStart(TurnStart {
            turn,
            prev_seq: prev,
            inputs: vec![inp.seq],
        }))?;
        prev = Some(t.seq);
        let call_id = format!("call_{k}");
        s.append(Record::Response(Response {
            turn,
            items: vec![
                Item::Text {
                    text: "Reading it now.".into(),
                },
                Item::ToolCall {
                    call_id: call_id.clone(),
                    name: "read_file".into(),
                    arguments: format!(r#"{{"path":"src/file{k}.rs"}}"#),
                },
            ],
            usage: Some(Usage {
                prompt_tokens: Some(1000 + k),
                completion_tokens: Some(20),
                total_tokens: Some(1020 + k),
                cached_tokens: None,
            }),
            stop_reason: Some("tool_calls".into()),
            failure: None,
            model: Some("m".into()),
            provider_extra: None,
            attempts: vec![],
        }))?;
        s.append(Record::ToolIntent(ToolIntent {
            call_id: call_id.clone(),
            turn,
            tool: "read_file".into(),
            arguments: format!(r#"{{"path":"src/file{k}.rs"}}"#),
            idempotent: true,
            idempotency_key: format!("k{k}"),
            rerun_basis: None,
        }))?;
        s.append(Record::ToolStart(ToolStart {
            call_id: call_id.clone(),
            process: None,
        }))?;
        s.append(Record::ToolOutcome(ToolOutcome {
            call_id,
            status: OutcomeStatus::Ok,
            result: "fn main() {}\n".repeat(20),
            exit_code: None,
            duration_ms: Some(1),
        }))?;
    }
    println!("{} records", s.state().last_seq);
    Ok(())
}
