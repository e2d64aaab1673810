//! `lazarus resume` in a real terminal (tmux): the picker lists sessions newest first, typing
//! filters, Enter resumes the chosen one (and only it), Esc cancels; off a terminal it is a
//! usage error naming --session.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lazarus_session::{LocalStore, SessionId, Status, Store};
use lazarus_testkit::tmux::{Tmux, sh_quote};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn setup(dir: &Path) {
    for (id, text) in [
        ("a-login", "fix the flaky login test"),
        ("b-docs", "write the docs"),
    ] {
        let o = Command::new(BIN)
            .args([
                "sessions",
                "--session-dir",
                dir.to_str().unwrap(),
                "create",
                "--id",
                id,
            ])
            .output()
            .unwrap();
        assert!(o.status.success());
        let o = Command::new(BIN)
            .args([
                "sessions",
                "--session-dir",
                dir.to_str().unwrap(),
                "send",
                id,
                text,
            ])
            .output()
            .unwrap();
        assert!(o.status.success());
    }
}

#[test]
fn the_picker_filters_and_resumes_the_chosen_session_in_a_terminal() {
    let Some(tmux) = Tmux::new("the picker") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("picked and answered"),
        )
        .repeat()])))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    setup(&dir);
    let command = format!(
        "XDG_CONFIG_HOME=/nonexistent {} resume --session-dir {} --workspace {} --model m --base-url {}; echo EXIT=$?; sleep 60",
        sh_quote(BIN),
        sh_quote(dir.to_str().unwrap()),
        sh_quote(tmp.path().to_str().unwrap()),
        sh_quote(&server.base_url()),
    );
    tmux.start(&command);
    let screen = tmux.wait_for("Resume which session?");
    // newest first: b-docs had the last activity
    let b = screen.find("write the docs").expect("b listed");
    let a = screen.find("fix the flaky login test").expect("a listed");
    assert!(b < a, "newest first:\n{screen}");
    eprintln!("picker:\n{screen}");
    tmux.type_text("flaky");
    let screen = tmux.wait_for("flaky");
    tmux.press("Enter");
    // resumed, answered, and back at the line prompt (a terminal): Ctrl-D leaves
    tmux.wait_for("picked and answered");
    tmux.press("C-d");
    let screen_after = tmux.wait_for("EXIT=");
    assert!(screen_after.contains("EXIT=0"), "{screen_after}");
    assert!(
        screen_after.contains("picked and answered"),
        "{screen_after}"
    );
    assert!(
        screen_after.contains("last turns of a-login"),
        "{screen_after}"
    );
    let _ = screen;
    let store = LocalStore::open(&dir).unwrap();
    assert_eq!(
        store.load(&SessionId::literal("a-login")).unwrap().status(),
        Status::Idle
    );
    assert_eq!(
        store.load(&SessionId::literal("b-docs")).unwrap().status(),
        Status::Pending
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn esc_cancels_and_no_terminal_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    setup(&dir);
    let o = Command::new(BIN)
        .args([
            "resume",
            "--session-dir",
            dir.to_str().unwrap(),
            "--model",
            "m",
        ])
        .env("XDG_CONFIG_HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--session ID"));

    let Some(tmux) = Tmux::new("the picker") else {
        return;
    };
    let command = format!(
        "XDG_CONFIG_HOME=/nonexistent {} resume --session-dir {} --model m --base-url http://127.0.0.1:9/v1; echo EXIT=$?; sleep 60",
        sh_quote(BIN),
        sh_quote(dir.to_str().unwrap()),
    );
    tmux.start(&command);
    tmux.wait_for("Resume which session?");
    tmux.press("Escape");
    let screen = tmux.wait_for("EXIT=");
    assert!(
        screen.contains("EXIT=130") && screen.contains("nothing resumed"),
        "{screen}"
    );
    let store = LocalStore::open(&dir).unwrap();
    for id in ["a-login", "b-docs"] {
        assert_eq!(
            store.load(&SessionId::literal(id)).unwrap().status(),
            Status::Pending
        );
    }
}

/// `lazarus run` on a terminal without -p: a line prompt. Each line is a durable input;
/// Ctrl-C cancels the running turn durably and returns to the prompt; Ctrl-D leaves.
#[test]
fn the_line_prompt_records_each_line_cancels_a_turn_with_ctrl_c_and_leaves_with_ctrl_d() {
    let Some(tmux) = Tmux::new("the picker") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::text("first answer")),
            // the second turn stalls long enough to be cancelled
            Step::reply(ScriptedResponse::text("never seen")).delay_ms(30_000),
            Step::reply(ScriptedResponse::text("third answer")).repeat(),
        ])))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let command = format!(
        "XDG_CONFIG_HOME=/nonexistent {} run --session-dir {} --workspace {} --model m --base-url {}; echo EXIT=$?; sleep 60",
        sh_quote(BIN),
        sh_quote(dir.to_str().unwrap()),
        sh_quote(tmp.path().to_str().unwrap()),
        sh_quote(&server.base_url()),
    );
    tmux.start_sized(&command, 140, 40);
    tmux.wait_for("Ctrl-D leaves");
    tmux.type_text("hello one");
    tmux.press("Enter");
    tmux.wait_for("first answer");
    tmux.type_text("slow two");
    tmux.press("Enter");
    // the request is in flight: Ctrl-C cancels the turn, the prompt comes back
    let t0 = Instant::now();
    while server.requests().len() < 2 {
        assert!(t0.elapsed() < Duration::from_secs(20), "{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(20));
    }
    tmux.press("C-c");
    tmux.wait_for("turn cancelled");
    tmux.type_text("three");
    tmux.press("Enter");
    tmux.wait_for("third answer");
    // The run goes on (the cut-off turn 2 is requested again, then "three" gets turn 3):
    // Ctrl-D typed while it runs would reach the terminal in cooked mode and be lost, so
    // wait until the session owes nothing and the prompt is back.
    let t0 = Instant::now();
    loop {
        let idle = LocalStore::open(&dir)
            .ok()
            .and_then(|s| {
                let id = s.list().ok()?.first()?.id.clone();
                s.load(&id).ok()
            })
            .is_some_and(|st| st.status() == Status::Idle);
        let screen = tmux.screen();
        let prompt_back = screen.lines().rev().find(|l| !l.trim().is_empty()) == Some(">");
        if idle && prompt_back {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{screen}");
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.press("C-d");
    let screen = tmux.wait_for("EXIT=");
    eprintln!("line prompt:\n{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!screen.contains("never seen"), "{screen}");

    let store = LocalStore::open(&dir).unwrap();
    let list = store.list().unwrap();
    assert_eq!(list.len(), 1, "one session for the whole conversation");
    let st = store.load(&list[0].id).unwrap();
    let texts: Vec<String> = st
        .context
        .iter()
        .filter_map(|e| match e {
            lazarus_session::ContextEntry::User { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["hello one", "slow two", "three"]);
    assert_eq!(st.status(), Status::Idle);
    let records = store.records(&list[0].id, 0, 1000).unwrap();
    assert!(
        records
            .iter()
            .any(|r| r.kind == "interrupted" && r.data.to_string().contains("sigint")),
        "the cancelled turn is recorded: {records:?}"
    );
}
