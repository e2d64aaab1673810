//! The tool calls of one session, as the wrapped agent reports them: announced (`tool_call`,
//! or the `toolCall` of a permission request), allowed or refused by the person, said to be
//! running (`in_progress`), ended (`completed`, `failed`), or closed by the proxy when the
//! agent died (in doubt, or not run). A pure function of the journal's entries: the proxy
//! feeds it each message as it passes, and rebuilds it from the ledger when it starts again.
//!
//! Agents differ in what they say, measured against the real ones: Gemini CLI 0.61.0 (in its
//! default mode) asks permission for a `toolCall` it never announces otherwise, says nothing
//! when the call starts, and reports `completed` at the end; OpenCode 1.18.33 announces
//! `pending`, says `in_progress` *before* it asks permission, and again once allowed. So a
//! call "may have run" unless something says it cannot have: its permission question was
//! still open, or refused, when the agent died.
//!
//! Call ids are the agent's, but not unique: Gemini CLI names a call after the model's id
//! (`run_shell_command__call01`), which a later turn may use again. A call announced under
//! an id whose previous call has ended is a new call; the ledger names it `ID#2`, `ID#3`….

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// Longest result text kept for a call's outcome record, in bytes (the whole message is in
/// the journal).
pub const RESULT_TEXT_MAX: usize = 4096;

/// What the person said to the call's permission question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    NotAsked,
    /// Asked in the request with this key (`GEN:ID`); the options that allow it.
    Asked {
        request: String,
        allow: Vec<String>,
    },
    Allowed,
    Refused,
}

/// How the proxy closed a call the agent never ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// It may have run, fully, partly or not at all.
    InDoubt,
    /// It cannot have run: its permission question was open or refused.
    NotRun,
}

impl Closed {
    pub fn as_str(self) -> &'static str {
        match self {
            Closed::InDoubt => "in_doubt",
            Closed::NotRun => "not_run",
        }
    }

    fn parse(s: &str) -> Option<Closed> {
        match s {
            "in_doubt" => Some(Closed::InDoubt),
            "not_run" => Some(Closed::NotRun),
            _ => None,
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Completed(String),
    Failed(String),
    Closed(Closed),
}

/// One call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Its id in the ledger (the agent's, made unique).
    pub ledger_id: String,
    /// Its id in the agent's messages.
    pub live_id: String,
    /// What it was first called (its title, else its kind).
    pub tool: String,
    /// Its latest title.
    pub title: String,
    /// Its latest `rawInput`.
    pub raw_input: Option<Value>,
    pub permission: Permission,
    /// The agent said `in_progress`.
    pub said_running: bool,
    pub ending: Option<Ending>,
}

impl Call {
    /// What the proxy closes it as when the agent dies without ending it.
    pub fn verdict_at_death(&self) -> Closed {
        match self.permission {
            Permission::Asked { .. } | Permission::Refused => Closed::NotRun,
            // allowed; or never asked and announced or said running: nothing says it did
            // not start
            Permission::Allowed | Permission::NotAsked => Closed::InDoubt,
        }
    }

    /// Its arguments, for messages: the raw input, else the latest title when it says more
    /// than the tool's name.
    pub fn arguments(&self) -> Option<Value> {
        self.raw_input.clone().or_else(|| {
            (!self.title.is_empty() && self.title != self.tool)
                .then(|| Value::String(self.title.clone()))
        })
    }
}

/// A change the journal records as a host call record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A new call (`host_call_intent`): from now on it may run.
    Announced(usize),
    /// It ended (`host_call_outcome`).
    Ended(usize),
}

/// Every call of a session.
#[derive(Debug, Default, Clone)]
pub struct Calls {
    list: Vec<Call>,
    /// Each agent id's latest call.
    current: HashMap<String, usize>,
    ledger_ids: HashSet<String>,
}

/// The key of request `id` of agent generation `gen`.
pub fn request_key(generation: u64, id: &Value) -> String {
    format!("{generation}:{id}")
}

impl Calls {
    pub fn get(&self, i: usize) -> &Call {
        &self.list[i]
    }

    pub fn all(&self) -> &[Call] {
        &self.list
    }

    /// Calls not ended, by index.
    pub fn open(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.list.len()).filter(|&i| self.list[i].ending.is_none())
    }

    /// The latest call under agent id `live_id`.
    pub fn by_live_id(&self, live_id: &str) -> Option<usize> {
        self.current.get(live_id).copied()
    }

    /// Applies one journal entry (`{"from", "gen", "msg", "replay"?}` or a proxy event) and
    /// says what changed.
    pub fn apply(&mut self, entry: &Value) -> Vec<Change> {
        let generation = entry.get("gen").and_then(Value::as_u64).unwrap_or(0);
        let replay = entry.get("replay").and_then(Value::as_bool) == Some(true);
        match entry.get("from").and_then(Value::as_str) {
            Some("agent") => {
                let Some(msg) = entry.get("msg") else {
                    return Vec::new();
                };
                match msg.get("method").and_then(Value::as_str) {
                    Some("session/update") => match msg.get("params").and_then(|p| p.get("update"))
                    {
                        Some(u) => self.on_update(u, replay),
                        None => Vec::new(),
                    },
                    Some("session/request_permission") => {
                        match (msg.get("id"), msg.get("params")) {
                            (Some(id), Some(p)) => {
                                self.on_permission_request(request_key(generation, id), p)
                            }
                            _ => Vec::new(),
                        }
                    }
                    _ => Vec::new(),
                }
            }
            Some("editor") => {
                let Some(msg) = entry.get("msg") else {
                    return Vec::new();
                };
                if msg.get("method").is_none()
                    && let Some(id) = msg.get("id")
                {
                    self.on_permission_answer(&request_key(generation, id), msg);
                }
                Vec::new()
            }
            Some("proxy") if entry.get("event").and_then(Value::as_str) == Some("closed") => {
                let call = entry.get("call").and_then(Value::as_str).unwrap_or("");
                let how = entry
                    .get("as")
                    .and_then(Value::as_str)
                    .and_then(Closed::parse);
                match (self.list.iter().position(|c| c.ledger_id == call), how) {
                    (Some(i), Some(how)) if self.list[i].ending.is_none() => {
                        self.list[i].ending = Some(Ending::Closed(how));
                        vec![Change::Ended(i)]
                    }
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// The call an agent message about `live_id` is about: its open call, or a new one. A
    /// final status for an id whose call has ended is a repeat (a load's replay): `None`.
    fn find_or_announce(
        &mut self,
        live_id: &str,
        final_status: bool,
        replay: bool,
        changes: &mut Vec<Change>,
    ) -> Option<usize> {
        if let Some(&i) = self.current.get(live_id) {
            if self.list[i].ending.is_none() {
                return Some(i);
            }
            if final_status {
                return None;
            }
        }
        if replay {
            // a load's replay says what was; it announces nothing new
            return None;
        }
        let mut ledger_id = live_id.to_string();
        let mut n = 1;
        while self.ledger_ids.contains(&ledger_id) {
            n += 1;
            ledger_id = format!("{live_id}#{n}");
        }
        self.ledger_ids.insert(ledger_id.clone());
        let i = self.list.len();
        self.list.push(Call {
            ledger_id,
            live_id: live_id.to_string(),
            tool: String::new(),
            title: String::new(),
            raw_input: None,
            permission: Permission::NotAsked,
            said_running: false,
            ending: None,
        });
        self.current.insert(live_id.to_string(), i);
        changes.push(Change::Announced(i));
        Some(i)
    }

    fn fill(&mut self, i: usize, call: &Value) {
        let c = &mut self.list[i];
        if let Some(t) = call
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            c.title = t.to_string();
            if c.tool.is_empty() {
                c.tool = t.to_string();
            }
        }
        if c.tool.is_empty()
            && let Some(k) = call.get("kind").and_then(Value::as_str)
        {
            c.tool = k.to_string();
        }
        if let Some(r) = call.get("rawInput").filter(|r| !r.is_null()) {
            c.raw_input = Some(r.clone());
        }
    }

    fn on_update(&mut self, u: &Value, replay: bool) -> Vec<Change> {
        let mut changes = Vec::new();
        if !matches!(
            u.get("sessionUpdate").and_then(Value::as_str),
            Some("tool_call" | "tool_call_update")
        ) {
            return changes;
        }
        let Some(live_id) = u.get("toolCallId").and_then(Value::as_str) else {
            return changes;
        };
        let status = u.get("status").and_then(Value::as_str);
        let final_status = matches!(status, Some("completed" | "failed"));
        let Some(i) = self.find_or_announce(live_id, final_status, replay, &mut changes) else {
            return changes;
        };
        self.fill(i, u);
        match status {
            Some("in_progress") => self.list[i].said_running = true,
            Some("completed") => {
                self.list[i].ending = Some(Ending::Completed(result_text(u)));
                changes.push(Change::Ended(i));
            }
            Some("failed") => {
                self.list[i].ending = Some(Ending::Failed(result_text(u)));
                changes.push(Change::Ended(i));
            }
            _ => {}
        }
        changes
    }

    fn on_permission_request(&mut self, request: String, params: &Value) -> Vec<Change> {
        let mut changes = Vec::new();
        let Some(call) = params.get("toolCall") else {
            return changes;
        };
        let Some(live_id) = call.get("toolCallId").and_then(Value::as_str) else {
            return changes;
        };
        let Some(i) = self.find_or_announce(live_id, false, false, &mut changes) else {
            return changes;
        };
        self.fill(i, call);
        let allow = params
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|o| {
                o.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.starts_with("allow"))
            })
            .filter_map(|o| o.get("optionId").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        self.list[i].permission = Permission::Asked { request, allow };
        changes
    }

    /// The person's answer to permission request `request`: allowed only when an option
    /// that allows was selected (a cancelled question, an error, another option: refused).
    fn on_permission_answer(&mut self, request: &str, answer: &Value) {
        let Some(c) = self.list.iter_mut().find(
            |c| matches!(&c.permission, Permission::Asked { request: r, .. } if r == request),
        ) else {
            return;
        };
        let Permission::Asked { allow, .. } = &c.permission else {
            return;
        };
        let outcome = answer.get("result").and_then(|r| r.get("outcome"));
        let selected = outcome
            .filter(|o| o.get("outcome").and_then(Value::as_str) == Some("selected"))
            .and_then(|o| o.get("optionId"))
            .and_then(Value::as_str);
        c.permission = match selected {
            Some(opt) if allow.iter().any(|a| a == opt) => Permission::Allowed,
            _ => Permission::Refused,
        };
    }
}

/// A call's result as text: its content's text and diffs, else its raw output, cut to
/// [`RESULT_TEXT_MAX`] bytes.
pub fn result_text(u: &Value) -> String {
    let mut out = String::new();
    for c in u
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = match c.get("type").and_then(Value::as_str) {
            Some("content") => c
                .get("content")
                .and_then(|b| b.get("text"))
                .and_then(Value::as_str)
                .map(str::to_string),
            Some("diff") => c
                .get("path")
                .and_then(Value::as_str)
                .map(|p| format!("(edited {p})")),
            Some("terminal") => Some("(terminal output)".to_string()),
            _ => None,
        };
        if let Some(t) = text {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&t);
        }
    }
    if out.is_empty()
        && let Some(r) = u.get("rawOutput").filter(|r| !r.is_null())
    {
        out = match r {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    }
    cut(&mut out, RESULT_TEXT_MAX);
    out
}

/// Cuts `s` to at most `max` bytes, on a character boundary, marking the cut.
pub fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}

#[cfg(test)]
mod tests;
