//! Whether a live process still owns a session: a Lazarus ledger's writer (its `.lock`), or
//! a Claude Code process (its `sessions/<pid>.json`). Asked only of a session that would be
//! resumed (a finished one is left alone either way).
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The start time of a process (field 22 of `/proc/PID/stat`, clock ticks since boot).
fn proc_start(pid: u32) -> Option<String> {
    let stat =
        crate::fsutil::read_small(Path::new(&format!("/proc/{pid}/stat")), 64 * 1024).ok()?;
    let stat = String::from_utf8_lossy(&stat);
    // The command name may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

/// The live Claude Code processes of each Claude Code configuration directory, read once per
/// scan: Claude Code keeps `<config>/sessions/<pid>.json` (`pid`, `sessionId`, `procStart`)
/// for each running process and leaves it behind when killed, so a file counts only when its
/// pid is alive with the same start time (a reused pid has another). The directory was read,
/// with every file in it, once per resumable session before.
#[derive(Debug, Default)]
pub struct ClaudeProcesses {
    /// config directory -> (session id -> who holds it)
    by_config: Mutex<HashMap<PathBuf, Arc<HashMap<String, String>>>>,
}

impl ClaudeProcesses {
    /// The live process that owns `session`, whose transcript is `transcript`
    /// (`<config>/projects/<project>/<session>.jsonl`).
    pub fn holder(&self, transcript: &Path, session: &str) -> Option<String> {
        let config = transcript
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == "projects"))?
            .parent()?;
        let known = self
            .by_config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(config)
            .cloned();
        let live = match known {
            Some(l) => l,
            None => {
                // read outside the lock; two threads may both read it once, harmlessly
                let l = Arc::new(live_claude_sessions(config));
                self.by_config
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(config.to_path_buf(), l.clone());
                l
            }
        };
        live.get(session).cloned()
    }
}

/// The sessions live Claude Code processes of `config` own, each with who owns it.
fn live_claude_sessions(config: &Path) -> HashMap<String, String> {
    #[derive(serde::Deserialize)]
    struct Live {
        pid: u32,
        #[serde(rename = "sessionId", default)]
        session_id: Option<String>,
        #[serde(rename = "procStart", default)]
        proc_start: Option<String>,
        #[serde(default)]
        status: Option<String>,
    }
    let mut out = HashMap::new();
    let dir = config.join("sessions");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(bytes) = crate::fsutil::read_small(&p, 1 << 20) else {
            continue;
        };
        let Ok(l) = serde_json::from_slice::<Live>(&bytes) else {
            continue;
        };
        let Some(session) = l.session_id else {
            continue;
        };
        let started = proc_start(l.pid);
        if started.is_some() && started == l.proc_start {
            out.insert(
                session,
                format!(
                    "pid {} ({}), per {}",
                    l.pid,
                    l.status.as_deref().unwrap_or("status unknown"),
                    p.display()
                ),
            );
        }
    }
    out
}

/// For a Lazarus ledger `<id>.jsonl`, the holder of `<id>.lock` if that process is alive
/// on this host.
pub fn live_lock_holder(ledger: &Path) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Lock {
        pid: i64,
        #[serde(default)]
        host: Option<String>,
        #[serde(default)]
        since: Option<serde_json::Value>,
    }
    let lock = ledger.with_extension("lock");
    let bytes = crate::fsutil::read_small(&lock, 64 * 1024).ok()?;
    let l: Lock = serde_json::from_slice(&bytes).ok()?;
    let here = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    if l.host.as_deref().is_some_and(|h| h != here) {
        return None;
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(l.pid).ok()?)?;
    let alive = match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    };
    alive.then(|| {
        format!(
            "pid {} on {here} since {}",
            l.pid,
            l.since.map(|s| s.to_string()).unwrap_or_else(|| "?".into())
        )
    })
}
