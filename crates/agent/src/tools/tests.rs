use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = ToolContext::new(dir.path());
    c.limits.shell_kill_grace_ms = 300;
    (dir, c)
}

struct Refuse(usize);
impl ToolHooks for Refuse {
    fn started(&mut self, _: Option<ProcessGroupRef>) -> Result<(), String> {
        self.0 += 1;
        Err("ledger is read-only".into())
    }
}

async fn run(
    tb: &Toolbox,
    c: &ToolContext,
    name: &str,
    args: serde_json::Value,
) -> (ToolOutput, NoHooks) {
    let mut hooks = NoHooks::default();
    let out = tb.run(c, name, &args.to_string(), &mut hooks).await;
    (out, hooks)
}

#[test]
fn toolbox_specs_and_idempotency() {
    let tb = Toolbox::standard();
    let names: Vec<_> = tb.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        ["edit_file", "list_dir", "read_file", "shell", "write_file"]
    );
    let idem = |n: &str| tb.get(n).map(|t| t.rerun().idempotent);
    assert_eq!(idem("shell"), Some(false));
    assert_eq!(idem("edit_file"), Some(false));
    assert_eq!(idem("read_file"), Some(true));
    assert_eq!(idem("list_dir"), Some(true));
    assert_eq!(idem("write_file"), Some(true));
    for s in tb.specs() {
        assert_eq!(s.parameters["type"], "object");
    }
}

#[tokio::test]
async fn argument_errors_are_clear_and_have_no_effect() {
    let (_d, c) = ctx();
    let tb = Toolbox::standard();
    let mut h = NoHooks::default();
    let o = tb.run(&c, "nope", "{}", &mut h).await;
    assert!(
        o.text.contains("unknown tool") && o.text.contains("shell"),
        "{}",
        o.text
    );
    let o = tb.run(&c, "shell", "{\"command\": ", &mut h).await;
    assert!(o.text.contains("not valid JSON"));
    let o = tb.run(&c, "shell", "[1]", &mut h).await;
    assert!(o.text.contains("must be a JSON object"));
    let o = tb.run(&c, "write_file", "{\"path\": \"a\"}", &mut h).await;
    assert!(o.text.contains("\"content\""), "{}", o.text);
    let o = tb.run(&c, "shell", "{\"command\": 5}", &mut h).await;
    assert!(o.text.contains("must be a string"));
    assert!(h.started.is_empty(), "no effect started");
    assert!(!o.effect_started);
}

#[tokio::test]
async fn file_tools_round_trip() {
    let (d, c) = ctx();
    let tb = Toolbox::standard();
    let (o, h) = run(
        &tb,
        &c,
        "write_file",
        json!({"path": "src/a.txt", "content": "one\ntwo\nthree\n"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert_eq!(h.started, vec![None]);
    // Same write twice: same state (idempotent).
    run(
        &tb,
        &c,
        "write_file",
        json!({"path": "src/a.txt", "content": "one\ntwo\nthree\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(d.path().join("src/a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );

    let (o, _) = run(&tb, &c, "read_file", json!({"path": "src/a.txt"})).await;
    assert_eq!(o.text, "one\ntwo\nthree\n");
    let (o, _) = run(
        &tb,
        &c,
        "read_file",
        json!({"path": "src/a.txt", "offset": 2, "limit": 1}),
    )
    .await;
    assert_eq!(o.text, "two\n[lines 2-2 of 3]");
    let (o, _) = run(
        &tb,
        &c,
        "read_file",
        json!({"path": "src/a.txt", "offset": 9}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Error);

    let (o, _) = run(
        &tb,
        &c,
        "edit_file",
        json!({"path": "src/a.txt", "old_string": "two", "new_string": "2"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert_eq!(
        std::fs::read_to_string(d.path().join("src/a.txt")).unwrap(),
        "one\n2\nthree\n"
    );
    let (o, h) = run(
        &tb,
        &c,
        "edit_file",
        json!({"path": "src/a.txt", "old_string": "two", "new_string": "2"}),
    )
    .await;
    assert!(o.text.contains("not found"), "{}", o.text);
    assert!(h.started.is_empty());
    run(
        &tb,
        &c,
        "write_file",
        json!({"path": "b.txt", "content": "x x"}),
    )
    .await;
    let (o, _) = run(
        &tb,
        &c,
        "edit_file",
        json!({"path": "b.txt", "old_string": "x", "new_string": "y"}),
    )
    .await;
    assert!(o.text.contains("occurs 2 times"), "{}", o.text);

    let (o, _) = run(&tb, &c, "list_dir", json!({})).await;
    assert_eq!(o.text, "b.txt\nsrc/");
    let (o, _) = run(&tb, &c, "list_dir", json!({"path": "src"})).await;
    assert_eq!(o.text, "a.txt");
}

#[tokio::test]
async fn read_file_caps_output() {
    let (d, mut c) = ctx();
    c.limits.read_max_bytes = 10;
    std::fs::write(d.path().join("big"), "aaaa\nbbbb\ncccc\ndddd\n").unwrap();
    let (o, _) = run(
        &Toolbox::standard(),
        &c,
        "read_file",
        json!({"path": "big"}),
    )
    .await;
    assert_eq!(
        o.text,
        "aaaa\nbbbb\n[lines 1-2 of 4; output cut at 10 bytes, continue with offset 3]"
    );
}

#[tokio::test]
async fn paths_are_confined() {
    let (d, c) = ctx();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("new.txt"), d.path().join("link")).unwrap();
    let tb = Toolbox::standard();
    for (tool, args) in [
        ("write_file", json!({"path": "../x", "content": "x"})),
        (
            "write_file",
            json!({"path": "/tmp/lazarus-escape", "content": "x"}),
        ),
        ("write_file", json!({"path": "out/x", "content": "x"})),
        ("write_file", json!({"path": "link", "content": "x"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("list_dir", json!({"path": "out"})),
        (
            "edit_file",
            json!({"path": "../../etc/hosts", "old_string": "a", "new_string": "b"}),
        ),
    ] {
        let (o, h) = run(&tb, &c, tool, args.clone()).await;
        assert_eq!(o.status, ToolStatus::Error, "{tool} {args}");
        assert!(!o.effect_started);
        assert!(h.started.is_empty());
    }
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "nothing written outside"
    );
}

#[tokio::test]
async fn refused_start_means_no_effect() {
    let (d, c) = ctx();
    let tb = Toolbox::standard();
    let marker = d.path().join("marker");
    let mut refuse = Refuse(0);
    let o = tb
        .run(
            &c,
            "shell",
            &json!({"command": "touch marker"}).to_string(),
            &mut refuse,
        )
        .await;
    assert_eq!(o.status, ToolStatus::Error);
    assert!(
        o.text.contains("not started") && o.text.contains("read-only"),
        "{}",
        o.text
    );
    let o = tb
        .run(
            &c,
            "write_file",
            &json!({"path": "marker", "content": "x"}).to_string(),
            &mut refuse,
        )
        .await;
    assert!(!o.effect_started);
    assert_eq!(refuse.0, 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!marker.exists(), "the command must not have run");
}

#[tokio::test]
async fn shell_runs_in_workspace_with_group_and_exit_code() {
    let (d, c) = ctx();
    let tb = Toolbox::standard();
    let (o, h) = run(
        &tb,
        &c,
        "shell",
        json!({"command": "pwd; echo err >&2; exit 3"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Error);
    assert_eq!(o.exit_code, Some(3));
    let root = d.path().canonicalize().unwrap();
    assert!(
        o.text.starts_with(&format!("{}\n", root.display())),
        "{}",
        o.text
    );
    assert!(o.text.contains("err\n"));
    assert!(o.text.ends_with("[exit code 3]"));
    let g = h.started[0].expect("process group reported");
    assert!(g.pgid > 1 && g.start_time_ticks > 0);

    let (o, _) = run(&tb, &c, "shell", json!({"command": "echo ok"})).await;
    assert_eq!((o.status, o.exit_code), (ToolStatus::Ok, Some(0)));
    assert_eq!(o.text, "ok\n[exit code 0]");
}

#[tokio::test]
async fn shell_gate_holds_the_command_until_started_returns() {
    let (d, c) = ctx();
    struct Check(std::path::PathBuf, Option<bool>);
    impl ToolHooks for Check {
        fn started(&mut self, g: Option<ProcessGroupRef>) -> Result<(), String> {
            std::thread::sleep(Duration::from_millis(200));
            self.1 = Some(self.0.exists());
            assert!(g.is_some_and(|g| crate::process::is_alive(&g)));
            Ok(())
        }
    }
    let mut hooks = Check(d.path().join("m"), None);
    let o = Toolbox::standard()
        .run(
            &c,
            "shell",
            &json!({"command": "touch m"}).to_string(),
            &mut hooks,
        )
        .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert_eq!(
        hooks.1,
        Some(false),
        "command ran before started() returned"
    );
    assert!(d.path().join("m").exists());
}

#[tokio::test]
async fn shell_timeout_kills_the_whole_group() {
    let (d, mut c) = ctx();
    c.limits.shell_max_timeout_secs = 5;
    let tb = Toolbox::standard();
    let t = Instant::now();
    let (o, h) = run(
        &tb,
        &c,
        "shell",
        json!({"command": "(trap '' TERM; sleep 30; touch late) & echo started; sleep 30", "timeout_secs": 1}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Timeout, "{}", o.text);
    assert!(o.text.starts_with("started\n"), "{}", o.text);
    assert!(o.text.contains("timed out after 1 s"));
    assert!(t.elapsed() < Duration::from_secs(5));
    let g = h.started[0].unwrap();
    assert!(!crate::process::group_has_running_members(g.pgid));
    assert!(!d.path().join("late").exists());
    let (o, _) = run(
        &tb,
        &c,
        "shell",
        json!({"command": "true", "timeout_secs": 6}),
    )
    .await;
    assert!(o.text.contains("between 1 and 5"));
}

#[tokio::test]
async fn shell_cancel_and_background_leftovers_are_terminated() {
    let (_d, c) = ctx();
    let tb = Toolbox::standard();
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let t = Instant::now();
    let (o, h) = run(&tb, &c, "shell", json!({"command": "sleep 30"})).await;
    assert_eq!(o.status, ToolStatus::Cancelled);
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(!crate::process::group_has_running_members(
        h.started[0].unwrap().pgid
    ));

    let (_d2, c2) = ctx();
    let t = Instant::now();
    let (o, h) = run(&tb, &c2, "shell", json!({"command": "sleep 30 & echo bg"})).await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "did not wait for the background job"
    );
    assert!(!crate::process::group_has_running_members(
        h.started[0].unwrap().pgid
    ));
}

#[tokio::test]
async fn shell_output_is_capped_head_and_tail() {
    let (_d, mut c) = ctx();
    c.limits.output_head_bytes = 100;
    c.limits.output_tail_bytes = 100;
    let (o, _) = run(
        &Toolbox::standard(),
        &c,
        "shell",
        json!({"command": "seq 1 100000"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok);
    assert!(o.text.starts_with("1\n2\n3\n"));
    assert!(o.text.contains("bytes of output cut"));
    assert!(
        o.text.ends_with("99999\n100000\n[exit code 0]"),
        "{}",
        &o.text[o.text.len() - 60..]
    );
    assert!(o.text.len() < 400);
}

#[test]
fn arguments_outside_the_schema_are_named() {
    let tb = Toolbox::standard();
    let shell = tb.get("shell").unwrap();
    let spec = shell.spec();
    assert_eq!(outside_schema(spec, r#"{"command":"ls"}"#), None);
    assert_eq!(
        outside_schema(spec, r#"{"command":"ls","timeout_secs":5}"#),
        None
    );
    let why = outside_schema(spec, r#"{"command_preview":"ls -la","command":"rm -rf x"}"#).unwrap();
    assert!(
        why.contains("command_preview") && why.contains("additionalProperties"),
        "{why}"
    );
    let why = outside_schema(spec, r#"{"timeout_secs":5}"#).unwrap();
    assert!(why.contains("needs the argument command"), "{why}");
    assert!(outside_schema(spec, "[1,2]").is_some());
    // a schema without additionalProperties: false takes other keys
    let open = crate::model::ToolSpec {
        name: "open".into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {"a": {"type": "string"}}}),
    };
    assert_eq!(outside_schema(&open, r#"{"a":"x","b":1}"#), None);
}

#[tokio::test]
async fn file_tools_refuse_version_control_metadata_and_read_only_workspaces() {
    let (d, c) = ctx();
    std::fs::create_dir_all(d.path().join(".git/hooks")).unwrap();
    std::fs::write(d.path().join(".git/config"), "[core]\n").unwrap();
    let tb = Toolbox::standard();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": ".git/hooks/post-commit", "content": "#!/bin/sh\n"}),
        ),
        (
            "write_file",
            json!({"path": ".hg/hgrc", "content": "[hooks]\n"}),
        ),
        (
            "write_file",
            json!({"path": ".jj/repo/config.toml", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = x"}),
        ),
    ] {
        let (o, _) = run(&tb, &c, tool, args.clone()).await;
        assert_eq!(o.status, ToolStatus::Error, "{tool} {args}: {}", o.text);
        assert!(o.text.contains("version-control metadata"), "{}", o.text);
    }
    assert!(!d.path().join(".git/hooks/post-commit").exists());
    assert!(!d.path().join(".hg").exists() && !d.path().join(".jj").exists());
    assert_eq!(
        std::fs::read_to_string(d.path().join(".git/config")).unwrap(),
        "[core]\n"
    );
    // allowed by the operator
    let mut allowed = c.clone();
    allowed.sandbox = std::sync::Arc::new(
        (*crate::sandbox::default_probed())
            .clone()
            .allow_vcs_writes(true),
    );
    let (o, _) = run(
        &tb,
        &allowed,
        "write_file",
        json!({"path": ".git/hooks/post-commit", "content": "#!/bin/sh\n"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    // read-only: nothing written, anywhere
    let mut ro = c.clone();
    let mut sb = crate::sandbox::Sandbox::off();
    sb.policy.mode = crate::sandbox::SandboxMode::ReadOnly;
    ro.sandbox = std::sync::Arc::new(sb);
    let (o, _) = run(
        &tb,
        &ro,
        "write_file",
        json!({"path": "a.txt", "content": "x"}),
    )
    .await;
    assert!(o.text.contains("the sandbox is read-only"), "{}", o.text);
    assert!(!d.path().join("a.txt").exists());
}
