//! Claude Code project transcripts (`~/.claude/projects/<cwd>/<session>.jsonl`).
//!
//! Facts from files Claude Code 2.1.x wrote (see docs/boot-resume.md, "Claude Code"):
//! - an `assistant` line is written only once its whole answer arrived; one API response may
//!   span several lines sharing `message.id` (one per content block);
//! - a finished turn ends with `system`/`turn_duration` (2.1+);
//! - a request in flight leaves only an `api-request` record after the last conversation
//!   line; `api-request-blob` records are message-like copies of request bodies and never
//!   conversation; `mode`, `permission-mode`, `atis-latch`, `cost-state`, `tools-used`,
//!   `attachment` (a `prompt_snapshot` is ~60 KB) and others are bookkeeping;
//! - API errors are `assistant` lines with `isApiErrorMessage`, `apiErrorStatus`,
//!   `apiErrorType` and `error`;
//! - `Agent` launched in the background returns at once (`toolUseResult.status:
//!   "async_launched"`) and reports back later as a user line holding a
//!   `<task-notification>` with `<tool-use-id>…</tool-use-id>`;
//! - `entrypoint` says which program path wrote a line (`cli` interactive, `sdk-*` for
//!   `claude -p` and the SDKs). `claude -p --resume` writes `sdk-cli` on the lines it adds, so
//!   ownership is decided by the first line that names an entrypoint (see [`owner_line`]).
//!
//! The record model (the line shapes, what a user line holds) is in `record`; the facts
//! gathered before deciding (owner, version, sub-agent transcripts, background agents) in
//! `facts`; the walk from the newest line back to the deciding one in `walk`, with the API
//! error rule in `api_error`. [`classify`] ties them together; all of it is pure.

mod api_error;
mod facts;
mod walk;

use super::{Parsed, need_more, stem};
use crate::formats::claude_code::record;
use crate::verdict::{Classification, SessionMeta, SkipWhy, Verdict};
use facts::{gather_facts, outstanding_background_agents, owner_line};
use record::Line;
use walk::Walk;

pub use api_error::api_error_is_transient;
pub use record::BOOKKEEPING;

/// Classifies a Claude Code transcript tail.
/// The newest Claude Code major version whose transcripts this build reads.
const KNOWN_MAJOR: u64 = 2;

pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    let p: Parsed<Line> = Parsed::new(tail, meta.at_start);
    let may_grow = !meta.at_start && !meta.at_cap;
    let mut out = Classification::new(Verdict::Skipped(SkipWhy::Empty), "");
    out.torn = p.torn;
    let torn_note = if p.torn {
        if p.torn_contains(b"\"tool_result\"") {
            "; a tool result was being written when the process died (torn last line ignored)"
        } else {
            "; torn last line ignored"
        }
    } else {
        ""
    };
    let facts = gather_facts(&p, meta, &mut out);
    out.permission_mode = facts.permission_mode.clone();
    if let Some(v) = facts.version.as_deref()
        && super::newer_major(v, KNOWN_MAJOR)
    {
        return super::unknown_format(&mut out, "Claude Code version", v, "Claude Code 2.x");
    }
    let decide = |mut out: Classification, v: Verdict, reason: String| {
        out.verdict = v;
        out.reason = format!("{reason}{torn_note}");
        out
    };

    // Step 1: whose session is it?
    if meta.subagent_path || stem(meta.file_name).starts_with("agent-") || facts.sidechain_only {
        return decide(
            out,
            Verdict::Skipped(SkipWhy::Subagent),
            "sub-agent transcript (the parent's Agent/Task call covers it)".into(),
        );
    }
    let owner = owner_line(&p, meta);
    if let Some(ep) = owner.as_deref()
        && ep.starts_with("sdk")
    {
        return decide(
            out,
            Verdict::Skipped(SkipWhy::SdkOwned),
            format!("created by entrypoint {ep:?}: owned by an SDK program"),
        );
    }

    // Step 2: walk back from the newest line to the deciding one.
    let version = facts.version.as_deref();
    let mut walk = Walk::default();
    let mut found = None;
    for i in (0..p.len()).rev() {
        // (bookkeeping is skipped by the walk anyway: not parsed at all)
        if record::is_idle_bookkeeping(p.lines[i]) {
            continue;
        }
        let Some(l) = p.get(i) else { continue };
        if let Some(d) = walk.step(l, version) {
            found = Some(d);
            break;
        }
    }
    let Some(d) = found.or_else(|| walk.at_window_start(may_grow, version)) else {
        if may_grow {
            return need_more(p.torn);
        }
        let r = if p.len() == 0 && !p.torn {
            "empty file"
        } else {
            "no user or assistant record"
        };
        return decide(out, Verdict::Skipped(SkipWhy::Empty), r.into());
    };

    // Step 3: a finished turn may still owe work to a background agent.
    if d.verdict == Verdict::Finished {
        let open = outstanding_background_agents(&p);
        if !open.is_empty() {
            let ids: Vec<&str> = open.iter().filter_map(|c| c.id.as_deref()).collect();
            let reason = format!(
                "background agent(s) launched by tool_use {} never reported back (no <task-notification>): their work was cut off; {}",
                ids.join(", "),
                d.reason
            );
            out.set_interrupted(open);
            return decide(out, Verdict::InterruptedToolCall, reason);
        }
        if meta.has_subagents && may_grow {
            // A launch may lie before the window: look at the whole file (up to the cap).
            return need_more(p.torn);
        }
    }
    out.set_interrupted(d.calls);
    decide(out, d.verdict, d.reason)
}
