//! Sessions in and out: another agent's conversation (read by `lazarus_boot_resume::formats`)
//! written as a native session (`import`), and a native session written as an ATIF
//! trajectory (`atif`).
//!
//! An import plans every record on a replayed state before anything is written: a source
//! that cannot be read, or a plan that does not replay, writes nothing.

pub mod atif;
mod branches;
mod plan;

use lazarus_boot_resume::formats::{Conversation, Event};
use lazarus_ledger::{FORMAT_VERSION, Header};
use lazarus_session::record::{Dropped, FORMAT, Import, Record};
use lazarus_session::{CreateOptions, SessionId, SessionState, Store};
use serde_json::json;

pub use plan::Counts;
use plan::Plan;

/// Why an import was refused.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(
        "{source_path} was imported already, as session {id} (same SHA-256 {sha256}); continue that one: lazarus run --session {id}"
    )]
    AlreadyImported {
        source_path: String,
        id: String,
        sha256: String,
    },
    #[error("{0}: nothing in it to import (no user message, answer or tool result)")]
    Empty(String),
    #[error(
        "the imported records would not replay ({0}); nothing was written; please report this with the source file"
    )]
    Invalid(String),
    #[error(transparent)]
    Session(#[from] lazarus_session::SessionError),
}

/// What an import wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Imported {
    pub id: String,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    pub source: String,
    pub bytes: u64,
    pub sha256: String,
    pub records: u64,
    pub counts: Counts,
    pub dropped: Vec<Dropped>,
    /// A torn last record was left out, at this byte offset of the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torn_at: Option<u64>,
    /// Sessions imported beside it (sub-agents, branches).
    pub related: Vec<Imported>,
}

/// The session id that already holds a source with this SHA-256, if any.
pub fn imported_already(store: &dyn Store, sha256: &str) -> Result<Option<String>, ImportError> {
    for s in store.list()? {
        let m = s.meta.as_ref().and_then(|m| m.get("import"));
        if m.and_then(|m| m.get("sha256")).and_then(|v| v.as_str()) == Some(sha256) {
            return Ok(Some(s.id.to_string()));
        }
    }
    Ok(None)
}

/// Imports a conversation as a new session (`id`, or a fresh one), its sub-agents as
/// sessions of their own and, when read, its other branches as forks.
pub fn import(
    store: &dyn Store,
    conv: &Conversation,
    id: Option<SessionId>,
) -> Result<Imported, ImportError> {
    let source = conv.source.to_string_lossy().into_owned();
    if let Some(existing) = imported_already(store, &conv.sha256)? {
        return Err(ImportError::AlreadyImported {
            source_path: source,
            id: existing,
            sha256: conv.sha256.clone(),
        });
    }
    if conv.events.is_empty() {
        return Err(ImportError::Empty(source));
    }
    let id = id.unwrap_or_else(SessionId::new_v7);
    // sub-agents first (their ids go into the parent's import record); all planned before
    // anything is written
    let mut subs = Vec::new();
    for (agent_id, sub) in &conv.subagents {
        let sub_id = SessionId::parse(&format!("{id}-agent-{}", short(agent_id)))?;
        if imported_already(store, &sub.sha256)?.is_none() && !sub.events.is_empty() {
            subs.push((sub_id, sub));
        }
    }
    let mut related: Vec<String> = subs.iter().map(|(i, _)| i.to_string()).collect();
    let branch_ids: Vec<SessionId> = (1..=conv.branches.len())
        .map(|n| SessionId::parse(&format!("{id}-branch-{n}")))
        .collect::<Result<_, _>>()?;
    related.extend(branch_ids.iter().map(|b| b.to_string()));
    let main = plan(conv, &id, &related, &conv.events)?;
    let mut sub_plans = Vec::new();
    for (sub_id, sub) in &subs {
        sub_plans.push((sub_id.clone(), *sub, plan(sub, sub_id, &[], &sub.events)?));
    }
    let branch_plans = conv
        .branches
        .iter()
        .zip(&branch_ids)
        .map(|(events, bid)| plan(conv, bid, &[], events))
        .collect::<Result<Vec<_>, _>>()?;
    let main_ends = main.ends.clone();
    let main_state = main.state.clone();
    let mut out = write(store, conv, &id, main)?;
    for (sub_id, sub, p) in sub_plans {
        out.related.push(write(store, sub, &sub_id, p)?);
    }
    for ((events, bid), p) in conv.branches.iter().zip(&branch_ids).zip(branch_plans) {
        let main = branches::Main {
            id: &id,
            events: &conv.events,
            ends: &main_ends,
            state: &main_state,
        };
        out.related
            .push(branches::write_branch(store, conv, &main, events, bid, p)?);
    }
    Ok(out)
}

fn short(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(40)
        .collect()
}

fn header_meta(conv: &Conversation) -> serde_json::Value {
    json!({
        "workspace": conv.cwd,
        "model": conv.model,
        "import": {"agent": conv.format.as_str(), "sha256": conv.sha256},
    })
}

pub(crate) fn plan(
    conv: &Conversation,
    id: &SessionId,
    related: &[String],
    events: &[Event],
) -> Result<Plan, ImportError> {
    let mut header = Header::new(FORMAT, id.as_str());
    header.version = FORMAT_VERSION;
    header.meta = Some(header_meta(conv));
    let mut p = Plan::new(SessionState::new(header));
    let mut dropped: Vec<Dropped> = conv
        .dropped
        .iter()
        .map(|(what, (count, why))| Dropped {
            what: what.clone(),
            count: *count,
            why: why.clone(),
        })
        .collect();
    // the import record's content is only known after planning: plan, then put it first
    let placeholder = import_record(conv, related, dropped.clone());
    p.push(placeholder)?;
    for e in events {
        p.event(e)?;
    }
    p.finish()?;
    if p.counts.orphan_results > 0 {
        dropped.push(Dropped {
            what: "tool result without its call".into(),
            count: p.counts.orphan_results as u64,
            why: "a result for a call the source never made, or made and answered already".into(),
        });
    }
    p.records[0] = import_record(conv, related, dropped);
    Ok(p)
}

fn import_record(conv: &Conversation, related: &[String], dropped: Vec<Dropped>) -> Record {
    Record::Import(Import {
        agent: conv.format.as_str().to_string(),
        agent_version: conv.agent_version.clone(),
        format_version: conv.format_version.clone(),
        source: conv.source.to_string_lossy().into_owned(),
        source_session: conv.session_id.clone(),
        bytes: conv.bytes,
        sha256: conv.sha256.clone(),
        dropped,
        related: related.to_vec(),
    })
}

pub(crate) fn write(
    store: &dyn Store,
    conv: &Conversation,
    id: &SessionId,
    p: Plan,
) -> Result<Imported, ImportError> {
    let mut session = store.create(CreateOptions {
        id: Some(id.clone()),
        meta: Some(header_meta(conv)),
    })?;
    let Record::Import(imp) = p.records[0].clone() else {
        return Err(ImportError::Invalid(
            "the first record is not the import".into(),
        ));
    };
    let n = p.records.len() as u64;
    for rec in p.records {
        session.append(rec)?;
    }
    Ok(Imported {
        id: id.to_string(),
        agent: imp.agent,
        agent_version: imp.agent_version,
        source: imp.source,
        bytes: imp.bytes,
        sha256: imp.sha256,
        records: n,
        counts: p.counts,
        dropped: imp.dropped,
        torn_at: conv.torn_at,
        related: Vec::new(),
    })
}
