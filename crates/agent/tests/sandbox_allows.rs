//! What the hardened sandbox still lets a build or a test do, each next to the refusal it
//! must not turn into: Unix sockets inside the workspace (and an outside one the operator
//! allowed), a private `/dev/shm`, pseudo-terminals, a process bound that a fork bomb meets
//! (through a cgroup as root, `RLIMIT_NPROC` otherwise, when below `pid_max`'s floor), and a
//! workspace that holds a denied directory.

use std::path::Path;
use std::sync::Arc;

use lazarus_agent::sandbox::{Sandbox, SandboxPolicy};
use lazarus_agent::tools::{NoHooks, ToolContext, ToolOutput, ToolStatus, Toolbox};
use serde_json::json;

fn probe(max_processes: u32) -> Sandbox {
    let s = Sandbox::probe(SandboxPolicy {
        max_processes,
        ..Default::default()
    });
    assert!(s.usable(), "{}", s.describe());
    s
}

async fn sh(ws: &Path, sb: Sandbox, command: &str) -> ToolOutput {
    let mut c = ToolContext::new(ws);
    c.sandbox = Arc::new(sb);
    let mut hooks = NoHooks::default();
    Toolbox::standard()
        .run(
            &c,
            "shell",
            &json!({ "command": command }).to_string(),
            &mut hooks,
        )
        .await
}

fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

const SERVE_AND_CONNECT: &str = r#"
import os, socket, sys
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(1)
cli = socket.socket(socket.AF_UNIX); cli.connect(path); cli.sendall(b"ping")
conn, _ = srv.accept(); print("inside:", conn.recv(4).decode())
"#;

#[tokio::test]
async fn unix_sockets_inside_the_workspace_and_where_allowed() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("serve.py"), SERVE_AND_CONNECT).unwrap();
    let py = python();
    let o = sh(
        ws.path(),
        probe(1024),
        &format!("{py} serve.py ./s.sock && {py} serve.py \"$TMPDIR/t.sock\""),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert_eq!(o.text.matches("inside: ping").count(), 2, "{}", o.text);

    // a daemon's socket outside: refused by default, reached once allowed
    let outside = tempfile::tempdir().unwrap();
    let sock = outside.path().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let connect = format!(
        "{py} -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"connected\")'",
        sock.display()
    );
    let o = sh(ws.path(), probe(1024), &connect).await;
    assert!(!o.text.contains("connected"), "{}", o.text);
    assert!(o.text.contains("Permission denied"), "{}", o.text);
    let allowed = probe(1024).allow_unix_sockets([sock.clone()]);
    assert!(allowed.describe().contains(&sock.display().to_string()));
    let o = sh(ws.path(), allowed, &connect).await;
    assert!(o.text.contains("connected"), "{}", o.text);
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_ok());
    // allowing a directory allows the sockets in it
    let o = sh(
        ws.path(),
        probe(1024).allow_unix_sockets([outside.path().to_path_buf()]),
        &connect,
    )
    .await;
    assert!(o.text.contains("connected"), "{}", o.text);
}

#[tokio::test]
async fn shared_memory_and_terminals_are_the_calls_own() {
    let ws = tempfile::tempdir().unwrap();
    let name = format!("lazarus-shm-{}", std::process::id());
    let py = python();
    let o = sh(
        ws.path(),
        probe(1024),
        &format!(
            "echo mine > /dev/shm/{name} && cat /dev/shm/{name} && {py} -c 'import multiprocessing as m; l=m.Lock(); l.acquire(); print(\"lock ok\")' && {py} -c 'import os,pty; a,b=pty.openpty(); print(\"tty\", os.ttyname(b))' && ls /dev/pts"
        ),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert!(o.text.contains("mine"), "{}", o.text);
    assert!(o.text.contains("lock ok"), "{}", o.text);
    assert!(o.text.contains("tty /dev/pts/0"), "{}", o.text);
    // the host's shared memory and terminals are not there
    assert!(!Path::new("/dev/shm").join(&name).exists());
    let pts_listed: Vec<&str> = o
        .text
        .lines()
        .skip_while(|l| !l.starts_with("tty "))
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .collect();
    assert!(
        pts_listed
            .iter()
            .all(|l| *l == "ptmx" || l.parse::<u32>().is_ok_and(|n| n < 2)),
        "{pts_listed:?}"
    );
}

#[tokio::test]
async fn a_fork_bomb_meets_the_bound() {
    // below pid_max's floor: a cgroup as root, RLIMIT_NPROC in the user namespace otherwise
    let ws = tempfile::tempdir().unwrap();
    let sb = probe(48);
    let d = sb.describe();
    if rustix::process::geteuid().is_root() {
        assert!(d.contains("pids≤48 (cgroup"), "{d}");
    } else {
        assert!(d.contains("pids≤48 (RLIMIT_NPROC)"), "{d}");
    }
    let o = sh(
        ws.path(),
        sb,
        "(i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); echo $i > n; done) 2>/dev/null; read n < n; echo started=$n",
    )
    .await;
    let n: u32 = o
        .text
        .lines()
        .find_map(|l| l.strip_prefix("started="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{}", o.text));
    assert!((1..48).contains(&n), "{n} started: {}", o.text);
    // the default bound (pid_max where the kernel has it) lets the same loop run to the end
    let o = sh(
        ws.path(),
        probe(1024),
        "(i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); echo $i > n; done) 2>/dev/null; read n < n; echo started=$n",
    )
    .await;
    assert!(o.text.contains("started=200"), "{}", o.text);
}

#[tokio::test]
async fn a_workspace_holding_a_denied_directory_keeps_it_denied() {
    // `lazarus run` in $HOME: the workspace is the home directory itself
    let home = tempfile::tempdir().unwrap();
    let h = home.path().canonicalize().unwrap();
    std::fs::create_dir(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "KEY-IN-WORKSPACE").unwrap();
    std::fs::create_dir(h.join("project")).unwrap();
    std::fs::write(h.join("notes.txt"), "n").unwrap();
    let mut sb = probe(1024);
    sb.home = Some(h.clone());
    let o = sh(
        &h,
        sb,
        "cat .ssh/id_ed25519; echo key >> .ssh/authorized_keys; echo ok > project/built && echo n2 >> notes.txt && echo wrote",
    )
    .await;
    assert!(!o.text.contains("KEY-IN-WORKSPACE"), "{}", o.text);
    assert!(!h.join(".ssh/authorized_keys").exists(), "{}", o.text);
    assert!(o.text.contains("wrote"), "{}", o.text);
    assert!(h.join("project/built").exists());
}
