//! Creating a session with only k file descriptors left, for every k from 0 to 24: the
//! answer is 201 or `429 overloaded`, and a refused creation leaves nothing behind — no lock
//! file, no workspace directory, no partial ledger. Each k runs in a child process (this test
//! binary again), whose descriptor limit is lowered and then filled up to k.

mod fd_common;

use std::path::Path;
use std::process::Command;

use lazarus_gateway::harness::{self, InProcess};

const CHILD: &str = "LAZARUS_FD_HEADROOM_CHILD";
const TEST: &str = "creating_a_session_with_few_descriptors_left_leaves_nothing_behind";

/// The creations tried: the default workspace, and one nested three deep.
const BODIES: [&str; 2] = [r#"{"id":"x"}"#, r#"{"id":"x","workspace":"team/a/b"}"#];

/// In the child: fill the descriptor table but `k`, create session `x`, print the status.
fn child(k: usize, body: &str, dir: &Path) {
    fd_common::lower_nofile();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gw = rt.block_on(InProcess::start(dir)).unwrap();
    let req =
        harness::request_from_bytes(format!("\x01POST /v1/sessions\n\n{body}").as_bytes()).unwrap();
    let held = fd_common::fill_leaving(k);
    let status = rt.block_on(gw.send(req));
    drop(held);
    println!("status={status:?}");
    match status {
        Ok(201) | Ok(429) => {}
        other => panic!("with {k} descriptors left: {other:?}"),
    }
}

#[test]
fn creating_a_session_with_few_descriptors_left_leaves_nothing_behind() {
    if let Ok(k) = std::env::var(CHILD) {
        let dir = std::env::var("LAZARUS_FD_HEADROOM_DIR").unwrap();
        let body = BODIES[std::env::var("LAZARUS_FD_HEADROOM_BODY")
            .unwrap()
            .parse::<usize>()
            .unwrap()];
        child(k.parse().unwrap(), body, Path::new(&dir));
        return;
    }
    for (b, body) in BODIES.iter().enumerate() {
        sweep(b, body);
    }
}

fn sweep(b: usize, body: &str) {
    let mut created = 0;
    for k in 0..=24usize {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture", "--test-threads", "1"])
            .env(CHILD, k.to_string())
            .env("LAZARUS_FD_HEADROOM_BODY", b.to_string())
            .env("LAZARUS_FD_HEADROOM_DIR", dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{body} k={k}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ok = stdout.contains("status=Ok(201)");
        assert!(
            ok || stdout.contains("status=Ok(429)"),
            "{body} k={k}: {stdout}"
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("sessions"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let workspaces: Vec<String> = std::fs::read_dir(dir.path().join("workspaces"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        if ok {
            created += 1;
            assert_eq!(names, ["x.jsonl", "x.lock"], "{body} k={k}");
        } else {
            assert!(
                names.is_empty(),
                "{body} k={k}: a refused creation left {names:?}"
            );
            assert!(
                workspaces.is_empty(),
                "{body} k={k}: a refused creation left the workspaces {workspaces:?}"
            );
        }
    }
    // the sweep went from refusals to creations: both sides were really tried
    assert!(created > 0, "{body}: no k was enough to create a session");
    assert!(created < 25, "{body}: no k was too few");
}
