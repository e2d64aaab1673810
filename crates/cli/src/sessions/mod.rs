//! `lazarus sessions …`: one module per family of subcommands. This file holds the
//! arguments and the dispatch; `inputs` (create, send), `list` (list, tree), `show`,
//! `verify` (verify, repair), `transfer` (export, import), `cleanup` (rm, prune),
//! `approvals` (approvals, approve, deny) and `compact` each hold their commands.

mod approvals;
mod cleanup;
pub(crate) mod compact;
mod inputs;
mod list;
mod show;
mod show_host;
mod transfer;
mod verify;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use lazarus_session::record::{Decision, Scope};
use lazarus_session::{SessionId, Status};
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

Exit codes: 0 success; 1 error (verify: problems found; rm/prune: some refused); 2 usage;
75 the session's inbox is full (send, compact: nothing was added; try again later).";

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
    /// Compact a session's context now: the model summarises all but its last turns, and
    /// the summary replaces them in later requests (the ledger keeps everything).
    Compact(Box<compact::CompactArgs>),
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
    /// Write a session to stdout (or --output FILE): its exact JSON Lines, an ATIF
    /// trajectory, or OpenTelemetry spans (OTLP JSON).
    Export {
        /// The session to export.
        id: SessionId,
        /// Write to this file (replaced atomically, mode 0600) instead of stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// `jsonl` (the ledger, byte for byte; `sessions import` takes it back), `atif` (an
        /// Agent Trajectory Interchange Format trajectory) or `otel` (OTLP JSON spans, GenAI
        /// semantic conventions).
        #[arg(long, value_name = "FORMAT", default_value = "jsonl")]
        format: transfer::ExportFormat,
    },
    /// Create a session from exported JSON Lines, or from another agent's session log.
    ///
    /// With --from claude-code, codex, pi, openclaw, gemini-cli or opencode, SOURCE is that
    /// agent's log (OpenClaw: its state directory or agent database, with --source-session
    /// KEY; OpenCode: its data directory or opencode.db, with --source-session ses_…; Gemini
    /// CLI: a chats/session-*.jsonl recording): the conversation
    /// becomes a native session (user messages, answers, every tool call with its result;
    /// a call without a result is closed in doubt), whose first record says where it came
    /// from. Continue it with `lazarus run --session ID` on any provider. Importing the same
    /// bytes twice is refused. Nothing is written unless the whole source reads.
    Import {
        /// A file written by `sessions export`, or another agent's log (see --from).
        #[arg(value_name = "SOURCE")]
        file: PathBuf,
        /// What SOURCE is: lazarus (an export), claude-code, codex, pi, openclaw,
        /// gemini-cli, opencode, or auto (guessed from the content, and said).
        #[arg(long, value_name = "AGENT", default_value = "lazarus")]
        from: String,
        /// The new session's id [default: a fresh one]. Foreign imports only.
        #[arg(long = "id", value_name = "NEW")]
        new_id: Option<SessionId>,
        /// OpenClaw: the session key (or id) to import from the state directory; OpenCode:
        /// the session id (`ses_…`) to import from the database.
        #[arg(long, value_name = "KEY")]
        source_session: Option<String>,
        /// pi, OpenClaw: also import the session tree's other branches, each as a fork.
        #[arg(long)]
        branches: bool,
    },
    /// The tool calls waiting for a person's approval: of one session, or of every session.
    /// One JSON object per line with --json (session, call_id, tool, arguments,
    /// requested_at, reason, mode).
    Approvals {
        /// The session [default: every session with a call waiting]
        id: Option<SessionId>,
    },
    /// Allows a call that waits for approval. Recorded through the session's inbox, so it
    /// works while a run or a gateway holds the session; `lazarus run --session ID` (or the
    /// gateway, by itself) then runs the call, once.
    Approve {
        /// The session.
        id: SessionId,
        /// The call (as `sessions approvals` lists it).
        call_id: String,
        /// once: this call; session: every later call of this tool in this session;
        /// always: every later call of this tool anywhere (the approvals policy file).
        #[arg(long, default_value = "once", value_parser = parse_scope)]
        scope: Scope,
        /// Why (kept in the ledger).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Denies a call that waits for approval: it never runs, and the model is told it was
    /// denied (and why).
    Deny {
        /// The session.
        id: SessionId,
        /// The call (as `sessions approvals` lists it).
        call_id: String,
        /// Why, for the model and the record.
        #[arg(long)]
        reason: Option<String>,
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
    /// Show at most N sessions [default: 50 in the table, every one with --json].
    #[arg(long, value_name = "N", conflicts_with = "all")]
    limit: Option<usize>,
    /// Skip the first N sessions of the order (the next page: --offset 50).
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: usize,
    /// Show every session in the table (no page).
    #[arg(long)]
    all: bool,
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|_| {
        format!(
            "unknown scope {:?}; one of once, session, always",
            escape(s)
        )
    })
}

fn parse_status(s: &str) -> Result<Status, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|_| {
        format!(
            "unknown status {:?}; one of new, idle, pending, running, interrupted, in_doubt, stopped, failed, corrupt, awaiting_approval, needs_owner",
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
        SessionsCommand::Compact(a) => return compact::run(store, *a, json),
        SessionsCommand::Create { id } => inputs::create(store, id, json, &mut out)?,
        SessionsCommand::Send {
            id,
            message_id,
            text,
        } => inputs::send(store, id, message_id, &text, json, &mut out)?,
        SessionsCommand::List(filters) => {
            // --json of 10⁵ sessions is 30 MB: written in big pieces
            let mut out = std::io::BufWriter::with_capacity(256 * 1024, &mut out);
            list::list(store, &filters, json, &mut out)?;
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
        SessionsCommand::Show { id } => show::show(store, &id, json, &mut out)?,
        SessionsCommand::Verify { id, all } => {
            if args.store.is_postgres()? {
                return verify::verify_by_replay(store, id, all, json, &mut out);
            }
            return verify::verify(&args.store.local("verify")?, id, all, json, &mut out);
        }
        SessionsCommand::Export { id, output, format } => {
            transfer::export(store, &id, output, format, json, &mut out)?
        }
        SessionsCommand::Import {
            file,
            from,
            new_id,
            source_session,
            branches,
        } => {
            let opts = transfer::ImportArgs {
                from,
                new_id,
                source_session,
                branches,
            };
            transfer::import(store, &file, &opts, json, &mut out)?
        }
        SessionsCommand::Repair { id } => {
            if args.store.is_postgres()? {
                anyhow::bail!(
                    "repair works on local session files; a PostgreSQL store checks every record on insert (use `sessions verify`)"
                );
            }
            verify::repair(&args.store.local("repair")?, &id, json, &mut out)?
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
            list::tree(store, id.as_ref(), json, &mut out)?;
            out.flush()?;
        }
        SessionsCommand::Approvals { id } => approvals::list(store, id.as_ref(), json, &mut out)?,
        SessionsCommand::Approve {
            id,
            call_id,
            scope,
            reason,
        } => {
            let decision = (Decision::Allow, scope, reason);
            return approvals::decide(store, &id, &call_id, decision, json, &mut out);
        }
        SessionsCommand::Deny {
            id,
            call_id,
            reason,
        } => {
            // a denial is for this call only
            let decision = (Decision::Deny, Scope::Once, reason);
            return approvals::decide(store, &id, &call_id, decision, json, &mut out);
        }
        SessionsCommand::Rm { ids, force } => {
            let local = args.store.local("rm")?;
            return cleanup::remove(&local, &ids, force, json, &mut out);
        }
        SessionsCommand::Prune {
            older_than,
            status,
            dry_run,
        } => {
            let local = args.store.local("prune")?;
            return cleanup::prune(&local, older_than, &status, dry_run, json, &mut out);
        }
    }
    Ok(0)
}
