//! Where sessions live: default locations per format, `--source FORMAT:PATH`, OpenClaw's
//! sessions.json index and its SQLite store.
use crate::format::Format;
use crate::sqlite::WaitBudget;
use crate::tail::Hints;
use crate::verdict::{IndexFacts, SkipWhy};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod openclaw;

pub use openclaw::{MAX_INDEX_BYTES, index_facts, openclaw_index, openclaw_sqlite, sqlite_tail};

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
    /// What is left of the database's one bounded wait for its lock, shared by its sessions.
    pub budget: Arc<WaitBudget>,
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
    /// What the directory listing told about the file.
    pub hints: Hints,
    /// Why it is not read, found while discovering (the index points at a missing file, a
    /// database cannot be opened or holds no session): reported as `skipped` with that why.
    pub problem: Option<(SkipWhy, String)>,
}

impl Candidate {
    fn file(format: Option<Format>, path: PathBuf) -> Self {
        Candidate {
            format,
            path,
            index: None,
            sqlite: None,
            hints: Hints::default(),
            problem: None,
        }
    }

    /// A source that cannot be read, as a row of the report (`unreadable`, with why), so a
    /// script reading `--json` sees it.
    pub fn unreadable(format: Format, path: &Path, problem: String) -> Self {
        Candidate::skipped(format, path, SkipWhy::Unreadable, problem)
    }

    /// A source reported as `skipped` for `why` without being read further.
    pub fn skipped(format: Format, path: &Path, why: SkipWhy, reason: String) -> Self {
        Candidate {
            format: Some(format),
            path: path.to_path_buf(),
            index: None,
            sqlite: None,
            hints: Hints::default(),
            problem: Some((why, reason)),
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

/// Candidates from an OpenCode database (one per session); one `unreadable` row when the
/// database cannot be read.
pub fn opencode_sqlite(db: &Path) -> Vec<Candidate> {
    let budget = WaitBudget::per_database();
    let sessions = match crate::formats::opencode::sessions(db, &budget) {
        Ok(s) => s,
        Err(e) => return vec![Candidate::unreadable(Format::Opencode, db, e.to_string())],
    };
    if sessions.is_empty() {
        return vec![no_session(Format::Opencode, db)];
    }
    sessions
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
                budget: budget.clone(),
            }),
            hints: Hints::default(),
            problem: None,
        })
        .collect()
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
    walk_jsonl_listing(dir, out);
}

/// [`walk_jsonl`], also returning what the listings showed of the directories beside the
/// files (Claude Code's `<session>/subagents/`), so no file needs a look of its own.
fn walk_jsonl_listing(dir: &Path, out: &mut Vec<PathBuf>) -> Subdirs {
    walk(
        dir,
        32,
        |name| name != "session-sqlite-import-archive" && name != "cold",
        |_, name| {
            (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst")) && !not_a_transcript(name)
        },
        out,
    )
}

/// What a walk's listings showed of directories: each directory is read once, and a file's
/// sidecar directory (`<dir>/<stem>/subagents/`) is known from them.
#[derive(Debug, Default)]
struct Subdirs {
    /// Directories read.
    read: HashSet<PathBuf>,
    /// Directories that hold a `subagents` directory.
    with_subagents: HashSet<PathBuf>,
    /// Entries that may be directories but were not read (too deep, excluded, a symlink).
    unread: HashSet<PathBuf>,
    /// Files with an entry of their own name (less `.jsonl`) beside them that may be a
    /// directory: only these need a look-up.
    with_sidecar: HashSet<PathBuf>,
}

impl Subdirs {
    /// Whether `<dir>/<stem>/subagents/` exists beside the file `<dir>/<stem>.jsonl`, as far
    /// as the listings tell (`None`: they do not).
    fn subagents_beside(&self, file: &Path) -> Option<bool> {
        if self.with_sidecar.is_empty() || !self.with_sidecar.contains(file) {
            return Some(false);
        }
        let sidecar = file.with_extension("");
        if self.with_subagents.contains(&sidecar) {
            Some(true)
        } else if self.read.contains(&sidecar) || !self.unread.contains(&sidecar) {
            // read without a `subagents` in it, or no such directory in the file's listing
            Some(false)
        } else {
            None
        }
    }
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
) -> Subdirs {
    let mut seen = Subdirs::default();
    let mut subdirs: HashSet<String> = HashSet::new();
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
                if name == "subagents" {
                    seen.with_subagents.insert(d.clone());
                }
                if depth < max_depth && enter(&name) {
                    stack.push((ent.path(), depth + 1));
                } else {
                    seen.unread.insert(ent.path());
                }
                subdirs.insert(name.into_owned());
            } else if keep(&d, &name) {
                files.push(ent.path());
            } else if ft.is_symlink() {
                seen.unread.insert(ent.path());
                subdirs.insert(name.into_owned());
            }
        }
        // by bytes: names in one directory, so this is the path order, without
        // comparing every path's components
        files.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
        // a file with no directory of its own name beside it has no sidecar: known now,
        // without a look-up of its whole path later
        for f in &files {
            let stem = f.file_stem().map(|s| s.to_string_lossy());
            if stem.is_some_and(|s| subdirs.contains(s.as_ref())) {
                seen.with_sidecar.insert(f.clone());
            }
        }
        subdirs.clear();
        out.extend(files);
        seen.read.insert(d);
    }
    seen
}

/// The entries named `name` under `dir` (directory symlinks not followed): whatever they
/// are, so a database that is a symbolic link is followed and one that is a FIFO reported,
/// by whoever opens them.
fn find_named(dir: &Path, name: &str, max_depth: usize, out: &mut Vec<PathBuf>) {
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for ent in rd.flatten() {
            let Ok(ft) = ent.file_type() else { continue };
            if ent.file_name() == name {
                out.push(ent.path());
            } else if ft.is_dir() && depth < max_depth {
                stack.push((ent.path(), depth + 1));
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
                out.extend(opencode_sqlite(&s.path));
            } else if name == "sessions.json" {
                out.extend(openclaw_index(&s.path));
            } else if name.ends_with(".sqlite") {
                out.extend(openclaw_sqlite(&s.path));
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
                out.extend(openclaw_sqlite(db));
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
                out.extend(opencode_sqlite(&db));
            }
            continue;
        }
        let mut files = Vec::new();
        if fmt == Some(Format::GeminiCli) {
            walk_gemini(&s.path, &mut files);
            out.extend(files.into_iter().map(|p| Candidate::file(fmt, p)));
        } else {
            let subdirs = walk_jsonl_listing(&s.path, &mut files);
            out.extend(files.into_iter().map(|p| {
                let hints = Hints {
                    subagents: subdirs.subagents_beside(&p),
                };
                Candidate {
                    hints,
                    ..Candidate::file(fmt, p)
                }
            }));
        }
    }
    (out, problems)
}

/// A database that holds no session (a fresh install, or one whose rows a torn WAL took):
/// one `empty` row, so it is seen.
pub(crate) fn no_session(format: Format, db: &Path) -> Candidate {
    Candidate::skipped(
        format,
        db,
        SkipWhy::Empty,
        "the database holds no session (with the transactions of its -wal that are whole)".into(),
    )
}
