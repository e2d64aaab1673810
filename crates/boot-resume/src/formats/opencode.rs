//! OpenCode (1.18) sessions: rows of one SQLite database in WAL mode,
//! `$XDG_DATA_HOME/opencode/opencode.db` (see docs/boot-resume.md). `session` rows name each
//! session (`version` is the OpenCode that created it, `parent_id` marks a sub-agent's),
//! `message` rows hold each message's JSON (`role`, `finish`, `error`, `time.completed`) and
//! `part` rows its parts (`text`, `reasoning`, `tool` with `state.status`, `step-start`,
//! `step-finish`, `compaction`).
//!
//! The database is opened read-only; SQLite reads the `-wal` file with it, which matters:
//! after a kill every row of the last turn may still be only in the WAL. Nothing here ever
//! writes to it or takes its write lock.
//!
//! For the classifier a session is exported as JSON lines (pure bytes, like every other
//! format): one `session` line, then one `message` line per message, oldest first, each
//! with its parts. The reader turns the same rows into a conversation: user `text` parts are
//! user messages, assistant `text` answers, `reasoning` reasoning, `tool` parts calls whose
//! `completed` / `error` state is their result; `step-*`, `compaction` and other parts are
//! counted as dropped.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::stream::hex;
use super::{Answer, Conversation, Event, Part, ReadError, ReadOptions, Usage};
use crate::format::Format;
use crate::sqlite::{self, DbError, WaitBudget};
use crate::verdict::InterruptedCall;

/// How errors name the program whose database it is.
const PROGRAM: &str = "OpenCode";

/// The OpenCode major versions whose rows this build reads.
pub const KNOWN_MAJOR: &str = "1";

/// Whether an OpenCode version (`1.18.33`) is one this build reads.
pub fn version_known(v: &str) -> bool {
    v.split('.').next() == Some(KNOWN_MAJOR)
}

/// The `session` line of an export.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct SessionLine {
    #[serde(rename = "type")]
    pub ty: String,
    pub id: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub directory: Option<String>,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub time_updated: Option<i64>,
    #[serde(default)]
    pub time_archived: Option<i64>,
}

/// A `message` line of an export: the row's JSON and its parts' JSON, as stored.
#[derive(Deserialize)]
pub struct MessageLine<'a> {
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub id: String,
    #[serde(borrow)]
    pub info: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub parts: Vec<&'a RawValue>,
}

/// The members of a message's JSON that matter.
#[derive(Deserialize, Default, Debug)]
pub struct Info {
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub finish: Option<String>,
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub time: Option<Times>,
    #[serde(rename = "modelID", default)]
    pub model_id: Option<String>,
    #[serde(default)]
    pub summary: Option<Value>,
    #[serde(default)]
    pub tokens: Option<Value>,
    #[serde(default)]
    pub path: Option<Value>,
}

/// `time` of a message or part.
#[derive(Deserialize, Default, Debug)]
pub struct Times {
    #[serde(default)]
    pub created: Option<i64>,
    #[serde(default)]
    pub completed: Option<i64>,
}

/// The members of a part's JSON that matter.
#[derive(Deserialize, Default, Debug)]
pub struct PartData {
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(rename = "callID", default)]
    pub call_id: Option<String>,
    #[serde(default)]
    pub state: Option<ToolState>,
}

/// A tool part's state.
#[derive(Deserialize, Default, Debug)]
pub struct ToolState {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub input: Value,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

impl MessageLine<'_> {
    /// The message's JSON, parsed (default when it does not parse).
    pub fn info(&self) -> Info {
        self.info
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or_default()
    }

    /// The parts' JSON, parsed (parts that do not parse are left out).
    pub fn parts(&self) -> Vec<PartData> {
        self.parts
            .iter()
            .filter_map(|r| serde_json::from_str(r.get()).ok())
            .collect()
    }
}

/// The text of a user message's `text` parts, joined by `\n`.
pub fn user_text(parts: &[PartData]) -> String {
    parts
        .iter()
        .filter(|p| p.ty == "text")
        .filter_map(|p| p.text.as_deref())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tool part that never finished, as the session recorded it: the tool, its input and
/// call id (what a resume message names).
pub fn interrupted_call(p: &PartData) -> InterruptedCall {
    InterruptedCall::new(
        p.tool.as_deref().unwrap_or_default(),
        p.state.as_ref().map(|s| &s.input),
        p.call_id.as_deref(),
    )
}

/// The OpenCode databases under a data directory (or the database itself):
/// `opencode.db` and the channel builds' `opencode-<channel>.db`, found up to 6 directories
/// down (so a home directory or a backup of one can be given too). Directory symlinks are
/// not followed; an entry with a database's name that is not a regular file (a symbolic
/// link, a FIFO, a directory) is listed too, for [`sqlite::open`] to follow or refuse by
/// name.
pub fn databases(source: &Path) -> Vec<PathBuf> {
    if !source.is_dir() {
        return vec![source.to_path_buf()];
    }
    let named = |n: &str| n == "opencode.db" || (n.starts_with("opencode-") && n.ends_with(".db"));
    let mut out = Vec::new();
    let mut stack = vec![(source.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name();
            let n = name.to_string_lossy();
            if named(&n) {
                out.push(e.path());
            } else if ft.is_dir() && depth < 6 {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    out.sort();
    out
}

/// Whether the database has the tables and columns read here: a missing one is a schema
/// this build does not read; any other failure is SQLite's own error.
fn check_schema(c: &rusqlite::Connection, db: &Path) -> Result<(), DbError> {
    for (table, cols) in [
        ("session", "id, version, directory, parent_id, time_updated"),
        ("message", "id, session_id, time_created, data"),
        ("part", "id, message_id, data"),
    ] {
        match c.prepare(&format!("SELECT {cols} FROM {table} LIMIT 0")) {
            Ok(_) => {}
            Err(e) if DbError::is_schema_error(&e) => {
                return Err(DbError::Schema {
                    program: PROGRAM,
                    path: db.to_path_buf(),
                    known: "OpenCode 1.x",
                    detail: format!("table {table} ({cols}): {e}"),
                });
            }
            Err(e) => return Err(DbError::sqlite(PROGRAM, db, e, std::time::Duration::ZERO)),
        }
    }
    Ok(())
}

/// The sessions of a database, waiting for its lock at most what `budget` has left.
pub fn sessions(db: &Path, budget: &WaitBudget) -> Result<Vec<SessionLine>, DbError> {
    let c = sqlite::open(db, PROGRAM, budget)?;
    check_schema(&c, db)?;
    let ctx = |e| DbError::sqlite(PROGRAM, db, e, std::time::Duration::ZERO);
    let mut st = c
        .prepare(
            "SELECT id, version, directory, parent_id, title, time_updated, time_archived FROM session ORDER BY time_updated",
        )
        .map_err(ctx)?;
    let rows = st
        .query_map([], |r| {
            Ok(SessionLine {
                ty: "session".into(),
                id: r.get(0)?,
                version: r.get(1)?,
                directory: r.get(2)?,
                parent_id: r.get(3)?,
                title: r.get(4)?,
                time_updated: r.get(5)?,
                time_archived: r.get(6)?,
            })
        })
        .map_err(ctx)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(ctx)
}

/// The newest `limit` messages of a session with their parts, oldest first, as export
/// lines after the session line. Returns the bytes and whether they reach the first message.
pub fn export_tail(
    db: &Path,
    session: &SessionLine,
    limit: usize,
    budget: &WaitBudget,
) -> Result<(Vec<u8>, bool), DbError> {
    let ctx = |e| DbError::sqlite(PROGRAM, db, e, std::time::Duration::ZERO);
    let c = sqlite::open(db, PROGRAM, budget)?;
    let mut st = c
        .prepare(
            "SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created DESC, id DESC LIMIT ?2",
        )
        .map_err(ctx)?;
    let msgs: Vec<(String, String)> = st
        .query_map(rusqlite::params![session.id, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(ctx)?
        .collect::<Result<_, _>>()
        .map_err(ctx)?;
    let complete = msgs.len() < limit;
    let mut parts_st = c
        .prepare("SELECT data FROM part WHERE message_id = ?1 ORDER BY id")
        .map_err(ctx)?;
    let mut out = serde_json::to_vec(session)
        .map_err(|e| ctx(rusqlite::Error::ToSqlConversionFailure(e.into())))?;
    out.push(b'\n');
    for (id, data) in msgs.iter().rev() {
        let parts: Vec<String> = parts_st
            .query_map([id], |r| r.get(0))
            .map_err(ctx)?
            .collect::<Result<_, _>>()
            .map_err(ctx)?;
        // The stored JSON goes in as it is (RawValue): not re-encoded, so what the
        // classifier sees is what OpenCode wrote. A row that is not JSON becomes null.
        let raw = |s: &str| -> Box<RawValue> { serde_json::from_str(s).unwrap_or_default() };
        let line = serde_json::json!({
            "type": "message",
            "id": id,
            "info": raw(data),
            "parts": parts.iter().map(|p| raw(p)).collect::<Vec<_>>(),
        });
        serde_json::to_writer(&mut out, &line)
            .map_err(|e| ctx(rusqlite::Error::ToSqlConversionFailure(e.into())))?;
        out.push(b'\n');
    }
    Ok((out, complete))
}

/// Reads the session named by `opts.session_key` (an id `ses_…`), or the only session, from
/// a data directory or a database.
pub fn read(source: &Path, opts: &ReadOptions) -> Result<Conversation, ReadError> {
    let dbs = databases(source);
    let sql = |db: &Path, why: String| ReadError::Database {
        path: db.to_path_buf(),
        why,
    };
    let mut known = Vec::new();
    for db in &dbs {
        let budget = WaitBudget::per_database();
        let sessions = sessions(db, &budget).map_err(|e| sql(db, e.to_string()))?;
        let pick = match &opts.session_key {
            Some(k) => sessions.iter().find(|s| &s.id == k).cloned(),
            None if dbs.len() == 1 && sessions.len() == 1 => sessions.first().cloned(),
            None => None,
        };
        if let Some(s) = pick {
            return read_session(db, &s, &budget);
        }
        known.extend(sessions.into_iter().map(|s| s.id));
    }
    if dbs.is_empty() {
        return Err(ReadError::NotThisFormat {
            path: source.to_path_buf(),
            why: "no opencode.db in it: not an OpenCode data directory".into(),
        });
    }
    Err(ReadError::NotThisFormat {
        path: source.to_path_buf(),
        why: match &opts.session_key {
            Some(k) => format!("no OpenCode session {k:?}; it has: {}", known.join(", ")),
            None => format!(
                "it holds {} sessions; name one with --source-session ({})",
                known.len(),
                known.join(", ")
            ),
        },
    })
}

fn read_session(
    db: &Path,
    s: &SessionLine,
    budget: &WaitBudget,
) -> Result<Conversation, ReadError> {
    use sha2::Digest;
    if let Some(v) = s.version.as_deref().filter(|v| !version_known(v)) {
        return Err(ReadError::UnknownVersion {
            path: db.to_path_buf(),
            what: "OpenCode session",
            version: v.to_string(),
            known: "OpenCode 1.x",
        });
    }
    let (bytes, _) =
        export_tail(db, s, usize::MAX >> 1, budget).map_err(|e| ReadError::Database {
            path: db.to_path_buf(),
            why: e.to_string(),
        })?;
    let mut conv = Conversation::new(Format::Opencode, db);
    conv.session_id = Some(s.id.clone());
    conv.cwd = s.directory.clone();
    conv.agent_version = s.version.clone();
    conv.bytes = bytes.len() as u64;
    conv.sha256 = hex(&sha2::Sha256::digest(&bytes));
    for line in bytes.split(|b| *b == b'\n').skip(1) {
        if line.is_empty() {
            continue;
        }
        let Ok(m) = serde_json::from_slice::<MessageLine>(line) else {
            conv.drop_one("unparsable row", "message JSON that does not parse");
            continue;
        };
        message(&mut conv, &m);
    }
    Ok(conv)
}

fn message(conv: &mut Conversation, m: &MessageLine) {
    let info = m.info();
    let parts = m.parts();
    if info.role == "user" {
        for p in parts.iter().filter(|p| p.ty != "text") {
            conv.drop_one(format!("user {} part", p.ty), "not a user message text");
        }
        if parts.iter().any(|p| p.ty == "text" && p.text.is_some()) {
            conv.events.push(Event::User {
                id: Some(m.id.clone()),
                text: user_text(&parts),
                timestamp: None,
            });
        }
        return;
    }
    let mut out = Vec::new();
    let mut results = Vec::new();
    for p in parts {
        match p.ty.as_str() {
            "text" => out.push(Part::Text(p.text.unwrap_or_default())),
            "reasoning" => out.push(Part::Reasoning(p.text.unwrap_or_default())),
            "tool" => {
                let id = p.call_id.clone().unwrap_or_default();
                let state = p.state.unwrap_or_default();
                out.push(Part::Call {
                    id: id.clone(),
                    name: p.tool.unwrap_or_default(),
                    arguments: match &state.input {
                        Value::Null => "{}".into(),
                        v => v.to_string(),
                    },
                });
                match state.status.as_str() {
                    "completed" => results.push(Event::Result {
                        call_id: id,
                        text: state.output.unwrap_or_default(),
                        is_error: false,
                    }),
                    "error" => results.push(Event::Result {
                        call_id: id,
                        text: state.error.unwrap_or_default(),
                        is_error: true,
                    }),
                    _ => conv.drop_one(
                        "unfinished tool call's result",
                        "the call was pending or running when OpenCode stopped",
                    ),
                }
            }
            other => conv.drop_one(format!("{other} part"), "bookkeeping, not conversation"),
        }
    }
    if out.is_empty() {
        conv.drop_one("empty assistant message", "no text and no call was stored");
        return;
    }
    if info.model_id.is_some() {
        conv.model = info.model_id.clone();
    }
    conv.events.push(Event::Answer(Answer {
        source_id: Some(m.id.clone()),
        parts: out,
        model: info.model_id.clone(),
        usage: info.tokens.as_ref().map(|t| Usage {
            input: t.get("input").and_then(Value::as_u64),
            output: t.get("output").and_then(Value::as_u64),
            cached: t
                .get("cache")
                .and_then(|c| c.get("read"))
                .and_then(Value::as_u64),
        }),
        stop_reason: info.finish.clone(),
        timestamp: None,
    }));
    conv.events.extend(results);
}
