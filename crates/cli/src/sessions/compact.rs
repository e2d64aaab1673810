//! `lazarus sessions compact ID`: compacts a session's context now (the runner's
//! compaction, with trigger `manual`), on a session that owes no work. A session another
//! process holds (a `lazarus run`, a gateway) gets a `compact` control input in its inbox
//! instead: its writer compacts it before its next turn.

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Args;
use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{RunEvent, Runner};
use lazarus_session::handoff::{Opened, open_or_deliver};
use lazarus_session::state::COMPACT_ACTION;
use lazarus_session::{HolderView, InboxMessage, SessionId, Store};
use serde_json::json;

use crate::args::ModelArgs;

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The session to compact (if another process holds it, the request waits in its inbox
    /// and that process compacts it before its next turn).
    pub id: SessionId,
    /// Complete turns kept verbatim after the summary.
    #[arg(long, default_value_t = 2)]
    pub keep_turns: u64,
    #[command(flatten)]
    pub model: ModelArgs,
}

pub fn run(store: &dyn Store, args: CompactArgs, json: bool) -> Result<i32> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let mut cfg = args.model.runner_config(cwd, true)?;
    cfg.compaction.keep_turns = args.keep_turns;
    let runner = Runner::new(cfg)?;
    // The writer compacts: this process, or (through its inbox) the one holding the session.
    let message_id = format!("compact-{}", uuid::Uuid::now_v7());
    let msg = InboxMessage::control(&message_id, COMPACT_ACTION, Some("sessions compact"));
    let session = match open_or_deliver(store, &args.id, &msg, &mut |_, _| {})? {
        Opened::Writer(s) => *s,
        Opened::Queued { holder, .. } => {
            return queued(&args.id, &message_id, holder.as_ref(), json);
        }
    };
    let session = Arc::new(Mutex::new(session));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut record = None;
    let mut observer = |ev: RunEvent<'_>| {
        if let RunEvent::Record {
            seq, kind, data, ..
        } = ev
            && kind == "compaction"
        {
            record = Some((seq, data));
        }
    };
    let cancel = CancellationToken::new();
    let done = rt.block_on(runner.compact_now(&session, &cancel, &mut observer));
    // let go of the writer; what was delivered meanwhile is recorded, not stranded
    if let Some(s) =
        Arc::into_inner(session).map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
    {
        lazarus_session::handoff::close(store, s)?;
    }
    let done = done?;
    let mut out = std::io::stdout().lock();
    match (done, record) {
        (true, Some((seq, d))) => {
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": args.id.as_str(), "compacted": true, "seq": seq,
                        "from_seq": d["from_seq"], "through_seq": d["through_seq"],
                        "tokens_before": d["tokens_before"], "tokens_after": d["tokens_after"]})
                )?;
            } else {
                writeln!(
                    out,
                    "compacted {}: seqs {}..={} summarised (seq {seq}); next request about {} tokens, was {}",
                    args.id, d["from_seq"], d["through_seq"], d["tokens_after"], d["tokens_before"]
                )?;
            }
        }
        _ => {
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": args.id.as_str(), "compacted": false})
                )?;
            } else {
                writeln!(
                    out,
                    "{}: nothing to compact (no complete turn since the last compaction)",
                    args.id
                )?;
            }
        }
    }
    Ok(0)
}

/// Says that the `compact` control input waits in the inbox of the process holding the
/// session, which compacts it before its next turn.
fn queued(
    id: &SessionId,
    message_id: &str,
    holder: Option<&HolderView>,
    json: bool,
) -> Result<i32> {
    let view = holder;
    let by = view.as_ref().map_or(
        "another process (holder details unavailable)".to_string(),
        |v| v.to_string(),
    );
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(
            out,
            "{}",
            json!({"id": id.as_str(), "compacted": false, "queued": true, "message_id": message_id, "holder": view})
        )?;
    } else {
        writeln!(
            out,
            "queued in the inbox of {id} (message {message_id}): {by} holds the session and compacts it before its next turn"
        )?;
    }
    Ok(0)
}
