//! Native Lazarus session ledgers (`lazarus.session`, one JSON record per line).
//!
//! Classified from bytes only: each line is
//! `{"seq":N,"ts":"...","kind":K,"data":{...},"crc":"........"}`, and a line whose checksum
//! fails is not part of the log (the ledger's own framing check decides). Whether the session
//! owes work at all is the session crate's rule for a tail
//! ([`lazarus_session::state::owes_work_from_tail`], the twin of the rule the runner and the
//! gateway apply after a full replay); this classifier only says *how* it was cut off, from
//! the records before the last one.
use super::{Parsed, clip, need_more, stem};
use crate::lines::{UserText, is_transient_error, user_text_kind};
use crate::verdict::{Classification, SessionMeta, SkipWhy, Verdict};
use lazarus_session::state::owes_work_from_tail;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashSet;

#[derive(Deserialize)]
struct Rec<'a> {
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    kind: String,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct Data {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    /// The header's application data: the runner keeps the workspace there.
    #[serde(default)]
    meta: Option<Meta>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    items: Vec<Item>,
    #[serde(default)]
    failure: Option<Failure>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    workspace: Option<String>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type", default)]
    ty: String,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct Failure {
    #[serde(default)]
    message: String,
    #[serde(default)]
    transient: Option<bool>,
}

/// Whether line `i` passes its checksum: a damaged line is not part of the log.
fn valid(p: &Parsed<Rec>, i: usize) -> bool {
    lazarus_ledger::frame::check_crc(p.lines[i]).is_ok()
}

fn data(r: &Rec) -> Data {
    r.data
        .and_then(|d| serde_json::from_str(d.get()).ok())
        .unwrap_or_default()
}

/// Classifies a Lazarus ledger tail.
pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    let p: Parsed<Rec> = Parsed::new(tail, meta.at_start);
    let may_grow = !meta.at_start && !meta.at_cap;
    let mut out = Classification::new(Verdict::Skipped(SkipWhy::Empty), "");
    out.torn = p.torn;
    let torn_note = if p.torn {
        "; torn last line ignored"
    } else {
        ""
    };
    let decide = |mut out: Classification, v: Verdict, reason: String| {
        out.verdict = v;
        out.reason = format!("{reason}{torn_note}");
        out
    };
    let header = meta
        .header
        .and_then(|h| serde_json::from_slice::<Rec>(h).ok())
        .or_else(|| {
            if meta.at_start {
                p.get(0).map(|r| Rec {
                    seq: r.seq,
                    kind: r.kind.clone(),
                    data: r.data,
                })
            } else {
                None
            }
        })
        .filter(|r| r.kind == "header");
    if let Some(h) = &header {
        let d = data(h);
        out.session_id = d.id;
        out.cwd = d.meta.and_then(|m| m.workspace).or(d.cwd);
        if d.format.as_deref().is_some_and(|f| f != "lazarus.session") {
            return decide(
                out,
                Verdict::Skipped(SkipWhy::Unreadable),
                format!(
                    "header names format {:?}, not lazarus.session",
                    d.format.unwrap_or_default()
                ),
            );
        }
    }
    if out.session_id.is_none() {
        out.session_id = Some(stem(meta.file_name).to_string()).filter(|s| !s.is_empty());
    }
    for j in (0..p.len()).rev() {
        if let Some(r) = p.get(j)
            && valid(&p, j)
        {
            out.last_record_id = r.seq.map(|s| s.to_string());
            break;
        }
    }

    // The one rule: does the last record say this session may owe work?
    if let Some((kind, data_json)) = (0..p.len()).rev().find_map(|j| {
        let r = p.get(j)?;
        valid(&p, j).then(|| (r.kind.as_str(), r.data.map(|d| d.get())))
    }) {
        let data: serde_json::Value = data_json
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or_default();
        if !owes_work_from_tail(kind, &data) {
            if kind == "header" {
                return decide(
                    out,
                    Verdict::Skipped(SkipWhy::Empty),
                    "header only: nothing happened yet".into(),
                );
            }
            let seq = out.last_record_id.clone().unwrap_or_else(|| "?".into());
            if let Some(f) = data.get("failure").filter(|f| !f.is_null()) {
                let message = f["message"].as_str().unwrap_or_default();
                let transient = f["transient"]
                    .as_bool()
                    .unwrap_or_else(|| is_transient_error(message));
                return decide(
                    out,
                    Verdict::Failed { transient },
                    format!("seq {seq}: response failed: {}", clip(message, 100)),
                );
            }
            return decide(
                out,
                Verdict::Finished,
                format!("seq {seq}: response ended the turn"),
            );
        }
    }

    let mut outcomes: HashSet<String> = HashSet::new();
    let mut saw_outcome = false;
    let mut resumed_since = false;
    let mut interrupted_note = String::new();
    let mut i = p.len();
    while i > 0 {
        i -= 1;
        let Some(r) = p.get(i) else { continue };
        if !valid(&p, i) {
            continue;
        }
        let seq = r.seq.map_or("?".to_string(), |s| s.to_string());
        match r.kind.as_str() {
            "header" => break,
            "resume" => resumed_since = true,
            "fork" => {}
            "interrupted" => {
                let d = data(r);
                // Ctrl-C (`sigint`) is the user asking to stop: leave it stopped — unless it
                // was resumed since (a receipt follows), and cut off again. A stop the system
                // forced (`sigterm`, `shutdown`) is resumed.
                if !resumed_since && matches!(d.reason.as_deref(), Some("user" | "sigint")) {
                    return decide(
                        out,
                        Verdict::UserStopped,
                        format!("seq {seq}: interrupted by the user"),
                    );
                }
                interrupted_note =
                    format!(" (after an interruption: {})", d.reason.unwrap_or_default());
            }
            "input" => {
                if saw_outcome {
                    return decide(
                        out,
                        Verdict::InterruptedAfterToolResult,
                        format!(
                            "seq {seq}: tool outcomes recorded, no response after them{interrupted_note}"
                        ),
                    );
                }
                let text = data(r).text.unwrap_or_default();
                let (v, why) = match user_text_kind(&text) {
                    UserText::Real => (Verdict::PendingInput, "input not answered"),
                    UserText::Trivial => (Verdict::Skipped(SkipWhy::TrivialInput), "trivial input"),
                    UserText::Heartbeat => {
                        (Verdict::Skipped(SkipWhy::Heartbeat), "heartbeat input")
                    }
                    UserText::Cron => (Verdict::Skipped(SkipWhy::Cron), "cron input"),
                };
                return decide(
                    out,
                    v,
                    format!("seq {seq}: {why}: {:?}{interrupted_note}", clip(&text, 60)),
                );
            }
            "control" => {
                let d = data(r);
                match d.action.as_deref() {
                    Some("resume") => {
                        return decide(
                            out,
                            Verdict::PendingInput,
                            format!(
                                "seq {seq}: resume control input not acted on{interrupted_note}"
                            ),
                        );
                    }
                    Some("stop" | "cancel" | "abort") => {
                        return decide(
                            out,
                            Verdict::UserStopped,
                            format!("seq {seq}: {} control input", d.action.unwrap_or_default()),
                        );
                    }
                    _ => {}
                }
            }
            "turn_start" => {
                if saw_outcome {
                    return decide(
                        out,
                        Verdict::InterruptedAfterToolResult,
                        format!(
                            "seq {seq}: tool outcomes recorded, no response after them{interrupted_note}"
                        ),
                    );
                }
                return decide(
                    out,
                    Verdict::InterruptedStream,
                    format!(
                        "seq {seq}: a model request was open (turn started, no response){interrupted_note}"
                    ),
                );
            }
            "tool_intent" | "tool_start" => {
                let d = data(r);
                let cid = d.call_id.unwrap_or_default();
                if !outcomes.contains(&cid) {
                    return decide(
                        out,
                        Verdict::InterruptedToolCall,
                        format!(
                            "seq {seq}: tool call {} ({cid}) has no outcome{interrupted_note}",
                            d.name.unwrap_or_default()
                        ),
                    );
                }
            }
            "tool_outcome" => {
                if let Some(c) = data(r).call_id {
                    outcomes.insert(c);
                }
                saw_outcome = true;
            }
            "response" => {
                let d = data(r);
                let open: Vec<String> = d
                    .items
                    .iter()
                    .filter(|it| it.ty == "tool_call")
                    .filter_map(|it| {
                        let cid = it
                            .call_id
                            .clone()
                            .or_else(|| it.id.clone())
                            .unwrap_or_default();
                        (!outcomes.contains(&cid)).then(|| it.name.clone().unwrap_or(cid))
                    })
                    .collect();
                if !open.is_empty() {
                    return decide(
                        out,
                        Verdict::InterruptedToolCall,
                        format!(
                            "seq {seq}: tool call {} has no outcome{interrupted_note}",
                            open.join(", ")
                        ),
                    );
                }
                if saw_outcome {
                    return decide(
                        out,
                        Verdict::InterruptedAfterToolResult,
                        format!(
                            "seq {seq}: every tool call has an outcome, the model never saw them{interrupted_note}"
                        ),
                    );
                }
                if let Some(f) = d.failure {
                    let transient = f
                        .transient
                        .unwrap_or_else(|| is_transient_error(&f.message));
                    return decide(
                        out,
                        Verdict::Failed { transient },
                        format!("seq {seq}: response failed: {}", clip(&f.message, 100)),
                    );
                }
                return decide(
                    out,
                    Verdict::Finished,
                    format!("seq {seq}: response ended the turn"),
                );
            }
            _ => {}
        }
    }
    if may_grow && !(i == 0 && p.get(0).is_some_and(|r| r.kind == "header")) {
        return need_more(p.torn);
    }
    if saw_outcome {
        return decide(
            out,
            Verdict::InterruptedAfterToolResult,
            "tool outcomes recorded, no response after them".into(),
        );
    }
    let r = if p.len() == 0 && !p.torn {
        "empty file"
    } else if header.is_some() || p.get(0).is_some_and(|r| r.kind == "header") {
        "header only: nothing happened yet"
    } else {
        "no meaningful record"
    };
    decide(out, Verdict::Skipped(SkipWhy::Empty), r.into())
}
