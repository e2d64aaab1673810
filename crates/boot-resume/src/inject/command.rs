//! Running a resume command: its own process group, output to a private log, accepted on
//! exit 0 or on the session recording the resume message.
use super::InjectError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::ResumeRequest;
use super::template::Template;

/// How a running command's success can also be seen: the session transcript at `path`
/// grows past `from` with a line holding `needle` (the JSON-escaped start of the message).
#[derive(Debug, Clone)]
pub struct TranscriptAck {
    /// The transcript.
    pub path: PathBuf,
    /// Its size before the command started.
    pub from: u64,
    /// What the new part must contain.
    pub needle: Vec<u8>,
}

impl TranscriptAck {
    /// Watches `path` (its current size is the start) for `message`.
    pub fn new(path: &Path, message: &str) -> TranscriptAck {
        let from = std::fs::metadata(path).map_or(0, |m| m.len());
        // The first words are enough and avoid characters a program may escape its own way.
        let start: String = message
            .chars()
            .take_while(|c| *c != '\n')
            .take(48)
            .collect();
        let json = serde_json::to_string(&start).unwrap_or_default();
        let needle = json
            .trim_start_matches('"')
            .trim_end_matches('"')
            .as_bytes()
            .to_vec();
        TranscriptAck {
            path: path.to_path_buf(),
            from,
            needle,
        }
    }

    /// Whether the session recorded the message since.
    pub fn seen(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let Ok(f) = crate::fsutil::open_regular(&self.path) else {
            return false;
        };
        let Ok(len) = f.metadata().map(|m| m.len()) else {
            return false;
        };
        if len <= self.from || self.needle.is_empty() {
            return false;
        }
        let n = (len - self.from).min(16 << 20) as usize;
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match f.read_at(&mut buf[got..], self.from + got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(_) => return false,
            }
        }
        crate::lines::contains(&buf[..got], &self.needle)
    }
}

fn output_tail(log: &Path) -> String {
    let text = crate::fsutil::read_small(log, 64 << 20).unwrap_or_default();
    String::from_utf8_lossy(&text[text.len().saturating_sub(400)..])
        .trim()
        .to_string()
}

/// Runs `argv` (no shell) in its own process group in `cwd`, output to `log` (0600).
/// Accepted: exit 0; or, with `ack`, the session recording the resume message while the
/// command still runs (it is left running to finish the resumed turn). A non-zero exit is a
/// failure; so is neither happening within `grace`, and the command is then stopped.
pub fn run_command(
    argv: &[String],
    cwd: Option<&Path>,
    log: &Path,
    grace: Duration,
    ack: Option<&TranscriptAck>,
) -> Result<String, InjectError> {
    let program = argv.first().ok_or(InjectError::EmptyTemplate)?.clone();
    let spawn_err = |source| InjectError::Spawn {
        program: program.clone(),
        source,
    };
    if let Some(d) = log.parent() {
        crate::fsutil::private_dir(d).map_err(spawn_err)?;
    }
    let out = crate::fsutil::open_private(log, true).map_err(spawn_err)?;
    let err = out.try_clone().map_err(spawn_err)?;
    let mut cmd = Command::new(&program);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    if let Some(d) = cwd {
        // PWD too: some programs (OpenCode) take the project from it, not from getcwd.
        cmd.current_dir(d).env("PWD", d);
    }
    let mut child = cmd.spawn().map_err(spawn_err)?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(format!("{program} exited 0")),
            Ok(Some(st)) => {
                return Err(InjectError::Exit {
                    program,
                    status: st.to_string(),
                    output: output_tail(log),
                });
            }
            Ok(None) if ack.is_some_and(TranscriptAck::seen) => {
                return Ok(format!(
                    "the session recorded the resume message; {program} left running (pid {}) to finish the turn",
                    child.id()
                ));
            }
            Ok(None) if start.elapsed() >= grace => {
                if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
                }
                std::thread::sleep(Duration::from_millis(200));
                let _ = child.kill();
                let _ = child.wait();
                return Err(InjectError::NotAcknowledged {
                    program,
                    grace,
                    output: output_tail(log),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(source) => return Err(InjectError::Spawn { program, source }),
        }
    }
}

/// Resolves the directory a command runs in.
pub fn command_cwd(t: &Template, r: &ResumeRequest) -> Result<Option<PathBuf>, InjectError> {
    if !t.in_session_cwd {
        return Ok(None);
    }
    match &r.cwd {
        Some(c) if Path::new(c).is_dir() => Ok(Some(PathBuf::from(c))),
        other => Err(InjectError::NoCwd(other.clone().unwrap_or_default())),
    }
}
