//! `lazarus sessions …`: create, send, list, show, verify, repair, fork, tree, export,
//! import, rm, prune. `run` only dispatches; each command is its own function.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lazarus_ledger::{Problem, verify_file};
use lazarus_session::{
    CreateOptions, InboxMessage, LocalStore, SessionError, SessionId, SessionSummary, Status, Store,
};
use serde_json::json;

use crate::args::StoreArgs;
use crate::term::escape;

const AFTER_HELP: &str = "\
Examples:
  lazarus sessions list --status in_doubt,interrupted   what a crash left to resume
  lazarus sessions list --search login                  find by id, title or workspace
  lazarus sessions show fix-tests                       the transcript
  lazarus sessions fork fix-tests --at-turn 3 --id try-b
  lazarus sessions export fix-tests -o fix-tests.jsonl  and `sessions import` elsewhere
  lazarus sessions prune --older-than 30d --dry-run

Exit codes: 0 success; 1 error (verify: problems found; rm/prune: some refused); 2 usage.";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct SessionsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON (one object per line; names in docs/json.md) instead of text.
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
    ///
    /// The same message id is recorded once: sending the same text again without
    /// --message-id is a duplicate (its id is derived from the text) and writes nothing.
    /// When another process holds the session (a `lazarus run`, a gateway), the message is
    /// put in the session's inbox instead, durably, and that process records and answers it.
    Send {
        /// The session to send to.
        id: SessionId,
        /// Message id for deduplication [default: derived from the session and the text]
        #[arg(long)]
        message_id: Option<String>,
        /// The message text.
        text: String,
    },
    /// Give a session the title listings show (instead of its first input); works while it runs.
    Rename {
        /// The session to rename.
        id: SessionId,
        /// The new title (its first line, at most 80 characters, is kept).
        #[arg(required_unless_present = "clear")]
        title: Option<String>,
        /// Go back to the first input as the title.
        #[arg(long, conflicts_with = "title")]
        clear: bool,
    },
    /// List sessions, newest activity first (status from each session's last record).
    List(ListArgs),
    /// Show a session's records as a transcript: times, inputs with their ids, tool calls
    /// with their states, resume receipts, and what is damaged (exit 1) if a line is.
    Show {
        /// The session to show.
        id: SessionId,
    },
    /// Check every line of a session (or all); exit 1 if problems were found.
    Verify {
        /// The session to check.
        id: Option<SessionId>,
        /// Check every session of the store.
        #[arg(long, conflicts_with = "id")]
        all: bool,
    },
    /// Cut a session back to its last good record; removed bytes are saved beside the file.
    Repair {
        /// The session to repair.
        id: SessionId,
    },
    /// Create a new session from ID holding everything up to the end of turn N.
    Fork {
        /// The session to fork (it is not changed).
        id: SessionId,
        /// The last turn the new session keeps (`sessions show` numbers the turns).
        #[arg(long, value_name = "N")]
        at_turn: u64,
        /// Id of the new session [default: a new UUID v7]
        #[arg(long = "id")]
        new_id: Option<SessionId>,
    },
    /// Show the fork tree (of one session's family, or of all).
    Tree {
        /// A session whose family to show [default: every session]
        id: Option<SessionId>,
    },
    /// Write a session's exact JSON Lines to stdout (or --output FILE).
    Export {
        /// The session to export.
        id: SessionId,
        /// Write to this file (replaced atomically, mode 0600) instead of stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Create a session from exported JSON Lines (checked line by line; never overwrites).
    Import {
        /// A file written by `sessions export`.
        file: PathBuf,
    },
    /// Remove sessions (their ledger, saved debris and lock file).
    ///
    /// A session with a live writer is refused. A session that still owes work (pending,
    /// interrupted, in_doubt, stopped) is refused unless --force is given. Sessions forked
    /// from a removed one keep working: each holds its own copy of the prefix.
    Rm {
        /// The sessions to remove.
        #[arg(required = true)]
        ids: Vec<SessionId>,
        /// Also remove sessions that still owe work (never one with a live writer).
        #[arg(long)]
        force: bool,
    },
    /// Remove sessions whose last activity is older than a duration.
    ///
    /// By default only sessions that owe no work (new, idle, failed); name other statuses
    /// with --status to include them. Sessions with a live writer are always kept.
    Prune {
        /// Age of the last activity (`30d`, `12h`, `2w`).
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
        /// Only sessions with these statuses (comma-separated) [default: new,idle,failed]
        #[arg(long, value_delimiter = ',', value_parser = parse_status)]
        status: Vec<Status>,
        /// Print what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Filters of `sessions list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only sessions with these statuses (comma-separated: new, idle, pending, running,
    /// interrupted, in_doubt, stopped, failed, corrupt).
    #[arg(long, value_delimiter = ',', value_parser = parse_status)]
    status: Vec<Status>,
    /// Only sessions whose id, title or workspace contains TEXT (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    search: Option<String>,
    /// Only sessions of this workspace (`.` for the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

fn parse_status(s: &str) -> Result<Status, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|_| {
        format!(
            "unknown status {:?}; one of new, idle, pending, running, interrupted, in_doubt, stopped, failed, corrupt",
            escape(s)
        )
    })
}

pub fn run(args: SessionsArgs) -> Result<i32> {
    let store = args.store.open()?;
    let store = &*store;
    let json = args.json;
    let mut out = std::io::stdout().lock();
    match args.command {
        SessionsCommand::Create { id } => create(store, id, json, &mut out)?,
        SessionsCommand::Send {
            id,
            message_id,
            text,
        } => send(store, id, message_id, &text, json, &mut out)?,
        SessionsCommand::List(filters) => {
            let mut out = std::io::BufWriter::new(&mut out);
            list(store, &filters, json, &mut out)?;
            out.flush()?;
        }
        SessionsCommand::Rename { id, title, clear } => {
            let title = if clear { None } else { title.as_deref() };
            store.rename(&id, title)?;
            let now = store.summary(&id)?.title.unwrap_or_default();
            if json {
                writeln!(out, "{}", json!({"id": id, "title": now}))?;
            } else {
                writeln!(out, "{id}: {}", escape(&now))?;
            }
        }
        SessionsCommand::Show { id } => crate::show::show(store, &id, json, &mut out)?,
        SessionsCommand::Verify { id, all } => {
            if args.store.is_postgres()? {
                return verify_by_replay(store, id, all, json, &mut out);
            }
            return verify(&args.store.local("verify")?, id, all, json, &mut out);
        }
        SessionsCommand::Export { id, output } => export(store, &id, output, json, &mut out)?,
        SessionsCommand::Import { file } => import(store, &file, json, &mut out)?,
        SessionsCommand::Repair { id } => {
            if args.store.is_postgres()? {
                anyhow::bail!(
                    "repair works on local session files; a PostgreSQL store checks every record on insert (use `sessions verify`)"
                );
            }
            repair(&args.store.local("repair")?, &id, json, &mut out)?
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
        SessionsCommand::Rm { ids, force } => {
            let local = args.store.local("rm")?;
            return remove(&local, &ids, force, json, &mut out);
        }
        SessionsCommand::Prune {
            older_than,
            status,
            dry_run,
        } => {
            let local = args.store.local("prune")?;
            return prune(&local, older_than, &status, dry_run, json, &mut out);
        }
    }
    Ok(0)
}

fn create(
    store: &dyn Store,
    id: Option<SessionId>,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let s = store.create(CreateOptions { id, meta: None })?;
    if json {
        writeln!(out, "{}", json!({"id": s.id(), "location": s.location()}))?;
    } else {
        writeln!(out, "created session {} at {}", s.id(), s.location())?;
    }
    Ok(())
}

fn send(
    store: &dyn Store,
    id: SessionId,
    message_id: Option<String>,
    text: &str,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let explicit = message_id.is_some();
    let message_id =
        message_id.unwrap_or_else(|| lazarus_session::record::derived_input_id(&id, "user", text));
    let mut s = match store.open(&id) {
        Ok(s) => s,
        // Another process (a `lazarus run`, a gateway) is the writer: hand the message to
        // it through the session's inbox; it records and answers it.
        Err(SessionError::Locked { holder, .. }) => {
            let msg = InboxMessage::input(&message_id, "user", text);
            let d = store.deliver(&id, &msg)?;
            let by = lazarus_ledger::holder::describe(&holder);
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": id, "message_id": message_id, "queued": true, "duplicate": d.duplicate, "holder": by})
                )?;
            } else if d.duplicate {
                writeln!(
                    out,
                    "message {} is waiting in the inbox of {id} already; nothing added",
                    escape(&message_id)
                )?;
            } else {
                writeln!(
                    out,
                    "queued in the inbox of {id} (message {}): {by} holds the session and will record and answer it",
                    escape(&message_id)
                )?;
            }
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let ack = s.append_input(&message_id, "user", text)?;
    drop(s);
    if !ack.duplicate {
        // a gateway serving this directory learns that the session owes work
        store.ring(&id)?;
    }
    if json {
        writeln!(
            out,
            "{}",
            json!({"id": id, "message_id": message_id, "seq": ack.seq, "duplicate": ack.duplicate})
        )?;
    } else if ack.duplicate {
        writeln!(
            out,
            "{} (duplicate of message {}; nothing written)",
            ack.seq,
            escape(&message_id)
        )?;
        if !explicit {
            eprintln!(
                "note: the same text was sent to {id} before (seq {}); without --message-id a message's id comes from its text, so it is recorded once. Give --message-id to send it again.",
                ack.seq
            );
        }
    } else {
        writeln!(out, "{}", ack.seq)?;
    }
    Ok(())
}

fn list(store: &dyn Store, f: &ListArgs, json: bool, out: &mut impl Write) -> Result<()> {
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
    list.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
    if json {
        for s in &list {
            writeln!(out, "{}", serde_json::to_string(s)?)?;
        }
        return Ok(());
    }
    print_table(out, &list)
}

fn export(
    store: &dyn Store,
    id: &SessionId,
    output: Option<PathBuf>,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let Some(path) = &output else {
        store.export_to(id, out)?;
        return Ok(());
    };
    // Replaced atomically and durably (0600: sessions hold user text); a failed export
    // leaves what was there.
    let mut n = 0;
    let mut failure = None;
    lazarus_ledger::durable_replace::replace_file_with(
        path,
        &lazarus_ledger::durable_replace::ReplaceOptions::default(),
        |f| match store.export_to(id, f) {
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
    if json {
        writeln!(out, "{}", json!({"id": id, "bytes": n, "output": output}))?;
    } else {
        writeln!(out, "exported {id}: {n} bytes")?;
    }
    Ok(())
}

fn import(store: &dyn Store, file: &Path, json: bool, out: &mut impl Write) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
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
    Ok(())
}

fn repair(local: &LocalStore, id: &SessionId, json: bool, out: &mut impl Write) -> Result<()> {
    let r = lazarus_ledger::repair(local.dir(), id, local.ledger_options())?;
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
    Ok(())
}

fn remove(
    local: &LocalStore,
    ids: &[SessionId],
    force: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let mut refused = 0;
    for id in ids {
        // Judged by a full replay: the tail alone may say `interrupted` for a finished one.
        let result: Result<()> = match local.load(id) {
            Err(e @ lazarus_session::SessionError::NotFound { .. }) => Err(e.into()),
            Ok(st) if st.owes_work() && !force => Err(anyhow::anyhow!(
                "session {id} is {} (it owes work that removing it would lose); resume it with `lazarus run --session {id}`, or add --force",
                st.status()
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

fn prune(
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
        if updated >= cutoff || !statuses.contains(&s.status) || s.status == Status::Running {
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

/// `3 min ago` from an RFC 3339 time (`-` when unknown).
pub(crate) fn ago(ts: &str) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return "-".into();
    };
    let secs = jiff::Timestamp::now().duration_since(t).as_secs();
    match secs {
        i64::MIN..=9 => "just now".into(),
        10..=59 => format!("{secs} s ago"),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=86_399 => format!("{} h ago", secs / 3600),
        86_400..=2_591_999 => format!("{} days ago", secs / 86_400),
        _ => t.strftime("%Y-%m-%d").to_string(),
    }
}

/// `~/src/app` for a path under $HOME.
pub(crate) fn short_path(p: &str) -> String {
    if let Some(home) = std::env::var_os("HOME").and_then(|h| h.into_string().ok())
        && !home.is_empty()
        && home != "/"
        && let Some(rest) = p.strip_prefix(&home)
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return format!("~{rest}");
    }
    p.to_string()
}

/// At most `n` characters, `…` when cut (from the left when `keep_end`: paths end in what
/// tells them apart).
pub(crate) fn fit(s: &str, n: usize, keep_end: bool) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    if keep_end {
        let tail: String = s.chars().skip(count - (n - 1)).collect();
        format!("…{tail}")
    } else {
        let head: String = s.chars().take(n - 1).collect();
        format!("{head}…")
    }
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
        "{:<id_w$}  {:<40}  {:<11}  {:<28}  ACTIVE",
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
            "{:<id_w$}  {:<40}  {:<11}  {:<28}  {}",
            fit(&s.id, id_w, false),
            fit(&escape(&title), 40, false),
            s.status.to_string(),
            fit(&escape(&ws), 28, true),
            ago(&s.updated_at),
        )?;
    }
    if list.is_empty() {
        writeln!(out, "(no sessions)")?;
    }
    Ok(())
}

/// Progress of a command over many sessions: a bar on a terminal's stderr (never mixed into
/// the lines written meanwhile: they are printed with the bar suspended), and the summary
/// line at the end.
struct Progress {
    bar: indicatif::ProgressBar,
    checked: usize,
    clean: usize,
    problems: usize,
}

impl Progress {
    fn new(len: usize) -> Self {
        let bar = if std::io::stderr().is_terminal() && len > 1 {
            let b = indicatif::ProgressBar::new(len as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{wide_bar} {pos}/{len} sessions checked, {eta} left",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        } else {
            indicatif::ProgressBar::hidden()
        };
        Progress {
            bar,
            checked: 0,
            clean: 0,
            problems: 0,
        }
    }

    /// Records one session's result and prints its lines (bar suspended meanwhile).
    fn report(
        &mut self,
        problems: usize,
        out: &mut impl Write,
        lines: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        self.checked += 1;
        self.problems += problems;
        if problems == 0 {
            self.clean += 1;
        }
        self.bar.suspend(|| lines(out))?;
        self.bar.inc(1);
        Ok(())
    }

    /// The summary (on stdout with text, on stderr with --json so the stream stays one
    /// object per line); the exit code.
    fn finish(self, all: bool, json: bool, out: &mut impl Write) -> Result<i32> {
        self.bar.finish_and_clear();
        if all {
            let line = format!(
                "checked {} sessions: {} clean, {} with problems ({} problems in all)",
                self.checked,
                self.clean,
                self.checked - self.clean,
                self.problems
            );
            if json {
                eprintln!("{line}");
            } else {
                writeln!(out, "{line}")?;
            }
        }
        Ok(if self.problems == 0 { 0 } else { 1 })
    }
}

fn usage_id_or_all() -> anyhow::Error {
    crate::Usage("give a session ID, or --all for every session".into()).into()
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
        (None, false) => return Err(usage_id_or_all()),
    };
    let mut progress = Progress::new(ids.len());
    for id in ids {
        match store.load(&id) {
            Ok(st) => progress.report(0, out, |out| {
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": id, "clean": true, "records": st.last_seq, "error": null})
                    )
                } else {
                    writeln!(out, "{id}: ok ({} records)", st.last_seq)
                }
            })?,
            Err(e) => progress.report(1, out, |out| {
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": id, "clean": false, "error": e.to_string()})
                    )
                } else {
                    writeln!(out, "{id}: {}", escape(&e.to_string()))
                }
            })?,
        }
    }
    progress.finish(all, json, out)
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
        (None, false) => return Err(usage_id_or_all()),
    };
    let mut progress = Progress::new(paths.len());
    for path in &paths {
        // The id the file is named for (`null` for a name no session could have).
        let id = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|stem| SessionId::parse(stem).ok());
        let shown = escape(&path.display().to_string()).into_owned();
        let report = match verify_file(path, store.ledger_options()) {
            Ok(r) => r,
            Err(e) => {
                progress.report(1, out, |out| {
                    if json {
                        writeln!(
                            out,
                            "{}",
                            json!({"id": id, "path": path, "clean": false, "error": e.to_string()})
                        )
                    } else {
                        writeln!(out, "{shown}: {}", escape(&e.to_string()))
                    }
                })?;
                continue;
            }
        };
        progress.report(report.problems.len(), out, |out| {
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
                return writeln!(
                    out,
                    "{}",
                    json!({"id": id, "path": path, "clean": report.is_clean(), "records": report.records, "bytes": report.size, "problems": list, "error": null})
                );
            }
            if report.is_clean() {
                return writeln!(
                    out,
                    "{shown}: ok ({} records, {} bytes)",
                    report.records, report.size
                );
            }
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
                    "{shown}: line {} (byte offset {}): {} — {hint}",
                    f.line, f.offset, f.problem
                )?;
            }
            Ok(())
        })?;
    }
    progress.finish(all, json, out)
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
