//! A private tmux server for tests that need a real terminal (a prompt, a picker): commands
//! run in its window `t`, the test reads the screen and types keys.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A tmux server whose socket lives in a temporary directory (removed with it); killed on
/// drop.
pub struct Tmux {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// `None` when tmux is not installed (then the caller skips); under CI (`CI` set) a
    /// missing tmux fails instead, naming `what` needs it.
    pub fn new(what: &str) -> Option<Tmux> {
        let have = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have {
            let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0");
            assert!(
                !ci,
                "tmux is needed to test {what} in a terminal (.ci/run installs it)"
            );
            eprintln!("\n*** SKIPPED {what}: tmux not installed ***\n");
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        Some(Tmux {
            socket: dir.path().join("tmux.sock"),
            _dir: dir,
        })
    }

    /// Runs tmux with `args` on this server; panics with its stderr when it fails.
    pub fn tmux(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running tmux");
        assert!(
            o.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Starts `command` (a shell command line) in window `t`, 140x30.
    pub fn start(&self, command: &str) {
        self.start_sized(command, 140, 30);
    }

    /// Starts `command` in window `t` of `columns` x `rows`.
    pub fn start_sized(&self, command: &str, columns: u16, rows: u16) {
        let (x, y) = (columns.to_string(), rows.to_string());
        self.tmux(&["new-session", "-d", "-s", "t", "-x", &x, "-y", &y, command]);
    }

    /// Types `text` literally into window `t`.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "t", "-l", text]);
    }

    /// Presses `key` (a tmux key name: `Enter`, `C-c`, `Escape`) in window `t`.
    pub fn press(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "t", key]);
    }

    /// What window `t` shows now.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits (at most 20 s) until the screen shows `text`; the screen otherwise.
    pub fn wait_for(&self, text: &str) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "never saw {text:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// `s` quoted for a POSIX shell.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
