//! A big session's replay runs on several threads with simd-json (`lazarus_ledger::parallel`);
//! a small one on the calling thread with serde_json. Both must rebuild the same resume state
//! from the same ledger, and decode every record kind alike, damaged or not.

use std::path::Path;

use lazarus_ledger::frame::{FastDecoder, decode_envelope};
use lazarus_ledger::{Durability, Options};
use lazarus_session::record::*;
use lazarus_session::{CreateOptions, LocalStore, SessionId, Store};
use serde_json::json;

/// A session of about `bytes` bytes: turns with text, tool calls and results full of escapes
/// and non-ASCII, some responses with provider extras holding floats (the fast decoder hands
/// those lines to serde_json), some calls interrupted.
fn write_session(dir: &Path, id: &str, bytes: u64) {
    let store = LocalStore::with_durability(dir, Durability::None).unwrap();
    let mut s = store
        .create(CreateOptions {
            id: Some(SessionId::parse(id).unwrap()),
            meta: None,
        })
        .unwrap();
    let (mut turn, mut prev, mut k) = (0u64, None, 0u64);
    let path = dir.join(format!("{id}.jsonl"));
    while std::fs::metadata(&path).unwrap().len() < bytes {
        k += 1;
        let inp = s
            .append_input(
                &format!("m{k}"),
                "user",
                &format!("step {k}: \"ünïcode\" \\ 漢字 😀"),
            )
            .unwrap();
        turn += 1;
        let t = s
            .append(Record::TurnStart(TurnStart {
                turn,
                prev_seq: prev,
                inputs: vec![inp.seq],
            }))
            .unwrap();
        prev = Some(t.seq);
        let call_id = format!("call_{k}");
        let extra = (k % 7 == 0).then(|| {
            json!({"logprob": -0.25 * k as f64, "n": k, "big": 12345678901234567890u64})
                .as_object()
                .unwrap()
                .clone()
        });
        s.append(Record::Response(Response {
            turn,
            items: vec![
                Item::Text {
                    text: format!("Reading file {k}.\nTab\there, quote \" and backslash \\."),
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
            provider_extra: extra,
            attempts: vec![],
        }))
        .unwrap();
        s.append(Record::ToolIntent(ToolIntent {
            call_id: call_id.clone(),
            turn,
            tool: "read_file".into(),
            arguments: format!(r#"{{"path":"src/file{k}.rs"}}"#),
            idempotent: true,
            idempotency_key: format!("k{k}"),
            rerun_basis: None,
        }))
        .unwrap();
        if k % 11 == 0 {
            continue; // cut off during the call: in doubt until the next turn
        }
        s.append(Record::ToolStart(ToolStart {
            call_id: call_id.clone(),
            process: None,
        }))
        .unwrap();
        s.append(Record::ToolOutcome(ToolOutcome {
            call_id,
            status: OutcomeStatus::Ok,
            result: format!("fn main() {{ println!(\"{k}\\n\"); }}\n\t// é\n").repeat(40),
            exit_code: None,
            duration_ms: Some(1),
        }))
        .unwrap();
    }
}

fn store(dir: &Path, workers: Option<usize>) -> LocalStore {
    LocalStore::with_options(
        dir,
        Options {
            replay_workers: workers,
            ..Options::default()
        },
    )
}

#[test]
fn a_big_session_replays_to_the_same_state_on_one_thread_and_on_many() {
    let dir = tempfile::tempdir().unwrap();
    let id = "big-session";
    // above the size from which a replay goes parallel by itself
    write_session(
        dir.path(),
        id,
        lazarus_ledger::parallel::PARALLEL_MIN_BYTES + 100_000,
    );
    let sid = SessionId::parse(id).unwrap();
    let one = format!("{:?}", store(dir.path(), Some(0)).load(&sid).unwrap());
    for workers in [Some(1), Some(3), None] {
        let many = format!("{:?}", store(dir.path(), workers).load(&sid).unwrap());
        assert!(
            one == many,
            "load with {workers:?} workers built another state"
        );
        // the writer's open (recovery scan and replay in one pass) too
        let s = store(dir.path(), workers).open(&sid).unwrap();
        assert!(
            format!("{:?}", s.state()) == one,
            "open with {workers:?} workers built another state"
        );
    }
}

/// Every record kind (the golden ledger), and every byte of each line replaced by a byte
/// that matters to a JSON parser: both decoders give the same record or the same refusal.
#[test]
fn every_record_kind_decodes_alike_damaged_or_not() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut lines = 0;
    let mut decoder = FastDecoder::default();
    for file in ["golden.jsonl", "import.jsonl"] {
        let bytes = std::fs::read(golden.join(file)).unwrap();
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            lines += 1;
            let mut variants = vec![line.to_vec()];
            for i in 0..line.len() {
                for b in [b'"', b'\\', b'{', b'}', b'0', b'-', b'.', b'x', b' ', 0xff] {
                    let mut v = line.to_vec();
                    v[i] = b;
                    variants.push(v);
                }
            }
            for v in &variants {
                let reference = decode_envelope::<Record>(v)
                    .map(|e| (e.seq, e.kind.to_string(), e.data))
                    .map_err(|p| p.to_string());
                let fast = decoder
                    .decode::<Record>(v)
                    .map(|e| (e.seq, e.kind.to_string(), e.data))
                    .map_err(|p| p.to_string());
                assert_eq!(reference, fast, "{}", String::from_utf8_lossy(v));
            }
        }
    }
    assert!(lines >= 13, "only {lines} golden lines");
}
