//! `sessions list` (filters, the table) and `sessions tree` (the fork tree).

use std::collections::HashMap;
use std::io::Write;

use anyhow::{Context, Result};
use lazarus_session::{ListOrder, ListQuery, SessionId, Store, SummaryView};
use serde_json::json;

use super::ListArgs;
use crate::fmt::{ago, fit, short_path};
use crate::term::escape;

/// Rows the table shows when no `--limit` is given.
pub(super) const TABLE_ROWS: usize = 50;

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
    let limit = match (f.limit, f.all || json) {
        (Some(n), _) => Some(n),
        (None, true) => None,
        (None, false) => Some(TABLE_ROWS),
    };
    // Newest activity first; RFC 3339 UTC with fixed precision sorts as text. Unreadable
    // sessions (no time) last, by id. The store builds only the rows shown.
    let q = ListQuery {
        statuses: f.status.clone(),
        workspace,
        search: f.search.clone(),
        order: ListOrder::Activity,
        offset: f.offset,
        limit,
    };
    let mut failed: Option<anyhow::Error> = None;
    let mut shown = 0usize;
    let mut table = Table::default();
    let counts = store.list_rows(&q, &mut |s| {
        if failed.is_some() {
            return;
        }
        shown += 1;
        // why a session is left to its owner, and the command that resumes it (its record)
        let left = (s.status == lazarus_session::Status::NeedsOwner)
            .then(|| {
                let id = SessionId::parse(s.id).ok()?;
                store.load(&id).ok()?.needs_owner.map(|n| n.1)
            })
            .flatten();
        let done = if json {
            write_json(&mut *out, s, left.as_ref())
        } else {
            table.add(s, left);
            Ok(())
        };
        if let Err(e) = done {
            failed = Some(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if !json {
        table.print(out)?;
        let first = q.offset.min(counts.matched);
        if shown < counts.matched {
            let of = if counts.matched == counts.total {
                format!("{} sessions", counts.total)
            } else {
                format!("{} matching ({} in all)", counts.matched, counts.total)
            };
            let next = if first + shown < counts.matched {
                format!("--offset {} for the next ones, ", first + shown)
            } else {
                String::new()
            };
            if shown == 0 {
                writeln!(
                    out,
                    "(showing none of {of}: --offset {} is past the last one)",
                    q.offset
                )?;
            } else {
                writeln!(
                    out,
                    "(showing {}–{} of {of}; {next}--all for every one)",
                    first + 1,
                    first + shown
                )?;
            }
        }
    }
    Ok(())
}

fn write_json(
    out: &mut impl Write,
    s: &SummaryView<'_>,
    left: Option<&lazarus_session::record::NeedsOwner>,
) -> Result<()> {
    match left {
        Some(n) => {
            let mut v = serde_json::to_value(s)?;
            v["needs_owner"] =
                json!({"by": n.by, "reason": n.reason, "resume_with": n.resume_with});
            serde_json::to_writer(&mut *out, &v)?;
        }
        None => serde_json::to_writer(&mut *out, s)?,
    }
    out.write_all(b"\n")?;
    Ok(())
}

/// The table's rows, built as the store hands them out (a page: few).
#[derive(Default)]
struct Table {
    rows: Vec<[String; 5]>,
    waiting: bool,
    left: Vec<(String, lazarus_session::record::NeedsOwner)>,
}

impl Table {
    fn add(&mut self, s: &SummaryView<'_>, left: Option<lazarus_session::record::NeedsOwner>) {
        let title = match (&s.title, s.error) {
            (_, Some(e)) => format!("({})", e),
            (Some(t), None) => t.to_string(),
            (None, None) => "-".into(),
        };
        let ws = s.workspace.map(short_path).unwrap_or("-".into());
        self.waiting |= s.waiting > 0;
        self.rows.push([
            s.id.to_string(),
            escape(&title).into_owned(),
            // messages accepted into its inbox, not yet recorded
            match s.waiting {
                0 => s.status.to_string(),
                n => format!("{} (+{n})", s.status),
            },
            escape(&ws).into_owned(),
            ago(s.updated_at),
        ]);
        if let Some(n) = left {
            self.left.push((s.id.to_string(), n));
        }
    }

    fn print(&self, out: &mut impl Write) -> Result<()> {
        let id_w = self
            .rows
            .iter()
            .map(|r| r[0].len())
            .max()
            .unwrap_or(2)
            .clamp(2, 36);
        writeln!(
            out,
            "{:<id_w$}  {:<40}  {:<17}  {:<28}  ACTIVE",
            "ID", "TITLE", "STATUS", "WORKSPACE"
        )?;
        for [id, title, status, ws, active] in &self.rows {
            writeln!(
                out,
                "{:<id_w$}  {:<40}  {:<17}  {:<28}  {}",
                fit(id, id_w, false),
                fit(title, 40, false),
                status,
                fit(ws, 28, true),
                active,
            )?;
        }
        if self.rows.is_empty() {
            writeln!(out, "(no sessions)")?;
        }
        if self.waiting {
            writeln!(
                out,
                "(+N): N messages waiting in the session's inbox, accepted and not yet recorded; the next writer records them first"
            )?;
        }
        for (id, n) in &self.left {
            writeln!(
                out,
                "{}: left to its owner by {}: {}\n  resume it in its world with: {}",
                id,
                escape(&n.by),
                escape(&n.reason),
                escape(&n.resume_with)
            )?;
        }
        Ok(())
    }
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
