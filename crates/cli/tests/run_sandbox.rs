//! `lazarus run` and its shell sandbox, driven by a scripted model whose shell calls try to
//! write outside the workspace, read `~/.ssh` (a fake one in a temporary `HOME`), connect to
//! a TCP listener on loopback and leave a `setsid` process behind. All refused or terminated
//! under the default sandbox; all allowed under `--sandbox off` (so every check can fail).
//! The sandbox in force is printed at the start of the run, recorded in the session header
//! and in the resume receipt. The workspace is always the operator's, never the one a
//! session's header names (an imported `/` or `.`).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use lazarus_session::SessionId;
use lazarus_session::record::{Item, Record, Response, ToolIntent, TurnStart};
use lazarus_session::{CreateOptions, LocalStore, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

struct Attack {
    _dirs: Vec<tempfile::TempDir>,
    sessions: std::path::PathBuf,
    ws: std::path::PathBuf,
    home: std::path::PathBuf,
    outside: std::path::PathBuf,
    listener: TcpListener,
    marker: String,
}

fn attack(tag: &str) -> Attack {
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let home = dirs[2].path().to_path_buf();
    std::fs::create_dir(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "FAKE PRIVATE KEY 1234").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    Attack {
        sessions: dirs[0].path().to_path_buf(),
        ws: dirs[1].path().to_path_buf(),
        home,
        outside: dirs[3].path().to_path_buf(),
        listener,
        marker: format!("lazarus-left-{tag}-{}", std::process::id()),
        _dirs: dirs,
    }
}

fn script(a: &Attack) -> Script {
    let port = a.listener.local_addr().unwrap().port();
    let calls = ScriptedResponse::default()
        .with_call(
            "write_out",
            "shell",
            json!({"command": format!("echo pwned > {}/x", a.outside.display())}),
        )
        .with_call(
            "read_ssh",
            "shell",
            json!({"command": "cat ~/.ssh/id_ed25519"}),
        )
        .with_call(
            "connect",
            "shell",
            json!({"command": format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=5); print(\"connected\")'")}),
        )
        .with_call(
            "leave",
            "shell",
            // The call returns only once the child has left the call's process group (it
            // writes `detached` after setsid), so only a sandbox can take it down.
            json!({"command": format!("setsid sh -c 'touch detached; sleep 1000; : {}' >/dev/null 2>&1 & i=0; while [ ! -e detached ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; echo left", a.marker)}),
        );
    Script::new([
        Step::reply(calls).when(When::LastUserContains {
            text: "attack".into(),
        }),
        Step::after_tool_result("leave", ScriptedResponse::text("done")).repeat(),
    ])
}

fn run(a: &Attack, url: &str, extra: &[&str]) -> (std::process::Output, String) {
    let out = Command::new(BIN)
        .args(["run", "--session", "s", "-p", "attack"])
        .arg("--session-dir")
        .arg(&a.sessions)
        .arg("--workspace")
        .arg(&a.ws)
        .args(["--base-url", url])
        .args(extra)
        .env("HOME", &a.home)
        .env_remove("LAZARUS_SANDBOX_TEST_UNSUPPORTED")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

fn result(store: &LocalStore, call: &str) -> String {
    let st = store.load(&SessionId::literal("s")).unwrap();
    st.tool_result_text(call).to_string()
}

fn processes_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmd).contains(marker)
        {
            out.push(pid);
        }
    }
    out
}

fn accepted(l: &TcpListener) -> bool {
    std::thread::sleep(Duration::from_millis(50));
    l.accept().is_ok()
}

#[test]
fn the_default_sandbox_refuses_every_escape() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = attack("default");
    let server = rt.block_on(ScriptedServer::start(script(&a))).unwrap();
    let (out, stderr) = run(&a, &server.base_url(), &[]);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("sandbox: workspace-write — shell commands read anywhere"),
        "{stderr}"
    );
    let store = LocalStore::open(&a.sessions).unwrap();
    assert!(!a.outside.join("x").exists(), "wrote outside the workspace");
    let r = result(&store, "write_out");
    assert!(
        r.contains("ermission denied") || r.contains("Read-only"),
        "{r}"
    );
    let r = result(&store, "read_ssh");
    assert!(!r.contains("FAKE PRIVATE KEY"), "{r}");
    let r = result(&store, "connect");
    assert!(!r.contains("connected"), "{r}");
    assert!(
        !accepted(&a.listener),
        "a sandboxed command reached the listener"
    );
    assert!(result(&store, "leave").contains("left"));
    let mut left = processes_with(&a.marker);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(&a.marker);
    }
    assert!(left.is_empty(), "processes outlived the call: {left:?}");
    // the header records how the shell was confined
    let st = store.load(&SessionId::literal("s")).unwrap();
    let meta = st.header.meta.clone().unwrap();
    assert_eq!(meta["sandbox"]["mode"], "workspace-write", "{meta}");
    assert_eq!(meta["sandbox"]["network"], false);
    assert!(
        meta["sandbox"]["detail"]
            .as_str()
            .unwrap()
            .contains("Landlock ABI"),
        "{meta}"
    );
}

#[test]
fn sandbox_off_allows_every_escape_and_says_so() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = attack("off");
    let server = rt.block_on(ScriptedServer::start(script(&a))).unwrap();
    let (out, stderr) = run(&a, &server.base_url(), &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("sandbox: off — shell commands run unconfined"),
        "{stderr}"
    );
    let store = LocalStore::open(&a.sessions).unwrap();
    let escaped = processes_with(&a.marker);
    for pid in &escaped {
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(*pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(a.outside.join("x").exists());
    assert!(result(&store, "read_ssh").contains("FAKE PRIVATE KEY"));
    assert!(result(&store, "connect").contains("connected"));
    assert!(accepted(&a.listener));
    assert!(
        !escaped.is_empty(),
        "with the sandbox off the setsid process escapes"
    );
    let meta = store
        .load(&SessionId::literal("s"))
        .unwrap()
        .header
        .meta
        .unwrap();
    assert_eq!(meta["sandbox"]["mode"], "off");
    assert_eq!(meta["sandbox"]["detail"], "unconfined");
}

#[test]
fn network_is_allowed_only_when_asked() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = attack("net");
    let server = rt.block_on(ScriptedServer::start(script(&a))).unwrap();
    let (out, stderr) = run(&a, &server.base_url(), &["--sandbox-network"]);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("network allowed"), "{stderr}");
    let store = LocalStore::open(&a.sessions).unwrap();
    assert!(result(&store, "connect").contains("connected"));
    assert!(accepted(&a.listener));
    // everything else stays confined
    assert!(!a.outside.join("x").exists());
    assert!(!result(&store, "read_ssh").contains("FAKE PRIVATE KEY"));
}

#[test]
fn without_landlock_shell_is_refused_unless_off() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = attack("unsupported");
    let server = rt.block_on(ScriptedServer::start(script(&a))).unwrap();
    let out = Command::new(BIN)
        .args(["run", "--session", "s", "-p", "attack"])
        .arg("--session-dir")
        .arg(&a.sessions)
        .arg("--workspace")
        .arg(&a.ws)
        .args(["--base-url", &server.base_url()])
        .env("HOME", &a.home)
        .env("LAZARUS_SANDBOX_TEST_UNSUPPORTED", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("UNAVAILABLE"), "{stderr}");
    assert!(stderr.contains("--sandbox off"), "{stderr}");
    let store = LocalStore::open(&a.sessions).unwrap();
    for call in ["write_out", "read_ssh", "connect", "leave"] {
        let r = result(&store, call);
        assert!(r.contains("shell is refused"), "{call}: {r}");
    }
    assert!(!a.outside.join("x").exists());
    assert!(!accepted(&a.listener));
    let meta = store
        .load(&SessionId::literal("s"))
        .unwrap()
        .header
        .meta
        .unwrap();
    assert!(
        meta["sandbox"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("unavailable"),
        "{meta}"
    );
}

/// A session whose turn 1 asked for `shell` and started it (no outcome): resume closes it
/// in doubt and writes a receipt.
fn interrupted_session(store: &LocalStore, meta: Option<Value>) {
    let mut s = store
        .create(CreateOptions {
            id: Some(SessionId::literal("s")),
            meta,
        })
        .unwrap();
    let inp = s.append_input("m1", "user", "go").unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![inp.seq],
    }))
    .unwrap();
    s.append(Record::Response(Response {
        turn: 1,
        items: vec![Item::ToolCall {
            call_id: "c1".into(),
            name: "read_file".into(),
            arguments: json!({"path": "where.txt"}).to_string(),
        }],
        usage: None,
        stop_reason: Some("tool_calls".into()),
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
    s.append(Record::ToolIntent(ToolIntent {
        call_id: "c1".into(),
        turn: 1,
        tool: "read_file".into(),
        arguments: json!({"path": "where.txt"}).to_string(),
        idempotent: true,
        idempotency_key: "s:c1".into(),
        rerun_basis: None,
    }))
    .unwrap();
}

#[test]
fn the_receipt_records_the_sandbox() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("c1", ScriptedResponse::text("ok")).repeat(),
        ])))
        .unwrap();
    for (flags, mode) in [
        (&[][..], "workspace-write"),
        (&["--sandbox", "off"][..], "off"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("where.txt"), "here").unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        interrupted_session(&store, None);
        let out = Command::new(BIN)
            .args(["run", "--session", "s", "--base-url", &server.base_url()])
            .arg("--session-dir")
            .arg(dir.path())
            .arg("--workspace")
            .arg(ws.path())
            .args(flags)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = store
            .load(&SessionId::literal("s"))
            .unwrap()
            .last_receipt
            .unwrap();
        let sb = r.sandbox.expect("receipt records the sandbox");
        assert_eq!(sb.mode, mode);
        assert!(stdout.contains(&format!("sandbox: {mode} (")), "{stdout}");
    }
}

/// Imports a session whose header names `workspace` and resumes it with `lazarus run`.
fn imported_workspace_is_ignored(recorded: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("c1", ScriptedResponse::text("ok")).repeat(),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("where.txt"), "the operator's workspace").unwrap();
    // the import, from a session file made elsewhere
    let elsewhere = tempfile::tempdir().unwrap();
    let other = LocalStore::open(elsewhere.path()).unwrap();
    interrupted_session(&other, Some(json!({"workspace": recorded})));
    let exported = elsewhere.path().join("s.export.jsonl");
    let st = Command::new(BIN)
        .args(["sessions", "export", "s", "-o"])
        .arg(&exported)
        .arg("--session-dir")
        .arg(elsewhere.path())
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new(BIN)
        .args(["sessions", "import"])
        .arg(&exported)
        .arg("--session-dir")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    // the cwd is a third directory, so `.` cannot pass for the workspace by accident
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("where.txt"), "the current directory").unwrap();
    let out = Command::new(BIN)
        .args(["run", "--session", "s", "--base-url", &server.base_url()])
        .arg("--session-dir")
        .arg(dir.path())
        .arg("--workspace")
        .arg(ws.path())
        .current_dir(cwd.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "workspace: {}",
            ws.path().canonicalize().unwrap().display()
        )),
        "{stderr}"
    );
    let store = LocalStore::open(dir.path()).unwrap();
    let text = store
        .load(&SessionId::literal("s"))
        .unwrap()
        .tool_result_text("c1")
        .to_string();
    assert!(
        text.contains("the operator's workspace"),
        "{recorded}: {text}"
    );
}

#[test]
fn an_imported_root_workspace_is_not_used() {
    imported_workspace_is_ignored("/");
}

#[test]
fn an_imported_dot_workspace_is_not_used() {
    imported_workspace_is_ignored(".");
}

/// `read_file` is idempotent, so an interrupted one is re-run on resume: a FIFO at its path
/// must not hang the resume (it used to, on every resume).
#[test]
fn resume_rerunning_read_file_on_a_fifo_does_not_hang() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("c1", ScriptedResponse::text("ok")).repeat(),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.path().join("where.txt"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    interrupted_session(&store, None);
    {
        let mut s = store.open(&SessionId::literal("s")).unwrap();
        s.append(Record::ToolStart(lazarus_session::record::ToolStart {
            call_id: "c1".into(),
            process: None,
        }))
        .unwrap();
    }
    let mut child = Command::new(BIN)
        .args(["run", "--session", "s", "--base-url", &server.base_url()])
        .arg("--session-dir")
        .arg(dir.path())
        .arg("--workspace")
        .arg(ws.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lazarus run hung re-running read_file on a FIFO");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert_eq!(st.last_receipt.as_ref().unwrap().calls_rerun, 1);
    let text = st.tool_result_text("c1");
    assert!(text.contains("a FIFO"), "{text}");
}

/// Run as root, the sandbox needs no user namespace; everyone else gets one first. This runs
/// the attack as an unprivileged user (`setpriv`, uid 65534) on files that user owns, so only
/// the sandbox can refuse. When the suite itself runs unprivileged, every test above already
/// takes that path.
#[test]
fn an_unprivileged_user_gets_the_same_sandbox() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: the other tests of this file already run the unprivileged path");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = attack("nobody");
    let server = rt.block_on(ScriptedServer::start(script(&a))).unwrap();
    // a copy of the binary the unprivileged user can run, wherever the build lives
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = bin_dir.path().join("lazarus");
    std::fs::copy(BIN, &bin).unwrap();
    for (p, mode) in [(bin_dir.path(), 0o755), (bin.as_path(), 0o755)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let nobody = rustix::process::Uid::from_raw(65534);
    let nogroup = rustix::process::Gid::from_raw(65534);
    for d in [
        &a.sessions,
        &a.ws,
        &a.home,
        &a.outside,
        &a.home.join(".ssh"),
    ] {
        rustix::fs::chown(d, Some(nobody), Some(nogroup)).unwrap();
    }
    rustix::fs::chown(a.home.join(".ssh/id_ed25519"), Some(nobody), Some(nogroup)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&bin)
        .args(["run", "--session", "s", "-p", "attack"])
        .arg("--session-dir")
        .arg(&a.sessions)
        .arg("--workspace")
        .arg(&a.ws)
        .args(["--base-url", &server.base_url()])
        .env("HOME", &a.home)
        .env_remove("LAZARUS_SANDBOX_TEST_UNSUPPORTED")
        .current_dir(&a.ws)
        .stdin(Stdio::null())
        .output()
        .expect("setpriv (util-linux) runs the binary as uid 65534");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("namespaces: user,pid"), "{stderr}");
    let store = LocalStore::open(&a.sessions).unwrap();
    assert!(
        !a.outside.join("x").exists(),
        "{}",
        result(&store, "write_out")
    );
    assert!(!result(&store, "read_ssh").contains("FAKE PRIVATE KEY"));
    assert!(!result(&store, "connect").contains("connected"));
    assert!(!accepted(&a.listener));
    let mut left = processes_with(&a.marker);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(&a.marker);
    }
    assert!(left.is_empty(), "processes outlived the call: {left:?}");
    // and the same user without the sandbox does write there: the refusals above were the
    // sandbox's, not file permissions'
    let st = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(["sh", "-c"])
        .arg(format!("echo ok > {}/y", a.outside.display()))
        .status()
        .unwrap();
    assert!(st.success() && a.outside.join("y").exists());
}
