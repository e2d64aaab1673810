//! OpenClaw's sessions: its `sessions.json` index (older versions) and its agent databases
//! (2026.9: `openclaw-agent.sqlite`), read into candidates, and a session's newest events.
use super::{Candidate, SqliteRef, Store, no_session};
use crate::format::Format;
use crate::sqlite::{self, WaitBudget};
use crate::verdict::{IndexFacts, SkipWhy};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
            hints: Default::default(),
            problem: Some((SkipWhy::Unreadable, msg)),
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
                hints: Default::default(),
                problem: Some((
                    SkipWhy::Unreadable,
                    format!("index entry {key:?} names no sessionId or sessionFile"),
                )),
            });
            continue;
        };
        let problem = (!file.exists()).then(|| {
            (
                SkipWhy::Unreadable,
                format!(
                    "sessions.json entry {key:?} points at missing file {}",
                    file.display()
                ),
            )
        });
        out.push(Candidate {
            format: Some(Format::Openclaw),
            path: file,
            index: Some(facts),
            sqlite: None,
            hints: Default::default(),
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

/// Candidates from an OpenClaw `openclaw-agent.sqlite` (one per session with events); one
/// `unreadable` row when the database cannot be read.
pub fn openclaw_sqlite(db: &Path) -> Vec<Candidate> {
    let budget = WaitBudget::per_database();
    match openclaw_sessions(db, &budget) {
        Ok(c) if c.is_empty() => vec![no_session(Format::Openclaw, db)],
        Ok(c) => c,
        Err(e) => vec![Candidate::unreadable(Format::Openclaw, db, e.to_string())],
    }
}

fn openclaw_sessions(
    db: &Path,
    budget: &Arc<WaitBudget>,
) -> Result<Vec<Candidate>, sqlite::DbError> {
    let c = sqlite::open(db, "OpenClaw", budget)?;
    let ctx = |e: rusqlite::Error| {
        if sqlite::DbError::is_schema_error(&e) {
            sqlite::DbError::Schema {
                program: "OpenClaw",
                path: db.to_path_buf(),
                known: "agent schema up to 23",
                detail: e.to_string(),
            }
        } else {
            sqlite::DbError::sqlite("OpenClaw", db, e, std::time::Duration::ZERO)
        }
    };
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
                budget: budget.clone(),
            }),
            hints: Default::default(),
            problem: None,
        });
    }
    Ok(out)
}

/// The newest `limit` events of a SQLite session, oldest first, as JSONL bytes.
/// Returns the bytes and whether they reach the first event.
pub fn sqlite_tail(r: &SqliteRef, limit: usize) -> Result<(Vec<u8>, bool), String> {
    let ctx =
        |e| sqlite::DbError::sqlite("OpenClaw", &r.db, e, std::time::Duration::ZERO).to_string();
    let c = sqlite::open(&r.db, "OpenClaw", &r.budget).map_err(|e| e.to_string())?;
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
