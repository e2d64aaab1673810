//! `lazarus sessions …`: create, send, list, show, verify, repair, fork, tree.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lazarus_ledger::{Problem, verify_file};
use lazarus_session::{ContextEntry, CreateOptions, LocalStore, SessionId, SessionSummary, Store};
use serde_json::json;

use crate::args::StoreArgs;
use crate::term::{escape, escape_text};

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON (one object per line) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: SessionsCommand,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Create an empty session.
    Create {
        /// Session id [default: a new UUID v7]
        #[arg(long)]
        id: Option<SessionId>,
    },
    /// Durably queue an external input; prints its seq (the original one for a duplicate id).
    Send {
        id: SessionId,
        /// Message id for deduplication [default: derived from the text]
        #[arg(long)]
        message_id: Option<String>,
        text: String,
    },
    /// List sessions with their status (from each file's tail).
    List,
    /// Show a session's transcript.
    Show { id: SessionId },
    /// Check every line of a session (or all); exit 1 if problems were found.
    Verify {
        id: Option<SessionId>,
        #[arg(long, conflicts_with = "id")]
        all: bool,
    },
    /// Cut a session back to its last good record; removed bytes are saved beside the file.
    Repair { id: SessionId },
    /// Create a new session from ID holding everything up to the end of turn N.
    Fork {
        id: SessionId,
        #[arg(long)]
        at_turn: u64,
        /// Id of the new session [default: a new UUID v7]
        #[arg(long = "id")]
        new_id: Option<SessionId>,
    },
    /// Show the fork tree (of one session's family, or of all).
    Tree { id: Option<SessionId> },
    /// Write a session's exact JSON Lines to stdout (or --output FILE).
    Export {
        id: SessionId,
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Create a session from exported JSON Lines (checked line by line; never overwrites).
    Import { file: PathBuf },
}

pub fn run(args: SessionsArgs) -> Result<i32> {
    let store = args.store.open()?;
    let store = &*store;
    let json = args.json;
    let mut out = std::io::stdout().lock();
    match args.command {
        SessionsCommand::Create { id } => {
            let s = store.create(CreateOptions { id, meta: None })?;
            if json {
                writeln!(out, "{}", json!({"id": s.id(), "location": s.location()}))?;
            } else {
                writeln!(out, "created session {} at {}", s.id(), s.location())?;
            }
        }
        SessionsCommand::Send {
            id,
            message_id,
            text,
        } => {
            let message_id = message_id
                .unwrap_or_else(|| lazarus_session::record::derived_input_id(&id, "user", &text));
            let mut s = store.open(&id)?;
            let ack = s.append_input(&message_id, "user", &text)?;
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": id, "message_id": message_id, "seq": ack.seq, "duplicate": ack.duplicate})
                )?;
            } else if ack.duplicate {
                writeln!(
                    out,
                    "{} (duplicate of message {message_id}; nothing written)",
                    ack.seq
                )?;
            } else {
                writeln!(out, "{}", ack.seq)?;
            }
        }
        SessionsCommand::List => {
            let list = store.list()?;
            let mut out = std::io::BufWriter::new(&mut out);
            if json {
                for s in &list {
                    writeln!(out, "{}", serde_json::to_string(s)?)?;
                }
            } else {
                print_table(&mut out, &list)?;
            }
            out.flush()?;
        }
        SessionsCommand::Show { id } => show(store, &id, json, &mut out)?,
        SessionsCommand::Verify { id, all } => {
            if args.store.is_postgres()? {
                return verify_by_replay(store, id, all, json, &mut out);
            }
            return verify(&args.store.local("verify")?, id, all, json, &mut out);
        }
        SessionsCommand::Export { id, output } => {
            let n = match &output {
                Some(path) => {
                    // Replaced atomically and durably (0600: sessions hold user text); a
                    // failed export leaves what was there.
                    let mut n = 0;
                    let mut failure = None;
                    lazarus_ledger::durable_replace::replace_file_with(
                        path,
                        &lazarus_ledger::durable_replace::ReplaceOptions::default(),
                        |f| match store.export_to(&id, f) {
                            Ok(bytes) => {
                                n = bytes;
                                Ok(())
                            }
                            Err(e) => {
                                failure = Some(e);
                                Err(std::io::Error::other("export failed"))
                            }
                        },
                    )
                    .map_err(|e| match failure.take() {
                        Some(f) => anyhow::Error::from(f),
                        None => anyhow::Error::from(e),
                    })
                    .with_context(|| format!("writing {}", path.display()))?;
                    n
                }
                None => store.export_to(&id, &mut out)?,
            };
            if output.is_some() {
                if json {
                    writeln!(out, "{}", json!({"id": id, "bytes": n, "output": output}))?;
                } else {
                    writeln!(out, "exported {id}: {n} bytes")?;
                }
            }
        }
        SessionsCommand::Import { file } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let s = store.import(&bytes)?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&s)?)?;
            } else {
                writeln!(
                    out,
                    "imported {} ({} records) into {}",
                    s.id,
                    s.records,
                    store.location()
                )?;
            }
        }
        SessionsCommand::Repair { id } => {
            if args.store.is_postgres()? {
                anyhow::bail!(
                    "repair works on local session files; a PostgreSQL store checks every record on insert (use `sessions verify`)"
                );
            }
            let local = args.store.local("repair")?;
            let r = lazarus_ledger::repair(local.dir(), &id, local.ledger_options())?;
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({
                        "id": id,
                        "kept_bytes": r.kept_bytes,
                        "removed_bytes": r.removed.as_ref().map(|c| c.bytes),
                        "first_bad_line": r.removed.as_ref().map(|c| c.line),
                        "reason": r.removed.as_ref().map(|c| c.reason.to_string()),
                        "saved_to": r.saved_to,
                    })
                )?;
            } else if let (Some(cut), Some(saved)) = (&r.removed, &r.saved_to) {
                writeln!(
                    out,
                    "repaired {id}: removed {} bytes from line {} (offset {}; {}), kept {} bytes; removed bytes saved to {}",
                    cut.bytes,
                    cut.line,
                    cut.offset,
                    cut.reason,
                    r.kept_bytes,
                    saved.display()
                )?;
            } else {
                writeln!(out, "{id} is clean; nothing to repair")?;
            }
        }
        SessionsCommand::Fork {
            id,
            at_turn,
            new_id,
        } => {
            let s = store.fork(&id, at_turn, new_id.as_ref())?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&s)?)?;
            } else {
                writeln!(
                    out,
                    "forked {id} at turn {at_turn} into {} ({} records)",
                    s.id, s.records
                )?;
            }
        }
        SessionsCommand::Tree { id } => {
            let mut out = std::io::BufWriter::new(&mut out);
            tree(store, id.as_ref(), json, &mut out)?;
            out.flush()?;
        }
    }
    Ok(0)
}

fn print_table(out: &mut impl Write, list: &[SessionSummary]) -> Result<()> {
    writeln!(
        out,
        "{:<38} {:<24} {:>8} {:>10} {:<12} PARENT",
        "ID", "CREATED", "RECORDS", "BYTES", "STATUS"
    )?;
    for s in list {
        writeln!(
            out,
            "{:<38} {:<24} {:>8} {:>10} {:<12} {}",
            s.id,
            s.created_at,
            s.records,
            s.bytes,
            s.status.to_string(),
            s.parent.as_deref().unwrap_or("-")
        )?;
    }
    Ok(())
}

fn show(store: &dyn Store, id: &SessionId, json: bool, out: &mut impl Write) -> Result<()> {
    if json {
        let mut after = 0;
        loop {
            let batch = store.records(id, after, 1000)?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for r in &batch {
                writeln!(out, "{}", serde_json::to_string(r)?)?;
            }
        }
        return Ok(());
    }
    let st = store.load(id)?;
    writeln!(
        out,
        "session {} (created {})",
        st.id(),
        st.header.created_at
    )?;
    if let Some(p) = &st.header.parent {
        writeln!(out, "forked from {} at seq {}", p.id, p.seq)?;
    }
    if let Some(sb) = st.header.meta.as_ref().and_then(|m| m.get("sandbox")) {
        writeln!(out, "shell sandbox at creation: {sb}")?;
    }
    for entry in &st.context {
        match entry {
            ContextEntry::User { text, .. } => writeln!(out, "\n> {}", escape_text(text))?,
            ContextEntry::Assistant { items, turn, .. } => {
                for item in items {
                    match item {
                        lazarus_session::record::Item::Text { text } => {
                            writeln!(out, "\n[turn {turn}] {}", escape_text(text))?
                        }
                        lazarus_session::record::Item::Reasoning { text } => {
                            writeln!(out, "\n[turn {turn}] (thinking) {}", escape_text(text))?
                        }
                        lazarus_session::record::Item::ToolCall {
                            name, arguments, ..
                        } => writeln!(
                            out,
                            "[turn {turn}] -> {} {}",
                            escape(name),
                            escape(arguments)
                        )?,
                    }
                }
            }
            ContextEntry::ToolResult { call, .. } => {
                let call_id = &st.calls[*call].call_id;
                let text = st.tool_result_text(call_id);
                let short: String = text.chars().take(400).collect();
                let more = if text.chars().count() > 400 {
                    " …"
                } else {
                    ""
                };
                writeln!(
                    out,
                    "   <- {}: {}{more}",
                    escape(call_id),
                    escape_text(&short)
                )?
            }
        }
    }
    for p in &st.pending_inputs {
        writeln!(out, "\n> {} (pending)", escape_text(&p.text))?;
    }
    writeln!(out, "\nstatus: {}", st.status())?;
    Ok(())
}

/// Verify for stores without files: replaying checks framing, CRC, seqs and meaning.
fn verify_by_replay(
    store: &dyn Store,
    id: Option<SessionId>,
    all: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let ids: Vec<SessionId> = match (id, all) {
        (Some(id), _) => vec![id],
        (None, true) => store.list()?.into_iter().map(|s| s.id).collect(),
        (None, false) => {
            eprintln!("error: give a session ID or --all");
            return Ok(2);
        }
    };
    let mut problems = 0;
    for id in ids {
        match store.load(&id) {
            Ok(st) => {
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": id, "clean": true, "records": st.last_seq})
                    )?;
                } else {
                    writeln!(out, "{id}: ok ({} records)", st.last_seq)?;
                }
            }
            Err(e) => {
                problems += 1;
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": id, "clean": false, "error": e.to_string()})
                    )?;
                } else {
                    writeln!(out, "{id}: {e}")?;
                }
            }
        }
    }
    Ok(if problems == 0 { 0 } else { 1 })
}

fn verify(
    store: &LocalStore,
    id: Option<SessionId>,
    all: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let paths: Vec<PathBuf> = match (id, all) {
        (Some(id), _) => vec![store.path_of(&id)],
        (None, true) => {
            let mut v: Vec<PathBuf> = std::fs::read_dir(store.dir())?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            v.sort();
            v
        }
        (None, false) => {
            eprintln!("error: give a session ID or --all");
            return Ok(2);
        }
    };
    let bar = if std::io::stderr().is_terminal() && paths.len() > 1 {
        let b = indicatif::ProgressBar::new(paths.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let mut problems = 0;
    for path in &paths {
        let report = verify_file(path, store.ledger_options());
        if let Some(b) = &bar {
            b.inc(1);
        }
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                problems += 1;
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"path": path, "clean": false, "error": e.to_string()})
                    )?;
                } else {
                    writeln!(out, "{}: {e}", path.display())?;
                }
                continue;
            }
        };
        problems += report.problems.len();
        if json {
            let list: Vec<_> = report
                .problems
                .iter()
                .map(|f| {
                    json!({
                        "line": f.line, "offset": f.offset, "problem": f.problem.to_string(),
                        "recoverable": f.recoverable,
                    })
                })
                .collect();
            writeln!(
                out,
                "{}",
                json!({"path": path, "clean": report.is_clean(), "records": report.records, "size": report.size, "problems": list})
            )?;
        } else if report.is_clean() {
            writeln!(
                out,
                "{}: ok ({} records, {} bytes)",
                path.display(),
                report.records,
                report.size
            )?;
        } else {
            for f in &report.problems {
                let hint = match (&f.problem, f.recoverable) {
                    (Problem::TornTail { .. }, _) | (_, true) => {
                        "crash debris: cut automatically at the next open, or by `lazarus sessions repair`"
                    }
                    _ => {
                        "corruption: `lazarus sessions repair` cuts back to the last good record (saving the rest)"
                    }
                };
                writeln!(
                    out,
                    "{}: line {} (byte offset {}): {} — {hint}",
                    path.display(),
                    f.line,
                    f.offset,
                    f.problem
                )?;
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(if problems == 0 { 0 } else { 1 })
}

/// The fork tree: each session under its parent, children in listing order. Iterative (a
/// fork chain of any depth) and O(n log n) (children indexed by parent once).
fn tree(store: &dyn Store, id: Option<&SessionId>, json: bool, out: &mut impl Write) -> Result<()> {
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
