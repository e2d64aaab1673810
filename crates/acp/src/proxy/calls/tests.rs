//! The message shapes below are the real agents' (Gemini CLI 0.61.0 and OpenCode 1.18.33 over
//! ACP, driven against scripted models), trimmed and with paths replaced.

use super::*;
use serde_json::json;

fn agent(generation: u64, msg: Value) -> Value {
    json!({"from": "agent", "gen": generation, "msg": msg})
}

fn editor(generation: u64, msg: Value) -> Value {
    json!({"from": "editor", "gen": generation, "msg": msg})
}

fn update(u: Value) -> Value {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":u}})
}

fn gemini_permission(id: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"session/request_permission","params":{"sessionId":"S",
        "options":[{"optionId":"proceed_always","name":"Allow for this session","kind":"allow_always"},
                   {"optionId":"proceed_once","name":"Allow","kind":"allow_once"},
                   {"optionId":"cancel","name":"Reject","kind":"reject_once"}],
        "toolCall":{"toolCallId":"run_shell_command__call01","status":"pending",
                    "title":"echo run >> /sandbox/count.txt","content":[],"locations":[],"kind":"execute"}}})
}

fn answer(id: u64, option: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"outcome":{"outcome":"selected","optionId":option}}})
}

#[test]
fn gemini_default_mode_allowed_then_cut_off_is_in_doubt() {
    let mut c = Calls::default();
    assert_eq!(
        c.apply(&agent(0, gemini_permission(0))),
        vec![Change::Announced(0)]
    );
    assert_eq!(c.get(0).verdict_at_death(), Closed::NotRun);
    c.apply(&editor(0, answer(0, "proceed_once")));
    assert_eq!(c.get(0).permission, Permission::Allowed);
    assert_eq!(c.get(0).verdict_at_death(), Closed::InDoubt);
    assert_eq!(c.get(0).tool, "echo run >> /sandbox/count.txt");
    assert_eq!(c.open().collect::<Vec<_>>(), vec![0]);
}

#[test]
fn gemini_refused_or_unanswered_is_not_run() {
    let mut c = Calls::default();
    c.apply(&agent(0, gemini_permission(0)));
    c.apply(&editor(0, answer(0, "cancel")));
    assert_eq!(c.get(0).verdict_at_death(), Closed::NotRun);
    // an answer to another generation's request with the same id changes nothing
    let mut d = Calls::default();
    d.apply(&agent(1, gemini_permission(0)));
    d.apply(&editor(0, answer(0, "proceed_once")));
    assert_eq!(d.get(0).verdict_at_death(), Closed::NotRun);
    let cancelled = json!({"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}});
    d.apply(&editor(1, cancelled));
    assert_eq!(d.get(0).permission, Permission::Refused);
}

#[test]
fn gemini_completed_ends_and_a_reused_id_is_a_new_call() {
    let mut c = Calls::default();
    c.apply(&agent(0, gemini_permission(0)));
    c.apply(&editor(0, answer(0, "proceed_once")));
    let done = update(
        json!({"sessionUpdate":"tool_call_update","toolCallId":"run_shell_command__call01","status":"completed","title":"echo run >> /sandbox/count.txt","content":[],"locations":[],"kind":"execute"}),
    );
    assert_eq!(c.apply(&agent(0, done.clone())), vec![Change::Ended(0)]);
    assert_eq!(c.get(0).ending, Some(Ending::Completed(String::new())));
    // a load's replay of the finished call, live or replayed: nothing new
    assert!(c.apply(&agent(0, done.clone())).is_empty());
    let replayed = update(
        json!({"sessionUpdate":"tool_call","toolCallId":"run_shell_command__call01","status":"completed","title":"Shell","content":[],"kind":"execute"}),
    );
    assert!(c.apply(&agent(1, replayed)).is_empty());
    // the model calls again under the same id: a second call
    assert_eq!(
        c.apply(&agent(1, gemini_permission(0))),
        vec![Change::Announced(1)]
    );
    assert_eq!(c.get(1).ledger_id, "run_shell_command__call01#2");
    assert_eq!(c.by_live_id("run_shell_command__call01"), Some(1));
}

#[test]
fn gemini_yolo_in_progress_is_in_doubt() {
    let mut c = Calls::default();
    let u = update(
        json!({"sessionUpdate":"tool_call","toolCallId":"run_shell_command__call01","status":"in_progress","title":"echo run","content":[],"locations":[],"kind":"execute"}),
    );
    assert_eq!(c.apply(&agent(0, u)), vec![Change::Announced(0)]);
    assert!(c.get(0).said_running);
    assert_eq!(c.get(0).verdict_at_death(), Closed::InDoubt);
}

#[test]
fn opencode_in_progress_before_its_question_is_not_run_while_asked() {
    let mut c = Calls::default();
    let pending = update(
        json!({"sessionUpdate":"tool_call","toolCallId":"call01","title":"bash","kind":"execute","status":"pending","locations":[{"path":"/sandbox"}],"rawInput":{"cwd":"/sandbox"}}),
    );
    let running = update(
        json!({"sessionUpdate":"tool_call_update","toolCallId":"call01","status":"in_progress","kind":"execute","title":"echo run >> count.txt","rawInput":{"command":"echo run >> count.txt","description":"append a line"}}),
    );
    let ask = json!({"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S",
        "toolCall":{"toolCallId":"call01","title":"echo run >> count.txt","kind":"execute","status":"pending","rawInput":{"command":"echo run >> count.txt"}},
        "options":[{"optionId":"once","kind":"allow_once","name":"Allow once"},{"optionId":"always","kind":"allow_always","name":"Always allow"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]}});
    assert_eq!(c.apply(&agent(0, pending)), vec![Change::Announced(0)]);
    assert_eq!(
        c.get(0).verdict_at_death(),
        Closed::InDoubt,
        "announced, never asked"
    );
    assert!(c.apply(&agent(0, running)).is_empty());
    assert!(c.apply(&agent(0, ask)).is_empty());
    assert_eq!(
        c.get(0).verdict_at_death(),
        Closed::NotRun,
        "asked, no answer"
    );
    c.apply(&editor(0, answer(0, "always")));
    assert_eq!(c.get(0).verdict_at_death(), Closed::InDoubt);
    assert_eq!(c.get(0).tool, "bash");
    assert_eq!(
        c.get(0).arguments(),
        Some(json!({"command":"echo run >> count.txt"}))
    );
}

#[test]
fn a_replay_announces_nothing_but_ends_an_open_call() {
    let mut c = Calls::default();
    let pending = update(
        json!({"sessionUpdate":"tool_call","toolCallId":"t1","title":"bash","status":"pending"}),
    );
    let mut replayed = agent(1, pending.clone());
    replayed["replay"] = json!(true);
    assert!(c.apply(&replayed).is_empty());
    assert!(c.all().is_empty());
    c.apply(&agent(0, pending));
    let failed = update(
        json!({"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"boom"}}]}),
    );
    let mut replayed = agent(1, failed);
    replayed["replay"] = json!(true);
    assert_eq!(c.apply(&replayed), vec![Change::Ended(0)]);
    assert_eq!(c.get(0).ending, Some(Ending::Failed("boom".into())));
}

#[test]
fn the_proxy_closes_calls_and_rebuilding_sees_it() {
    let mut c = Calls::default();
    c.apply(&agent(0, gemini_permission(0)));
    c.apply(&editor(0, answer(0, "proceed_once")));
    assert_eq!(
        c.apply(&json!({"from":"proxy","event":"closed","call":"run_shell_command__call01","as":"in_doubt"})),
        vec![Change::Ended(0)]
    );
    assert_eq!(c.get(0).ending, Some(Ending::Closed(Closed::InDoubt)));
    assert_eq!(c.open().count(), 0);
}

#[test]
fn results_are_text_and_cut() {
    let u = json!({"content":[{"type":"content","content":{"type":"text","text":"a"}},{"type":"diff","path":"/p","newText":"x"}]});
    assert_eq!(result_text(&u), "a\n(edited /p)");
    let raw = json!({"rawOutput":{"output":"hi"}});
    assert_eq!(result_text(&raw), r#"{"output":"hi"}"#);
    let mut s = "é".repeat(RESULT_TEXT_MAX);
    cut(&mut s, RESULT_TEXT_MAX);
    assert!(s.len() <= RESULT_TEXT_MAX + '…'.len_utf8());
    assert!(s.ends_with('…'));
}
