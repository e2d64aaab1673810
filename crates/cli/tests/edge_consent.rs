//! The session's edges that are about consent and what a person sees, through `lazarus run`
//! (rows 2, 8, 10, 11 and 12 of the issue "the sandbox's edges"; the same through `lazarus
//! serve`, and row 9, in `serve_edge_consent.rs`): input pushed into the terminal never
//! answers a question, a decoy argument never stands before the command, text never drives
//! the terminal, a grant names the server it was given for. As root and as uid 65534, except
//! where said.

mod edge_common;

use std::time::{Duration, Instant};

use edge_common::*;
use lazarus_testkit::pty::Pty;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Runs `args` of `p` on a terminal; afterwards the person's shell reads a line.
fn on_terminal(p: &Person, args: &[String]) -> Pty {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let line = format!(
        "{}; echo LAZARUS-EXIT=$?; if IFS= read -r -t 2 l; then echo \"THE SHELL READ: $l\"; fi; echo PERSON-DONE",
        p.line(&args)
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg(line).current_dir(&p.ws);
    Pty::spawn(&mut cmd)
}

fn wait_count(pty: &Pty, text: &str, n: usize) -> String {
    let t0 = Instant::now();
    loop {
        let s = String::from_utf8_lossy(&pty.shown()).into_owned();
        if s.matches(text).count() >= n {
            return s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never saw {text:?} {n} times:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Row 2: a call allowed once pushes `a` + Enter into the terminal; the next question must
/// not read it as "always". The push itself is refused (no terminal in the call, TIOCSTI
/// refused); input typed ahead of the question (what a push that got through would leave)
/// is thrown away before it is asked.
fn pushed_input_never_answers(uid: Option<u32>) {
    let p = Person::new(uid);
    let push = format!(
        r#"{py} -c 'import os, fcntl, time
def push(fd, name):
    try:
        for b in b"a\n":
            fcntl.ioctl(fd, 0x5412, bytes([b]))
        print("ATTACK-OK pushed into", name)
    except OSError as e:
        print("refused", name, e.errno)
try:
    push(os.open("/dev/tty", os.O_RDWR), "/dev/tty")
except OSError as e:
    print("refused open /dev/tty", e.errno)
for fd in range(64):
    try:
        if os.isatty(fd):
            push(fd, "fd %d" % fd)
    except OSError:
        pass
time.sleep(2)'"#,
        py = python()
    );
    let marker = p.outside.join("second-ran");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(
                ScriptedResponse::default()
                    .with_call("c1", "shell", json!({ "command": push }))
                    .with_call(
                        "c2",
                        "shell",
                        json!({ "command": format!("touch {}", q(&marker)) }),
                    ),
            )
            .when(When::LastUserContains {
                text: "push".into(),
            }),
            Step::after_tool_result("c2", ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let url = server.base_url();
    let args = p.run_args(
        "s",
        &url,
        &["--ask-for-approval", "untrusted", "-p", "push"],
    );
    let mut pty = on_terminal(&p, &args);
    let first = pty.wait_for("allow it?", Duration::from_secs(60));
    assert!(
        first.contains("[a] yes, always: every shell call, in every session and every workspace"),
        "the scope of `always` is said before it is chosen:\n{first}"
    );
    // yes to the harmless call, and (what a push that got through would leave) an `a`
    // typed ahead of the next question
    pty.type_text("y\n");
    pty.type_text("a\n");
    let second = wait_count(&pty, "allow it?", 2);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !p.policy().exists(),
        "an always grant was written: {:?}\n{second}",
        std::fs::read_to_string(p.policy())
    );
    let decided = |call: &str| {
        p.records("s")
            .into_iter()
            .find(|(k, d)| k == "approval" && d["call_id"] == call)
            .map(|(_, d)| d)
    };
    assert!(
        decided("c2").is_none(),
        "c2 was decided: {:?}",
        decided("c2")
    );
    // the person says no, and gives no reason (asked after the answer: what was typed
    // ahead of that question is thrown away too)
    pty.type_text("n\n");
    pty.wait_for("reason, for the model", Duration::from_secs(30));
    pty.type_text("\n");
    let (_, shown) = pty.finish(Duration::from_secs(60));
    let shown = String::from_utf8_lossy(&shown).into_owned();
    assert!(shown.contains("LAZARUS-EXIT=0"), "{shown}");
    assert!(!shown.contains("THE SHELL READ"), "{shown}");
    let c1 = decided("c1").expect("c1 decided");
    assert_eq!(
        (c1["decision"].as_str(), c1["scope"].as_str()),
        (Some("allow"), Some("once"))
    );
    let c2 = decided("c2").expect("c2 decided");
    assert_eq!(
        (c2["decision"].as_str(), c2["by"].as_str()),
        (Some("deny"), Some("cli"))
    );
    assert!(!marker.exists(), "the denied call ran");
    assert!(!p.policy().exists());
    let result = p
        .records("s")
        .into_iter()
        .find(|(k, d)| k == "tool_outcome" && d["call_id"] == "c1")
        .map(|(_, d)| d["result"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    assert!(!result.contains("ATTACK-OK"), "{result}");
    eprintln!("row 2 as uid {:?}: held; the push: {result}", uid);
}

#[test]
fn row_2_input_pushed_into_the_terminal_never_answers_the_next_question() {
    pushed_input_never_answers(None);
}

#[test]
fn row_2_input_pushed_into_the_terminal_never_answers_the_next_question_unprivileged() {
    if can_switch_user() {
        pushed_input_never_answers(Some(NOBODY));
    }
}

/// Ctrl-C at the prompt ends the run at once (130), recorded as a stop by `sigint`; the call
/// still waits and nothing of it ran.
#[test]
fn ctrl_c_at_the_approval_prompt_cancels_at_once_and_is_recorded() {
    let p = Person::new(None);
    let marker = p.outside.join("c1-ran");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({ "command": format!("touch {}", q(&marker)) }),
            ))
            .when(When::RequestNumber { n: 1 }),
            Step::reply(ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let url = server.base_url();
    let args = p.run_args("s", &url, &["--ask-for-approval", "untrusted", "-p", "go"]);
    let mut pty = on_terminal(&p, &args);
    pty.wait_for("allow it?", Duration::from_secs(60));
    let t0 = Instant::now();
    pty.type_text("\x03");
    let shown = pty.wait_for("LAZARUS-EXIT=", Duration::from_secs(10));
    let took = t0.elapsed();
    let (_, all) = pty.finish(Duration::from_secs(20));
    let all = String::from_utf8_lossy(&all).into_owned();
    assert!(all.contains("LAZARUS-EXIT=130"), "{all}");
    assert!(all.contains("approval cancelled (Ctrl-C)"), "{all}");
    assert!(
        took < Duration::from_secs(5),
        "Ctrl-C took {took:?} to end the prompt:\n{shown}"
    );
    let records = p.records("s");
    let (kind, data) = records.last().unwrap();
    assert_eq!(kind, "interrupted", "{records:?}");
    assert_eq!(data["reason"], "sigint");
    assert!(!records.iter().any(|(k, _)| k == "tool_intent"));
    assert!(!marker.exists());
    let o = p.sessions_cmd(&["approvals", "s", "--json"]);
    let waiting = String::from_utf8_lossy(&o.stdout);
    assert!(waiting.contains("\"call_id\":\"c1\""), "{}", text(&o));
}

/// Row 8: thirteen decoy keys before the real `command` and fourteen after: refused before
/// anyone is asked, never run; a call that is asked about shows its command first and whole
/// (every line), on the prompt and in `sessions approvals`; the reason of a decision is
/// shown by `sessions show`.
fn decoys_refused_command_shown(uid: Option<u32>) {
    let p = Person::new(uid);
    let decoy_mark = p.outside.join("decoy-ran");
    let long: Vec<String> = (1..=40).map(|i| format!("echo line {i:02}")).collect();
    let long = format!(
        "{}\ntouch {}",
        long.join("\n"),
        q(p.outside.join("hidden-ran"))
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
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
    let url = server.base_url();
    let args = p.run_args("s", &url, &["--ask-for-approval", "untrusted", "-p", "go"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = p.lazarus(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let records = p.records("s");
    assert!(
        !records
            .iter()
            .any(|(k, d)| k == "approval_request" && d["call_id"] == "c1"),
        "a person was asked about the decoy call"
    );
    let c1 = records
        .iter()
        .find(|(k, d)| k == "tool_outcome" && d["call_id"] == "c1")
        .map(|(_, d)| d.clone())
        .expect("the decoy call is closed");
    assert_eq!(c1["status"], "error");
    let why = c1["result"].as_str().unwrap();
    assert!(
        why.contains("additionalProperties") && why.contains("command_preview"),
        "{why}"
    );
    assert!(!decoy_mark.exists(), "the decoy call ran");
    assert!(
        !records
            .iter()
            .any(|(k, d)| k == "tool_start" && d["call_id"] == "c1")
    );
    // the question on stderr: the command first, every line of it
    let err = String::from_utf8_lossy(&o.stderr);
    let asked = err
        .split("approval needed: shell (call c2")
        .nth(1)
        .unwrap_or_else(|| panic!("{err}"));
    let mut lines = asked.lines().skip(1);
    assert_eq!(lines.next(), Some("  command: echo line 01"), "{asked}");
    for i in 2..=40 {
        assert!(asked.contains(&format!("  | echo line {i:02}")), "{asked}");
    }
    assert!(asked.contains("hidden-ran"), "{asked}");
    // the same in `sessions approvals`
    let o = p.sessions_cmd(&["approvals", "s"]);
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(listed.contains("    command: echo line 01"), "{listed}");
    assert!(listed.contains("    | echo line 40"), "{listed}");
    assert!(listed.contains("hidden-ran"), "{listed}");
    // a decision's reason is shown with it
    let o = p.sessions_cmd(&["deny", "s", "c2", "--reason", "touches outside the project"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = p.sessions_cmd(&["show", "s"]);
    let shown = String::from_utf8_lossy(&o.stdout);
    let decision = shown
        .lines()
        .find(|l| l.contains("call c2: DENIED by cli (once)"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        decision.ends_with(": touches outside the project"),
        "{shown}"
    );
}

#[test]
fn row_8_decoy_keys_are_refused_before_anyone_is_asked_and_the_command_shows_first_and_whole() {
    decoys_refused_command_shown(None);
}

#[test]
fn row_8_decoy_keys_are_refused_before_anyone_is_asked_and_the_command_shows_first_and_whole_unprivileged()
 {
    if can_switch_user() {
        decoys_refused_command_shown(Some(NOBODY));
    }
}

/// Row 10: a server that fails to start says why on stderr with escape sequences (a
/// clipboard write, a screen clear, a title) and a bidirectional override; the error the
/// run prints shows them, never sends them.
fn stderr_tail_escaped(uid: Option<u32>) {
    let p = Person::new(uid);
    let mcp = p.ws.join("noisy.mcp.json");
    let noise = r"printf '\033]52;c;cHduZWQ=\007\033[2J\033]0;pwned\007 boom \342\200\256txt.exe\n' >&2; exit 1";
    std::fs::write(
        &mcp,
        json!({"mcpServers": {"noisy": {"command": "sh", "args": ["-c", noise]}}}).to_string(),
    )
    .unwrap();
    p.own(&mcp);
    let o = p
        .lazarus(&[
            "run",
            "--session-dir",
            &p.sessions.display().to_string(),
            "--workspace",
            &p.ws.display().to_string(),
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--mcp-config",
            &mcp.display().to_string(),
            "-p",
            "hello",
        ])
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
    assert!(err.contains("boom"), "{err}");
    assert!(err.contains(r"\x1b]52;c;cHduZWQ="), "{err}");
    assert!(err.contains(r"\u{202e}"), "{err}");
}

#[test]
fn row_10_an_mcp_servers_stderr_reaches_the_terminal_escaped() {
    stderr_tail_escaped(None);
}

#[test]
fn row_10_an_mcp_servers_stderr_reaches_the_terminal_escaped_unprivileged() {
    if can_switch_user() {
        stderr_tail_escaped(Some(NOBODY));
    }
}

/// Row 11: bidirectional overrides and isolates and a zero-width space in a command are
/// shown as escapes by the prompt's question and `sessions approvals`.
fn bidi_shown(uid: Option<u32>) {
    let p = Person::new(uid);
    let command = "echo invoice\u{202E}gpj.exe \u{2066}rm -rf ~\u{2069}\u{200B}";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
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
    let url = server.base_url();
    let args = p.run_args("s", &url, &["--ask-for-approval", "untrusted", "-p", "go"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = p.lazarus(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let raw = raw_controls(&o.stderr);
    assert!(raw.is_empty(), "raw {raw:?} in the question: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(r"command: echo invoice\u{202e}gpj.exe \u{2066}rm -rf ~\u{2069}\u{200b}"),
        "{err}"
    );
    let o = p.sessions_cmd(&["approvals"]);
    let raw = raw_controls(&o.stdout);
    assert!(
        raw.is_empty(),
        "raw {raw:?} in sessions approvals: {}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(r"invoice\u{202e}gpj.exe"),
        "{}",
        text(&o)
    );
}

#[test]
fn row_11_bidirectional_controls_are_shown_not_obeyed() {
    bidi_shown(None);
}

#[test]
fn row_11_bidirectional_controls_are_shown_not_obeyed_unprivileged() {
    if can_switch_user() {
        bidi_shown(Some(NOBODY));
    }
}

/// Row 12: a person grants `always` to `mcp__files__bump`; another project's `.mcp.json`
/// names a different program `files` with a tool `bump`: its call is asked about again and
/// does not run. The first server's calls go on without asking. (As root: the MCP SDK the
/// test servers run on lives in root's cache; a grant involves no sandbox.)
#[test]
fn row_12_an_always_grant_holds_its_servers_fingerprint() {
    use lazarus_testkit::mcp_servers;
    let p = Person::new(None);
    let counter_a = p.outside.join("a.count");
    let counter_b = p.outside.join("b.count");
    // the other program: the same server's code under another path
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
        f
    };
    let first = config(
        &mcp_servers::script("counter_server.py"),
        &counter_a,
        "a.mcp.json",
    );
    let second = config(&other, &counter_b, "b.mcp.json");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
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
    let url = server.base_url();
    let run = |id: &str, cfg: &std::path::Path| {
        let cfg = cfg.display().to_string();
        let args = p.run_args(
            id,
            &url,
            &[
                "--ask-for-approval",
                "untrusted",
                "--mcp-config",
                &cfg,
                "-p",
                "bump",
            ],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        p.lazarus(&args).output().unwrap()
    };
    let lines = |f: &std::path::Path| {
        std::fs::read_to_string(f)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    // the person allows it always, for the first server
    let o = run("one", &first);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = p.sessions_cmd(&["approve", "one", "c1", "--scope", "always"]);
    assert!(o.status.success(), "{}", text(&o));
    let resume = {
        let cfg = first.display().to_string();
        let args = p.run_args(
            "one",
            &url,
            &["--ask-for-approval", "untrusted", "--mcp-config", &cfg],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        p.lazarus(&args).output().unwrap()
    };
    assert_eq!(resume.status.code(), Some(0), "{}", text(&resume));
    assert_eq!(lines(&counter_a), 1);
    let policy = std::fs::read_to_string(p.policy()).unwrap();
    assert!(policy.contains("tool = \"mcp__files__bump\""), "{policy}");
    assert!(
        policy.contains("fingerprint = "),
        "the grant names its server: {policy}"
    );
    // another program under the same name: asked again, not run
    let o = run("two", &second);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}\npolicy: {}\nrecords: {:?}",
        text(&o),
        std::fs::read_to_string(p.policy()).unwrap_or_default(),
        p.records("two")
    );
    assert_eq!(
        lines(&counter_b),
        0,
        "the other server's tool ran under the grant"
    );
    // the first server again: the grant covers it
    let o = run("three", &first);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(lines(&counter_a), 2);
    let listed = p.lazarus(&["approvals", "list"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("mcp__files__bump\tgranted"),
        "{}",
        text(&listed)
    );
}
