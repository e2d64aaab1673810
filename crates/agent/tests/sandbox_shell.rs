//! The shell sandbox, attacked through the `shell` tool itself: writes outside the workspace,
//! a credential store in `$HOME`, a TCP connection to a listener on loopback, a credential in
//! the environment, and a `setsid` process left behind. Each is refused under the default
//! sandbox and allowed with `off` (so each check is shown able to fail).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lazarus_agent::sandbox::{EnvPolicy, Inherit, Sandbox, SandboxMode, SandboxPolicy};
use lazarus_agent::tools::{NoHooks, ToolContext, ToolOutput, ToolStatus, Toolbox};
use serde_json::json;

fn ctx(ws: &Path, sandbox: Sandbox) -> ToolContext {
    let mut c = ToolContext::new(ws);
    c.limits.shell_kill_grace_ms = 300;
    c.sandbox = Arc::new(sandbox);
    c
}

fn confined(mode: SandboxMode, home: &Path) -> Sandbox {
    let mut s = Sandbox::probe(SandboxPolicy {
        mode,
        network: false,
        ..Default::default()
    });
    assert!(
        s.usable(),
        "this machine cannot enforce the sandbox: {}",
        s.describe()
    );
    s.home = Some(home.to_path_buf());
    s
}

async fn sh(c: &ToolContext, command: &str) -> ToolOutput {
    let mut hooks = NoHooks::default();
    Toolbox::standard()
        .run(
            c,
            "shell",
            &json!({ "command": command }).to_string(),
            &mut hooks,
        )
        .await
}

/// Processes running `sh -c '…; sleep 1000; : MARKER'` (not the shell whose command line
/// merely mentions it, where a quote follows the marker).
fn processes_with(marker: &str) -> Vec<i32> {
    let marker = format!("sleep 1000; : {marker}\0");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmd).contains(&marker)
        {
            out.push(pid);
        }
    }
    out
}

struct Fixture {
    ws: tempfile::TempDir,
    outside: tempfile::TempDir,
    home: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let f = Fixture {
        ws: tempfile::tempdir().unwrap(),
        outside: tempfile::tempdir().unwrap(),
        home: tempfile::tempdir().unwrap(),
    };
    std::fs::create_dir(f.home.path().join(".ssh")).unwrap();
    std::fs::write(f.home.path().join(".ssh/id_ed25519"), "PRIVATE KEY 42").unwrap();
    std::fs::write(f.home.path().join("notes.txt"), "public notes").unwrap();
    f
}

#[tokio::test]
async fn workspace_write_confines_writes_and_secrets() {
    let f = fixture();
    let c = ctx(
        f.ws.path(),
        confined(SandboxMode::WorkspaceWrite, f.home.path()),
    );
    let out = f.outside.path().join("x");
    let o = sh(&c, &format!("touch {}", out.display())).await;
    assert_ne!(o.exit_code, Some(0), "{}", o.text);
    assert!(!out.exists(), "wrote outside the workspace");

    let o = sh(
        &c,
        "echo in > inside.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo \"$TMPDIR\"",
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert!(f.ws.path().join("inside.txt").exists());
    let tmpdir = o.text.lines().nth(1).unwrap().to_string();
    assert!(
        !Path::new(&tmpdir).exists(),
        "the private TMPDIR {tmpdir} outlived the call"
    );

    let home = f.home.path().display();
    let o = sh(&c, &format!("cat {home}/.ssh/id_ed25519")).await;
    assert!(!o.text.contains("PRIVATE KEY 42"), "{}", o.text);
    assert_ne!(o.exit_code, Some(0));
    // the rest of the home directory stays readable, and .ssh can be listed
    let o = sh(&c, &format!("cat {home}/notes.txt; ls {home}/.ssh")).await;
    assert!(o.text.contains("public notes"), "{}", o.text);
    assert!(o.text.contains("id_ed25519"), "{}", o.text);

    // Everything again with the sandbox off: each refusal above was the sandbox's doing.
    let off = ctx(f.ws.path(), Sandbox::off());
    let o = sh(
        &off,
        &format!("touch {}; cat {home}/.ssh/id_ed25519", out.display()),
    )
    .await;
    assert!(out.exists(), "{}", o.text);
    assert!(o.text.contains("PRIVATE KEY 42"), "{}", o.text);
}

#[tokio::test]
async fn read_only_refuses_workspace_writes() {
    let f = fixture();
    let c = ctx(f.ws.path(), confined(SandboxMode::ReadOnly, f.home.path()));
    std::fs::write(f.ws.path().join("a.txt"), "old").unwrap();
    let o = sh(&c, "cat a.txt; echo new > a.txt; touch b.txt").await;
    assert!(o.text.starts_with("old"), "{}", o.text);
    assert_eq!(
        std::fs::read_to_string(f.ws.path().join("a.txt")).unwrap(),
        "old"
    );
    assert!(!f.ws.path().join("b.txt").exists());
    let o = sh(&c, "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"").await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
}

#[tokio::test]
async fn no_network_unless_allowed() {
    let f = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let probe = format!(
        "python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\", {port}), timeout=5); s.sendall(b\"hi\"); print(\"connected\")'"
    );
    let accepted = || {
        std::thread::sleep(Duration::from_millis(50));
        listener.accept().is_ok()
    };

    let c = ctx(
        f.ws.path(),
        confined(SandboxMode::WorkspaceWrite, f.home.path()),
    );
    let o = sh(&c, &probe).await;
    assert!(!o.text.contains("connected"), "{}", o.text);
    assert!(
        o.text.contains("Error") || o.text.contains("error"),
        "{}",
        o.text
    );
    assert!(!accepted(), "a confined command reached the listener");

    let mut allowed = Sandbox::probe(SandboxPolicy {
        mode: SandboxMode::WorkspaceWrite,
        network: true,
        ..Default::default()
    });
    allowed.home = Some(f.home.path().to_path_buf());
    let o = sh(&ctx(f.ws.path(), allowed), &probe).await;
    assert!(o.text.contains("connected"), "{}", o.text);
    assert!(accepted());
}

#[tokio::test]
async fn credentials_in_the_environment_are_not_passed() {
    // Set before the runtime spawns any command; nextest runs each test in its own process.
    // SAFETY: no other thread of this test reads the environment concurrently.
    unsafe {
        std::env::set_var("LAZARUS_TEST_API_KEY", "sk-secret-77");
        std::env::set_var("DATABASE_URL", "postgres://u:pw-secret-78@db/x");
        std::env::set_var("GITHUB_PAT", "pat-secret-79");
        std::env::set_var("LAZARUS_TEST_PLAIN", "plain-80");
    }
    let f = fixture();
    let c = ctx(
        f.ws.path(),
        confined(SandboxMode::WorkspaceWrite, f.home.path()),
    );
    let o = sh(&c, "env").await;
    for secret in ["sk-secret-77", "pw-secret-78", "pat-secret-79"] {
        assert!(!o.text.contains(secret), "{}", o.text);
    }
    // the default keeps only the core variables, so a harmless one is not passed either
    assert!(!o.text.contains("plain-80"), "{}", o.text);
    assert!(o.text.contains("PATH="), "{}", o.text);
    assert!(o.text.contains("PAGER=cat"), "{}", o.text);
    // `inherit = "all"` passes the harmless one and still holds the credentials back
    let all = EnvPolicy {
        inherit: Inherit::All,
        ..Default::default()
    };
    let o = sh(
        &ctx(f.ws.path(), Sandbox::off().with_env(all.clone())),
        "env",
    )
    .await;
    assert!(o.text.contains("plain-80"), "{}", o.text);
    assert!(!o.text.contains("sk-secret-77"), "{}", o.text);
    // and only with the default excludes ignored do they get through (the check can fail)
    let everything = EnvPolicy {
        ignore_default_excludes: true,
        ..all
    };
    let o = sh(
        &ctx(f.ws.path(), Sandbox::off().with_env(everything)),
        "env",
    )
    .await;
    for secret in ["sk-secret-77", "pw-secret-78", "pat-secret-79"] {
        assert!(o.text.contains(secret), "{}", o.text);
    }
}

#[tokio::test]
async fn nothing_outlives_the_call() {
    let f = fixture();
    let marker = format!("lazarus-outlive-{}", std::process::id());
    // The call ends only once both children are running (each writes a file after it has
    // left the process group or been orphaned): without that wait, a child still on its way to
    // setsid is killed with the group on a loaded machine and the escape below is not seen.
    let cmd = format!(
        "rm -f up1 up2; setsid sh -c 'echo > up1; sleep 1000; : {marker}' >/dev/null 2>&1 & (nohup sh -c 'echo > up2; sleep 1000; : {marker}' >/dev/null 2>&1 &); \
         n=0; while [ ! -e up1 ] || [ ! -e up2 ]; do n=$((n+1)); [ $n -gt 3000 ] && echo 'children did not start' && exit 1; sleep 0.01; done; echo started"
    );
    let c = ctx(
        f.ws.path(),
        confined(SandboxMode::WorkspaceWrite, f.home.path()),
    );
    let o = sh(&c, &cmd).await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    // the kernel kills the namespace when its init exits; give it a moment to be reaped
    let mut left = processes_with(&marker);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(&marker);
    }
    assert!(left.is_empty(), "processes outlived the call: {left:?}");

    // With the sandbox off, the setsid process escapes the group (as before): proof that the
    // check above can fail. Clean it up.
    let o = sh(&ctx(f.ws.path(), Sandbox::off()), &cmd).await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    // the escaped process may take a moment to show on a loaded machine: wait for it
    let mut escaped = processes_with(&marker);
    for _ in 0..250 {
        if !escaped.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        escaped = processes_with(&marker);
    }
    for pid in &escaped {
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(*pid).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(
        !escaped.is_empty(),
        "without the sandbox a setsid process escapes"
    );
}

#[tokio::test]
async fn without_landlock_shell_is_refused_not_unconfined() {
    let f = fixture();
    let sb = Sandbox::probe_with(SandboxPolicy::default(), true);
    assert!(!sb.usable());
    assert!(sb.describe().contains("UNAVAILABLE"), "{}", sb.describe());
    assert!(sb.describe().contains("--sandbox off"));
    let c = ctx(f.ws.path(), sb);
    let o = sh(&c, "touch ran").await;
    assert_eq!(o.status, ToolStatus::Error);
    assert!(!o.effect_started);
    assert!(o.text.contains("shell is refused"), "{}", o.text);
    assert!(!f.ws.path().join("ran").exists());
    // read-only is refused likewise; off is never "unavailable"
    let ro = Sandbox::probe_with(
        SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            network: false,
            ..Default::default()
        },
        true,
    );
    assert!(!ro.usable());
    assert!(
        Sandbox::probe_with(
            SandboxPolicy {
                mode: SandboxMode::Off,
                network: false,
                ..Default::default()
            },
            true
        )
        .usable()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_still_finds_and_terminates_a_sandboxed_group() {
    // The leader recorded by `tool_start` is the sandbox's outer process: terminating its
    // group (what resume does after kill -9 of the runner) takes the whole namespace down.
    let f = fixture();
    let c = ctx(
        f.ws.path(),
        confined(SandboxMode::WorkspaceWrite, f.home.path()),
    );
    let marker = format!("lazarus-resume-{}", std::process::id());
    let (tx, rx) = std::sync::mpsc::channel();
    struct Send(std::sync::mpsc::Sender<lazarus_agent::process::ProcessGroupRef>);
    impl lazarus_agent::tools::ToolHooks for Send {
        fn started(
            &mut self,
            g: Option<lazarus_agent::process::ProcessGroupRef>,
        ) -> Result<(), String> {
            let _ = self.0.send(g.unwrap());
            Ok(())
        }
    }
    let cmd = format!("setsid sh -c 'sleep 1000; : {marker}' & sleep 1000");
    let task = {
        let c = c.clone();
        tokio::spawn(async move {
            let mut hooks = Send(tx);
            Toolbox::standard()
                .run(
                    &c,
                    "shell",
                    &json!({ "command": cmd }).to_string(),
                    &mut hooks,
                )
                .await
        })
    };
    let group = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = processes_with(&marker);
        if !seen.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!seen.is_empty(), "the setsid process did not start");
    // as after a crash: only the recorded group reference is known
    let outcome = lazarus_agent::process::terminate_group(&group, Duration::from_millis(300));
    assert!(
        matches!(
            outcome,
            lazarus_agent::process::TerminateOutcome::Terminated
                | lazarus_agent::process::TerminateOutcome::Killed
        ),
        "{outcome:?}"
    );
    let o = task.await.unwrap();
    assert_ne!(o.status, ToolStatus::Ok);
    let mut left = processes_with(&marker);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with(&marker);
    }
    assert!(
        left.is_empty(),
        "left after terminating the group: {left:?}"
    );
}

/// What the sandbox costs per call (`true` run N times, off vs workspace-write). Prints the
/// figures; asserts nothing about time. `cargo nextest run -p lazarus-agent --test
/// sandbox_shell --run-ignored only --no-capture -E 'test(overhead)'`
#[tokio::test]
#[ignore = "measurement; run by hand"]
async fn overhead_per_call() {
    let f = fixture();
    let n = 100;
    let mut figures = Vec::new();
    for (name, sb) in [
        ("off", Sandbox::off()),
        (
            "workspace-write",
            confined(SandboxMode::WorkspaceWrite, f.home.path()),
        ),
    ] {
        let c = ctx(f.ws.path(), sb);
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            let o = sh(&c, "true").await;
            assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
        }
        let per = t0.elapsed() / n;
        eprintln!("{name}: {per:?} per `true` call ({n} calls)");
        figures.push(per.as_secs_f64());
    }
    eprintln!(
        "ratio workspace-write / off: {:.2}",
        figures[1] / figures[0]
    );
}
