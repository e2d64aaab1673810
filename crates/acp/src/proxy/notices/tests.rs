use super::*;
use serde_json::json;

fn agent(msg: Value) -> Value {
    json!({"from": "agent", "gen": 0, "msg": msg})
}

fn update(u: Value) -> Value {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"A","update":u}})
}

fn prompt(text: &str) -> Value {
    json!({"from": "editor", "gen": 0, "msg": {"jsonrpc":"2.0","id":1,"method":"session/prompt",
        "params":{"sessionId":"A","prompt":[{"type":"text","text":text}]}}})
}

/// A session: a prompt, an answer in two chunks, a bash call (completed), a second call
/// running when the agent died (closed in doubt), a third waiting for permission (not run).
fn entries() -> Vec<Value> {
    vec![
        prompt("make the file"),
        agent(update(
            json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"On "}}),
        )),
        agent(update(
            json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"it."}}),
        )),
        agent(update(
            json!({"sessionUpdate":"tool_call","toolCallId":"t1","title":"bash","status":"pending","rawInput":{"command":"touch a"}}),
        )),
        agent(update(
            json!({"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"ok"}}]}),
        )),
        agent(update(
            json!({"sessionUpdate":"tool_call","toolCallId":"t2","title":"bash","status":"in_progress","rawInput":{"command":"echo run >> count.txt"}}),
        )),
        agent(
            json!({"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"A",
            "toolCall":{"toolCallId":"t3","title":"rm -rf build","kind":"execute","status":"pending"},
            "options":[{"optionId":"y","kind":"allow_once","name":"Allow"}]}}),
        ),
        json!({"from":"proxy","event":"closed","call":"t2","as":"in_doubt"}),
        json!({"from":"proxy","event":"closed","call":"t3","as":"not_run"}),
        // a load's replay is not the conversation twice
        json!({"from":"agent","gen":1,"replay":true,"msg":update(json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"On it."}}))}),
    ]
}

fn calls() -> Calls {
    let mut c = Calls::default();
    for e in entries() {
        c.apply(&e);
    }
    c
}

#[test]
fn the_agent_is_told_which_call_is_in_doubt_and_which_did_not_run() {
    let c = calls();
    let closed = [(1, Closed::InDoubt), (2, Closed::NotRun)];
    let told = for_agent(&c, &closed, true, None).unwrap();
    assert!(told.starts_with(RESUME_BASE), "{told}");
    assert!(
        told.contains(r#"The tool call that was running when it stopped: bash {"command":"echo run >> count.txt"} (call t2)"#),
        "{told}"
    );
    assert!(told.contains("Its effect is unknown"), "{told}");
    assert!(
        told.contains(
            "waiting for permission when it stopped and did not run: rm -rf build (call t3)"
        ),
        "{told}"
    );
    assert!(!told.contains("lost this session's context"));
}

#[test]
fn nothing_to_tell_is_nothing() {
    let c = calls();
    assert_eq!(for_agent(&c, &[], false, None), None);
    let lost = for_agent(&c, &[], false, Some("User: hi")).unwrap();
    assert!(
        lost.starts_with("[System] You lost this session's context"),
        "{lost}"
    );
    assert!(lost.ends_with("User: hi"));
}

#[test]
fn the_transcript_tells_the_story_once() {
    let t = transcript(&entries());
    assert_eq!(
        t,
        "User: make the file\n\
Assistant: On it.\n\
Tool call bash {\"command\":\"touch a\"} (t1): completed: ok\n\
Tool call bash (t2): in doubt: the agent process stopped while this call may have been running; its effect is unknown (the agent and the editor were told)\n\
Tool call rm -rf build (t3): not run: the agent process stopped before this call was allowed to start"
    );
}

#[test]
fn a_long_transcript_keeps_its_end() {
    let mut e = Vec::new();
    for i in 0..5000 {
        e.push(prompt(&format!(
            "prompt number {i} with some words to fill it"
        )));
    }
    let t = transcript(&e);
    assert!(t.len() <= TRANSCRIPT_BYTES_MAX + 128, "{}", t.len());
    assert!(t.starts_with("[… the earlier conversation is left out …]\nUser: prompt number"));
    assert!(t.ends_with("prompt number 4999 with some words to fill it"));
}

#[test]
fn the_editor_replay_has_the_prompts_the_cards_and_no_replays() {
    let r = replay_for_editor("S", &entries());
    let kinds: Vec<&str> = r
        .iter()
        .map(|m| m["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call"
        ]
    );
    assert!(
        r.iter().all(|m| m["params"]["sessionId"] == "S"),
        "the editor's id"
    );
    assert_eq!(
        r[6]["params"]["update"]["toolCallId"], "t3",
        "the permission's call"
    );
}

#[test]
fn closed_calls_are_failed_with_why() {
    let c = calls();
    let u = call_update(
        "S",
        c.get(1),
        Closed::InDoubt,
        "killed by signal 9 (SIGKILL)",
        true,
    );
    assert_eq!(u["params"]["update"]["sessionUpdate"], "tool_call_update");
    assert_eq!(u["params"]["update"]["status"], "failed");
    let text = u["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("Cut off: the agent process stopped (killed by signal 9 (SIGKILL))"));
    let whole = call_update("S", c.get(2), Closed::NotRun, "x", false);
    assert_eq!(whole["params"]["update"]["sessionUpdate"], "tool_call");
    assert_eq!(whole["params"]["update"]["title"], "rm -rf build");
}

#[test]
fn prompts_as_text() {
    let p = json!([{"type":"text","text":"look"},{"type":"resource","resource":{"uri":"file:///a.rs","text":"fn a(){}"}},
        {"type":"resource_link","uri":"file:///b.rs","name":"b"},{"type":"image","data":"..."}]);
    assert_eq!(
        prompt_text(&p),
        "look\n[file:///a.rs]\nfn a(){}\n[file:///b.rs]\n[image]"
    );
}

#[test]
fn the_editor_message_counts() {
    let s = for_editor(
        "the agent (gemini) killed by signal 9 (SIGKILL) and was started again",
        &Back::Lost("No previous sessions found".into()),
        &[
            (0, Closed::InDoubt),
            (1, Closed::InDoubt),
            (2, Closed::NotRun),
        ],
    );
    assert_eq!(
        s,
        "Lazarus: the agent (gemini) killed by signal 9 (SIGKILL) and was started again; it could not load this session (No previous sessions found), so it lost its context: Lazarus gave it the conversation it recorded. 2 tool calls were cut off: in doubt, not run again unless the agent checks first. 1 call waiting for permission did not run."
    );
}
