//! OpenClaw 2026.9 state (session-formats.md §2.7): one SQLite database per agent,
//! `agents/<agent>/agent/openclaw-agent.sqlite`, whose `transcript_events` rows are pi-shaped
//! entries (read by `formats::pi`), found by session key through `session_nodes`.
//!
//! The database is opened read-only (SQLite reads its `-wal` file too); rows are streamed in
//! `seq` order, each held to the line limit, compressed ones (`event_zstd`) decompressed within
//! it. The bytes hashed are the rows' JSON, each followed by `\n`: the file a JSONL export of
//! the session would be.

use std::path::{Path, PathBuf};

use super::pi::Tree;
use super::stream::{depth_exceeds, hex};
use super::{Conversation, ReadError, ReadOptions};
use crate::format::Format;
use crate::sqlite::{self, WaitBudget};

/// Agent database schema versions this reader knows.
pub const KNOWN: &str = "up to 23";
const SCHEMA_MAX: i64 = 23;

/// The agent database's schema version when it is newer than this build reads.
pub fn schema_too_new(c: &rusqlite::Connection) -> Option<i64> {
    c.query_row(
        "SELECT schema_version FROM schema_meta WHERE role = 'agent' LIMIT 1",
        [],
        |r| r.get::<_, i64>(0),
    )
    .ok()
    .filter(|v| *v > SCHEMA_MAX)
}

/// Whether `path` is a SQLite database file (by its magic bytes).
pub fn is_sqlite(path: &Path) -> bool {
    use std::io::Read;
    if super::stream::check_regular(path).is_err() {
        return false;
    }
    let mut magic = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"SQLite format 3\0"
}

/// The agent databases under a state directory (or the database itself).
pub fn databases(source: &Path) -> Vec<PathBuf> {
    if !source.is_dir() {
        return vec![source.to_path_buf()];
    }
    let agents = if source.join("agents").is_dir() {
        source.join("agents")
    } else {
        source.to_path_buf()
    };
    let mut out: Vec<PathBuf> = std::fs::read_dir(&agents)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("agent").join("openclaw-agent.sqlite"))
        // whatever it is: a symbolic link is followed, anything else refused by name
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    out.sort();
    out
}

/// Reads the session named by `opts.session_key` (a session key or id) from a state
/// directory or an agent database.
pub fn read(source: &Path, opts: &ReadOptions) -> Result<Conversation, ReadError> {
    let dbs = databases(source);
    if dbs.is_empty() {
        return Err(ReadError::NotThisFormat {
            path: source.to_path_buf(),
            why: "no agents/<agent>/agent/openclaw-agent.sqlite under it: not an OpenClaw state directory".into(),
        });
    }
    let mut known = Vec::new();
    for db in &dbs {
        let budget = WaitBudget::per_database();
        let sessions = sessions(db, &budget)?;
        let pick = match &opts.session_key {
            Some(k) => sessions
                .iter()
                .find(|(key, id)| key.as_deref() == Some(k.as_str()) || id == k)
                .cloned(),
            None if dbs.len() == 1 && sessions.len() == 1 => sessions.first().cloned(),
            None => None,
        };
        if let Some((key, id)) = pick {
            return read_session(db, key, &id, opts, &budget);
        }
        known.extend(sessions.into_iter().map(|(k, id)| k.unwrap_or(id)));
    }
    let why = match &opts.session_key {
        Some(k) => format!(
            "no session with key or id {k:?}; it holds: {}",
            known.join(", ")
        ),
        None => format!(
            "name the session with --source-session KEY; it holds: {}",
            known.join(", ")
        ),
    };
    Err(ReadError::Sqlite {
        path: source.to_path_buf(),
        why,
    })
}

/// SQLite's error first, then the database.
fn sql(db: &Path) -> impl Fn(rusqlite::Error) -> ReadError + '_ {
    move |e| ReadError::Database {
        path: db.to_path_buf(),
        why: sqlite::DbError::sqlite("OpenClaw", db, e, std::time::Duration::ZERO).to_string(),
    }
}

/// Opens an agent database for reading (one bounded wait for its lock).
fn open(db: &Path, budget: &WaitBudget) -> Result<rusqlite::Connection, ReadError> {
    sqlite::open(db, "OpenClaw", budget).map_err(|e| ReadError::Database {
        path: db.to_path_buf(),
        why: e.to_string(),
    })
}

/// (session key, session id) of every session with events.
fn sessions(db: &Path, budget: &WaitBudget) -> Result<Vec<(Option<String>, String)>, ReadError> {
    let c = open(db, budget)?;
    let mut st = c
        .prepare(
            "SELECT DISTINCT e.session_id, \
             (SELECT n.session_key FROM session_nodes n WHERE n.current_session_id = e.session_id LIMIT 1) \
             FROM transcript_events e ORDER BY e.session_id",
        )
        .map_err(sql(db))?;
    let rows = st
        .query_map([], |r| {
            Ok((r.get::<_, Option<String>>(1)?, r.get::<_, String>(0)?))
        })
        .map_err(sql(db))?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sql(db))
}

fn read_session(
    db: &Path,
    key: Option<String>,
    id: &str,
    opts: &ReadOptions,
    budget: &WaitBudget,
) -> Result<Conversation, ReadError> {
    let c = open(db, budget)?;
    let mut conv = Conversation::new(Format::Openclaw, db);
    let meta: Option<(i64, Option<String>)> = c
        .query_row(
            "SELECT schema_version, app_version FROM schema_meta WHERE role = 'agent' LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok();
    if let Some((schema, app)) = meta {
        if schema > SCHEMA_MAX {
            return Err(ReadError::UnknownVersion {
                path: db.to_path_buf(),
                what: "OpenClaw agent database schema",
                version: schema.to_string(),
                known: KNOWN,
            });
        }
        conv.format_version = Some(schema.to_string());
        conv.agent_version = app;
    }
    let mut st = c
        .prepare("SELECT seq, event_json, event_zstd FROM transcript_events WHERE session_id = ?1 ORDER BY seq")
        .map_err(sql(db))?;
    let mut rows = st.query([id]).map_err(sql(db))?;
    let schema = conv.format_version.clone();
    let mut tree = Tree::default();
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    let mut bytes = 0u64;
    let limits = &opts.limits;
    while let Some(r) = rows.next().map_err(sql(db))? {
        let seq: i64 = r.get(0).map_err(sql(db))?;
        let json: Vec<u8> = match (r.get_ref(1), r.get_ref(2)) {
            (Ok(rusqlite::types::ValueRef::Text(t)), _) => t.to_vec(),
            (_, Ok(rusqlite::types::ValueRef::Blob(z))) => {
                use std::io::Read;
                let mut out = Vec::new();
                zstd::stream::read::Decoder::new(z)
                    .and_then(|d| d.take(limits.line_bytes as u64 + 1).read_to_end(&mut out))
                    .map_err(|e| ReadError::Sqlite {
                        path: db.to_path_buf(),
                        why: format!(
                            "event {seq} of session {id}: event_zstd does not decompress: {e}"
                        ),
                    })?;
                out
            }
            _ => {
                conv.drop_one(
                    "event without JSON",
                    "a row with neither event_json nor event_zstd",
                );
                continue;
            }
        };
        let bad = |why: String| ReadError::Sqlite {
            path: db.to_path_buf(),
            why: format!("event {seq} of session {id}: {why}"),
        };
        if json.len() > limits.line_bytes {
            return Err(bad(format!(
                "longer than the {}-byte line limit",
                limits.line_bytes
            )));
        }
        if std::str::from_utf8(&json).is_err() || json.contains(&0) {
            return Err(bad("not UTF-8 text".into()));
        }
        if depth_exceeds(&json, limits.depth) {
            return Err(bad(format!(
                "nests JSON deeper than {} levels",
                limits.depth
            )));
        }
        sha2::Digest::update(&mut hasher, &json);
        sha2::Digest::update(&mut hasher, b"\n");
        bytes += json.len() as u64 + 1;
        if bytes > limits.file_bytes {
            return Err(bad(format!(
                "the session passes the {}-byte limit",
                limits.file_bytes
            )));
        }
        tree.line(&mut conv, &json, true, bytes)?;
    }
    conv.bytes = bytes;
    conv.sha256 = hex(&sha2::Digest::finalize(hasher));
    tree.finish(&mut conv, opts.branches);
    // the version that matters is the database's, not the pi header's inside it
    conv.format_version = schema.or(conv.format_version.take());
    conv.session_id = key.or(Some(id.to_string()));
    Ok(conv)
}
