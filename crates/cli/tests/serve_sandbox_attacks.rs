//! A `lazarus serve` session's shell against the gateway and the other tenants: the
//! gateway's bearer token (its token file), another session's ledger and workspace, and the
//! gateway's own environment. Each attack prints `held` or `BROKE`; the test fails on any
//! `BROKE`, and its own workspace stays writable.

mod serve_common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use lazarus_session::{LocalStore, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::*;

fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

#[test]
fn a_sessions_shell_reaches_neither_the_gateway_nor_other_tenants() {
    let state = tempdir();
    let s = state.path().canonicalize().unwrap();
    let (sessions, root, token_file) = (
        s.join("sessions"),
        s.join("workspaces"),
        s.join("gateway.token"),
    );
    let tag = std::process::id();
    let api_key = format!("sk-canary-gateway-{tag}");
    let ledger_canary = format!("canary-tenant-message-{tag}");
    let file_canary = format!("canary-tenant-file-{tag}");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();

    let attacks: Vec<(&str, String)> = vec![
        (
            "read the gateway's token file",
            format!("cat {}", token_file.display()),
        ),
        (
            "read the other tenant's ledger",
            format!(
                "grep -r canary {}; cat {}/*",
                sessions.display(),
                sessions.display()
            ),
        ),
        (
            "read the other tenant's workspace",
            format!(
                "cat {}/victim/notes.txt; ls {}",
                root.display(),
                root.display()
            ),
        ),
        (
            "read the gateway's environment",
            "env; cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'".into(),
        ),
        (
            "find the token in the gateway's state",
            format!("grep -r {TOKEN} {} 2>&1 | head -3", s.display()),
        ),
    ];
    let mut calls = ScriptedResponse::default();
    for (i, (_, cmd)) in attacks.iter().enumerate() {
        calls = calls.with_call(format!("a{i}"), "shell", json!({ "command": cmd }));
    }
    calls = calls.with_call(
        "own",
        "shell",
        json!({"command": "echo mine > mine.txt && cat mine.txt"}),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::text("noted")).when(When::LastUserContains {
                text: "hello".into(),
            }),
            Step::reply(calls).when(When::LastUserContains {
                text: "attack".into(),
            }),
            Step::after_tool_result("own", ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let mut cmd = serve_cmd(&s, &model.base_url(), &[]);
    // the token comes from its file (the one the shell tries to read), the key from the env
    cmd.env_remove("LAZARUS_TOKEN")
        .env("OPENAI_API_KEY", &api_key)
        .env("LAZARUS_CONFIG", s.join("no-config.toml"));
    let gw = Gateway::start(&mut cmd);

    for id in ["victim", "attacker"] {
        let (st, v) = call(&gw.url, "POST", "/v1/sessions", Some(json!({ "id": id })));
        assert_eq!(st, 201, "{v}");
    }
    // the other tenant: a message, and a file in its workspace
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions/victim/messages",
        Some(json!({"text": format!("hello {ledger_canary}"), "message_id": "v1"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    wait_session(&gw.url, "victim", Duration::from_secs(30), |v| {
        v["status"] == "idle" && v["turns"].as_u64() >= Some(1)
    });
    std::fs::write(root.join("victim/notes.txt"), &file_canary).unwrap();

    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions/attacker/messages",
        Some(json!({"text": "attack", "message_id": "a1"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    wait_session(&gw.url, "attacker", Duration::from_secs(60), |v| {
        v["status"] == "idle" && v["turns"].as_u64() >= Some(2)
    });

    let st = LocalStore::open(&sessions)
        .unwrap()
        .load(&sid("attacker"))
        .unwrap();
    let secrets = [TOKEN, &api_key, &ledger_canary, &file_canary];
    let mut broke = Vec::new();
    for (i, (name, _)) in attacks.iter().enumerate() {
        let text = st.tool_result_text(&format!("a{i}")).to_string();
        match secrets.iter().find(|c| text.contains(*c)) {
            Some(c) => {
                eprintln!("attack {name}: BROKE (read {c})");
                broke.push(format!("{name}: {text}"));
            }
            None => eprintln!("attack {name}: held"),
        }
    }
    let own = st.tool_result_text("own").to_string();
    assert!(
        own.contains("mine"),
        "the session's own workspace is writable: {own}"
    );
    assert!(root.join("attacker/mine.txt").exists());
    assert!(
        broke.is_empty(),
        "attacks that broke the sandbox:\n{}",
        broke.join("\n")
    );
    drop(gw);
}
