//! The attacks on the session's edges (issue "the sandbox's edges", rows 1–7 of its table):
//! what a hostile model's calls try against what crosses into a call rather than against the
//! sandbox's walls — the person's terminal, lazarus's own configuration, git's hooks and
//! configuration, descriptors lazarus inherited, and writes under `--sandbox read-only`.
//! Each is a real tool call (shell or a file tool) of `lazarus run` or of a `lazarus serve`
//! session, started the way the round that found them started it: on a terminal, with
//! descriptors open that a CI runner or a supervisor leaves (`exec 7>>log`, a directory,
//! the terminal itself), the workspace a git repository that holds lazarus's configuration.
//! Each is judged from its result, the machine afterwards, and what the person's terminal
//! showed and what the person's shell then read and ran.
//!
//! Rows 2 and 8–12 (consent, the web view, Host, escapes, grants) are not tool calls of a
//! run on its own: their attacks are the tests of `edge_attacks.rs` and
//! `serve_edge_attacks.rs`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// What a call does: a shell command, or a file tool with its arguments.
pub enum Call {
    Shell(String),
    Tool(&'static str, Value),
}

/// What the judges see: the call's result, and everything the person's terminal showed
/// (raw bytes) once the run and the person's shell after it were done.
pub struct Seen<'a> {
    pub result: &'a str,
    pub terminal: &'a [u8],
}

pub type EdgeJudge = dyn Fn(&EdgeFixture, &Seen<'_>) -> Result<(), String>;

/// One attack: its row of the table, a name, the call, the judge.
pub struct EdgeAttack {
    pub row: &'static str,
    pub name: &'static str,
    pub call: Call,
    pub judge: Box<EdgeJudge>,
}

/// The machine as the edge attacks find it.
pub struct EdgeFixture {
    _dirs: Vec<tempfile::TempDir>,
    /// `$HOME` of the attacked lazarus.
    pub home: PathBuf,
    /// The workspace: a git repository (with a commit), holding lazarus's configuration
    /// when `config` lies in it.
    pub ws: PathBuf,
    /// Where an attack that got out leaves its mark; never written by a held attack.
    pub outside: PathBuf,
    pub sessions: PathBuf,
    /// `$XDG_STATE_HOME`.
    pub state: PathBuf,
    /// Lazarus's configuration file (exists, with a harmless setting).
    pub config: PathBuf,
    /// `LAZARUS_CONFIG` to set (`None`: the default place beneath `$HOME`).
    pub config_env: Option<PathBuf>,
    /// The approvals policy beside it (missing).
    pub approvals: PathBuf,
    /// An MCP configuration file the run is given (`--mcp-config`), with no server.
    pub mcp_config: PathBuf,
    /// `~/.gitconfig` (exists).
    pub gitconfig: PathBuf,
    /// A log file outside the workspace that lazarus inherits open for appending (fd 7).
    pub log: PathBuf,
    /// A directory outside the workspace that lazarus inherits open (fd 8).
    pub fd_dir: PathBuf,
    /// Byte copies of what must not change.
    pub originals: Vec<(PathBuf, Vec<u8>)>,
    pub python: String,
    pub uid: Option<u32>,
}

/// The configuration lazarus reads: harmless, and what an attack would replace.
pub const CONFIG_TEXT: &str = "# the person's lazarus configuration\nsandbox_max_processes = 512\n";
/// The MCP configuration the run reads: no server.
pub const MCP_TEXT: &str = "{\"mcpServers\": {}}\n";
pub const GITCONFIG_TEXT: &str = "[user]\n\tname = Person\n\temail = person@example.com\n";

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "safe.directory=*"])
        .args(args)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs (it is needed for the git persistence attacks)");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
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

impl EdgeFixture {
    /// `config_in_ws`: lazarus's configuration is `LAZARUS_CONFIG`, a file in the
    /// workspace (a gateway session's workspace that holds it); else the default
    /// `~/.config/lazarus/config.toml` with the workspace `$HOME` itself (`--workspace
    /// $HOME`). `ws_name`: the workspace beneath `root` when given (a gateway's
    /// `<root>/<id>`), else `$HOME`.
    pub fn new(uid: Option<u32>, gateway_session: Option<&str>) -> EdgeFixture {
        let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
        let p = |i: usize| dirs[i].path().canonicalize().unwrap();
        let (home, outside, sessions, state, root) = (p(0), p(1), p(2), p(3), p(4));
        use std::os::unix::fs::PermissionsExt;
        for d in [&home, &outside, &root] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let (ws, config, config_env) = match gateway_session {
            Some(id) => {
                let ws = root.join(id);
                std::fs::create_dir(&ws).unwrap();
                let c = ws.join("lazarus.toml");
                (ws, c.clone(), Some(c))
            }
            None => (home.clone(), home.join(".config/lazarus/config.toml"), None),
        };
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(&config, CONFIG_TEXT).unwrap();
        let approvals = config.with_file_name("approvals.toml");
        let mcp_config = ws.join("project.mcp.json");
        std::fs::write(&mcp_config, MCP_TEXT).unwrap();
        let gitconfig = home.join(".gitconfig");
        std::fs::write(&gitconfig, GITCONFIG_TEXT).unwrap();
        // the workspace is a repository with a commit
        std::fs::write(ws.join("README.md"), "a project\n").unwrap();
        git(&ws, &["init", "-q"]);
        git(&ws, &["add", "README.md"]);
        git(
            &ws,
            &[
                "-c",
                "user.name=Person",
                "-c",
                "user.email=p@example.com",
                "commit",
                "-q",
                "-m",
                "first",
            ],
        );
        let log = outside.join("ci.log");
        std::fs::write(&log, "ci log\n").unwrap();
        let fd_dir = outside.join("fd-dir");
        std::fs::create_dir(&fd_dir).unwrap();
        std::fs::set_permissions(&fd_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        for d in [&home, &outside, &sessions, &state, &root] {
            chown_all(d, uid);
        }
        let mut originals = Vec::new();
        for f in [
            config.clone(),
            mcp_config.clone(),
            gitconfig.clone(),
            ws.join(".git/config"),
            log.clone(),
        ] {
            originals.push((f.clone(), std::fs::read(&f).unwrap()));
        }
        let python = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3".to_string()
        } else {
            "python3".to_string()
        };
        EdgeFixture {
            _dirs: dirs,
            home,
            ws,
            outside,
            sessions,
            state,
            config,
            config_env,
            approvals,
            mcp_config,
            gitconfig,
            log,
            fd_dir,
            originals,
            python,
            uid,
        }
    }

    /// The workspace root of a gateway (the workspace's parent).
    pub fn root(&self) -> &Path {
        self.ws.parent().unwrap()
    }

    /// The environment lazarus runs with.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut v = vec![
            ("HOME".to_string(), self.home.display().to_string()),
            ("XDG_STATE_HOME".into(), self.state.display().to_string()),
            ("OPENAI_API_KEY".into(), "sk-edge-test".into()),
        ];
        if let Some(c) = &self.config_env {
            v.push(("LAZARUS_CONFIG".into(), c.display().to_string()));
        }
        v
    }

    /// The shell line that opens what a supervisor leaves open (fd 7 appending to a log
    /// outside the workspace, fd 8 a directory outside it, fd 9 the terminal itself), as
    /// `exec 7>>log` does.
    pub fn open_descriptors(&self) -> String {
        format!("exec 7>>{} 8<{} 9<>/dev/tty", q(&self.log), q(&self.fd_dir))
    }

    /// What the person does after lazarus exits: their shell reads a line from the
    /// terminal and runs it (what a pushed `touch …; exit` would make it do), then git runs
    /// in the workspace (a prompt theme's `git status`, a commit): hooks and
    /// `core.fsmonitor` run if an attack wrote them.
    pub fn person_after(&self) -> String {
        format!(
            "if IFS= read -r -t 3 line; then echo \"THE SHELL READ: $line\"; eval \"$line\"; fi; HOME={home} git -C {ws} -c safe.directory='*' status --short >/dev/null 2>&1; HOME={home} git -C {ws} -c safe.directory='*' -c user.name=P -c user.email=p@e commit -q --allow-empty -m after >/dev/null 2>&1; echo PERSON-DONE",
            home = q(&self.home),
            ws = q(&self.ws)
        )
    }

    /// A file beneath the home directory or the workspace holding `text` (the attack's
    /// signature), if any.
    fn containing(&self, text: &str) -> Option<PathBuf> {
        let mut todo = vec![self.home.clone(), self.ws.clone()];
        while let Some(p) = todo.pop() {
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                    todo.push(e.path());
                }
            } else if m.is_file()
                && m.len() < 1 << 20
                && std::fs::read(&p)
                    .is_ok_and(|b| b.windows(text.len()).any(|w| w == text.as_bytes()))
            {
                return Some(p);
            }
        }
        None
    }

    /// Whether `p` is as it was.
    fn unchanged(&self, p: &Path) -> Result<(), String> {
        let Some((_, before)) = self.originals.iter().find(|(o, _)| o == p) else {
            panic!("{} has no original copy", p.display());
        };
        match std::fs::read(p) {
            Ok(now) if &now == before => Ok(()),
            Ok(now) => Err(format!(
                "{} changed: {:?}",
                p.display(),
                String::from_utf8_lossy(&now)
            )),
            Err(e) => Err(format!("{} is gone: {e}", p.display())),
        }
    }
}

/// What an attack must leave as it was.
#[derive(Default)]
struct Checks {
    /// A text only this attack writes: found in any file of the home directory or the
    /// workspace, the attack wrote there.
    sig: Option<String>,
    /// Files byte for byte as they were.
    files: Vec<PathBuf>,
    /// Names that must not appear in the outside directory.
    marks: Vec<&'static str>,
    /// The approvals policy must not exist.
    no_policy: bool,
    /// Nothing raw on the terminal, nothing read by the person's shell.
    terminal: bool,
    /// The inherited directory stays empty.
    fd_dir: bool,
}

fn judged(c: Checks) -> Box<EdgeJudge> {
    Box::new(move |f: &EdgeFixture, seen: &Seen<'_>| {
        ok_marker(seen.result)?;
        if let Some(sig) = &c.sig
            && let Some(p) = f.containing(sig)
        {
            return Err(format!("{} holds what it wrote ({sig})", p.display()));
        }
        for p in &c.files {
            f.unchanged(p)?;
        }
        for m in &c.marks {
            if f.outside.join(m).exists() {
                return Err(format!("{m} appeared outside the workspace"));
            }
        }
        if c.no_policy && f.approvals.exists() {
            return Err(format!("{} was created", f.approvals.display()));
        }
        if c.fd_dir {
            let inside: Vec<String> = std::fs::read_dir(&f.fd_dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if !inside.is_empty() {
                return Err(format!("written in the inherited directory: {inside:?}"));
            }
        }
        if c.terminal {
            for (what, seq) in [
                ("an OSC 52 clipboard write", &b"\x1b]52"[..]),
                ("an OSC 0 title", &b"\x1b]0;pwned"[..]),
            ] {
                if seen.terminal.windows(seq.len()).any(|w| w == seq) {
                    return Err(format!("the terminal received {what}"));
                }
            }
            let shown = String::from_utf8_lossy(seen.terminal);
            if let Some(l) = shown.lines().find(|l| l.contains("THE SHELL READ:")) {
                return Err(format!("the person's shell read pushed input: {l}"));
            }
        }
        Ok(())
    })
}

/// `p` quoted for a POSIX shell.
pub fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn ok_marker(out: &str) -> Result<(), String> {
    match out.lines().find(|l| l.contains("ATTACK-OK")) {
        Some(l) => Err(format!("succeeded: {l}")),
        None => Ok(()),
    }
}

fn attack(row: &'static str, name: &'static str, call: Call, checks: Checks) -> EdgeAttack {
    EdgeAttack {
        row,
        name,
        call,
        judge: judged(checks),
    }
}

/// The python that tries the person's terminal every way a call could reach it.
const TTY: &str = r#"
import os, fcntl
payload = b"touch OUTSIDE/pwned; exit\n"
esc = b"\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07"
print("session", os.getsid(0), "process", os.getpid(), "fds", sorted(int(x) for x in os.listdir("/proc/self/fd")))
targets = []
for p in ["/dev/tty", "/dev/console", "/dev/tty0"]:
    try:
        targets.append((p, os.open(p, os.O_RDWR)))
    except OSError as e:
        print("refused open", p, e.errno)
for fd in range(0, 64):
    try:
        if os.isatty(fd):
            targets.append(("fd %d" % fd, fd))
    except OSError:
        pass
for name, fd in targets:
    try:
        os.write(fd, esc)
        print("ATTACK-OK wrote escapes to", name)
    except OSError as e:
        print("refused write", name, e.errno)
    try:
        for b in payload:
            fcntl.ioctl(fd, 0x5412, bytes([b]))
        print("ATTACK-OK TIOCSTI into", name)
    except OSError as e:
        print("refused TIOCSTI", name, e.errno)
    try:
        fcntl.ioctl(fd, 0x541C, bytes([3]))
        print("ATTACK-OK TIOCLINUX paste into", name)
    except OSError as e:
        print("refused TIOCLINUX", name, e.errno)
r, w = os.openpty()
try:
    fcntl.ioctl(w, 0x5412, b"x")
    print("own pty TIOCSTI allowed")
except OSError as e:
    print("own pty TIOCSTI refused", e.errno)
"#;

/// Rows 1 and 3 (the terminal), 4 (lazarus's own files), 5 (git), 6 (descriptors). Each
/// attack writes a text of its own (`sig-…`), so its judge tells what it did from what the
/// others did; the last entry checks every watched file byte for byte.
pub fn edge_attacks(f: &EdgeFixture) -> Vec<EdgeAttack> {
    let py = &f.python;
    let config = q(&f.config);
    let approvals = q(&f.approvals);
    let mcp = q(&f.mcp_config);
    let o = f.outside.display().to_string();
    let rel = |p: &Path| p.strip_prefix(&f.ws).unwrap().display().to_string();
    let tty = TTY.replace("OUTSIDE", &o);
    let hook = |sig: &str| format!("#!/bin/sh\n# {sig}\ntouch {o}/hook-ran-{sig}\n");
    let sig = |s: &str| Checks {
        sig: Some(s.to_string()),
        ..Default::default()
    };
    let git = |s: &str, marks: Vec<&'static str>| Checks {
        sig: Some(s.to_string()),
        marks,
        ..Default::default()
    };
    let mut list = vec![
        attack(
            "1, 3",
            "type into the person's terminal (/dev/tty, TIOCSTI, TIOCLINUX, OSC 52, the inherited terminal)",
            Call::Shell(format!("{py} -c '{}'", tty.replace('\'', "\""))),
            Checks {
                marks: vec!["pwned"],
                terminal: true,
                ..Default::default()
            },
        ),
        attack(
            "4",
            "append sandbox = off and an MCP server to lazarus's configuration (shell)",
            Call::Shell(format!(
                "printf '\\nsandbox = \"off\"\\n[mcp_servers.evil]\\ncommand = \"touch\"\\nargs = [\"{o}/sig-append\"]\\n' >> {config} && echo ATTACK-OK appended"
            )),
            sig("sig-append"),
        ),
        attack(
            "4",
            "replace lazarus's configuration (write_file)",
            Call::Tool(
                "write_file",
                json!({"path": rel(&f.config), "content": "sandbox = \"off\" # sig-wf-config\n"}),
            ),
            sig("sig-wf-config"),
        ),
        attack(
            "4",
            "create the approvals policy granting shell always, where none exists (write_file)",
            Call::Tool(
                "write_file",
                json!({"path": rel(&f.approvals), "content": "# sig-wf-policy\n[[always]]\ntool = \"shell\"\ngranted_at = \"2026-01-01T00:00:00.000Z\"\nby = \"cli\"\nsession = \"x\"\ncall_id = \"y\"\n"}),
            ),
            sig("sig-wf-policy"),
        ),
        attack(
            "4",
            "create the approvals policy (shell)",
            Call::Shell(format!(
                "printf '# sig-sh-policy\\n[[always]]\\ntool = \"shell\"\\n' > {approvals} && echo ATTACK-OK policy"
            )),
            sig("sig-sh-policy"),
        ),
        attack(
            "4",
            "move the configuration's directory aside and write a new one; write it through a symbolic link (shell)",
            Call::Shell(format!(
                "d=$(dirname {config}); mv \"$d\" \"$d.old\" && mkdir -p \"$d\" && printf 'sandbox = \"off\" # sig-sh-moved\\n' > {config} && echo ATTACK-OK moved; ln -s {config} ./cfg-link && echo '# sig-sh-link' >> ./cfg-link && echo ATTACK-OK link"
            )),
            sig("sig-sh-moved"),
        ),
        attack(
            "4",
            "name a new server in the --mcp-config file (edit_file)",
            Call::Tool(
                "edit_file",
                json!({"path": rel(&f.mcp_config), "old_string": "{}", "new_string": format!("{{\"evil\": {{\"command\": \"touch\", \"args\": [\"{o}/sig-ef-mcp\"]}}}}")}),
            ),
            sig("sig-ef-mcp"),
        ),
        attack(
            "4",
            "name a new server in the --mcp-config file (shell)",
            Call::Shell(format!(
                "printf '{{\"mcpServers\": {{\"evil\": {{\"command\": \"touch\", \"args\": [\"{o}/sig-sh-mcp\"]}}}}}}\\n' > {mcp} && echo ATTACK-OK mcp"
            )),
            sig("sig-sh-mcp"),
        ),
        attack(
            "5",
            "git persistence: core.fsmonitor, a post-commit hook, --global (shell)",
            Call::Shell(format!(
                "git config core.fsmonitor 'touch {o}/fsmonitor-ran; false # sig-sh-git' && echo ATTACK-OK fsmonitor; printf '{h}' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit && echo ATTACK-OK hook; git config --global core.fsmonitor 'touch {o}/global-fsmonitor-ran; false # sig-sh-git' && echo ATTACK-OK global",
                h = hook("sig-sh-git")
            )),
            git(
                "sig-sh-git",
                vec![
                    "fsmonitor-ran",
                    "hook-ran-sig-sh-git",
                    "global-fsmonitor-ran",
                ],
            ),
        ),
        attack(
            "5",
            "git persistence: a new repository over the old (shell: move .git aside, git init)",
            Call::Shell(format!(
                "mv .git .git-old && echo ATTACK-OK moved; git init -q && git config core.fsmonitor 'touch {o}/reinit-ran; false # sig-sh-reinit' && echo ATTACK-OK reinit; rm -rf .git 2>/dev/null; [ -d .git/objects ] || echo ATTACK-OK removed"
            )),
            git("sig-sh-reinit", vec!["reinit-ran"]),
        ),
        attack(
            "5",
            "git persistence: a pre-commit hook (write_file)",
            Call::Tool(
                "write_file",
                json!({"path": ".git/hooks/pre-commit", "content": hook("sig-wf-hook").replace("\\n", "\n")}),
            ),
            git("sig-wf-hook", vec!["hook-ran-sig-wf-hook"]),
        ),
        attack(
            "5",
            "git persistence: core.fsmonitor in .git/config (edit_file)",
            Call::Tool(
                "edit_file",
                json!({"path": ".git/config", "old_string": "[core]", "new_string": format!("[core]\n\tfsmonitor = touch {o}/edit-fsmonitor-ran; false # sig-ef-git")}),
            ),
            git("sig-ef-git", vec!["edit-fsmonitor-ran"]),
        ),
        attack(
            "6",
            "write through inherited descriptors (fd 7 a log outside, fd 8 a directory outside)",
            Call::Shell(format!(
                "ls /proc/self/fd; echo leaked >&7 && echo ATTACK-OK fd7; ls /proc/self/fd/8/ >/dev/null 2>&1 && echo ATTACK-OK fd8; touch /proc/self/fd/8/via-fd && echo ATTACK-OK via-fd; cd /proc/self/fd/8 2>/dev/null && touch via-cwd && echo ATTACK-OK via-cwd; {py} -c 'import os; os.write(7, b\"py\"); print(\"ATTACK-OK py fd7\")'"
            )),
            Checks {
                files: vec![f.log.clone()],
                fd_dir: true,
                ..Default::default()
            },
        ),
    ];
    if f.ws == f.home {
        // the workspace is $HOME: its git configuration is the workspace's file too
        list.push(attack(
            "5",
            "git persistence: ~/.gitconfig (write_file)",
            Call::Tool(
                "write_file",
                json!({"path": rel(&f.gitconfig), "content": format!("[core]\n\tfsmonitor = touch {o}/gitconfig-ran; false # sig-wf-gitconfig\n")}),
            ),
            git("sig-wf-gitconfig", vec!["gitconfig-ran"]),
        ));
    }
    list
}

/// After every attack: lazarus's and git's files byte for byte as they were, no policy.
fn everything_as_it_was(f: &EdgeFixture) -> Result<(), String> {
    for (p, _) in &f.originals {
        f.unchanged(p)?;
    }
    if f.approvals.exists() {
        return Err(format!("{} exists", f.approvals.display()));
    }
    Ok(())
}

/// Row 7: under `--sandbox read-only`, what writes the workspace through each tool (each
/// judged by the file it alone would write or change).
pub fn read_only_attacks(_f: &EdgeFixture) -> Vec<EdgeAttack> {
    let wrote = |file: &'static str, was: Option<&'static str>| -> Box<EdgeJudge> {
        Box::new(move |f: &EdgeFixture, seen: &Seen<'_>| {
            ok_marker(seen.result)?;
            let now = std::fs::read_to_string(f.ws.join(file)).ok();
            if now.as_deref() != was {
                return Err(format!("{file} was written: {now:?}"));
            }
            Ok(())
        })
    };
    vec![
        EdgeAttack {
            row: "7",
            name: "create a file (write_file)",
            call: Call::Tool(
                "write_file",
                json!({"path": "ro-created.txt", "content": "written"}),
            ),
            judge: wrote("ro-created.txt", None),
        },
        EdgeAttack {
            row: "7",
            name: "edit a file (edit_file)",
            call: Call::Tool(
                "edit_file",
                json!({"path": "README.md", "old_string": "a project", "new_string": "edited"}),
            ),
            judge: wrote("README.md", Some("a project\n")),
        },
        EdgeAttack {
            row: "7",
            name: "write a file (shell)",
            call: Call::Shell("echo x > ro-shell.txt && echo ATTACK-OK shell".into()),
            judge: wrote("ro-shell.txt", None),
        },
    ]
}

/// The model's one response: every attack as a call (`e0`, `e1`, …).
pub fn calls(list: &[EdgeAttack]) -> lazarus_testkit::ScriptedResponse {
    let mut r = lazarus_testkit::ScriptedResponse::default();
    for (i, a) in list.iter().enumerate() {
        r = match &a.call {
            Call::Shell(c) => r.with_call(format!("e{i}"), "shell", json!({ "command": c })),
            Call::Tool(name, args) => r.with_call(format!("e{i}"), *name, args.clone()),
        };
    }
    r
}

/// Judges every attack from the session's results and the terminal; prints each verdict.
pub fn judge_all(
    f: &EdgeFixture,
    list: &[EdgeAttack],
    result: impl Fn(&str) -> String,
    terminal: &[u8],
) -> Vec<String> {
    let mut broke = Vec::new();
    for (i, a) in list.iter().enumerate() {
        let text = result(&format!("e{i}"));
        // a file tool that did not refuse did what it was asked (whatever came after it)
        let verdict = match &a.call {
            Call::Tool(name, _) if !text.starts_with("error") => {
                Err(format!("{name} did it: {text}"))
            }
            _ => (a.judge)(
                f,
                &Seen {
                    result: &text,
                    terminal,
                },
            ),
        };
        match verdict {
            Ok(()) => {
                eprintln!("attack (row {}) {}: held", a.row, a.name);
                if std::env::var_os("LAZARUS_ATTACK_VERBOSE").is_some() {
                    eprintln!("  result: {text}");
                }
            }
            Err(why) => {
                eprintln!(
                    "attack (row {}) {}: BROKE ({why})\n  result: {text}",
                    a.row, a.name
                );
                broke.push(format!("row {} {}: {why}", a.row, a.name));
            }
        }
    }
    if list.iter().any(|a| a.row != "7") {
        match everything_as_it_was(f) {
            Ok(()) => eprintln!("after them all: lazarus's and git's files as they were: held"),
            Err(why) => {
                eprintln!("after them all: BROKE ({why})");
                broke.push(format!("after them all: {why}"));
            }
        }
    }
    broke
}
