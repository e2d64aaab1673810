//! Where sessions live: default locations per format, `--source FORMAT:PATH`, OpenClaw's
//! sessions.json index and its SQLite store.
use crate::format::Format;
use crate::fsutil::open_ro;
use crate::verdict::IndexFacts;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Which format(s) a source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    /// A known format.
    Known(Format),
    /// Detect per file.
    Auto,
}

/// One `--source FORMAT:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The format.
    pub format: SourceFormat,
    /// A directory (searched recursively) or a file.
    pub path: PathBuf,
}

/// A bad `--source` value.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// No `FORMAT:` prefix or an unknown format name.
    #[error(
        "bad --source {0:?}: expected FORMAT:PATH with FORMAT one of lazarus, openclaw, pi, claude-code, codex, gemini-cli, opencode, auto"
    )]
    Bad(String),
}

impl std::str::FromStr for Source {
    type Err = SourceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (f, p) = s
            .split_once(':')
            .ok_or_else(|| SourceError::Bad(s.to_string()))?;
        let format = if f == "auto" {
            SourceFormat::Auto
        } else {
            SourceFormat::Known(Format::parse(f).ok_or_else(|| SourceError::Bad(s.to_string()))?)
        };
        if p.is_empty() {
            return Err(SourceError::Bad(s.to_string()));
        }
        Ok(Source {
            format,
            path: PathBuf::from(p),
        })
    }
}

/// Where the events of a session kept in SQLite are.
#[derive(Debug, Clone)]
pub struct SqliteRef {
    /// The database file.
    pub db: PathBuf,
    /// The session id (`transcript_events.session_id`, OpenCode `session.id`).
    pub session_id: String,
    /// Newest activity in ms, if known.
    pub updated_at_ms: Option<i64>,
    /// Whose database it is.
    pub store: Store,
}

/// The programs whose sessions live in SQLite.
#[derive(Debug, Clone)]
pub enum Store {
    /// OpenClaw's `openclaw-agent.sqlite` (`transcript_events`); `too_new` is its schema
    /// version when this build does not read it.
    Openclaw { too_new: Option<i64> },
    /// OpenCode's `opencode.db`, with the session's row.
    Opencode(Box<crate::formats::opencode::SessionLine>),
}

/// One session to classify.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The format, or `None` to detect it.
    pub format: Option<Format>,
    /// The transcript path (for SQLite: the database path).
    pub path: PathBuf,
    /// Index facts (OpenClaw sessions.json / SQLite sessions table).
    pub index: Option<IndexFacts>,
    /// Events live in SQLite rather than a file.
    pub sqlite: Option<SqliteRef>,
    /// A problem found while discovering (e.g. the index points at a missing file).
    pub problem: Option<String>,
}

impl Candidate {
    fn file(format: Option<Format>, path: PathBuf) -> Self {
        Candidate {
            format,
            path,
            index: None,
            sqlite: None,
            problem: None,
        }
    }
}

/// Environment lookups, injectable for tests.
pub trait Env {
    /// The value of an environment variable.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

fn home(env: &dyn Env) -> PathBuf {
    env.var("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// `$XDG_STATE_HOME` or `~/.local/state`.
pub fn xdg_state_home(env: &dyn Env) -> PathBuf {
    env.var("XDG_STATE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home(env).join(".local/state"))
}

/// The default source locations of every format, honouring the documented env overrides.
pub fn default_sources(env: &dyn Env) -> Vec<Source> {
    let h = home(env);
    let mut v = Vec::new();
    let lazarus = env
        .var("LAZARUS_SESSION_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| xdg_state_home(env).join("lazarus/sessions"));
    v.push(Source {
        format: SourceFormat::Known(Format::Lazarus),
        path: lazarus,
    });
    match env.var("OPENCLAW_STATE_DIR") {
        Some(d) => v.push(Source {
            format: SourceFormat::Known(Format::Openclaw),
            path: d.into(),
        }),
        None => {
            for d in [".openclaw", ".openclaw-dev", ".clawdbot"] {
                v.push(Source {
                    format: SourceFormat::Known(Format::Openclaw),
                    path: h.join(d),
                });
            }
        }
    }
    let pi = env
        .var("PI_CODING_AGENT_SESSION_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            env.var("PI_CODING_AGENT_DIR")
                .map(|d| PathBuf::from(d).join("sessions"))
        })
        .unwrap_or_else(|| h.join(".pi/agent/sessions"));
    v.push(Source {
        format: SourceFormat::Known(Format::Pi),
        path: pi,
    });
    // a program's home: its variable, else the default under $HOME; then `sub` in it
    let home_of = |var: &str, default: &str, sub: &str| {
        env.var(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| h.join(default))
            .join(sub)
    };
    for (format, var, default, sub) in [
        (
            Format::ClaudeCode,
            "CLAUDE_CONFIG_DIR",
            ".claude",
            "projects",
        ),
        (Format::Codex, "CODEX_HOME", ".codex", "sessions"),
        // Gemini CLI's variable replaces the home directory, not `.gemini`
        (Format::GeminiCli, "GEMINI_CLI_HOME", "", ".gemini"),
    ] {
        v.push(Source {
            format: SourceFormat::Known(format),
            path: home_of(var, default, sub),
        });
    }
    let opencode_data = home_of("XDG_DATA_HOME", ".local/share", "opencode");
    let opencode = match env.var("OPENCODE_DB").map(PathBuf::from) {
        Some(db) if db.is_absolute() => db,
        Some(db) => opencode_data.join(db),
        None => opencode_data,
    };
    v.push(Source {
        format: SourceFormat::Known(Format::Opencode),
        path: opencode,
    });
    v
}

/// Gemini CLI recordings under a directory: `session-*.jsonl` (and the legacy
/// `session-*.json`, reported as an unknown format) in `chats/` directories, and sub-agent
/// recordings in `chats/<parent id>/`. Directory symlinks are not followed.
pub fn walk_gemini(dir: &Path, out: &mut Vec<PathBuf>) {
    let in_chats = |d: &Path| {
        dir.ends_with("chats")
            || d.strip_prefix(dir)
                .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == "chats"))
    };
    walk(
        dir,
        8,
        |_| true,
        |d, name| {
            in_chats(d)
                && (name.ends_with(".jsonl")
                    || (name.starts_with("session-") && name.ends_with(".json")))
        },
        out,
    );
}

/// Candidates from an OpenCode database (one per session).
pub fn opencode_sqlite(db: &Path) -> Result<Vec<Candidate>, String> {
    let sessions = crate::formats::opencode::sessions(db)?;
    Ok(sessions
        .into_iter()
        .map(|s| Candidate {
            format: Some(Format::Opencode),
            path: db.to_path_buf(),
            index: Some(IndexFacts {
                session_id: Some(s.id.clone()),
                spawned: s.parent_id.is_some(),
                updated_at_ms: s.time_updated,
                ..Default::default()
            }),
            sqlite: Some(SqliteRef {
                db: db.to_path_buf(),
                session_id: s.id.clone(),
                updated_at_ms: s.time_updated,
                store: Store::Opencode(Box::new(s)),
            }),
            problem: None,
        })
        .collect())
}

/// File names that are never live transcripts.
fn not_a_transcript(name: &str) -> bool {
    name.contains(".trajectory.")
        || name.contains(".checkpoint.")
        || name.contains(".reset.")
        || name.contains(".deleted.")
        || name.contains(".bak")
        || name == "history.jsonl"
        || name == "session_index.jsonl"
}

/// Recursively lists `.jsonl` files under `dir` without following directory symlinks.
pub fn walk_jsonl(dir: &Path, out: &mut Vec<PathBuf>) {
    walk(
        dir,
        32,
        |name| name != "session-sqlite-import-archive" && name != "cold",
        |_, name| {
            (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst")) && !not_a_transcript(name)
        },
        out,
    );
}

/// The files under `dir` that `keep` (given their directory and name) takes, each directory's
/// sorted, going at most `max_depth` down into the directories `enter` allows. Directory
/// symlinks are not followed; files (and symlinks to them: a loop fails at open, per file)
/// are.
fn walk(
    dir: &Path,
    max_depth: usize,
    enter: impl Fn(&str) -> bool,
    keep: impl Fn(&Path, &str) -> bool,
    out: &mut Vec<PathBuf>,
) {
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut files = Vec::new();
        for ent in rd.flatten() {
            let Ok(ft) = ent.file_type() else { continue };
            let name = ent.file_name();
            let name = name.to_string_lossy();
            if ft.is_dir() {
                if depth < max_depth && enter(&name) {
                    stack.push((ent.path(), depth + 1));
                }
            } else if keep(&d, &name) {
                files.push(ent.path());
            }
        }
        // by bytes: names in one directory, so this is the path order, without
        // comparing every path's components
        files.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
        out.extend(files);
    }
}

fn find_named(dir: &Path, name: &str, max_depth: usize, out: &mut Vec<PathBuf>) {
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for ent in rd.flatten() {
            let Ok(ft) = ent.file_type() else { continue };
            if ft.is_dir() && depth < max_depth {
                stack.push((ent.path(), depth + 1));
            } else if ft.is_file() && ent.file_name() == name {
                out.push(ent.path());
            }
        }
    }
    out.sort();
}

/// Expands sources into candidates. Directories that do not exist are silently empty for
/// default locations (`explicit == false`) and reported otherwise.
pub fn candidates(sources: &[Source], explicit: bool) -> (Vec<Candidate>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for s in sources {
        let fmt = match s.format {
            SourceFormat::Known(f) => Some(f),
            SourceFormat::Auto => None,
        };
        let md = match std::fs::metadata(&s.path) {
            Ok(m) => m,
            Err(e) => {
                if explicit {
                    problems.push(format!("source {}: {e}", s.path.display()));
                }
                continue;
            }
        };
        if md.is_file() {
            let name = s.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if fmt == Some(Format::Opencode)
                || (fmt.is_none() && name.starts_with("opencode") && name.ends_with(".db"))
            {
                match opencode_sqlite(&s.path) {
                    Ok(c) => out.extend(c),
                    Err(e) => problems.push(e),
                }
            } else if name == "sessions.json" {
                out.extend(openclaw_index(&s.path));
            } else if name.ends_with(".sqlite") {
                match openclaw_sqlite(&s.path) {
                    Ok(c) => out.extend(c),
                    Err(e) => problems.push(e),
                }
            } else {
                out.push(Candidate::file(fmt, s.path.clone()));
            }
            continue;
        }
        if fmt == Some(Format::Openclaw) {
            // Choose transcripts through sessions.json, not by globbing; plus SQLite stores.
            let mut idx = Vec::new();
            find_named(&s.path, "sessions.json", 6, &mut idx);
            let mut dbs = Vec::new();
            find_named(&s.path, "openclaw-agent.sqlite", 6, &mut dbs);
            for db in &dbs {
                match openclaw_sqlite(db) {
                    Ok(c) => out.extend(c),
                    Err(e) => problems.push(e),
                }
            }
            if !idx.is_empty() {
                for i in &idx {
                    out.extend(openclaw_index(i));
                }
                continue;
            }
            if !dbs.is_empty() {
                continue;
            }
        }
        if fmt == Some(Format::Opencode) {
            for db in crate::formats::opencode::databases(&s.path) {
                match opencode_sqlite(&db) {
                    Ok(c) => out.extend(c),
                    Err(e) => problems.push(e),
                }
            }
            continue;
        }
        let mut files = Vec::new();
        if fmt == Some(Format::GeminiCli) {
            walk_gemini(&s.path, &mut files);
        } else {
            walk_jsonl(&s.path, &mut files);
        }
        out.extend(files.into_iter().map(|p| Candidate::file(fmt, p)));
    }
    (out, problems)
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// Index facts from one sessions.json entry.
pub fn index_facts(key: &str, e: &Value) -> IndexFacts {
    let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    IndexFacts {
        session_key: Some(key.to_string()),
        session_id: s("sessionId"),
        status: s("status"),
        aborted_last_run: e
            .get("abortedLastRun")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        restart_recovery: truthy(e.get("restartRecoveryRuns"))
            || truthy(e.get("restartRecoveryIdempotencyKey"))
            || truthy(e.get("restartRecoveryDeliveryContext")),
        spawned: e.get("spawnDepth").and_then(Value::as_i64).unwrap_or(0) > 0
            || truthy(e.get("subagentRole"))
            || truthy(e.get("spawnedBy")),
        updated_at_ms: e.get("updatedAt").and_then(Value::as_i64),
        created_via: e
            .get("createdVia")
            .and_then(Value::as_str)
            .map(str::to_string),
        foreign_owned: false,
        sqlite: false,
    }
}

pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Candidates from an OpenClaw `sessions.json`. An unreadable index yields one candidate
/// carrying the problem, so it shows up in the report.
pub fn openclaw_index(path: &Path) -> Vec<Candidate> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let bad = |msg: String| {
        vec![Candidate {
            format: Some(Format::Openclaw),
            path: path.to_path_buf(),
            index: None,
            sqlite: None,
            problem: Some(msg),
        }]
    };
    let bytes = match crate::fsutil::read_small(path, MAX_INDEX_BYTES) {
        Ok(b) => b,
        Err(e) => return bad(format!("cannot read index {}: {e}", path.display())),
    };
    let v: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return bad(format!("index {} is not valid JSON: {e}", path.display())),
    };
    let Some(map) = v.as_object() else {
        return bad(format!("index {} is not a JSON object", path.display()));
    };
    let mut out = Vec::new();
    for (key, e) in map {
        let facts = index_facts(key, e);
        let file = e
            .get("sessionFile")
            .and_then(Value::as_str)
            .map(|f| {
                let p = PathBuf::from(f);
                if p.is_absolute() { p } else { dir.join(p) }
            })
            .or_else(|| {
                facts
                    .session_id
                    .as_ref()
                    .map(|id| dir.join(format!("{id}.jsonl")))
            });
        let Some(file) = file else {
            out.push(Candidate {
                format: Some(Format::Openclaw),
                path: path.to_path_buf(),
                index: Some(facts),
                sqlite: None,
                problem: Some(format!(
                    "index entry {key:?} names no sessionId or sessionFile"
                )),
            });
            continue;
        };
        let problem = (!file.exists()).then(|| {
            format!(
                "sessions.json entry {key:?} points at missing file {}",
                file.display()
            )
        });
        out.push(Candidate {
            format: Some(Format::Openclaw),
            path: file,
            index: Some(facts),
            sqlite: None,
            problem,
        });
    }
    out
}

fn ms_of(v: rusqlite::types::ValueRef<'_>) -> Option<i64> {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Integer(i) => Some(if i > 100_000_000_000 { i } else { i * 1000 }),
        ValueRef::Real(f) => Some(if f > 1e11 {
            f as i64
        } else {
            (f * 1000.0) as i64
        }),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_millisecond()),
        _ => None,
    }
}

/// One row's facts from `session_nodes` (schema v23): the node's session key, its
/// `status` column and its `entry_json` (status, createdVia, spawn fields, recovery markers).
fn node_facts(key: String, id: String, status: Option<String>, entry: Option<&str>) -> IndexFacts {
    let e: Value = entry
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or(Value::Null);
    let mut f = index_facts(&key, &e);
    f.session_id = Some(id);
    if f.status.is_none() {
        f.status = status;
    }
    f.created_via = e
        .get("createdVia")
        .and_then(Value::as_str)
        .map(str::to_string);
    f
}

/// Session facts of an OpenClaw agent database, by session id: `session_nodes` names the
/// current session of each key, `session_windows` every session (older ones included) with
/// its key, status and ownership.
fn openclaw_session_facts(
    c: &rusqlite::Connection,
) -> std::collections::HashMap<String, IndexFacts> {
    let mut facts: std::collections::HashMap<String, IndexFacts> = Default::default();
    if let Ok(mut st) = c.prepare(
        "SELECT session_key, current_session_id, status, entry_json, spawned_by, parent_session_key FROM session_nodes",
    ) && let Ok(mut rows) = st.query([])
    {
        while let Ok(Some(r)) = rows.next() {
            let text = |i| r.get::<_, Option<String>>(i).ok().flatten();
            let (Some(key), Some(id)) = (text(0), text(1)) else {
                continue;
            };
            let mut f = node_facts(key, id.clone(), text(2), text(3).as_deref());
            f.spawned |= text(4).is_some() || text(5).is_some();
            facts.insert(id, f);
        }
    }
    if let Ok(mut st) = c.prepare(
        "SELECT session_id, session_key, status, acp_owned, plugin_owner_id, spawned_by, parent_session_key FROM session_windows",
    ) && let Ok(mut rows) = st.query([])
    {
        while let Ok(Some(r)) = rows.next() {
            let text = |i| r.get::<_, Option<String>>(i).ok().flatten();
            let Some(id) = text(0) else { continue };
            let f = facts.entry(id.clone()).or_insert_with(|| IndexFacts {
                session_id: Some(id),
                ..Default::default()
            });
            if f.session_key.is_none() {
                f.session_key = text(1);
            }
            if f.status.is_none() {
                f.status = text(2);
            }
            f.foreign_owned |= r.get::<_, Option<i64>>(3).ok().flatten().unwrap_or(0) != 0
                || text(4).is_some();
            f.spawned |= text(5).is_some() || text(6).is_some();
        }
    }
    facts
}

/// Candidates from an OpenClaw `openclaw-agent.sqlite` (one per session with events).
pub fn openclaw_sqlite(db: &Path) -> Result<Vec<Candidate>, String> {
    let ctx = |e: rusqlite::Error| format!("OpenClaw database {}: {e}", db.display());
    let c = open_ro(db).map_err(ctx)?;
    let too_new = crate::formats::openclaw::schema_too_new(&c);
    let facts = openclaw_session_facts(&c);
    let mut st = c
        .prepare("SELECT session_id, MAX(created_at) FROM transcript_events GROUP BY session_id")
        .map_err(ctx)?;
    let mut rows = st.query([]).map_err(ctx)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(ctx)? {
        let Ok(id) = r.get::<_, String>(0) else {
            continue;
        };
        let updated = r.get_ref(1).ok().and_then(ms_of);
        let mut f = facts.get(&id).cloned().unwrap_or_else(|| IndexFacts {
            session_id: Some(id.clone()),
            ..Default::default()
        });
        f.updated_at_ms = updated;
        f.sqlite = true;
        out.push(Candidate {
            format: Some(Format::Openclaw),
            path: db.to_path_buf(),
            index: Some(f),
            sqlite: Some(SqliteRef {
                db: db.to_path_buf(),
                session_id: id,
                updated_at_ms: updated,
                store: Store::Openclaw { too_new },
            }),
            problem: None,
        });
    }
    Ok(out)
}

/// The newest `limit` events of a SQLite session, oldest first, as JSONL bytes.
/// Returns the bytes and whether they reach the first event.
pub fn sqlite_tail(r: &SqliteRef, limit: usize) -> Result<(Vec<u8>, bool), String> {
    let ctx = |e: rusqlite::Error| format!("OpenClaw database {}: {e}", r.db.display());
    let c = open_ro(&r.db).map_err(ctx)?;
    let mut st = c
        .prepare("SELECT event_json FROM transcript_events WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2")
        .map_err(ctx)?;
    let mut rows = st
        .query(rusqlite::params![r.session_id, limit as i64])
        .map_err(ctx)?;
    let mut evs: Vec<Vec<u8>> = Vec::new();
    let mut compressed = 0usize;
    while let Some(row) = rows.next().map_err(ctx)? {
        match row.get_ref(0).map_err(ctx)? {
            rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                evs.push(t.to_vec())
            }
            _ => compressed += 1,
        }
    }
    if evs.is_empty() && compressed > 0 {
        return Err(format!(
            "OpenClaw database {}: session {} stores only compressed events (event_zstd), which boot-resume does not read",
            r.db.display(),
            r.session_id
        ));
    }
    let complete = evs.len() + compressed < limit;
    let mut out = Vec::new();
    for e in evs.iter().rev() {
        out.extend_from_slice(e);
        out.push(b'\n');
    }
    Ok((out, complete))
}
