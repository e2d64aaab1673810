//! `lazarus sessions compact ID`: compacts a session's context now (the runner's
//! compaction, with trigger `manual`), on a session that owes no work.

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use clap::Args;
use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{RunEvent, Runner};
use lazarus_session::{SessionId, Store};
use serde_json::json;

use crate::args::ModelArgs;

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The session to compact (it must owe no work and not be running).
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
    let session = store.open(&args.id)?;
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
    let done = rt.block_on(runner.compact_now(&session, &cancel, &mut observer))?;
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
