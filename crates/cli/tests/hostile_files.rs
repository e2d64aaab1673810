//! Files and settings planted to hang, flood or clobber: a FIFO or a symlink to `/dev/zero`
//! named like a session or its lock, a symlinked lock pointing at a victim, a token file
//! others can read, a remote gateway with a weak token. Every command answers promptly with
//! a clear error (or lists the file as `corrupt`) and changes nothing.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

/// Runs `lazarus ARGS` with a deadline: a hang is a failure, not a stuck test.
fn lazarus(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("LAZARUS_SESSION_DIR", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env_remove("LAZARUS_TOKEN")
        .env_remove("LAZARUS_LOG")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "lazarus {args:?} hung (killed after 20 s); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn mkfifo(p: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

#[test]
fn fifos_and_dev_zero_named_like_sessions_never_hang_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(
        lazarus(dir, &["sessions", "create", "--id", "good"], &[])
            .status
            .success()
    );
    mkfifo(&dir.join("fifo.jsonl"));
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.jsonl")).unwrap();
    mkfifo(&dir.join("good.lock.tmp")); // noise that is not ours
    // the lock of a good session replaced by a FIFO
    std::fs::remove_file(dir.join("good.lock")).unwrap();
    mkfifo(&dir.join("good.lock"));

    let o = lazarus(dir, &["sessions", "list", "--json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for id in ["fifo", "zero"] {
        let r = rows.iter().find(|r| r["id"] == id).expect("listed");
        assert_eq!(r["status"], "corrupt", "{r}");
        assert!(
            r["error"].as_str().unwrap().contains("not a regular file"),
            "{r}"
        );
    }
    assert!(rows.iter().any(|r| r["id"] == "good"));

    for args in [
        &["sessions", "verify", "fifo"][..],
        &["sessions", "show", "zero"][..],
        &["sessions", "send", "fifo", "hi"][..],
        &["sessions", "repair", "zero"][..],
        &["sessions", "create", "--id", "fifo"][..],
        &["sessions", "send", "good", "hi"][..],
    ] {
        let o = lazarus(dir, args, &[]);
        assert!(!o.status.success(), "{args:?} succeeded: {}", text(&o));
        assert!(
            text(&o).contains("not a regular file"),
            "{args:?}: {}",
            text(&o)
        );
    }
    let o = lazarus(dir, &["sessions", "verify", "--all"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn a_symlinked_lock_or_ledger_is_never_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    assert!(
        lazarus(dir, &["sessions", "create", "--id", "v1"], &[])
            .status
            .success()
    );
    std::fs::remove_file(dir.join("v1.lock")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("v1.lock")).unwrap();
    let o = lazarus(dir, &["sessions", "send", "v1", "hi"], &[]);
    assert!(!o.status.success(), "{}", text(&o));
    std::os::unix::fs::symlink(&victim, dir.join("v2.jsonl")).unwrap();
    let o = lazarus(dir, &["sessions", "create", "--id", "v2"], &[]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

#[test]
fn a_token_file_others_can_read_is_refused_and_a_remote_gateway_needs_a_strong_token() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let token = dir.join("token");
    std::fs::write(
        &token,
        "a-perfectly-long-token-that-others-can-read-0123456789\n",
    )
    .unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = lazarus(
        dir,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            token.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("chmod 600"), "{}", text(&o));

    // a non-loopback address without --allow-remote: refused before any file is written
    let fresh = dir.join("fresh-token");
    let o = lazarus(
        dir,
        &[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--token-file",
            fresh.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("--allow-remote"), "{}", text(&o));
    assert!(!fresh.exists(), "nothing written for a refused command");

    // --allow-remote with a one-character token
    let o = lazarus(
        dir,
        &["serve", "--listen", "0.0.0.0:0", "--allow-remote"],
        &[("LAZARUS_TOKEN", "x")],
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("32 random bytes"), "{}", text(&o));
}
