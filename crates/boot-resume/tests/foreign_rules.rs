//! The Gemini CLI and OpenCode classifiers rule by rule, on small hand-written tails: the
//! paths the real captures do not reach (a format not read, sub-agents, trivial input, a
//! call not finished, errors and their transience, a window that must grow). Each test was
//! written for a mutant `scripts/mutants.sh foreign` found alive.
use lazarus_boot_resume::classify::{gemini_cli, opencode};
use lazarus_boot_resume::{SessionMeta, SkipWhy, Verdict};

fn whole(name: &str) -> SessionMeta<'_> {
    SessionMeta {
        at_start: true,
        file_name: name,
        ..Default::default()
    }
}

fn lines(ls: &[&str]) -> Vec<u8> {
    let mut v = ls.join("\n").into_bytes();
    v.push(b'\n');
    v
}

const META: &str =
    r#"{"sessionId":"g-1","projectHash":"h","startTime":"t","lastUpdated":"t","kind":"main"}"#;
const PROMPT: &str =
    r#"{"id":"u1","timestamp":"t","type":"user","content":[{"text":"please make the file"}]}"#;

#[test]
fn gemini_a_first_line_that_is_not_metadata_is_an_unknown_format() {
    let t = lines(&[
        r#"{"id":"u1","type":"user","content":[{"text":"fix it"}]}"#,
        PROMPT,
    ]);
    let c = gemini_cli::classify(&t, &whole("session-x.jsonl"));
    assert_eq!(c.verdict, Verdict::UnknownFormat, "{c:?}");
    assert!(c.seen_version.is_some());
}

#[test]
fn gemini_without_metadata_in_the_window_takes_its_id_from_the_file_name() {
    // a window inside the file: its first line is the cut end of an earlier one
    let t = lines(&["art of an earlier line\"}", PROMPT]);
    let meta = SessionMeta {
        at_start: false,
        at_cap: true,
        file_name: "session-2026-12-05T07-23-1bf2a0f3.jsonl",
        ..Default::default()
    };
    let c = gemini_cli::classify(&t, &meta);
    assert_eq!(c.verdict, Verdict::PendingInput, "{c:?}");
    assert_eq!(
        c.session_id.as_deref(),
        Some("session-2026-12-05T07-23-1bf2a0f3")
    );
}

#[test]
fn gemini_a_subagent_recording_is_skipped() {
    let sub = META.replace(r#""kind":"main""#, r#""kind":"subagent""#);
    let c = gemini_cli::classify(&lines(&[&sub, PROMPT]), &whole("abc.jsonl"));
    assert_eq!(c.verdict, Verdict::Skipped(SkipWhy::Subagent), "{c:?}");
    let c = gemini_cli::classify(&lines(&[META, PROMPT]), &whole("abc.jsonl"));
    assert_eq!(c.verdict, Verdict::PendingInput, "{c:?}");
}

#[test]
fn gemini_asks_for_more_only_when_the_window_may_grow_and_cannot_decide() {
    let answered = r#"{"id":"g1","type":"gemini","content":"Done."}"#;
    let inside = SessionMeta {
        at_start: false,
        at_cap: false,
        file_name: "s.jsonl",
        ..Default::default()
    };
    // decided from the window alone: no need to grow
    let c = gemini_cli::classify(&lines(&["cut\"}", PROMPT, answered]), &inside);
    assert!(!c.need_more, "{c:?}");
    assert_eq!(c.verdict, Verdict::Finished);
    // a rewind to a message before the window: grow
    let c = gemini_cli::classify(
        &lines(&["cut\"}", answered, r#"{"$rewindTo":"before"}"#]),
        &inside,
    );
    assert!(c.need_more, "{c:?}");
}

#[test]
fn gemini_trivial_input_is_not_resumed() {
    let ok = r#"{"id":"u2","type":"user","content":[{"text":"ok"}]}"#;
    let c = gemini_cli::classify(&lines(&[META, ok]), &whole("s.jsonl"));
    assert_eq!(c.verdict, Verdict::Skipped(SkipWhy::TrivialInput), "{c:?}");
}

#[test]
fn gemini_a_recorded_call_without_a_finished_result_is_interrupted() {
    let call = |status: &str, result: &str| {
        format!(
            r#"{{"id":"g1","type":"gemini","content":"","toolCalls":[{{"id":"c1","name":"run_shell_command","args":{{"command":"make"}},"status":{status},"result":{result}}}]}}"#
        )
    };
    let done = r#"[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"ok"}}}]"#;
    for (status, result, want) in [
        (r#""success""#, done, Verdict::InterruptedAfterToolResult),
        (r#""executing""#, done, Verdict::InterruptedToolCall),
        (r#""success""#, "null", Verdict::InterruptedToolCall),
        ("null", done, Verdict::InterruptedToolCall),
    ] {
        let c = gemini_cli::classify(
            &lines(&[META, PROMPT, &call(status, result)]),
            &whole("s.jsonl"),
        );
        assert_eq!(c.verdict, want, "status {status}, result {result}: {c:?}");
        if want == Verdict::InterruptedToolCall {
            assert!(
                c.interrupted_call
                    .as_deref()
                    .is_some_and(|x| x.contains("run_shell_command") && x.contains("make")),
                "{c:?}"
            );
        }
    }
}

const SESSION: &str = r#"{"type":"session","id":"ses_1","version":"1.18.33","directory":"/w"}"#;

fn message(id: &str, info: &str, parts: &str) -> String {
    format!(r#"{{"type":"message","id":"{id}","info":{info},"parts":{parts}}}"#)
}

fn user(id: &str, text: &str) -> String {
    message(
        id,
        r#"{"role":"user"}"#,
        &format!(r#"[{{"type":"text","text":"{text}"}}]"#),
    )
}

#[test]
fn opencode_a_window_that_does_not_reach_the_start_grows_only_while_it_may() {
    let open = message("m2", r#"{"role":"assistant","time":{"created":1}}"#, "[]");
    // the export always starts with its session line (no cut line to drop)
    let t = lines(&[SESSION, &open]);
    let inside = |at_cap| SessionMeta {
        at_start: false,
        at_cap,
        ..Default::default()
    };
    let c = opencode::classify(&t, &inside(false));
    assert!(c.need_more, "{c:?}");
    let c = opencode::classify(&t, &inside(true));
    assert!(!c.need_more, "{c:?}");
    assert_eq!(c.verdict, Verdict::InterruptedStream);
    let c = opencode::classify(&t, &whole(""));
    assert!(!c.need_more, "{c:?}");
}

#[test]
fn opencode_a_compaction_never_run_and_trivial_input() {
    let compaction = message(
        "m3",
        r#"{"role":"user"}"#,
        r#"[{"type":"compaction","auto":true}]"#,
    );
    let c = opencode::classify(
        &lines(&[SESSION, &user("m1", "go"), &compaction]),
        &whole(""),
    );
    assert_eq!(c.verdict, Verdict::InterruptedStream, "{c:?}");
    assert!(c.reason.contains("compaction"), "{c:?}");
    let c = opencode::classify(&lines(&[SESSION, &user("m1", "thanks")]), &whole(""));
    assert_eq!(c.verdict, Verdict::Skipped(SkipWhy::TrivialInput), "{c:?}");
    let c = opencode::classify(
        &lines(&[SESSION, &user("m1", "fix the date test")]),
        &whole(""),
    );
    assert_eq!(c.verdict, Verdict::PendingInput, "{c:?}");
}

#[test]
fn opencode_errors_and_their_transience() {
    let failed = |info: &str| {
        opencode::classify(
            &lines(&[SESSION, &user("m1", "fix it"), &message("m2", info, "[]")]),
            &whole(""),
        )
    };
    // an error without finish "error" still ends the turn
    let c = failed(
        r#"{"role":"assistant","time":{"created":1,"completed":2},"error":{"name":"APIError","data":{"message":"rate limited","statusCode":429}}}"#,
    );
    assert_eq!(c.verdict, Verdict::Failed { transient: true }, "{c:?}");
    // a context overflow is never transient, whatever else the error says
    let c = failed(
        r#"{"role":"assistant","finish":"error","error":{"name":"ContextOverflowError","data":{"message":"too large","isRetryable":true}}}"#,
    );
    assert_eq!(c.verdict, Verdict::Failed { transient: false }, "{c:?}");
    let c = failed(
        r#"{"role":"assistant","finish":"error","error":{"name":"APIError","data":{"message":"maximum context length exceeded","isRetryable":true}}}"#,
    );
    assert_eq!(c.verdict, Verdict::Failed { transient: false }, "{c:?}");
    let c = failed(
        r#"{"role":"assistant","finish":"error","error":{"name":"APIError","data":{"message":"bad request","isRetryable":false,"statusCode":500}}}"#,
    );
    assert_eq!(c.verdict, Verdict::Failed { transient: false }, "{c:?}");
    let c = failed(
        r#"{"role":"assistant","finish":"error","error":{"name":"MessageAbortedError","data":{"message":"aborted"}}}"#,
    );
    assert_eq!(c.verdict, Verdict::UserStopped, "{c:?}");
}

#[test]
fn opencode_an_open_answer_is_after_tool_results_only_when_the_turn_before_called_tools() {
    let open = message("m3", r#"{"role":"assistant","time":{"created":3}}"#, "[]");
    let before = |finish: &str| {
        message(
            "m2",
            &format!(
                r#"{{"role":"assistant","finish":"{finish}","time":{{"created":2,"completed":2}}}}"#
            ),
            "[]",
        )
    };
    let c = opencode::classify(
        &lines(&[SESSION, &user("m1", "fix it"), &before("tool-calls"), &open]),
        &whole(""),
    );
    assert_eq!(c.verdict, Verdict::InterruptedAfterToolResult, "{c:?}");
    let c = opencode::classify(
        &lines(&[SESSION, &user("m1", "fix it"), &before("stop"), &open]),
        &whole(""),
    );
    assert_eq!(c.verdict, Verdict::InterruptedStream, "{c:?}");
}

#[test]
fn opencode_an_archived_session_is_the_users_stop_and_a_newer_major_is_unknown() {
    let archived = SESSION.replace(
        r#""directory":"/w""#,
        r#""directory":"/w","time_archived":5"#,
    );
    let c = opencode::classify(&lines(&[&archived, &user("m1", "fix it")]), &whole(""));
    assert_eq!(c.verdict, Verdict::UserStopped, "{c:?}");
    let newer = SESSION.replace("1.18.33", "2.0.0");
    let c = opencode::classify(&lines(&[&newer, &user("m1", "fix it")]), &whole(""));
    assert_eq!(c.verdict, Verdict::UnknownFormat, "{c:?}");
    assert_eq!(c.seen_version.as_deref(), Some("2.0.0"));
}
