//! `sessions list` (filters, the table) and `sessions tree` (the fork tree).

use std::collections::HashMap;
use std::io::Write;

use anyhow::{Context, Result};
use lazarus_session::{SessionId, SessionSummary, Store};
use serde_json::json;

use super::ListArgs;
use crate::fmt::{ago, fit, short_path};
use crate::term::escape;

pub(super) fn list(
    store: &dyn Store,
    f: &ListArgs,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let workspace = match &f.workspace {
        Some(w) => Some(
            w.canonicalize()
                .with_context(|| format!("--workspace {}", w.display()))?
                .to_string_lossy()
                .into_owned(),
        ),
        None => None,
    };
    let needle = f.search.as_ref().map(|s| s.to_lowercase());
    let mut list: Vec<SessionSummary> = store
        .list()?
        .into_iter()
        .filter(|s| f.status.is_empty() || f.status.contains(&s.status))
        .filter(|s| workspace.is_none() || s.workspace == workspace)
        .filter(|s| {
            needle.as_deref().is_none_or(|n| {
                s.id.to_lowercase().contains(n)
                    || s.title
                        .as_deref()
                        .is_some_and(|t| t.to_lowercase().contains(n))
                    || s.workspace
                        .as_deref()
                        .is_some_and(|w| w.to_lowercase().contains(n))
            })
        })
        .collect();
    // Newest activity first; RFC 3339 UTC with fixed precision sorts as text. Unreadable
    // sessions (no time) last, by id.
    list.sort_by_cached_key(|s| {
        (
            std::cmp::Reverse(lazarus_session::store::time_sort_key(&s.updated_at)),
            s.id.clone(),
        )
    });
    // why a session is left to its owner, and the command that resumes it (its record)
    let left: HashMap<&str, lazarus_session::record::NeedsOwner> = list
        .iter()
        .filter(|s| s.status == lazarus_session::Status::NeedsOwner)
        .filter_map(|s| {
            let st = store.load(&s.id).ok()?;
            Some((s.id.as_str(), st.needs_owner?.1))
        })
        .collect();
    if json {
        for s in &list {
            match left.get(s.id.as_str()) {
                Some(n) => {
                    let mut v = serde_json::to_value(s)?;
                    v["needs_owner"] =
                        json!({"by": n.by, "reason": n.reason, "resume_with": n.resume_with});
                    serde_json::to_writer(&mut *out, &v)?;
                }
                None => serde_json::to_writer(&mut *out, s)?,
            }
            out.write_all(b"\n")?;
        }
    } else {
        print_table(out, &list)?;
        for s in &list {
            if let Some(n) = left.get(s.id.as_str()) {
                writeln!(
                    out,
                    "{}: left to its owner by {}: {}\n  resume it in its world with: {}",
                    s.id,
                    escape(&n.by),
                    escape(&n.reason),
                    escape(&n.resume_with)
                )?;
            }
        }
    }
    // The process ends after this command: freeing 10⁵ summaries one by one would only make
    // the listing wait (tens of milliseconds); the operating system takes the memory back.
    std::mem::forget(list);
    Ok(())
}

fn print_table(out: &mut impl Write, list: &[SessionSummary]) -> Result<()> {
    let id_w = list
        .iter()
        .map(|s| s.id.len())
        .max()
        .unwrap_or(2)
        .clamp(2, 36);
    writeln!(
        out,
        "{:<id_w$}  {:<40}  {:<17}  {:<28}  ACTIVE",
        "ID", "TITLE", "STATUS", "WORKSPACE"
    )?;
    for s in list {
        let title = match (&s.title, &s.error) {
            (_, Some(e)) => format!("({})", e),
            (Some(t), None) => t.clone(),
            (None, None) => "-".into(),
        };
        let ws = s.workspace.as_deref().map(short_path).unwrap_or("-".into());
        writeln!(
            out,
            "{:<id_w$}  {:<40}  {:<17}  {:<28}  {}",
            fit(&s.id, id_w, false),
            fit(&escape(&title), 40, false),
            // messages accepted into its inbox, not yet recorded
            match s.waiting {
                0 => s.status.to_string(),
                n => format!("{} (+{n})", s.status),
            },
            fit(&escape(&ws), 28, true),
            ago(&s.updated_at),
        )?;
    }
    if list.is_empty() {
        writeln!(out, "(no sessions)")?;
    }
    if list.iter().any(|s| s.waiting > 0) {
        writeln!(
            out,
            "(+N): N messages waiting in the session's inbox, accepted and not yet recorded; the next writer records them first"
        )?;
    }
    Ok(())
}

/// The fork tree: each session under its parent, children in listing order. Iterative (a
/// fork chain of any depth) and O(n log n) (children indexed by parent once).
pub(super) fn tree(
    store: &dyn Store,
    id: Option<&SessionId>,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let list = store.list()?;
    let index: HashMap<&str, usize> = list
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, s) in list.iter().enumerate() {
        if let Some(p) = s.parent.as_deref().filter(|p| index.contains_key(p)) {
            children.entry(p).or_default().push(i);
        }
    }
    let roots: Vec<usize> = match id {
        Some(id) => {
            let root = store
                .lineage(id)?
                .last()
                .cloned()
                .unwrap_or_else(|| id.clone());
            index.get(root.as_str()).copied().into_iter().collect()
        }
        // A session whose parent is gone is a root of its own.
        None => (0..list.len())
            .filter(|&i| {
                list[i]
                    .parent
                    .as_deref()
                    .is_none_or(|p| !index.contains_key(p))
            })
            .collect(),
    };
    // Depth-first, children in order: push them reversed.
    let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|r| (r, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        let s = &list[i];
        if json {
            writeln!(
                out,
                "{}",
                json!({"id": s.id, "parent": s.parent, "depth": depth, "status": s.status, "records": s.records})
            )?;
        } else {
            writeln!(
                out,
                "{}{} ({}, {} records)",
                "  ".repeat(depth),
                s.id,
                s.status,
                s.records
            )?;
        }
        if let Some(c) = children.get(s.id.as_str()) {
            stack.extend(c.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    Ok(())
}
