//! The session's edges that are about consent and what a person sees, through `lazarus
//! serve` and `lazarus ui` (rows 8–12 of the issue "the sandbox's edges"; through `lazarus
//! run` in `edge_consent.rs`): the web card shows what runs, a page whose name points at the
//! machine reads nothing, text never drives a terminal or hides in a page, a grant names its
//! server. As root and as uid 65534, except where said.

mod edge_common;
mod serve_common;

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use edge_common::*;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};
use serve_common::{Gateway, TOKEN, call, wait_session};

/// `lazarus serve` of `p` on a free loopback port.
fn serve(p: &Person, model: &str, extra: &[&str]) -> Gateway {
    let sessions = p.sessions.display().to_string();
    let root = p.home.join("workspaces").display().to_string();
    let token = p.home.join("gateway.token").display().to_string();
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--max-tokens",
        "64",
        "--session-dir",
        &sessions,
        "--workspace-root",
        &root,
        "--token-file",
        &token,
        "--model",
        "m",
        "--base-url",
        model,
    ];
    args.extend_from_slice(extra);
    let mut cmd = p.lazarus(&args);
    cmd.env("LAZARUS_TOKEN", TOKEN);
    Gateway::start(&mut cmd)
}

/// One GET with this `Host` (and the token); the status.
fn get_with_host(url: &str, path: &str, host: &str, token: bool) -> u16 {
    let hostport = url.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(hostport).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = if token {
        format!("Authorization: Bearer {TOKEN}\r\n")
    } else {
        String::new()
    };
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The session page of `id`, as the browser gets it.
fn page(url: &str, id: &str) -> String {
    let (st, body) = serve_common::request(
        url,
        "GET",
        &format!("/sessions/{id}"),
        Some(TOKEN),
        &[],
        None,
    )
    .unwrap();
    assert_eq!(st, 200, "{body}");
    body
}

/// The approval card's arguments of call `call` in a session page.
fn approval_args<'a>(page: &'a str, call: &str) -> &'a str {
    let card = page
        .split(&format!("data-call-id=\"{call}\""))
        .nth(1)
        .unwrap_or_else(|| panic!("no card for {call}: {page}"));
    let args = card
        .split("approval-args")
        .nth(1)
        .unwrap_or_else(|| panic!("no approval arguments for {call}: {card}"));
    &args[..args.find("</dl>").expect("the arguments list ends")]
}

/// Row 8 through a gateway: the decoy call is refused before anyone is asked; the card of a
/// call that waits shows its command first and whole (never a collapsed middle); a
/// decision's reason is shown on the card.
fn card_shows_what_runs(uid: Option<u32>) {
    let p = Person::new(uid);
    let decoy_mark = p.outside.join("decoy-ran");
    let lines: Vec<String> = (1..=60).map(|i| format!("echo line {i:02}")).collect();
    let long = format!(
        "{}\ntouch {}",
        lines.join("\n"),
        q(p.outside.join("hidden-ran"))
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(
                ScriptedResponse::default()
                    .with_call(
                        "c1",
                        "shell",
                        Value::Object(decoys(&format!("touch {}", q(&decoy_mark)))),
                    )
                    .with_call("c2", "shell", json!({ "command": long })),
            )
            .when(When::RequestNumber { n: 1 }),
            Step::reply(ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let gw = serve(&p, &model.base_url(), &["--ask-for-approval", "untrusted"]);
    let (st, v) = call(&gw.url, "POST", "/v1/sessions", Some(json!({"id": "s"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions/s/messages",
        Some(json!({"text": "go", "message_id": "m1"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    wait_session(&gw.url, "s", Duration::from_secs(60), |v| {
        v["status"] == "awaiting_approval"
    });
    let (_, waiting) = call(&gw.url, "GET", "/v1/sessions/s/approvals", None);
    let ids: Vec<&str> = waiting["approvals"]
        .as_array()
        .or_else(|| waiting.as_array())
        .into_iter()
        .flatten()
        .filter_map(|a| a["call_id"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["c2"],
        "only the declared call is asked about: {waiting}"
    );
    assert!(!decoy_mark.exists());
    let html = page(&gw.url, "s");
    let args = approval_args(&html, "c2");
    let first = args.find("<dt").expect("an argument");
    assert!(
        args[first..].starts_with("<dt class=\"arg executed\">command</dt>"),
        "the command comes first: {args}"
    );
    for i in 1..=60 {
        assert!(
            args.contains(&format!("echo line {i:02}")),
            "line {i}: {args}"
        );
    }
    assert!(args.contains("hidden-ran"), "{args}");
    assert!(!args.contains("<details"), "collapsed: {args}");
    // the decision and its reason, on the card
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions/s/approvals/c2",
        Some(json!({"decision": "deny", "reason": "touches outside the project"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    wait_session(&gw.url, "s", Duration::from_secs(60), |v| {
        v["status"] == "idle"
    });
    let html = page(&gw.url, "s");
    assert!(
        html.contains("reason: <q class=\"decision-reason\">touches outside the project</q>"),
        "{html}"
    );
    assert!(!p.outside.join("hidden-ran").exists());
}

#[test]
fn row_8_the_web_card_shows_the_command_first_and_whole_and_decoys_never_reach_it() {
    card_shows_what_runs(None);
}

#[test]
fn row_8_the_web_card_shows_the_command_first_and_whole_and_decoys_never_reach_it_unprivileged() {
    if can_switch_user() {
        card_shows_what_runs(Some(NOBODY));
    }
}

/// Row 9: DNS rebinding. A request whose Host is another name gets 421 on every route of
/// `serve` (the API, the view, `/metrics`, `/healthz`) and of `ui --no-auth`; an IP
/// address, `localhost` and `--allowed-host` names are answered.
fn host_checked(uid: Option<u32>) {
    let p = Person::new(uid);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("hello"),
        )
        .repeat()])))
        .unwrap();
    let gw = serve(&p, &model.base_url(), &["--allowed-host", "lazarus.test"]);
    let (st, _) = call(&gw.url, "POST", "/v1/sessions", Some(json!({"id": "s"})));
    assert_eq!(st, 201);
    let port = gw.url.rsplit(':').next().unwrap().to_string();
    let evil = format!("evil.example:{port}");
    for path in [
        "/metrics",
        "/healthz",
        "/readyz",
        "/v1/sessions",
        "/v1/sessions/s",
        "/",
        "/sessions/s",
        "/sessions/s/export.jsonl",
        "/no-such-route",
    ] {
        assert_eq!(
            get_with_host(&gw.url, path, &evil, true),
            421,
            "serve {path}"
        );
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("lazarus.test:{port}"),
    ] {
        assert_eq!(
            get_with_host(&gw.url, "/metrics", &host, false),
            200,
            "{host}"
        );
        assert_eq!(
            get_with_host(&gw.url, "/sessions/s/export.jsonl", &host, true),
            200,
            "{host}"
        );
    }
    drop(gw);
    // the read-only view, without a token, as the attack found it
    let dir = p.sessions.display().to_string();
    let mut ui = p
        .lazarus(&[
            "ui",
            "--no-auth",
            "--listen",
            "127.0.0.1:0",
            "--session-dir",
            &dir,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(ui.stdout.take().unwrap());
    let mut line = String::new();
    let t0 = Instant::now();
    let url = loop {
        line.clear();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        if let Some(u) = line.trim().strip_prefix("lazarus ui: ") {
            break u.trim_end_matches('/').to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "ui did not listen");
    };
    let port = url.rsplit(':').next().unwrap().to_string();
    assert_eq!(
        get_with_host(
            &url,
            "/sessions/s/export.jsonl",
            &format!("evil.example:{port}"),
            false
        ),
        421
    );
    assert_eq!(
        get_with_host(&url, "/", &format!("evil.example:{port}"), false),
        421
    );
    assert_eq!(
        get_with_host(
            &url,
            "/sessions/s/export.jsonl",
            &format!("127.0.0.1:{port}"),
            false
        ),
        200
    );
    let _ = ui.kill();
    let _ = ui.wait();
}

#[test]
fn row_9_a_rebound_host_name_reads_nothing_from_serve_or_ui() {
    host_checked(None);
}

#[test]
fn row_9_a_rebound_host_name_reads_nothing_from_serve_or_ui_unprivileged() {
    if can_switch_user() {
        host_checked(Some(NOBODY));
    }
}

/// Row 10 through a gateway: a server that fails to start, saying why with escape
/// sequences; the gateway's error shows them, never sends them.
fn serve_stderr_escaped(uid: Option<u32>) {
    let p = Person::new(uid);
    let mcp = p.ws.join("noisy.mcp.json");
    let noise = r"printf '\033]52;c;cHduZWQ=\007\033[2J\033]0;pwned\007 boom \342\200\256txt.exe\n' >&2; exit 1";
    std::fs::write(
        &mcp,
        json!({"mcpServers": {"noisy": {"command": "sh", "args": ["-c", noise]}}}).to_string(),
    )
    .unwrap();
    p.own(&mcp);
    let sessions = p.sessions.display().to_string();
    let root = p.home.join("workspaces").display().to_string();
    let cfg = mcp.display().to_string();
    let o = p
        .lazarus(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--session-dir",
            &sessions,
            "--workspace-root",
            &root,
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--mcp-config",
            &cfg,
        ])
        .env("LAZARUS_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    let raw = raw_controls(&o.stderr);
    assert!(
        raw.is_empty(),
        "raw {raw:?} reached the terminal: {}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("boom") && err.contains(r"\x1b]52"), "{err}");
}

#[test]
fn row_10_a_gateways_mcp_start_error_reaches_the_terminal_escaped() {
    serve_stderr_escaped(None);
}

#[test]
fn row_10_a_gateways_mcp_start_error_reaches_the_terminal_escaped_unprivileged() {
    if can_switch_user() {
        serve_stderr_escaped(Some(NOBODY));
    }
}

/// Row 11 through a gateway: the web card marks the bidirectional and zero-width
/// characters of a command that waits, so the person sees they are there.
fn card_marks_format_characters(uid: Option<u32>) {
    let p = Person::new(uid);
    let command = "echo invoice\u{202E}gpj.exe \u{2066}rm -rf ~\u{2069}\u{200B}";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({ "command": command }),
            ))
            .when(When::RequestNumber { n: 1 }),
            Step::reply(ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let gw = serve(&p, &model.base_url(), &["--ask-for-approval", "untrusted"]);
    call(&gw.url, "POST", "/v1/sessions", Some(json!({"id": "s"})));
    call(
        &gw.url,
        "POST",
        "/v1/sessions/s/messages",
        Some(json!({"text": "go", "message_id": "m1"})),
    );
    wait_session(&gw.url, "s", Duration::from_secs(60), |v| {
        v["status"] == "awaiting_approval"
    });
    let html = page(&gw.url, "s");
    let args = approval_args(&html, "c1");
    for code in ["U+202E", "U+2066", "U+2069", "U+200B"] {
        assert!(
            args.contains(&format!("<span class=\"format-char\" title=\"an invisible format character ({code}) is here\">⟨{code}⟩</span>")),
            "{code} not marked: {args}"
        );
    }
    let raw = raw_controls(args.as_bytes());
    assert!(raw.is_empty(), "raw {raw:?} on the card: {args}");
}

#[test]
fn row_11_the_web_card_marks_invisible_format_characters() {
    card_marks_format_characters(None);
}

#[test]
fn row_11_the_web_card_marks_invisible_format_characters_unprivileged() {
    if can_switch_user() {
        card_marks_format_characters(Some(NOBODY));
    }
}

/// Row 12 through gateways: `always` given over the API for a call to one server; a gateway
/// whose `files` server is another program asks again and runs nothing; one with the first
/// server goes on. (As root: the MCP SDK lives in root's cache; no sandbox is involved.)
#[test]
fn row_12_an_always_grant_given_over_the_api_holds_its_servers_fingerprint() {
    use lazarus_testkit::mcp_servers;
    let p = Person::new(None);
    let (counter_a, counter_b) = (p.outside.join("a.count"), p.outside.join("b.count"));
    let other = p.outside.join("other_server.py");
    std::fs::copy(mcp_servers::script("counter_server.py"), &other).unwrap();
    let config = |script: &std::path::Path, counter: &std::path::Path, name: &str| {
        let f = p.ws.join(name);
        std::fs::write(
            &f,
            json!({"mcpServers": {"files": {
                "command": mcp_servers::python(),
                "args": [script, "stdio"],
                "env": {"COUNTER_FILE": counter},
            }}})
            .to_string(),
        )
        .unwrap();
        f.display().to_string()
    };
    let first = config(
        &mcp_servers::script("counter_server.py"),
        &counter_a,
        "a.mcp.json",
    );
    let second = config(&other, &counter_b, "b.mcp.json");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "mcp__files__bump",
                json!({}),
            ))
            .when(When::LastUserContains {
                text: "bump".into(),
            })
            .repeat(),
            Step::reply(ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let lines = |f: &std::path::Path| {
        std::fs::read_to_string(f)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let start = |id: &str, gw: &Gateway| {
        call(&gw.url, "POST", "/v1/sessions", Some(json!({ "id": id })));
        call(
            &gw.url,
            "POST",
            &format!("/v1/sessions/{id}/messages"),
            Some(json!({"text": "bump", "message_id": "m1"})),
        );
    };
    let url = model.base_url();
    let mut gw = serve(
        &p,
        &url,
        &["--ask-for-approval", "untrusted", "--mcp-config", &first],
    );
    start("one", &gw);
    wait_session(&gw.url, "one", Duration::from_secs(60), |v| {
        v["status"] == "awaiting_approval"
    });
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions/one/approvals/c1",
        Some(json!({"decision": "allow", "scope": "always"})),
    );
    assert!(st == 200 || st == 202, "{st} {v}");
    wait_session(&gw.url, "one", Duration::from_secs(60), |v| {
        v["status"] == "idle"
    });
    assert_eq!(lines(&counter_a), 1);
    gw.term();
    let policy = std::fs::read_to_string(p.policy()).unwrap();
    assert!(policy.contains("fingerprint = "), "{policy}");
    // another program named `files`: asked again, nothing ran
    let mut gw = serve(
        &p,
        &url,
        &["--ask-for-approval", "untrusted", "--mcp-config", &second],
    );
    start("two", &gw);
    wait_session(&gw.url, "two", Duration::from_secs(60), |v| {
        v["status"] == "awaiting_approval"
    });
    assert_eq!(lines(&counter_b), 0);
    gw.term();
    // the first server again: the grant covers it
    let gw = serve(
        &p,
        &url,
        &["--ask-for-approval", "untrusted", "--mcp-config", &first],
    );
    start("three", &gw);
    wait_session(&gw.url, "three", Duration::from_secs(60), |v| {
        v["status"] == "idle"
    });
    assert_eq!(lines(&counter_a), 2);
}
