//! Native Lazarus session ledgers (`lazarus.session`, one JSON record per line).
//!
//! Classified from bytes only: each line is
//! `{"seq":N,"ts":"...","kind":K,"data":{...},"crc":"........"}`, and a line whose checksum
//! fails is not part of the log (the ledger's own framing check decides). Whether the session
//! owes work at all is the session crate's rule for a tail
//! ([`lazarus_session::state::owes_work_from_records`], the twin of the rule the runner and
//! the gateway apply after a full replay); this classifier only says *how* it was cut off,
//! from the records before the last one.
use super::{Parsed, clip, need_more, stem};
use crate::lines::{UserText, is_transient_error, user_text_kind};
use crate::verdict::{Classification, SessionMeta, SkipWhy, Verdict};
use lazarus_session::state::owes_work_from_records;
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
    /// The header's framing version.
    #[serde(default)]
    version: Option<serde_json::Value>,
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
    /// A program that writes the session through the Python package (`openai-agents`,
    /// `langgraph`): it resumes the session, not Lazarus.
    #[serde(default)]
    host: Option<String>,
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
fn valid<'a>(p: &Parsed<'a, Rec<'a>>, i: usize) -> bool {
    lazarus_ledger::frame::check_crc(p.lines[i]).is_ok()
}

fn data(r: &Rec) -> Data {
    r.data
        .and_then(|d| serde_json::from_str(d.get()).ok())
        .unwrap_or_default()
}

/// Classifies a Lazarus ledger tail, in four steps: the header's facts, the last record
/// (which settles a session that owes nothing), then a walk back to see how it was cut off.
pub fn classify(tail: &[u8], meta: &SessionMeta) -> Classification {
    let p: Parsed<Rec> = Parsed::new(tail, meta.at_start);
    let mut out = Classification::new(Verdict::Skipped(SkipWhy::Empty), "");
    out.torn = p.torn;
    let header = header_record(&p, meta);
    if let Err(why) = read_header(&mut out, header.as_ref(), meta) {
        return decided(out, Verdict::Skipped(SkipWhy::Unreadable), why);
    }
    if let Some(v) = header.as_ref().and_then(|h| data(h).version)
        && v.as_u64() != Some(lazarus_ledger::FORMAT_VERSION)
    {
        return super::unknown_format(
            &mut out,
            "ledger format version",
            &v.to_string(),
            &lazarus_ledger::FORMAT_VERSION.to_string(),
        );
    }
    out.last_record_id = last_valid(&p).and_then(|j| p.get(j)?.seq.map(|s| s.to_string()));
    let seq = out.last_record_id.clone().unwrap_or_else(|| "?".into());
    if let Some(host) = header.as_ref().and_then(|h| data(h).meta?.host) {
        return host_session(&p, out, &host);
    }
    let may_grow = !meta.at_start && !meta.at_cap;
    let owed = match owes_work(&p, header.as_ref()) {
        Some(owed) => owed,
        None if may_grow => return need_more(p.torn),
        // the whole file (or as much as may be read) cannot tell: say it may owe work
        None => true,
    };
    if !owed && let Some((v, why)) = settled_by_last_record(&p, &seq) {
        return decided(out, v, why);
    }
    match walk_back(&p, may_grow, header.is_some(), owed) {
        Walk::Decided(v, why) => decided(out, v, why),
        Walk::NeedMore => need_more(p.torn),
    }
}

/// A session a program writes through the Python package: its program resumes it, so it is
/// skipped (`sdk_owned`); a call it announced with no outcome in the tail is in doubt, as a
/// native call's start without an outcome is (the session crate's status rule), and named.
fn host_session<'a>(p: &Parsed<'a, Rec<'a>>, out: Classification, host: &str) -> Classification {
    let mut open: Vec<(u64, String, String)> = Vec::new();
    for i in 0..p.len() {
        let Some(r) = p.get(i).filter(|_| valid(p, i)) else {
            continue;
        };
        let d = data(r);
        match (r.kind.as_str(), d.call_id) {
            ("host_call_intent", Some(id)) => open.push((
                r.seq.unwrap_or(0),
                id,
                r.data
                    .and_then(|v| serde_json::from_str::<serde_json::Value>(v.get()).ok())
                    .and_then(|v| v["tool"].as_str().map(str::to_string))
                    .unwrap_or_default(),
            )),
            ("host_call_outcome", Some(id)) => open.retain(|(_, c, _)| *c != id),
            ("host_clear", _) => open.clear(),
            _ => {}
        }
    }
    let mut out = out;
    let why = format!(
        "written through the Python package (host: {}): its program resumes it",
        clip(host, 40)
    );
    match open.last() {
        Some((seq, call, tool)) => {
            out.interrupted_call = Some(format!("{} ({})", clip(tool, 60), clip(call, 60)));
            decided(
                out,
                Verdict::Skipped(SkipWhy::SdkOwned),
                format!(
                    "seq {seq}: {} call(s) in doubt (announced, no outcome; the last: {} {}); {why}",
                    open.len(),
                    clip(tool, 60),
                    clip(call, 60)
                ),
            )
        }
        None => decided(out, Verdict::Skipped(SkipWhy::SdkOwned), why),
    }
}

/// The classification with its verdict and reason (and a note when the last line was torn).
fn decided(mut out: Classification, v: Verdict, reason: String) -> Classification {
    out.verdict = v;
    out.reason = if out.torn {
        format!("{reason}; torn last line ignored")
    } else {
        reason
    };
    out
}

/// The header record: given by the reader, or the first line of a window that starts at the
/// beginning of the file.
fn header_record<'a>(p: &Parsed<'a, Rec<'a>>, meta: &SessionMeta<'a>) -> Option<Rec<'a>> {
    meta.header
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
        .filter(|r| r.kind == "header")
}

/// Session id and workspace from the header (else the file name); `Err` for a ledger of
/// another format.
fn read_header(
    out: &mut Classification,
    header: Option<&Rec>,
    meta: &SessionMeta,
) -> Result<(), String> {
    if let Some(h) = header {
        let d = data(h);
        out.session_id = d.id;
        out.cwd = d.meta.and_then(|m| m.workspace).or(d.cwd);
        if let Some(f) = d.format.filter(|f| f != "lazarus.session") {
            return Err(format!("header names format {f:?}, not lazarus.session"));
        }
    }
    if out.session_id.is_none() {
        out.session_id = Some(stem(meta.file_name).to_string()).filter(|s| !s.is_empty());
    }
    Ok(())
}

/// Index of the last line that parses and passes its checksum.
fn last_valid<'a>(p: &Parsed<'a, Rec<'a>>) -> Option<usize> {
    (0..p.len())
        .rev()
        .find(|&j| p.get(j).is_some() && valid(p, j))
}

/// The one rule, over the valid records of the window (and the header when the reader gave
/// it): whether the session owes work; `None` when the window does not reach back far
/// enough to tell.
fn owes_work<'a>(p: &Parsed<'a, Rec<'a>>, header: Option<&Rec<'a>>) -> Option<bool> {
    let value = |r: &Rec| -> serde_json::Value {
        r.data
            .and_then(|d| serde_json::from_str(d.get()).ok())
            .unwrap_or_default()
    };
    let mut records: Vec<(String, serde_json::Value)> = Vec::new();
    let in_window_header = p.get(0).is_some_and(|r| r.kind == "header");
    if let Some(h) = header.filter(|_| !in_window_header) {
        records.push((h.kind.clone(), value(h)));
    }
    for i in 0..p.len() {
        if let Some(r) = p.get(i).filter(|_| valid(p, i)) {
            records.push((r.kind.clone(), value(r)));
        }
    }
    let view: Vec<(&str, &serde_json::Value)> =
        records.iter().map(|(k, d)| (k.as_str(), d)).collect();
    owes_work_from_records(&view)
}

/// A session that owes nothing is settled by its last record (finished, failed, or a
/// header alone).
fn settled_by_last_record<'a>(p: &Parsed<'a, Rec<'a>>, seq: &str) -> Option<(Verdict, String)> {
    let r = p.get(last_valid(p)?)?;
    let data: serde_json::Value = r
        .data
        .and_then(|d| serde_json::from_str(d.get()).ok())
        .unwrap_or_default();
    if r.kind == "header" {
        return Some((
            Verdict::Skipped(SkipWhy::Empty),
            "header only: nothing happened yet".into(),
        ));
    }
    if let Some(f) = data.get("failure").filter(|f| !f.is_null()) {
        let message = f["message"].as_str().unwrap_or_default();
        let transient = f["transient"]
            .as_bool()
            .unwrap_or_else(|| is_transient_error(message));
        return Some((
            Verdict::Failed { transient },
            format!("seq {seq}: response failed: {}", clip(message, 100)),
        ));
    }
    Some((
        Verdict::Finished,
        format!("seq {seq}: response ended the turn"),
    ))
}

enum Walk {
    Decided(Verdict, String),
    /// The deciding record lies before the window.
    NeedMore,
}

/// How a session that may owe work was cut off: back from the end, to the record that
/// decides it.
fn walk_back<'a>(p: &Parsed<'a, Rec<'a>>, may_grow: bool, has_header: bool, owed: bool) -> Walk {
    let mut back = Back {
        owed_past_answer: owed,
        ..Back::default()
    };
    let mut i = p.len();
    while i > 0 {
        i -= 1;
        let Some(r) = p.get(i) else { continue };
        if !valid(p, i) {
            continue;
        }
        if r.kind == "header" {
            break;
        }
        let seq = r.seq.map_or("?".to_string(), |s| s.to_string());
        if let Some((v, why)) = back.on_record(r, &seq) {
            return Walk::Decided(v, why);
        }
    }
    if may_grow && !(i == 0 && p.get(0).is_some_and(|r| r.kind == "header")) {
        return Walk::NeedMore;
    }
    if back.saw_outcome {
        return Walk::Decided(
            Verdict::InterruptedAfterToolResult,
            "tool outcomes recorded, no response after them".into(),
        );
    }
    let r = if p.len() == 0 && !p.torn {
        "empty file"
    } else if has_header || p.get(0).is_some_and(|r| r.kind == "header") {
        "header only: nothing happened yet"
    } else {
        "no meaningful record"
    };
    Walk::Decided(Verdict::Skipped(SkipWhy::Empty), r.into())
}

/// What the walk back has seen so far (newest first).
#[derive(Default)]
struct Back {
    /// Calls with an outcome.
    outcomes: HashSet<String>,
    saw_outcome: bool,
    /// A receipt was seen: an interruption before it was resumed.
    resumed_since: bool,
    /// Added to every reason once an interruption was passed.
    interrupted_note: String,
    /// The session owes work although its newest response ended its turn (an input was
    /// recorded while that turn was in flight): walk past that response to what is owed.
    owed_past_answer: bool,
}

impl Back {
    /// Reads one record; `Some` when it decides the verdict.
    fn on_record(&mut self, r: &Rec, seq: &str) -> Option<(Verdict, String)> {
        let note = &self.interrupted_note;
        match r.kind.as_str() {
            "resume" => self.resumed_since = true,
            "interrupted" => {
                let d = data(r);
                // Ctrl-C (`sigint`) is the user asking to stop: leave it stopped — unless it
                // was resumed since (a receipt follows), and cut off again. A stop the system
                // forced (`sigterm`, `shutdown`) is resumed. An imported session that owes
                // work (`import`) waits for the person who imported it.
                if !self.resumed_since
                    && matches!(d.reason.as_deref(), Some("user" | "sigint" | "import"))
                {
                    return Some((
                        Verdict::UserStopped,
                        format!("seq {seq}: interrupted by the user"),
                    ));
                }
                self.interrupted_note =
                    format!(" (after an interruption: {})", d.reason.unwrap_or_default());
            }
            "input" => return Some(self.input(r, seq)),
            "control" => {
                let d = data(r);
                match d.action.as_deref() {
                    Some("resume") => {
                        return Some((
                            Verdict::PendingInput,
                            format!("seq {seq}: resume control input not acted on{note}"),
                        ));
                    }
                    Some("stop" | "cancel" | "abort") => {
                        return Some((
                            Verdict::UserStopped,
                            format!("seq {seq}: {} control input", d.action.unwrap_or_default()),
                        ));
                    }
                    _ => {}
                }
            }
            "turn_start" => {
                if self.saw_outcome {
                    return Some(self.results_unseen(seq));
                }
                return Some((
                    Verdict::InterruptedStream,
                    format!(
                        "seq {seq}: a model request was open (turn started, no response){note}"
                    ),
                ));
            }
            "tool_intent" | "tool_start" => {
                let d = data(r);
                let cid = d.call_id.unwrap_or_default();
                if !self.outcomes.contains(&cid) {
                    return Some((
                        Verdict::InterruptedToolCall,
                        format!(
                            "seq {seq}: tool call {} ({cid}) has no outcome{note}",
                            d.name.unwrap_or_default()
                        ),
                    ));
                }
            }
            "tool_outcome" => {
                if let Some(c) = data(r).call_id {
                    self.outcomes.insert(c);
                }
                self.saw_outcome = true;
            }
            "response" => {
                let (v, why) = self.response(r, seq);
                let answered = matches!(v, Verdict::Finished | Verdict::Failed { .. });
                if answered && std::mem::take(&mut self.owed_past_answer) {
                    return None;
                }
                return Some((v, why));
            }
            _ => {}
        }
        None
    }

    /// Tool outcomes follow the last record that could have answered them.
    fn results_unseen(&self, seq: &str) -> (Verdict, String) {
        (
            Verdict::InterruptedAfterToolResult,
            format!(
                "seq {seq}: tool outcomes recorded, no response after them{}",
                self.interrupted_note
            ),
        )
    }

    /// The newest input decides: unanswered (or only trivial), unless outcomes came after it.
    fn input(&self, r: &Rec, seq: &str) -> (Verdict, String) {
        if self.saw_outcome {
            return self.results_unseen(seq);
        }
        let text = data(r).text.unwrap_or_default();
        let (v, why) = match user_text_kind(&text) {
            UserText::Real => (Verdict::PendingInput, "input not answered"),
            UserText::Trivial => (Verdict::Skipped(SkipWhy::TrivialInput), "trivial input"),
            UserText::Heartbeat => (Verdict::Skipped(SkipWhy::Heartbeat), "heartbeat input"),
            UserText::Cron => (Verdict::Skipped(SkipWhy::Cron), "cron input"),
        };
        (
            v,
            format!(
                "seq {seq}: {why}: {:?}{}",
                clip(&text, 60),
                self.interrupted_note
            ),
        )
    }

    /// The newest response decides: a call without outcome, results the model never saw, a
    /// failed request, or a finished turn.
    fn response(&self, r: &Rec, seq: &str) -> (Verdict, String) {
        let note = &self.interrupted_note;
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
                (!self.outcomes.contains(&cid)).then(|| it.name.clone().unwrap_or(cid))
            })
            .collect();
        if !open.is_empty() {
            return (
                Verdict::InterruptedToolCall,
                format!(
                    "seq {seq}: tool call {} has no outcome{note}",
                    open.join(", ")
                ),
            );
        }
        if self.saw_outcome {
            return (
                Verdict::InterruptedAfterToolResult,
                format!(
                    "seq {seq}: every tool call has an outcome, the model never saw them{note}"
                ),
            );
        }
        if let Some(f) = d.failure {
            let transient = f
                .transient
                .unwrap_or_else(|| is_transient_error(&f.message));
            return (
                Verdict::Failed { transient },
                format!("seq {seq}: response failed: {}", clip(&f.message, 100)),
            );
        }
        (
            Verdict::Finished,
            format!("seq {seq}: response ended the turn"),
        )
    }
}
