//! End-to-end tests of `lazarus boot-resume` through the real binary: JSON report, command
//! injection with fake `claude` / `codex` / `openclaw` executables and hostile values,
//! injection into a real HTTP server, the state file, the lock, and systemd units.
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let s = Sandbox {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::create_dir_all(s.bin()).expect("bin");
        std::fs::create_dir_all(s.rec()).expect("rec");
        s
    }
    fn root(&self) -> &Path {
        self.dir.path()
    }
    fn bin(&self) -> PathBuf {
        self.root().join("fakebin")
    }
    fn rec(&self) -> PathBuf {
        self.root().join("records")
    }
    /// A fake executable that records its cwd and argv (NUL-separated), prints $FAKE_OUT
    /// to stderr, appends $FAKE_APPEND_LINE to the file $FAKE_APPEND_TO (a program writing
    /// its transcript), and exits with $FAKE_EXIT (default 0) after sleeping $FAKE_SLEEP
    /// seconds.
    fn fake(&self, name: &str) {
        let p = self.bin().join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\nout=\"{}/{name}.$$\"\nprintf '%s\\0' \"$(pwd -P)\" \"$@\" > \"$out.tmp\" && mv \"$out.tmp\" \"$out\"\n[ -n \"$FAKE_OUT\" ] && echo \"$FAKE_OUT\" >&2\n[ -n \"$FAKE_APPEND_TO\" ] && echo \"$FAKE_APPEND_LINE\" >> \"$FAKE_APPEND_TO\"\nsleep \"${{FAKE_SLEEP:-0}}\"\nexit \"${{FAKE_EXIT:-0}}\"\n",
                self.rec().display()
            ),
        )
        .expect("fake");
        std::os::unix::fs::PermissionsExt::set_mode(
            &mut std::fs::metadata(&p).expect("md").permissions(),
            0o755,
        );
        let mut perm = std::fs::metadata(&p).expect("md").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm).expect("chmod");
    }
    /// Recorded invocations of `name`: (cwd, argv without argv[0]).
    fn calls(&self, name: &str) -> Vec<(String, Vec<String>)> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(self.rec()).expect("rec").flatten() {
            let f = e.file_name().to_string_lossy().into_owned();
            if f.starts_with(&format!("{name}.")) && !f.ends_with(".tmp") {
                let b = std::fs::read(e.path()).expect("read");
                let mut parts: Vec<String> = b
                    .split(|&c| c == 0)
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
                parts.pop(); // after the last NUL
                let cwd = parts.remove(0);
                v.push((cwd, parts));
            }
        }
        v
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("boot-resume").args(args);
        c.env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin().display()))
            .env("HOME", self.root().join("home"))
            .env("XDG_STATE_HOME", self.root().join("state"))
            .current_dir(self.root());
        c
    }
    fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut c = self.cmd(args);
        for (k, v) in envs {
            c.env(k, v);
        }
        c.output().expect("run lazarus")
    }
}

fn json_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn json_report_has_the_documented_fields_for_every_fixture() {
    let s = Sandbox::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../boot-resume/tests/fixtures");
    let src = format!("auto:{}", dir.display());
    let o = s.run(
        &[
            "--source",
            &src,
            "--window",
            "0",
            "--skip-pattern",
            "",
            "--dry-run",
            "--json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", show(&o));
    let lines = json_lines(&o);
    assert!(lines.len() >= 50, "{}", lines.len());
    for l in &lines {
        for k in [
            "format", "id", "path", "verdict", "reason", "torn", "action", "size", "mtime",
        ] {
            assert!(l.get(k).is_some(), "missing {k} in {l}");
        }
        let v = l["verdict"].as_str().expect("verdict");
        let resumable = matches!(
            v,
            "pending_input"
                | "interrupted_tool_call"
                | "interrupted_after_tool_result"
                | "interrupted_stream"
        );
        assert!(
            l["mtime"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z') && t.contains('T')),
            "mtime is RFC 3339 UTC: {l}"
        );
        assert!(
            l.get("session").is_none() && l.get("mtime_ns").is_none(),
            "{l}"
        );
        let a = l["action"].as_str().expect("action");
        if resumable {
            assert_eq!(a, "would_resume", "{l}");
        } else {
            assert_eq!(a, "none", "{l}");
        }
    }
    let torn: Vec<&Value> = lines.iter().filter(|l| l["torn"] == true).collect();
    assert_eq!(torn.len(), 5, "{torn:?}");
    assert!(
        torn.iter().all(|l| l["verdict"] == "interrupted_tool_call"),
        "{torn:?}"
    );
    let sub = lines
        .iter()
        .find(|l| {
            l["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("codex/subagent-interrupted.jsonl"))
        })
        .expect("sub");
    assert_eq!(sub["verdict"], "skipped");
    assert_eq!(sub["why"], "subagent");
    // Nothing was written in a dry run.
    assert!(
        !s.root()
            .join("state/lazarus/boot-resume/state.json")
            .exists()
    );
    // Table mode prints a summary line.
    let o = s.run(&["--source", &src, "--window", "0", "--dry-run"], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("sessions scanned") && out.contains("would_resume"),
        "{out}"
    );
}

const HOSTILE_ID: &str = "x'; touch PWNED; echo \"$(touch PWNED2)\" `id` ;";

fn hostile_cwd(s: &Sandbox) -> PathBuf {
    let d = s.root().join("work dir 'q' \"dq\" $(touch PWNED3) ; & |x");
    std::fs::create_dir_all(&d).expect("mkdir hostile cwd");
    d.canonicalize().expect("canon")
}

fn claude_session(s: &Sandbox, id: &str, cwd: &Path) -> PathBuf {
    let dir = s.root().join("claude/projects/-hostile");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut text = String::new();
    for l in fixture("claude-code/interrupted-tool-call.jsonl").lines() {
        let mut v: Value = serde_json::from_str(l).expect("json");
        if v.get("sessionId").is_some() {
            v["sessionId"] = id.into();
            v["cwd"] = cwd.to_string_lossy().into_owned().into();
        }
        text.push_str(&v.to_string());
        text.push('\n');
    }
    let p = dir.join("session-1.jsonl");
    std::fs::write(&p, text).expect("write");
    p
}

fn no_pwned(s: &Sandbox) {
    for d in [s.root().to_path_buf(), hostile_cwd(s), std::env::temp_dir()] {
        for f in ["PWNED", "PWNED2", "PWNED3"] {
            assert!(
                !d.join(f).exists(),
                "{} was created: a shell interpreted a value",
                d.join(f).display()
            );
        }
    }
}

#[test]
fn claude_preset_passes_hostile_values_verbatim_in_the_session_cwd_and_never_twice() {
    let s = Sandbox::new();
    s.fake("claude");
    let cwd = hostile_cwd(&s);
    claude_session(&s, HOSTILE_ID, &cwd);
    let src = format!("claude-code:{}", s.root().join("claude").display());
    let args = [
        "--source",
        &src,
        "--window",
        "0",
        "--preset",
        "claude",
        "--json",
        "--message",
        "go on; $(rm -rf /)",
    ];
    let o = s.run(&args, &[]);
    assert!(o.status.success(), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "resumed", "{l}");
    assert_eq!(l["verdict"], "interrupted_tool_call");
    let calls = s.calls("claude");
    assert_eq!(calls.len(), 1);
    let (ran_in, argv) = &calls[0];
    assert_eq!(Path::new(ran_in), cwd.as_path());
    assert_eq!(
        argv,
        &vec![
            "-p".to_string(),
            "--resume".into(),
            HOSTILE_ID.into(),
            "--permission-mode".into(),
            "default".into(),
            "go on; $(rm -rf /)".into()
        ]
    );
    no_pwned(&s);

    // Second run: same tail → skipped already_resumed, no second call.
    let o = s.run(&args, &[]);
    assert!(o.status.success(), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["verdict"], "skipped", "{l}");
    assert_eq!(l["why"], "already_resumed", "{l}");
    assert_eq!(l["action"], "none");
    assert_eq!(s.calls("claude").len(), 1, "resumed twice");

    // The decision log has the attempt and the decisions.
    let log = std::fs::read_to_string(s.root().join("state/lazarus/boot-resume/decisions.jsonl"))
        .expect("log");
    assert!(
        log.lines()
            .any(|l| l.contains("\"event\":\"attempt\"") && l.contains("\"ok\":true")),
        "{log}"
    );
    assert!(log.lines().any(|l| l.contains("already_resumed")), "{log}");
}

#[test]
fn codex_and_openclaw_presets_build_the_documented_argv() {
    let s = Sandbox::new();
    s.fake("codex");
    s.fake("openclaw");
    let cwd = hostile_cwd(&s);
    // Codex rollout with a hostile id and cwd.
    let cdir = s.root().join("codex/sessions/2026/10/05");
    std::fs::create_dir_all(&cdir).expect("mkdir");
    let mut text = String::new();
    for l in fixture("codex/interrupted-after-tool-result.jsonl").lines() {
        let mut v: Value = serde_json::from_str(l).expect("json");
        if v["type"] == "session_meta" {
            v["payload"]["id"] = HOSTILE_ID.into();
            v["payload"]["cwd"] = cwd.to_string_lossy().into_owned().into();
        }
        text.push_str(&v.to_string());
        text.push('\n');
    }
    std::fs::write(
        cdir.join("rollout-2026-10-05T13-02-11-019a5c33-8c2d-7e40-a9f6-0b1c7d5e2f68.jsonl"),
        text,
    )
    .expect("write");
    // OpenClaw agent with sessions.json.
    let odir = s.root().join("openclaw/agents/main/sessions");
    std::fs::create_dir_all(&odir).expect("mkdir");
    std::fs::write(
        odir.join("c7e2a913.jsonl"),
        fixture("openclaw/interrupted-after-tool-result.jsonl"),
    )
    .expect("write");
    std::fs::write(
        odir.join("sessions.json"),
        r#"{"agent:main:telegram:direct:12345":{"sessionId":"c7e2a913","status":"running","abortedLastRun":true}}"#,
    )
    .expect("write");
    let o = s.run(
        &[
            "--window", "0", "--preset", "codex", "--preset", "openclaw", "--json",
        ],
        &[
            ("CODEX_HOME", &s.root().join("codex").to_string_lossy()),
            (
                "OPENCLAW_STATE_DIR",
                &s.root().join("openclaw").to_string_lossy(),
            ),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    let lines = json_lines(&o);
    assert_eq!(
        lines.iter().filter(|l| l["action"] == "resumed").count(),
        2,
        "{lines:?}"
    );
    let codex = s.calls("codex");
    assert_eq!(codex.len(), 1);
    assert_eq!(Path::new(&codex[0].0), cwd.as_path());
    assert_eq!(
        &codex[0].1[..4],
        &[
            "exec".to_string(),
            "resume".into(),
            "--skip-git-repo-check".into(),
            HOSTILE_ID.into()
        ]
    );
    assert!(
        codex[0].1[4].contains("interrupted"),
        "default message: {:?}",
        codex[0].1[4]
    );
    let oc = s.calls("openclaw");
    assert_eq!(oc.len(), 1);
    assert_eq!(
        &oc[0].1[..6],
        &[
            "gateway".to_string(),
            "call".into(),
            "agent".into(),
            "--json".into(),
            "--params".into(),
            oc[0].1[5].clone()
        ]
    );
    let params: Value = serde_json::from_str(&oc[0].1[5]).expect("params JSON");
    assert_eq!(params["sessionKey"], "agent:main:telegram:direct:12345");
    // `deliver: true` fails with no channel configured; the resume must still run.
    assert_eq!(params["bestEffortDeliver"], true, "{params}");
    assert!(params.get("deliver").is_none(), "{params}");
    let key = lines
        .iter()
        .find(|l| l["format"] == "openclaw")
        .expect("oc")["idempotency_key"]
        .clone();
    assert_eq!(params["idempotencyKey"], key);
    assert!(
        params["message"]
            .as_str()
            .is_some_and(|m| m.contains("tool call")),
        "{params}"
    );
    no_pwned(&s);
}

#[test]
fn a_session_id_that_looks_like_an_option_is_refused() {
    let s = Sandbox::new();
    s.fake("claude");
    let cwd = hostile_cwd(&s);
    claude_session(&s, "--dangerously-skip-permissions", &cwd);
    let src = format!("claude-code:{}", s.root().join("claude").display());
    let o = s.run(
        &[
            "--source",
            &src,
            "--window",
            "0",
            "--preset",
            "claude",
            "--json",
            "--max-attempts",
            "1",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "failed");
    assert!(
        l["action_detail"]
            .as_str()
            .is_some_and(|d| d.contains("would be read as an option")),
        "{l}"
    );
    assert!(s.calls("claude").is_empty());
}

#[test]
fn failures_retry_with_backoff_up_to_max_attempts_across_runs() {
    let s = Sandbox::new();
    s.fake("resumer");
    std::fs::create_dir_all(s.root().join("lz")).expect("mkdir");
    std::fs::write(
        s.root().join("lz/s1.jsonl"),
        fixture("codex/interrupted-tool-call.jsonl"),
    )
    .expect("write");
    let src = format!("codex:{}", s.root().join("lz").display());
    let base = [
        "--source",
        &src,
        "--window",
        "0",
        "--json",
        "--inject-command",
        "resumer --key={idempotency_key} {verdict} {path}",
        "--retry-backoff",
        "10ms",
    ];
    let mut first = base.to_vec();
    first.extend(["--max-attempts", "3"]);
    let t0 = Instant::now();
    // Run 1: the command fails twice within the run (max 2 per run is not a thing: the cap
    // is per interruption), so cap at 3 and let two runs share it.
    let refused = "gateway connect failed: connect ECONNREFUSED 127.0.0.1:18789";
    let o = s.run(
        &[&base[..], &["--max-attempts", "2"]].concat(),
        &[("FAKE_EXIT", "3"), ("FAKE_OUT", refused)],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "failed", "{l}");
    assert!(
        l["action_detail"]
            .as_str()
            .is_some_and(|d| d.contains("attempt 2/2")
                && d.contains("exited with")
                && d.contains("(transient)")),
        "{l}"
    );
    let calls = s.calls("resumer");
    assert_eq!(calls.len(), 2, "two attempts");
    let key = l["idempotency_key"].as_str().expect("key");
    for (_, argv) in &calls {
        assert_eq!(
            argv[0],
            format!("--key={key}"),
            "same idempotency key on retry"
        );
        assert_eq!(argv[1], "interrupted_tool_call");
        assert!(argv[2].ends_with("lz/s1.jsonl"));
    }
    assert!(t0.elapsed() >= Duration::from_millis(10), "backoff slept");
    // Run 2: the cap is reached for this interruption.
    let o = s.run(
        &[&base[..], &["--max-attempts", "2"]].concat(),
        &[("FAKE_EXIT", "0")],
    );
    assert!(o.status.success(), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["why"], "max_attempts", "{l}");
    assert_eq!(s.calls("resumer").len(), 2);
    // Run 3: a higher cap allows one more attempt, which succeeds with the same key.
    let o = s.run(&first, &[("FAKE_EXIT", "0")]);
    assert!(o.status.success(), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "resumed", "{l}");
    assert_eq!(l["idempotency_key"].as_str(), Some(key));
    assert_eq!(s.calls("resumer").len(), 3);
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(s.root().join("state/lazarus/boot-resume/state.json"))
            .expect("state"),
    )
    .expect("state JSON");
    let e = state["sessions"]
        .as_object()
        .and_then(|m| m.values().next())
        .expect("entry");
    assert_eq!(e["attempts"], 3);
    assert_eq!(e["resumed"], true);
}

#[test]
fn a_permanent_failure_is_recorded_as_failed_never_retried_and_never_as_resumed() {
    let s = Sandbox::new();
    s.fake("resumer");
    std::fs::create_dir_all(s.root().join("cx")).expect("mkdir");
    std::fs::write(
        s.root().join("cx/s1.jsonl"),
        fixture("codex/interrupted-tool-call.jsonl"),
    )
    .expect("write");
    let src = format!("codex:{}", s.root().join("cx").display());
    let base = [
        "--source",
        &src,
        "--window",
        "0",
        "--json",
        "--inject-command",
        "resumer {session_id}",
        "--retry-backoff",
        "10ms",
        "--max-attempts",
        "5",
    ];
    // What `openclaw gateway call agent` said with `deliver: true` and no channel.
    let channel = "Error: Channel is required (no configured channels detected)";
    let o = s.run(&base, &[("FAKE_EXIT", "1"), ("FAKE_OUT", channel)]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "failed", "{l}");
    assert!(
        l["action_detail"]
            .as_str()
            .is_some_and(|d| d.contains("attempt 1/5")
                && d.contains("Channel is required")
                && d.contains("permanent, not retried")),
        "{l}"
    );
    assert_eq!(
        s.calls("resumer").len(),
        1,
        "a permanent failure is not retried"
    );
    let state = || -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(s.root().join("state/lazarus/boot-resume/state.json"))
                .expect("state"),
        )
        .expect("state JSON")
    };
    let e = state()["sessions"]
        .as_object()
        .and_then(|m| m.values().next())
        .cloned()
        .expect("entry");
    assert_eq!(
        e["resumed"], false,
        "a failed injection is never recorded as a resume: {e}"
    );
    assert_eq!(e["permanent_failure"], true, "{e}");
    // The next run says why it does nothing, and does not call again.
    let o = s.run(&base, &[("FAKE_EXIT", "0")]);
    assert!(o.status.success(), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["why"], "permanent_failure", "{l}");
    assert!(
        l["reason"]
            .as_str()
            .is_some_and(|r| r.contains("--retry-failed")),
        "{l}"
    );
    assert_eq!(s.calls("resumer").len(), 1);
    // After fixing the cause, --retry-failed tries again.
    let o = s.run(
        &[&base[..], &["--retry-failed"]].concat(),
        &[("FAKE_EXIT", "0")],
    );
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(json_lines(&o)[0]["action"], "resumed");
    assert_eq!(s.calls("resumer").len(), 2);
    assert_eq!(
        state()["sessions"]
            .as_object()
            .and_then(|m| m.values().next())
            .expect("e")["resumed"],
        true
    );
}

#[test]
fn a_resume_command_still_running_counts_only_once_the_session_records_the_resume() {
    let s = Sandbox::new();
    s.fake("claude");
    let cwd = hostile_cwd(&s);
    let path = claude_session(&s, "0b9d6a2c-cc11-4b8e-9d3f-5a7e1c2b4d60", &cwd);
    let src = format!("claude-code:{}", s.root().join("claude").display());
    let args = [
        "--source",
        &src,
        "--window",
        "0",
        "--preset",
        "claude",
        "--json",
        "--message",
        "please carry on with the task",
        "--command-grace",
        "1s",
        "--max-attempts",
        "1",
    ];
    // Still running after the grace and the transcript never shows the message: not a
    // resume (the old rule counted it as one), the command is stopped.
    let t0 = Instant::now();
    let o = s.run(&args, &[("FAKE_SLEEP", "30")]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the command was stopped"
    );
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "failed", "{l}");
    assert!(
        l["action_detail"]
            .as_str()
            .is_some_and(|d| d.contains("did not record the resume")),
        "{l}"
    );
    // A program that records the message in the session (as `claude -p --resume` does) is
    // accepted while it still runs. A new interruption of the same file: size changed.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"\n"))
        .expect("touch");
    let line = serde_json::json!({"type": "user", "uuid": "u-resume",
        "message": {"role": "user", "content": "please carry on with the task"}})
    .to_string();
    let o = s.run(
        &args,
        &[
            ("FAKE_SLEEP", "3"),
            ("FAKE_APPEND_TO", &path.to_string_lossy()),
            ("FAKE_APPEND_LINE", &line),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "resumed", "{l}");
    assert!(
        l["action_detail"]
            .as_str()
            .is_some_and(|d| d.contains("recorded the resume message")),
        "{l}"
    );
}

/// A tiny HTTP server answering scripted statuses; returns the raw requests it saw.
fn serve(statuses: Vec<u16>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", l.local_addr().expect("addr"));
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for st in statuses {
            let Ok((sock, _)) = l.accept() else { break };
            let mut r = BufReader::new(sock);
            let mut head = String::new();
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            seen.push(format!("{head}\r\n{}", String::from_utf8_lossy(&body)));
            let mut sock = r.into_inner();
            let _ = write!(
                sock,
                "HTTP/1.1 {st} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            );
        }
        seen
    });
    (url, h)
}

#[test]
fn lazarus_gateway_gets_a_post_with_bearer_token_after_readiness() {
    let s = Sandbox::new();
    let d = s.root().join("sessions");
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(
        d.join("0199a3c2.jsonl"),
        fixture("lazarus/interrupted-after-tool-result.jsonl"),
    )
    .expect("write");
    std::fs::write(d.join("done.jsonl"), fixture("lazarus/finished.jsonl")).expect("write");
    // Readiness: 503 first, then 200; then the POST is answered 202.
    let (url, h) = serve(vec![503, 200, 202]);
    let ready = format!("{url}/healthz");
    let inject = format!("lazarus={url}");
    let o = s.run(
        &[
            "--window",
            "0",
            "--inject",
            &inject,
            "--wait-ready",
            &ready,
            "--ready-timeout",
            "10s",
            "--json",
        ],
        &[
            ("LAZARUS_SESSION_DIR", &d.to_string_lossy()),
            ("LAZARUS_TOKEN", "s3cret"),
        ],
    );
    assert!(o.status.success(), "{}", show(&o));
    let reqs = h.join().expect("server");
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    assert!(reqs[0].starts_with("GET /healthz "), "{}", reqs[0]);
    let post = &reqs[2];
    assert!(
        post.starts_with("POST /v1/sessions/0199a3c2-7e10-7d3a-9b42-1e6c0d8f2a71/events HTTP/1.1"),
        "{post}"
    );
    assert!(
        post.lines()
            .any(|l| l.eq_ignore_ascii_case("authorization: Bearer s3cret")),
        "{post}"
    );
    let body: Value =
        serde_json::from_str(post.split("\r\n\r\n").nth(1).expect("body")).expect("body JSON");
    assert_eq!(body["type"], "resume");
    let lines = json_lines(&o);
    let r = lines
        .iter()
        .find(|l| l["action"] == "resumed")
        .expect("resumed");
    assert_eq!(body["idempotency_key"], r["idempotency_key"]);
    assert!(
        body["reason"]
            .as_str()
            .is_some_and(|t| t.starts_with("interrupted_after_tool_result")),
        "{body}"
    );
    assert_eq!(lines.iter().filter(|l| l["action"] == "resumed").count(), 1);
}

#[test]
fn gateway_rejection_is_a_failed_action_with_the_status() {
    let s = Sandbox::new();
    let d = s.root().join("sessions");
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(d.join("x.jsonl"), fixture("lazarus/pending-input.jsonl")).expect("write");
    let tok = s.root().join("tok");
    std::fs::write(&tok, "from-file\n").expect("write");
    let (url, h) = serve(vec![401]);
    let src = format!("lazarus:{}", d.display());
    let inject = format!("lazarus={url}");
    let tf = tok.to_string_lossy().into_owned();
    let o = s.run(
        &[
            "--source",
            &src,
            "--window",
            "0",
            "--inject",
            &inject,
            "--token-file",
            &tf,
            "--max-attempts",
            "1",
            "--json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let reqs = h.join().expect("server");
    assert!(
        reqs[0]
            .lines()
            .any(|l| l.eq_ignore_ascii_case("authorization: Bearer from-file")),
        "{}",
        reqs[0]
    );
    let l = &json_lines(&o)[0];
    assert_eq!(l["action"], "failed");
    assert!(
        l["action_detail"]
            .as_str()
            .is_some_and(|d| d.contains("HTTP 401")),
        "{l}"
    );
}

#[test]
fn a_second_instance_exits_zero_while_the_first_holds_the_lock() {
    let s = Sandbox::new();
    s.fake("slow");
    let d = s.root().join("cx");
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(
        d.join("a.jsonl"),
        fixture("codex/interrupted-tool-call.jsonl"),
    )
    .expect("write");
    let src = format!("codex:{}", d.display());
    let args = [
        "--source",
        &src,
        "--window",
        "0",
        "--inject-command",
        "slow {session_id}",
        "--json",
    ];
    let mut first = s.cmd(&args);
    first
        .env("FAKE_SLEEP", "3")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let first = first.spawn().expect("spawn");
    // Wait until the first instance is injecting (so it holds the lock).
    let t0 = Instant::now();
    while s.calls("slow").is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "first instance never injected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = s.run(&args, &[]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("another lazarus boot-resume is running"),
        "{}",
        show(&o)
    );
    assert!(o.stdout.is_empty());
    let o1 = first.wait_with_output().expect("wait");
    assert!(o1.status.success(), "{}", show(&o1));
    assert_eq!(json_lines(&o1)[0]["action"], "resumed");
    assert_eq!(s.calls("slow").len(), 1);
    // After the first finished, a new run sees it as already resumed.
    let o = s.run(&args, &[]);
    let l = json_lines(&o);
    assert_eq!(
        l.first().map(|l| l["why"].clone()),
        Some("already_resumed".into()),
        "{}",
        show(&o)
    );
    assert_eq!(s.calls("slow").len(), 1);
}

fn verify(dir: &Path, unit: &Path, user: bool) {
    let rt = dir.parent().unwrap_or(dir).join("runtime");
    std::fs::create_dir_all(&rt).expect("rt");
    let mut c = Command::new("systemd-analyze");
    if user {
        c.arg("--user");
    }
    let o = c
        .arg("verify")
        .arg(unit)
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display()))
        .env("XDG_RUNTIME_DIR", &rt)
        .output()
        .expect("systemd-analyze must be installed (apt-get install systemd)");
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success() && out.trim().is_empty(),
        "systemd-analyze verify {}:\n{out}",
        unit.display()
    );
}

#[test]
fn install_writes_units_that_systemd_analyze_accepts_and_uninstall_removes_them() {
    for (mode, user) in [("--user", true), ("--system", false)] {
        let s = Sandbox::new();
        let units = s.root().join("units");
        std::fs::create_dir_all(&units).expect("mkdir");
        std::fs::write(
            units.join("openclaw-gateway.service"),
            "[Unit]\nDescription=gw\n\n[Service]\nExecStart=/bin/true\n",
        )
        .expect("w");
        let ud = units.to_string_lossy().into_owned();
        let o = s.run(
            &[
                "install",
                mode,
                "--gateway-unit",
                "openclaw-gateway",
                "--dir",
                &ud,
                "--",
                "--preset",
                "openclaw",
                "--skip-pattern",
                "cron|100%",
                "--message",
                "go on, \"now\" $HOME",
            ],
            &[],
        );
        assert!(o.status.success(), "{}", show(&o));
        let dropin = units.join("openclaw-gateway.service.d/lazarus-boot-resume.conf");
        let text = std::fs::read_to_string(&dropin).expect("drop-in");
        let exe = Path::new(BIN).canonicalize().expect("exe");
        assert!(
            text.contains(&format!("ExecStartPost=-{} boot-resume --trigger gateway-restart --preset openclaw --skip-pattern cron|100%% --message \"go on, \\\"now\\\" $$HOME\"", exe.display())),
            "{text}"
        );
        verify(&units, &units.join("openclaw-gateway.service"), user);
        let trigger = if user {
            "lazarus-boot-resume-watch.service"
        } else {
            "lazarus-boot-resume-wake.service"
        };
        let t = std::fs::read_to_string(units.join(trigger)).expect("trigger unit");
        if user {
            assert!(t.contains("boot-resume watch"), "{t}");
            assert!(
                !t.lines()
                    .any(|l| !l.starts_with('#') && l.contains("sleep.target")),
                "no sleep.target for user units: {t}"
            );
        } else {
            for target in [
                "suspend.target",
                "hibernate.target",
                "hybrid-sleep.target",
                "suspend-then-hibernate.target",
            ] {
                assert!(
                    t.lines()
                        .any(|l| l.starts_with("After=") && l.contains(target)),
                    "{t}"
                );
                assert!(
                    t.lines()
                        .any(|l| l.starts_with("WantedBy=") && l.contains(target)),
                    "{t}"
                );
            }
            assert!(
                t.contains("Type=oneshot") && t.contains("--trigger system-wake"),
                "{t}"
            );
        }
        verify(&units, &units.join(trigger), user);
        let o = s.run(&["uninstall", mode, "--dir", &ud], &[]);
        assert!(o.status.success(), "{}", show(&o));
        let left: Vec<String> = std::fs::read_dir(&units)
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            left,
            vec!["openclaw-gateway.service".to_string()],
            "uninstall removes exactly what install wrote"
        );
        let o = s.run(&["uninstall", mode, "--dir", &ud], &[]);
        assert!(
            !o.status.success(),
            "second uninstall has nothing to remove"
        );
    }
}
