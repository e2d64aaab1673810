//! Shared by the consent and display tests of the session's edges (rows 2 and 8–12): a
//! person's machine for one user (root, or uid 65534 through `setpriv`): a home directory
//! with lazarus's configuration and approvals policy, a session directory, a workspace, and
//! the binary where that user may run it.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_lazarus");
pub const NOBODY: u32 = 65534;

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Whether the unprivileged variant can run here (root switches user; elsewhere this user is
/// the unprivileged one and the other variant covers it; CI must be root).
pub fn can_switch_user() -> bool {
    if is_root() {
        return true;
    }
    assert!(!in_ci(), "CI must be root to switch user (setpriv)");
    eprintln!("skipped: not root; the other test is the unprivileged run");
    false
}

/// `p` quoted for a POSIX shell.
pub fn q(p: impl AsRef<Path>) -> String {
    format!(
        "'{}'",
        p.as_ref().display().to_string().replace('\'', r"'\''")
    )
}

fn chown_all(root: &Path, uid: Option<u32>) {
    let Some(u) = uid else { return };
    let id = rustix::process::Uid::from_raw(u);
    let gid = rustix::process::Gid::from_raw(u);
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let _ = rustix::fs::chownat(
            rustix::fs::CWD,
            &p,
            Some(id),
            Some(gid),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        );
        if p.is_dir() && !p.is_symlink() {
            for e in std::fs::read_dir(&p).unwrap().flatten() {
                todo.push(e.path());
            }
        }
    }
}

/// One person's machine.
pub struct Person {
    _tmp: tempfile::TempDir,
    pub uid: Option<u32>,
    pub home: PathBuf,
    pub sessions: PathBuf,
    pub ws: PathBuf,
    /// Where an attack that got out leaves its mark.
    pub outside: PathBuf,
    pub bin: PathBuf,
}

impl Person {
    pub fn new(uid: Option<u32>) -> Person {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (home, sessions, ws, outside, bindir) = (
            base.join("home"),
            base.join("sessions"),
            base.join("ws"),
            base.join("outside"),
            base.join("bin"),
        );
        for d in [&home, &ws, &outside, &bindir, &sessions] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(home.join(".config/lazarus")).unwrap();
        let bin = bindir.join("lazarus");
        std::fs::copy(BIN, &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        for d in [&home, &ws, &outside, &sessions] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
            chown_all(d, uid);
        }
        Person {
            _tmp: tmp,
            uid,
            home,
            sessions,
            ws,
            outside,
            bin,
        }
    }

    /// Makes what the test wrote beneath `p` this person's.
    pub fn own(&self, p: &Path) {
        chown_all(p, self.uid);
    }

    /// The environment lazarus runs with (as `VAR=value` words for a shell line too).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("HOME", self.home.display().to_string()),
            (
                "XDG_STATE_HOME",
                self.home.join(".state").display().to_string(),
            ),
            ("OPENAI_API_KEY", "test".into()),
        ]
    }

    /// `lazarus ARGS` as this person, without a terminal.
    pub fn lazarus(&self, args: &[&str]) -> Command {
        let mut c = match self.uid {
            Some(u) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={u}"))
                    .arg(format!("--regid={u}"))
                    .args(["--clear-groups", "--"])
                    .arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        c.args(args)
            .env_remove("LAZARUS_CONFIG")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("LAZARUS_SESSION_DIR")
            .env_remove("LAZARUS_STORE")
            .env_remove("LAZARUS_TOKEN")
            .env_remove("NOTIFY_SOCKET")
            .envs(self.env())
            .current_dir(&self.ws)
            .stdin(Stdio::null());
        c
    }

    /// The same as a shell command line (for a terminal).
    pub fn line(&self, args: &[&str]) -> String {
        let mut s = String::from(
            "env -u LAZARUS_CONFIG -u XDG_CONFIG_HOME -u LAZARUS_SESSION_DIR -u LAZARUS_STORE",
        );
        for (k, v) in self.env() {
            s.push_str(&format!(" {k}={}", q(v)));
        }
        if let Some(u) = self.uid {
            s.push_str(&format!(
                " setpriv --reuid={u} --regid={u} --clear-groups --"
            ));
        }
        s.push(' ');
        s.push_str(&q(&self.bin));
        for a in args {
            s.push(' ');
            s.push_str(&q(a));
        }
        s
    }

    /// `lazarus run` arguments for session `id` of this person, `extra` after.
    pub fn run_args<'a>(&'a self, id: &'a str, url: &'a str, extra: &[&'a str]) -> Vec<String> {
        let mut v: Vec<String> = vec![
            "run".into(),
            "--session".into(),
            id.into(),
            "--session-dir".into(),
            self.sessions.display().to_string(),
            "--workspace".into(),
            self.ws.display().to_string(),
            "--model".into(),
            "m".into(),
            "--base-url".into(),
            url.into(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    pub fn sessions_cmd(&self, args: &[&str]) -> Output {
        let mut all = vec!["sessions", "--session-dir"];
        let dir = self.sessions.display().to_string();
        all.push(&dir);
        all.extend_from_slice(args);
        self.lazarus(&all).output().unwrap()
    }

    /// The approvals policy file.
    pub fn policy(&self) -> PathBuf {
        self.home.join(".config/lazarus/approvals.toml")
    }

    /// The records of session `id`: (kind, data).
    pub fn records(&self, id: &str) -> Vec<(String, Value)> {
        std::fs::read_to_string(self.sessions.join(format!("{id}.jsonl")))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["kind"].as_str().unwrap().to_string(), v["data"].clone())
            })
            .collect()
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The thirteen keys a hostile model puts before the command, and the fourteen after (row 8).
pub fn decoys(command: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("command_preview".into(), Value::String("ls -la".into()));
    for i in 0..12 {
        m.insert(format!("note_{i:02}"), Value::String("harmless".into()));
    }
    m.insert("command".into(), Value::String(command.into()));
    for i in 12..26 {
        m.insert(format!("note_{i:02}"), Value::String("harmless".into()));
    }
    m
}

/// Bytes a terminal would obey: ESC, BEL, CSI, and the bidirectional and zero-width
/// characters (as UTF-8) the row 11 attack uses.
pub fn raw_controls(s: &[u8]) -> Vec<&'static str> {
    let text = String::from_utf8_lossy(s);
    let mut found = Vec::new();
    if s.contains(&0x1b) {
        found.push("ESC");
    }
    if s.contains(&0x07) {
        found.push("BEL");
    }
    for (c, name) in [
        ('\u{9b}', "CSI"),
        ('\u{202E}', "U+202E"),
        ('\u{2066}', "U+2066"),
        ('\u{2069}', "U+2069"),
        ('\u{200B}', "U+200B"),
    ] {
        if text.contains(c) {
            found.push(name);
        }
    }
    found
}
