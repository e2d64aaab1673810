//! Scanning candidates in parallel into per-session [`Report`]s.
use crate::classify::{Format, pi};
use crate::discover::{Candidate, Store, sqlite_tail};
use crate::tail::{self, TailOptions};
use crate::verdict::{Classification, SessionMeta, SkipWhy, Verdict};
use regex::Regex;
use serde::Serialize;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

/// What boot-resume did (or would do) about a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A resume was injected.
    Resumed,
    /// A resume would be injected (dry run).
    WouldResume,
    /// Nothing to do.
    None,
    /// Injection was attempted and failed.
    Failed,
    /// The gateway recorded the resume event durably but leaves the session to a resumer
    /// that can honour its world (its workspace, MCP servers, policy): the detail says why
    /// and which command resumes it.
    LeftToOwner,
}

impl Action {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Resumed => "resumed",
            Action::WouldResume => "would_resume",
            Action::None => "none",
            Action::Failed => "failed",
            Action::LeftToOwner => "left_to_owner",
        }
    }
}

/// One line of the report: a session, its verdict and what was done.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Format name (`unknown` when it could not be told).
    pub format: &'static str,
    /// Session id (falls back to the file name); `id` in JSON.
    #[serde(rename = "id")]
    pub session: String,
    /// Session key (OpenClaw).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// Transcript path (or database path).
    pub path: String,
    /// The verdict.
    pub verdict: Verdict,
    /// For `failed`: whether transient.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transient: Option<bool>,
    /// For `skipped`: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<SkipWhy>,
    /// Why this verdict.
    pub reason: String,
    /// The last line was torn and ignored.
    pub torn: bool,
    /// What was done.
    pub action: Action,
    /// Details of the action (error, command, HTTP status).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_detail: Option<String>,
    /// Session working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Last record id (fingerprint part).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_record_id: Option<String>,
    /// File size (fingerprint part).
    pub size: u64,
    /// Modification time in ns since the epoch (fingerprint part); in JSON `mtime`, RFC 3339
    /// UTC.
    #[serde(rename = "mtime", serialize_with = "rfc3339_ns")]
    pub mtime_ns: i64,
    /// Claude Code permission mode of the session, carried into the resume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// For `unknown_format`: the version seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_version: Option<String>,
    /// The call that was running when the session was cut off, as far as it is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_call: Option<String>,
    /// Idempotency key of the injection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

fn rfc3339_ns<S: serde::Serializer>(ns: &i64, s: S) -> Result<S::Ok, S::Error> {
    match jiff::Timestamp::from_nanosecond(i128::from(*ns)) {
        Ok(t) => s.serialize_str(&t.to_string()),
        Err(_) => s.serialize_none(),
    }
}

impl Report {
    /// Sets the verdict and keeps `transient` / `why` in step.
    pub fn set_verdict(&mut self, v: Verdict) {
        self.verdict = v;
        self.transient = v.transient();
        self.why = v.skip_why();
    }

    /// The parsed format, if known.
    pub fn format(&self) -> Option<Format> {
        Format::parse(self.format)
    }
}

/// Scan settings.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Recency window; `None` = no limit.
    pub window: Option<Duration>,
    /// Sessions whose name matches are skipped.
    pub skip_pattern: Option<Regex>,
    /// "Now", for the window.
    pub now: SystemTime,
    /// Tail window sizes.
    pub tail: TailOptions,
    /// Worker threads.
    pub threads: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            window: Some(Duration::from_secs(20 * 60)),
            skip_pattern: None,
            now: SystemTime::now(),
            tail: TailOptions::default(),
            threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(8),
        }
    }
}

/// Scans all candidates in parallel; reports come back in candidate order.
pub fn scan(
    cands: &[Candidate],
    opts: &ScanOptions,
    progress: Option<&indicatif::ProgressBar>,
) -> Vec<Report> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Report)>> = Mutex::new(Vec::with_capacity(cands.len()));
    let threads = opts.threads.clamp(1, 64).min(cands.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut buf = Vec::with_capacity(opts.tail.first_window as usize);
                let mut local = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(c) = cands.get(i) else { break };
                    local.push((i, scan_one(c, opts, &mut buf)));
                    if let Some(pb) = progress {
                        pb.inc(1);
                    }
                }
                if let Ok(mut r) = results.lock() {
                    r.extend(local);
                }
            });
        }
    });
    let mut v = results.into_inner().unwrap_or_else(|e| e.into_inner());
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, r)| r).collect()
}

fn base_report(c: &Candidate) -> Report {
    let name = c.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let session = c
        .index
        .as_ref()
        .and_then(|i| i.session_id.clone())
        .unwrap_or_else(|| name.strip_suffix(".jsonl").unwrap_or(name).to_string());
    Report {
        format: c.format.map_or("unknown", Format::as_str),
        session,
        session_key: c.index.as_ref().and_then(|i| i.session_key.clone()),
        path: c.path.display().to_string(),
        verdict: Verdict::Finished,
        transient: None,
        why: None,
        reason: String::new(),
        torn: false,
        action: Action::None,
        action_detail: None,
        cwd: None,
        last_record_id: None,
        size: 0,
        mtime_ns: 0,
        permission_mode: None,
        seen_version: None,
        interrupted_call: None,
        idempotency_key: None,
    }
}

fn skipped(mut r: Report, why: SkipWhy, reason: impl Into<String>) -> Report {
    r.set_verdict(Verdict::Skipped(why));
    r.reason = reason.into();
    r
}

fn apply(mut r: Report, c: Classification) -> Report {
    r.set_verdict(c.verdict);
    r.reason = c.reason;
    r.torn = c.torn;
    if let Some(s) = c.session_id {
        r.session = s;
    }
    r.cwd = c.cwd;
    r.last_record_id = c.last_record_id;
    r.permission_mode = c.permission_mode;
    r.seen_version = c.seen_version;
    r.interrupted_call = c.interrupted_call;
    r
}

/// What `--skip-pattern` is matched against: the session key (OpenClaw) and the file name,
/// and an OpenCode session's title (its one file holds every session).
fn label(c: &Candidate) -> String {
    let name = c.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut l = match c.index.as_ref().and_then(|i| i.session_key.as_deref()) {
        Some(k) => format!("{k} {name}"),
        None => name.to_string(),
    };
    if let Some(sq) = &c.sqlite
        && let Store::Opencode(s) = &sq.store
        && let Some(t) = &s.title
    {
        l.push(' ');
        l.push_str(t);
    }
    l
}

/// A session file's last activity in ms: its mtime, or the index's `updatedAt` if later.
fn last_activity_ms(c: &Candidate, mtime_ns: i64) -> i64 {
    let ms = mtime_ns / 1_000_000;
    c.index
        .as_ref()
        .and_then(|i| i.updated_at_ms)
        .map_or(ms, |u| ms.max(u))
}

fn outside_window(opts: &ScanOptions, last_ms: i64) -> Option<String> {
    let w = opts.window?;
    let now_ms = opts
        .now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let age = now_ms.saturating_sub(last_ms);
    (age > w.as_millis() as i64).then(|| {
        format!(
            "last activity {} ago, outside the {} window",
            fmt_dur(age),
            fmt_dur(w.as_millis() as i64)
        )
    })
}

/// Formats milliseconds as a short duration (`3h12m`, `45s`).
pub fn fmt_dur(ms: i64) -> String {
    let s = ms / 1000;
    if s >= 86400 {
        format!("{}d{}h", s / 86400, (s % 86400) / 3600)
    } else if s >= 3600 {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Classifies one candidate.
pub fn scan_one(c: &Candidate, opts: &ScanOptions, buf: &mut Vec<u8>) -> Report {
    let mut r = base_report(c);
    if let Some(p) = &c.problem {
        return skipped(r, SkipWhy::Unreadable, p.clone());
    }
    if let Some(re) = &opts.skip_pattern
        && re.is_match(&label(c))
    {
        return skipped(
            r,
            SkipWhy::SkipPattern,
            format!("name matches --skip-pattern {:?}", re.as_str()),
        );
    }
    if let Some(sq) = &c.sqlite {
        r.mtime_ns = sq.updated_at_ms.unwrap_or(0).saturating_mul(1_000_000);
        if let Some(why) = sq.updated_at_ms.and_then(|ms| outside_window(opts, ms)) {
            return skipped(r, SkipWhy::OutsideWindow, why);
        }
        if let Store::Openclaw { too_new: Some(v) } = &sq.store {
            let u = Classification::unknown_format(
                "OpenClaw agent database schema",
                v.to_string(),
                crate::formats::openclaw::KNOWN,
            );
            return apply(r, u);
        }
        let mut limit = 64usize;
        loop {
            let got = match &sq.store {
                Store::Openclaw { .. } => sqlite_tail(sq, limit),
                Store::Opencode(s) => crate::formats::opencode::export_tail(&sq.db, s, limit),
            };
            let (bytes, complete) = match got {
                Ok(x) => x,
                Err(e) => return skipped(r, SkipWhy::Unreadable, e),
            };
            let meta = SessionMeta {
                header: None,
                at_start: complete,
                at_cap: limit >= 4096,
                file_name: "",
                subagent_path: false,
                index: c.index.as_ref(),
                has_subagents: false,
            };
            let cl = match &sq.store {
                Store::Openclaw { .. } => pi::classify_openclaw(&bytes, &meta),
                Store::Opencode(_) => Format::Opencode.classify(&bytes, &meta),
            };
            if cl.need_more && limit < 4096 {
                limit *= 4;
                continue;
            }
            r.size = bytes.len() as u64;
            let r = apply(r, cl);
            return r;
        }
    }
    // A file outside the window is skipped by its metadata (lstat), never opened. Anything
    // that is not plainly a regular file goes on to the open, which names the problem.
    if opts.window.is_some()
        && let Ok(md) = std::fs::symlink_metadata(&c.path)
        && md.file_type().is_file()
    {
        r.size = md.len();
        r.mtime_ns = tail::mtime_ns(md.modified().ok()) as i64;
        if let Some(why) = outside_window(opts, last_activity_ms(c, r.mtime_ns)) {
            return skipped(r, SkipWhy::OutsideWindow, why);
        }
    }
    // One open + fstat per file; the window is checked again on what was opened (the file
    // may have been swapped since the lstat).
    let (file, facts) = match tail::open(&c.path) {
        Ok(x) => x,
        Err(e) => return skipped(r, SkipWhy::Unreadable, e.to_string()),
    };
    r.size = facts.size;
    r.mtime_ns = facts.mtime_ns as i64;
    if let Some(why) = outside_window(opts, last_activity_ms(c, r.mtime_ns)) {
        return skipped(r, SkipWhy::OutsideWindow, why);
    }
    let res = match tail::classify_open(
        &file,
        facts,
        &c.path,
        c.format,
        c.index.as_ref(),
        opts.tail,
        buf,
    ) {
        Ok(x) => x,
        Err(e) => return skipped(r, SkipWhy::Unreadable, e.to_string()),
    };
    r.format = res.format.as_str();
    r.size = res.facts.size;
    r.mtime_ns = res.facts.mtime_ns as i64;
    let mut r = apply(r, res.classification);
    if res.format == Format::GeminiCli && r.cwd.is_none() {
        r.cwd = gemini_project_root(&c.path);
    }
    // Only a session that would be resumed needs to be known live (a finished one is left
    // alone either way): one open fewer per ledger.
    if res.format == Format::Lazarus
        && r.verdict.is_resumable(true)
        && let Some(holder) = live_lock_holder(&c.path)
    {
        let inner = r.verdict;
        r.set_verdict(Verdict::Skipped(SkipWhy::Running));
        r.reason = format!("a live writer holds the session ({holder}); tail: {inner}");
    }
    if res.format == Format::ClaudeCode
        && r.verdict.is_resumable(true)
        && let Some(holder) = claude_live_process(&c.path, &r.session)
    {
        let inner = r.verdict;
        r.set_verdict(Verdict::Skipped(SkipWhy::Running));
        r.reason = format!("Claude Code is still running this session ({holder}); tail: {inner}");
    }
    r
}

/// The project directory of a Gemini CLI recording: `tmp/<project>/.project_root`, beside
/// the `chats/` directory the recording is in (the recording itself names only a hash of it).
pub fn gemini_project_root(recording: &Path) -> Option<String> {
    let project = recording
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "chats"))?
        .parent()?;
    let bytes = crate::fsutil::read_small(&project.join(".project_root"), 64 * 1024).ok()?;
    let root = String::from_utf8(bytes).ok()?;
    let root = root.trim();
    (!root.is_empty()).then(|| root.to_string())
}

/// The start time of a process (field 22 of `/proc/PID/stat`, clock ticks since boot).
fn proc_start(pid: u32) -> Option<String> {
    let stat =
        crate::fsutil::read_small(Path::new(&format!("/proc/{pid}/stat")), 64 * 1024).ok()?;
    let stat = String::from_utf8_lossy(&stat);
    // The command name may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

/// Whether a live Claude Code process owns `session`: Claude Code keeps
/// `<config>/sessions/<pid>.json` (`pid`, `sessionId`, `procStart`) for each running
/// process and leaves it behind when killed, so the pid must be alive with the same start
/// time (a reused pid has another).
pub fn claude_live_process(transcript: &Path, session: &str) -> Option<String> {
    let config = transcript
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "projects"))?
        .parent()?;
    let dir = config.join("sessions");
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(bytes) = crate::fsutil::read_small(&p, 1 << 20) else {
            continue;
        };
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
        let Ok(l) = serde_json::from_slice::<Live>(&bytes) else {
            continue;
        };
        if l.session_id.as_deref() != Some(session) {
            continue;
        }
        let started = proc_start(l.pid);
        if started.is_some() && started == l.proc_start {
            return Some(format!(
                "pid {} ({}), per {}",
                l.pid,
                l.status.as_deref().unwrap_or("status unknown"),
                p.display()
            ));
        }
    }
    None
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
