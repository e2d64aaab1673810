//! A compaction frees what it summarised from the resume state: the context entries before
//! the kept tail and the summarised calls are dropped (their ids stay known), while what the model is sent next (the summary and the kept tail) is exactly what it was,
//! and a replay of the file builds the same state as the live session did.

use lazarus_ledger::{Header, Payload};
use lazarus_session::record::{FORMAT, Record};
use lazarus_session::{ContextEntry, CreateOptions, LocalStore, SessionState, Store};
use serde_json::{Value, json};

const BIG: usize = 100_000;

fn rec(kind: &str, data: Value) -> Record {
    Record::deserialize_kind(kind, data).expect("a valid record")
}

/// Two turns, each with a big input, a big answer and a call with a big result, then an
/// automatic compaction that summarises turn 1 and keeps turn 2.
fn history() -> Vec<Record> {
    let big = |c: char| c.to_string().repeat(BIG);
    let call_turn = |turn: u64, prev: Option<u64>, input: u64, c: &str, ch: char| {
        vec![
            rec(
                "input",
                json!({"input_id": format!("m{turn}"), "source": "user", "text": big(ch)}),
            ),
            rec(
                "turn_start",
                json!({"turn": turn, "prev_seq": prev, "inputs": [input]}),
            ),
            rec(
                "response",
                json!({"turn": turn, "items": [
                    {"type": "text", "text": big(ch)},
                    {"type": "tool_call", "call_id": c, "name": "read_file", "arguments": format!("{{\"path\":\"{}\"}}", big(ch))}]}),
            ),
            rec(
                "tool_intent",
                json!({"call_id": c, "turn": turn, "tool": "read_file", "arguments": "{}", "idempotent": true, "idempotency_key": c}),
            ),
            rec("tool_start", json!({"call_id": c})),
            rec(
                "tool_outcome",
                json!({"call_id": c, "status": "ok", "result": big(ch)}),
            ),
        ]
    };
    let mut h = call_turn(1, None, 1, "c1", 'a');
    h.extend(call_turn(2, Some(2), 7, "c2", 'b'));
    // seqs 1..=12; a cut ends where a turn_start follows: seq 7 (m2's input) before turn 2
    h
}

/// Checks and applies `records` (seqs 1, 2, …) to a new state, as a replay does.
fn replay(records: Vec<Record>) -> SessionState {
    let mut st = SessionState::new(Header::new(FORMAT, "s"));
    for (i, r) in records.into_iter().enumerate() {
        st.check(&r)
            .unwrap_or_else(|e| panic!("record {}: {e}", i + 1));
        st.apply(i as u64 + 1, r);
    }
    st
}

fn text_bytes(st: &SessionState) -> usize {
    let ctx: usize = st
        .context
        .iter()
        .map(|e| match e {
            ContextEntry::User { text, .. } => text.len(),
            ContextEntry::Assistant { items, .. } => serde_json::to_string(items).unwrap().len(),
            ContextEntry::ToolResult { .. } => 0,
        })
        .sum();
    let calls: usize = st
        .calls
        .iter()
        .map(|c| c.arguments.len() + c.outcome.as_ref().map_or(0, |o| o.result.len()))
        .sum();
    ctx + calls
}

#[test]
fn a_compaction_frees_what_it_summarised_and_changes_nothing_sent() {
    let mut st = SessionState::new(Header::new(FORMAT, "s"));
    let mut all = history();
    all.push(rec(
        "compaction",
        json!({"trigger": "auto", "from_seq": 1, "through_seq": 7, "summary": "turn 1 read a file",
               "tokens_before": 200000, "tokens_after": 100000}),
    ));
    let n = all.len();
    let mut before = None;
    for (i, r) in all.into_iter().enumerate() {
        st.check(&r)
            .unwrap_or_else(|e| panic!("record {}: {e}", i + 1));
        if i + 1 == n {
            before = Some((text_bytes(&st), st.clone()));
        }
        st.apply(i as u64 + 1, r);
    }
    let (bytes_before, st_before) = before.unwrap();
    let bytes_after = text_bytes(&st);
    assert!(bytes_before >= 8 * BIG, "{bytes_before}");
    // turn 1's input, answer, call arguments and result are gone; turn 2's stay
    assert!(
        bytes_after < bytes_before / 2 + 1000,
        "{bytes_before} -> {bytes_after}"
    );
    assert!(
        bytes_after >= 3 * BIG,
        "the kept turn lost text: {bytes_after}"
    );
    let (summary, live) = st.live_context();
    assert_eq!(summary, Some("turn 1 read a file"));
    let (_, live_before) = st_before.live_context();
    let kept_from = st.compaction.as_ref().unwrap().kept_from;
    assert_eq!(
        live,
        st_before.context.since(kept_from),
        "what is sent next did not change"
    );
    assert!(
        live_before.len() > live.len(),
        "the compaction cut the context sent"
    );
    // what it summarised is dropped, not kept empty; indices keep their meaning
    assert_eq!(st.context.start(), kept_from);
    assert_eq!(st.context.len(), st_before.context.len());
    assert!(st.call("c1").is_none() && st.calls.get(0).is_none());
    assert_eq!(st.calls[1].outcome.as_ref().unwrap().result.len(), BIG);
    assert_eq!(st.tool_result_text("c2").len(), BIG);
}

#[test]
fn replay_after_a_compaction_equals_the_live_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut s = store
        .create(CreateOptions {
            id: Some("c".parse().unwrap()),
            meta: None,
        })
        .unwrap();
    for r in history() {
        if let Record::Input(i) = &r {
            s.append_input(&i.input_id, &i.source, &i.text).unwrap();
        } else {
            s.append(r).unwrap();
        }
    }
    s.append(rec(
        "compaction",
        json!({"trigger": "auto", "from_seq": 1, "through_seq": 7, "summary": "turn 1",
               "tokens_before": 200000, "tokens_after": 100000}),
    ))
    .unwrap();
    let live = s.state().clone();
    drop(s);
    let replayed = store.load(&"c".parse().unwrap()).unwrap();
    assert_eq!(replayed.context, live.context);
    assert_eq!(replayed.calls, live.calls);
    assert_eq!(replayed.compaction, live.compaction);
    // the file still holds every byte of turn 1
    let recs = store.records(&"c".parse().unwrap(), 0, 100).unwrap();
    assert_eq!(recs[5].data["result"].as_str().unwrap().len(), BIG);
}

/// After a compaction, a call of the next turn that was cut off is still found: the search
/// for unresolved calls starts after what the compaction summarised, not later.
#[test]
fn a_call_cut_off_after_a_compaction_is_still_unresolved() {
    let mut all: Vec<Record> = history().into_iter().take(6).collect(); // turn 1, resolved
    all.push(rec(
        "compaction",
        json!({"trigger": "auto", "from_seq": 1, "through_seq": 6, "summary": "turn 1",
               "tokens_before": 900, "tokens_after": 100}),
    ));
    all.push(rec(
        "turn_start",
        json!({"turn": 2, "prev_seq": 2, "inputs": []}),
    ));
    all.push(rec(
        "response",
        json!({"turn": 2, "items": [{"type": "tool_call", "call_id": "c2", "name": "shell", "arguments": "{}"}]}),
    ));
    all.push(rec(
        "tool_intent",
        json!({"call_id": "c2", "turn": 2, "tool": "shell", "arguments": "{}", "idempotent": false, "idempotency_key": "k2"}),
    ));
    all.push(rec("tool_start", json!({"call_id": "c2"})));
    let st = replay(all);
    assert_eq!(st.compaction.as_ref().unwrap().through_turn, 1);
    let open: Vec<&str> = st.unresolved_calls().map(|c| c.call_id.as_str()).collect();
    assert_eq!(open, ["c2"]);
    assert!(st.owes_work());
    assert!(!st.every_call_has_one_result());
    // a compaction now would break the rule (a call has no outcome)
    let again = rec(
        "compaction",
        json!({"trigger": "auto", "from_seq": 7, "through_seq": 11, "summary": "x",
               "tokens_before": 900, "tokens_after": 100}),
    );
    assert!(st.check(&again).is_err());
}

/// The first turn (through its tool result, seq 6), then a compaction of all of it.
fn turn_one_summarised() -> Vec<Record> {
    let mut all: Vec<Record> = history().into_iter().take(6).collect();
    all.push(rec(
        "compaction",
        json!({"trigger": "auto", "from_seq": 1, "through_seq": 6, "summary": "turn 1",
               "tokens_before": 900, "tokens_after": 100}),
    ));
    all
}

/// The ids of what a compaction dropped are still known: a second input with a summarised
/// input's id and a response reusing a summarised call's id are refused as before.
#[test]
fn ids_of_summarised_turns_are_still_refused_twice() {
    let mut st = replay(turn_one_summarised());
    assert!(
        st.calls.iter().next().is_none(),
        "turn 1's call was dropped"
    );
    let again = rec(
        "input",
        json!({"input_id": "m1", "source": "user", "text": "again"}),
    );
    assert!(
        matches!(
            st.check(&again),
            Err(lazarus_session::ReplayError::DuplicateInputId { first: 1, .. })
        ),
        "{:?}",
        st.check(&again)
    );
    st.apply(
        8,
        rec(
            "turn_start",
            json!({"turn": 2, "prev_seq": 2, "inputs": []}),
        ),
    );
    let reuse = rec(
        "response",
        json!({"turn": 2, "items": [{"type": "tool_call", "call_id": "c1", "name": "shell", "arguments": "{}"}]}),
    );
    assert!(matches!(
        st.check(&reuse),
        Err(lazarus_session::ReplayError::DuplicateCallId { .. })
    ));
}

/// A compaction through the last record, right after tool results, drops every context
/// entry; the session still owes the turn that answers those results.
#[test]
fn results_not_yet_answered_are_still_owed_after_a_compaction_drops_them() {
    let st = replay(turn_one_summarised());
    assert!(st.live_context().1.is_empty() && st.context.last().is_none());
    assert!(st.owes_work(), "the tool result is not answered yet");
    assert_eq!(st.status(), lazarus_session::Status::Interrupted);
}

/// A `compact` control input asks for a compaction before the next turn: it owes no work by
/// itself, a resume receipt does not answer it, a compaction (or a turn start) does.
#[test]
fn a_compact_request_waits_for_a_compaction_and_owes_no_work() {
    let mut all: Vec<Record> = history().into_iter().take(6).collect();
    // turn 2 answers the tool result, so nothing is owed
    all.push(rec(
        "turn_start",
        json!({"turn": 2, "prev_seq": 2, "inputs": []}),
    ));
    all.push(rec(
        "response",
        json!({"turn": 2, "items": [{"type": "text", "text": "done"}]}),
    ));
    all.push(rec(
        "control",
        json!({"input_id": "k1", "action": "compact", "reason": "sessions compact"}),
    ));
    let mut st = replay(all);
    assert!(st.compact_requested());
    assert!(!st.owes_work(), "a compact request owes no work by itself");
    assert_eq!(st.status(), lazarus_session::Status::Idle);
    let receipt = rec(
        "resume",
        json!({"trigger": "event", "truncated_bytes": 0, "records_replayed": 9, "calls_reused": 0,
               "calls_rerun": 0, "calls_in_doubt": 0, "calls_not_started": 0, "inputs_pending": 0,
               "every_call_has_one_result": true}),
    );
    st.check(&receipt).unwrap();
    st.apply(10, receipt);
    assert!(st.compact_requested(), "a receipt does not answer it");
    let compaction = rec(
        "compaction",
        json!({"trigger": "manual", "from_seq": 1, "through_seq": 6, "summary": "turn 1",
               "tokens_before": 900, "tokens_after": 100}),
    );
    st.check(&compaction).unwrap();
    st.apply(11, compaction);
    assert!(!st.compact_requested(), "the compaction answers it");
    // a resume event still owes its receipt, as before
    st.apply(
        12,
        rec("control", json!({"input_id": "k2", "action": "resume"})),
    );
    assert!(st.owes_work() && !st.compact_requested());
}

/// A call that ended in doubt still counts after a compaction drops it (the gateway reports
/// the session's in-doubt calls), though it is no longer in the live context.
#[test]
fn calls_in_doubt_are_still_counted_after_a_compaction_drops_them() {
    let mut all: Vec<Record> = history().into_iter().take(5).collect();
    all.push(rec(
        "tool_outcome",
        json!({"call_id": "c1", "status": "in_doubt", "result": "the effect is unknown"}),
    ));
    let before = replay(all.clone());
    assert_eq!(
        (before.in_doubt_count(), before.in_doubt_calls().count()),
        (1, 1)
    );
    all.push(rec(
        "compaction",
        json!({"trigger": "auto", "from_seq": 1, "through_seq": 6, "summary": "turn 1",
               "tokens_before": 900, "tokens_after": 100}),
    ));
    let st = replay(all);
    assert_eq!(st.in_doubt_calls().count(), 0, "dropped with its turn");
    assert_eq!(st.in_doubt_count(), 1);
}
