//! `sessions rm` and `sessions prune`: removing sessions, never one a writer holds, and by
//! default never one that still owes work.

use std::io::Write;

use anyhow::{Context, Result};
use lazarus_session::{LocalStore, SessionId, Status, Store};
use serde_json::json;

use crate::fmt::ago;
use crate::term::escape;

pub(super) fn remove(
    local: &LocalStore,
    ids: &[SessionId],
    force: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let mut refused = 0;
    for id in ids {
        // The one status rule (as `list` says it), and what waits in its inbox.
        let result: Result<()> = match local.summary(id) {
            Err(e @ lazarus_session::SessionError::NotFound { .. }) => Err(e.into()),
            Ok(s) if s.status == Status::Running => Err(anyhow::anyhow!(
                "session {id} is in use by {} (running); stop that process first",
                s.holder
                    .as_ref()
                    .map_or("a live writer".into(), |h| h.to_string())
            )),
            Ok(s) if s.status == Status::Corrupt && !force => Err(anyhow::anyhow!(
                "session {id} cannot be read ({}); add --force to remove it anyway",
                s.error.unwrap_or_default()
            )),
            Ok(s) if s.owes_work() && !force => Err(anyhow::anyhow!(
                "session {id} is {}{} (it owes work that removing it would lose); resume it with `lazarus run --session {id}`, or add --force",
                s.status,
                if s.waiting > 0 {
                    format!(" with {} message(s) waiting in its inbox", s.waiting)
                } else {
                    String::new()
                }
            )),
            Err(e) if !force => Err(anyhow::anyhow!(
                "session {id} cannot be read ({e}); add --force to remove it anyway"
            )),
            _ => local.remove(id).map_err(Into::into),
        };
        match result {
            Ok(()) if json => {
                writeln!(out, "{}", json!({"id": id, "removed": true, "error": null}))?
            }
            Ok(()) => writeln!(out, "removed {id}")?,
            Err(e) => {
                refused += 1;
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": id, "removed": false, "error": format!("{e:#}")})
                    )?;
                } else {
                    eprintln!("error: {}", escape(&format!("{e:#}")));
                }
            }
        }
    }
    Ok(if refused == 0 { 0 } else { 1 })
}

pub(super) fn prune(
    local: &LocalStore,
    older_than: std::time::Duration,
    statuses: &[Status],
    dry_run: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let statuses: Vec<Status> = if statuses.is_empty() {
        vec![Status::New, Status::Idle, Status::Failed]
    } else {
        statuses.to_vec()
    };
    let cutoff = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::try_from(older_than).context("--older-than")?)
        .context("--older-than reaches before the calendar")?;
    let mut removed = 0usize;
    let mut bytes = 0u64;
    let mut failed = 0usize;
    for s in local.list()? {
        let Ok(updated) = s.updated_at.parse::<jiff::Timestamp>() else {
            continue;
        };
        // sessions that owe work are kept, whatever --status says about their log: so are
        // those with messages waiting in their inbox
        if updated >= cutoff
            || !statuses.contains(&s.status)
            || s.status == Status::Running
            || s.waiting > 0
        {
            continue;
        }
        let result = if dry_run { Ok(()) } else { local.remove(&s.id) };
        match result {
            Ok(()) => {
                removed += 1;
                bytes += s.bytes;
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": s.id, "status": s.status, "updated_at": s.updated_at, "bytes": s.bytes, "removed": !dry_run, "error": null})
                    )?;
                } else {
                    writeln!(
                        out,
                        "{} {} ({}, last active {})",
                        if dry_run { "would remove" } else { "removed" },
                        s.id,
                        s.status,
                        ago(&s.updated_at)
                    )?;
                }
            }
            Err(e) => {
                failed += 1;
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": s.id, "removed": false, "error": e.to_string()})
                    )?;
                } else {
                    eprintln!("error: {}", escape(&e.to_string()));
                }
            }
        }
    }
    if !json {
        writeln!(
            out,
            "{} {removed} sessions ({bytes} bytes) last active more than {} ago{}",
            if dry_run { "would remove" } else { "removed" },
            humantime::format_duration(older_than),
            if failed > 0 {
                format!("; {failed} could not be removed")
            } else {
                String::new()
            }
        )?;
    }
    Ok(if failed == 0 { 0 } else { 1 })
}
