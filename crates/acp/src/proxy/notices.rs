//! What the proxy says when the agent died: to the agent (in boot-resume's words: which calls
//! were cut off, that their effect is unknown), to the editor (each cut-off call `failed`,
//! with why; one plain message about the restart), and, when the agent lost the session, the
//! conversation as the journal recorded it — as text for the agent, as `session/update`s for
//! the editor. Pure functions over the calls and the journal's entries.

use lazarus_boot_resume::{InterruptedCall, Verdict};
use serde_json::{Value, json};

use super::calls::{Call, Calls, Closed, cut};
use super::rpc;

/// The first paragraph of what the agent is told, in the words of boot-resume's message.
pub const RESUME_BASE: &str = "[System] Your previous turn was interrupted (the agent process stopped and was restarted) \
while you were working. Continue from the existing transcript and finish the interrupted task. \
A tool call that was running may have half-run: check its effects before repeating it.";

/// The most bytes of recorded conversation given to an agent that lost its context (the
/// newest part is kept).
pub const TRANSCRIPT_BYTES_MAX: usize = 48 * 1024;

/// How the agent came back, for the editor's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Back {
    /// It loaded (or resumed) the session: it has its context.
    Loaded,
    /// It could not (the reason): a new session of its own, given the recorded conversation.
    Lost(String),
}

/// What the agent is told when it goes on: boot-resume's message naming each call in doubt
/// (when its turn was cut off), the calls that did not run, and, when it lost the session,
/// the conversation so far. `None`: nothing to tell.
pub fn for_agent(
    calls: &Calls,
    closed: &[(usize, Closed)],
    turn_cut_off: bool,
    transcript: Option<&str>,
) -> Option<String> {
    let in_doubt: Vec<InterruptedCall> = closed
        .iter()
        .filter(|(_, how)| *how == Closed::InDoubt)
        .map(|&(i, _)| interrupted(calls.get(i)))
        .collect();
    let mut s = String::new();
    if turn_cut_off || !closed.is_empty() {
        let verdict = if in_doubt.is_empty() {
            Verdict::Finished
        } else {
            Verdict::InterruptedToolCall
        };
        s = lazarus_boot_resume::inject::resume_message(RESUME_BASE, verdict, &in_doubt, None);
    }
    let not_run: Vec<String> = closed
        .iter()
        .filter(|(_, how)| *how == Closed::NotRun)
        .map(|&(i, _)| interrupted(calls.get(i)).describe())
        .collect();
    if !not_run.is_empty() {
        s.push_str(&format!(
            "\n\nThese calls were waiting for permission when it stopped and did not run: {}.",
            not_run.join("; ")
        ));
    }
    if let Some(t) = transcript {
        if !s.is_empty() {
            s.push_str("\n\n");
        }
        s.push_str(
            "[System] You lost this session's context when you were restarted. The conversation so far, as it was recorded:\n\n",
        );
        s.push_str(t);
    }
    (!s.is_empty()).then_some(s)
}

fn interrupted(c: &Call) -> InterruptedCall {
    InterruptedCall::new(&c.tool, c.arguments().as_ref(), Some(&c.live_id))
}

/// The text a closed call shows in the editor.
pub fn call_text(how: Closed, died: &str) -> String {
    match how {
        Closed::InDoubt => format!(
            "Cut off: the agent process stopped ({died}) while this call may have been running. \
Its effect is unknown: it may have run fully, partly or not at all. Lazarus restarted the agent \
and told it to check before running it again."
        ),
        Closed::NotRun => format!(
            "Not run: the agent process stopped ({died}) before this call was allowed to start."
        ),
    }
}

/// The editor's update closing call `c`: `tool_call_update` when the editor has the call,
/// else a whole `tool_call`.
pub fn call_update(sid: &str, c: &Call, how: Closed, died: &str, editor_has_it: bool) -> Value {
    let content =
        json!([{ "type": "content", "content": { "type": "text", "text": call_text(how, died) } }]);
    let mut u = json!({
        "sessionUpdate": if editor_has_it { "tool_call_update" } else { "tool_call" },
        "toolCallId": c.live_id,
        "status": "failed",
        "content": content,
    });
    if !editor_has_it {
        u["title"] = json!(if c.title.is_empty() {
            &c.tool
        } else {
            &c.title
        });
        if let Some(r) = &c.raw_input {
            u["rawInput"] = r.clone();
        }
    }
    rpc::session_update(sid, u)
}

/// The one message the editor sees about what happened: `event` (what the agent did), then
/// how it came back and what that means for the calls.
pub fn for_editor(event: &str, back: &Back, closed: &[(usize, Closed)]) -> String {
    let mut s = format!("Lazarus: {event}; ");
    match back {
        Back::Loaded => s.push_str("it has this session back."),
        Back::Lost(why) => s.push_str(&format!(
            "it could not load this session ({why}), so it lost its context: Lazarus gave it the conversation it recorded."
        )),
    }
    let doubt = closed.iter().filter(|(_, h)| *h == Closed::InDoubt).count();
    let not_run = closed.len() - doubt;
    if doubt > 0 {
        s.push_str(&format!(
            " {doubt} tool call{} cut off: in doubt, not run again unless the agent checks first.",
            if doubt == 1 { " was" } else { "s were" }
        ));
    }
    if not_run > 0 {
        s.push_str(&format!(
            " {not_run} call{} waiting for permission did not run.",
            if not_run == 1 { "" } else { "s" }
        ));
    }
    s
}

/// An agent message chunk for the editor.
pub fn message_update(sid: &str, text: &str) -> Value {
    rpc::session_update(
        sid,
        json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } }),
    )
}

/// The text of a prompt's content blocks (resources by their text or their URI).
pub fn prompt_text(prompt: &Value) -> String {
    let mut out = Vec::new();
    for b in prompt.as_array().into_iter().flatten() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    out.push(t.to_string());
                }
            }
            Some("resource") => {
                let r = b.get("resource");
                let uri = r.and_then(|r| r.get("uri")).and_then(Value::as_str);
                match r.and_then(|r| r.get("text")).and_then(Value::as_str) {
                    Some(t) => out.push(format!("[{}]\n{t}", uri.unwrap_or("resource"))),
                    None => out.push(format!("[{}]", uri.unwrap_or("resource"))),
                }
            }
            Some("resource_link") => {
                if let Some(u) = b.get("uri").and_then(Value::as_str) {
                    out.push(format!("[{u}]"));
                }
            }
            Some(other) => out.push(format!("[{other}]")),
            None => {}
        }
    }
    out.join("\n")
}

/// The conversation the entries record, as plain text for an agent: prompts, answers, tool
/// calls and how they ended; the newest [`TRANSCRIPT_BYTES_MAX`] bytes of it.
pub fn transcript(entries: &[Value]) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut speaking: Option<&'static str> = None;
    let mut calls = Calls::default();
    for e in entries {
        calls.apply(e);
        if e.get("replay").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let Some(msg) = e.get("msg") else { continue };
        let from = e.get("from").and_then(Value::as_str);
        let method = msg.get("method").and_then(Value::as_str);
        match (from, method) {
            (Some("editor") | Some("proxy"), Some("session/prompt")) => {
                let text = prompt_text(
                    msg.get("params")
                        .and_then(|p| p.get("prompt"))
                        .unwrap_or(&Value::Null),
                );
                lines.push(format!("User: {text}"));
                speaking = None;
            }
            (Some("agent"), Some("session/update")) => {
                let Some(u) = msg.get("params").and_then(|p| p.get("update")) else {
                    continue;
                };
                match u.get("sessionUpdate").and_then(Value::as_str) {
                    Some("agent_message_chunk") => {
                        let t = u
                            .get("content")
                            .and_then(|c| c.get("text"))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        if speaking == Some("agent") {
                            if let Some(l) = lines.last_mut() {
                                l.push_str(t);
                            }
                        } else {
                            lines.push(format!("Assistant: {t}"));
                            speaking = Some("agent");
                        }
                    }
                    Some("tool_call_update") | Some("tool_call") => {
                        let status = u.get("status").and_then(Value::as_str);
                        if matches!(status, Some("completed" | "failed")) {
                            let id = u.get("toolCallId").and_then(Value::as_str).unwrap_or("");
                            if let Some(i) = calls.by_live_id(id) {
                                let c = calls.get(i);
                                let args = c
                                    .arguments()
                                    .map(|a| match a {
                                        Value::String(s) => s,
                                        other => other.to_string(),
                                    })
                                    .unwrap_or_default();
                                let result = super::calls::result_text(u);
                                lines.push(format!(
                                    "Tool call {} {args} ({id}): {}{}",
                                    c.tool,
                                    status.unwrap_or(""),
                                    if result.is_empty() {
                                        String::new()
                                    } else {
                                        format!(": {result}")
                                    }
                                ));
                            }
                            speaking = None;
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    for i in 0..calls.all().len() {
        let c = calls.get(i);
        if let Some(super::calls::Ending::Closed(how)) = c.ending {
            lines.push(format!(
                "Tool call {} ({}): {}",
                c.tool,
                c.live_id,
                super::journal::closed_text(how)
            ));
        }
    }
    let mut text = lines.join("\n");
    if text.len() > TRANSCRIPT_BYTES_MAX {
        let mut start = text.len() - TRANSCRIPT_BYTES_MAX;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        let from = text[start..].find('\n').map_or(start, |n| start + n + 1);
        text = format!(
            "[… the earlier conversation is left out …]\n{}",
            &text[from..]
        );
    }
    let mut t = text;
    cut(&mut t, TRANSCRIPT_BYTES_MAX + 64);
    t
}

/// The session as the journal recorded it, for an editor whose agent lost it: each prompt
/// as `user_message_chunk`s, and what the agent and the proxy told the editor, in order
/// (what a load replayed left out: the editor had it already then).
pub fn replay_for_editor(sid: &str, entries: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for e in entries {
        if e.get("replay").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let Some(msg) = e.get("msg") else { continue };
        let from = e.get("from").and_then(Value::as_str);
        let to = e.get("to").and_then(Value::as_str);
        match (from, msg.get("method").and_then(Value::as_str)) {
            (Some("editor"), Some("session/prompt")) => {
                for b in msg
                    .get("params")
                    .and_then(|p| p.get("prompt"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push(rpc::session_update(
                        sid,
                        json!({ "sessionUpdate": "user_message_chunk", "content": b }),
                    ));
                }
            }
            (Some("agent"), Some("session/update")) => {
                let mut m = msg.clone();
                rpc::set_session_id(&mut m, sid);
                out.push(m);
            }
            // an agent that announces a call only in its permission question (Gemini CLI):
            // the question's call, so the editor has the card its later updates change
            (Some("agent"), Some("session/request_permission")) => {
                if let Some(call) = msg.get("params").and_then(|p| p.get("toolCall")) {
                    let mut u = call.clone();
                    u["sessionUpdate"] = json!("tool_call");
                    out.push(rpc::session_update(sid, u));
                }
            }
            (Some("proxy"), Some("session/update")) if to == Some("editor") => {
                let mut m = msg.clone();
                rpc::set_session_id(&mut m, sid);
                out.push(m);
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
