//! When the agent dies: the calls it left closed and shown, the agent started again and
//! initialized as the editor did, each session taken back (resume, load, or a new one given
//! the recorded conversation), the agent told what happened — as the continuation of the
//! editor's open prompt, or in front of the next one — and the editor's held messages sent
//! on. Also an editor's own load, which closes what a dead proxy's agent left open.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWrite;

use super::calls::Closed;
use super::child::Agent;
use super::notices::{self, Back};
use super::{
    AGENT_ANSWER_TIMEOUT, EditorReq, Own, Proxy, ProxyError, REPLAY_QUIET, REPLAY_QUIET_MAX,
    RESTART_WINDOW, RESTARTS_MAX, rpc,
};

/// How a session is taken back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Resume,
    Load,
}

impl How {
    fn as_str(self) -> &'static str {
        match self {
            How::Resume => "resume",
            How::Load => "load",
        }
    }
}

/// A restart in progress.
#[derive(Debug)]
pub struct Restart {
    /// How the agent ended, in words.
    died: String,
    /// Sessions still to take back.
    queue: VecDeque<String>,
    /// The calls closed in each session, for what the agent is told.
    closed: HashMap<String, Vec<(usize, Closed)>>,
    /// The agent must answer before this.
    deadline: Instant,
    /// A load's replay being swallowed: the session, since when, and when it counts as over.
    quiet: Option<(String, Instant, Instant)>,
}

impl Restart {
    pub fn wake_at(&self) -> Option<Instant> {
        Some(match &self.quiet {
            Some((_, _, wake)) => (*wake).min(self.deadline),
            None => self.deadline,
        })
    }
}

/// What the editor sees for a call closed in doubt or not run.
const BEFORE_START: &str = "before this proxy started";

impl<W: AsyncWrite + Unpin> Proxy<W> {
    /// Closes the calls of `sid` the agent never ended, journals why, and shows each to the
    /// editor as `failed` (`editor_has`: whether the editor has the call's card).
    async fn close_open(
        &mut self,
        sid: &str,
        died: &str,
        editor_has: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(usize, Closed)>, ProxyError> {
        let Some(live) = self.sessions.get(sid) else {
            return Ok(Vec::new());
        };
        let open: Vec<(usize, Closed, String)> = live
            .calls
            .open()
            .map(|i| {
                let c = live.calls.get(i);
                (i, c.verdict_at_death(), c.ledger_id.clone())
            })
            .collect();
        for (_, how, ledger_id) in &open {
            let entry = json!({"from": "proxy", "event": "closed", "gen": self.generation,
                "call": ledger_id, "as": how.as_str(), "why": died});
            self.record(sid, entry, 0);
        }
        for (i, how, _) in &open {
            let update = match self.sessions.get(sid) {
                Some(l) => {
                    let c = l.calls.get(*i);
                    notices::call_update(sid, c, *how, died, editor_has(&c.live_id))
                }
                None => continue,
            };
            self.tell_editor(sid, update).await?;
        }
        Ok(open.into_iter().map(|(i, how, _)| (i, how)).collect())
    }

    /// The agent's end was read: close, tell, start it again.
    pub(super) async fn agent_died(&mut self) -> Result<(), ProxyError> {
        let died = match self.agent.as_mut() {
            Some(a) => a.wait().await,
            None => "stopped".to_string(),
        };
        self.agent = None;
        tracing::warn!("acp proxy: the agent {died}; starting it again");
        let mut sids: Vec<String> = self.sessions.keys().cloned().collect();
        sids.sort();
        let mut closed_by: HashMap<String, Vec<(usize, Closed)>> = HashMap::new();
        for sid in &sids {
            let entry = json!({"from": "proxy", "event": "agent_stopped", "gen": self.generation, "how": died});
            self.record(sid, entry, 0);
            let closed = self.close_open(sid, &died, &|_| true).await?;
            closed_by.insert(sid.clone(), closed);
        }
        if let Some(r) = self.restart.take() {
            // it died again while coming back
            for (sid, c) in r.closed {
                closed_by.entry(sid).or_default().extend(c);
            }
        }
        for live in self.sessions.values_mut() {
            live.swallowing = None;
        }
        self.own.clear();
        let now = Instant::now();
        self.deaths.push_back(now);
        while self
            .deaths
            .front()
            .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
        {
            self.deaths.pop_front();
        }
        if self.deaths.len() > RESTARTS_MAX {
            return self.give_up(&died).await;
        }
        // a few deaths in a row: a moment between starts
        let pause = Duration::from_millis(500 * (self.deaths.len() as u64 - 1));
        tokio::time::sleep(pause).await;
        self.generation += 1;
        match Agent::spawn(&self.cfg.agent, self.generation, self.agent_tx.clone()) {
            Ok(a) => self.agent = Some(a),
            Err(e) => {
                return self
                    .give_up(&format!("could not be started again: {e}"))
                    .await;
            }
        }
        let queue: VecDeque<String> = sids
            .into_iter()
            .filter(|s| self.sessions.get(s).is_some_and(|l| l.loading.is_none()))
            .collect();
        for sid in &queue {
            let entry = json!({"from": "proxy", "event": "agent_started", "gen": self.generation,
                "pid": self.agent.as_ref().map(|a| a.pid)});
            self.record(sid, entry, 0);
        }
        self.restart = Some(Restart {
            died,
            queue,
            closed: closed_by,
            deadline: now + AGENT_ANSWER_TIMEOUT,
            quiet: None,
        });
        match self.init_params.clone() {
            Some(params) if self.init_result.is_some() => {
                self.ask_agent(Own::Initialize, "initialize", params).await;
                Ok(())
            }
            // it never answered the editor's initialize: that is asked again as it was
            _ => self.finish().await,
        }
    }

    /// Too many deaths: every open request answered with why, every session told.
    async fn give_up(&mut self, last: &str) -> Result<(), ProxyError> {
        let text = format!(
            "the agent ({}) {last}, its {} stop within {:?}; Lazarus gave up restarting it",
            self.agent_name,
            ordinal(self.deaths.len()),
            RESTART_WINDOW
        );
        let reqs: Vec<String> = self.editor_reqs.keys().cloned().collect();
        for key in reqs {
            if let Ok(id) = serde_json::from_str::<Value>(&key) {
                let answer = rpc::error_response(&id, rpc::INTERNAL_ERROR, &text);
                self.send_editor(&serde_json::to_vec(&answer).unwrap_or_default())
                    .await?;
            }
        }
        let sids: Vec<String> = self.sessions.keys().cloned().collect();
        for sid in sids {
            let msg = notices::message_update(&sid, &format!("Lazarus: {text}."));
            self.tell_editor(&sid, msg).await?;
        }
        Err(ProxyError::Crashing {
            agent: self.cfg.agent.join(" "),
            deaths: self.deaths.len(),
            window: RESTART_WINDOW,
            last: last.to_string(),
        })
    }

    /// Takes the next session back, or ends the restart.
    async fn next_session(&mut self) -> Result<(), ProxyError> {
        loop {
            let Some(r) = self.restart.as_mut() else {
                return Ok(());
            };
            r.deadline = Instant::now() + AGENT_ANSWER_TIMEOUT;
            let Some(sid) = r.queue.pop_front() else {
                return self.finish().await;
            };
            let Some(live) = self.sessions.get(&sid) else {
                continue;
            };
            let params = json!({"sessionId": live.agent_sid, "cwd": live.cwd, "mcpServers": live.mcp_servers});
            let caps = self
                .init_result
                .as_ref()
                .and_then(|r| r.get("agentCapabilities"));
            let resume = caps
                .and_then(|c| c.get("sessionCapabilities"))
                .and_then(|s| s.get("resume"))
                .is_some_and(|r| !r.is_null());
            let load = caps
                .and_then(|c| c.get("loadSession"))
                .and_then(Value::as_bool)
                == Some(true);
            if resume {
                self.ask_agent(
                    Own::Reattach {
                        sid,
                        how: How::Resume,
                    },
                    "session/resume",
                    params,
                )
                .await;
            } else if load {
                self.ask_agent(
                    Own::Reattach {
                        sid,
                        how: How::Load,
                    },
                    "session/load",
                    params,
                )
                .await;
            } else {
                self.ask_fresh(&sid, None, "it cannot load sessions".into())
                    .await;
            }
            return Ok(());
        }
    }

    /// Session `sid` is back: its settings asked again, the editor told, the agent told (the
    /// editor's open prompt continued with it).
    async fn back(&mut self, sid: &str, back: Back) -> Result<(), ProxyError> {
        let (closed, died) = match self.restart.as_mut() {
            Some(r) => (r.closed.remove(sid).unwrap_or_default(), r.died.clone()),
            None => (Vec::new(), "stopped".into()),
        };
        let transcript = match &back {
            Back::Lost(_) => Some(notices::transcript(&self.journal.entries(sid).await)),
            Back::Loaded => None,
        };
        let Some(live) = self.sessions.get(sid) else {
            return self.next_session().await;
        };
        let agent_sid = live.agent_sid.clone();
        let prompt = live.prompt.clone();
        for (method, mut params) in live.settings.clone() {
            params["sessionId"] = json!(agent_sid);
            self.ask_agent(Own::Setting, &method, params).await;
        }
        let event = format!(
            "the agent ({}) {died} and was started again",
            self.agent_name
        );
        let msg = notices::message_update(sid, &notices::for_editor(&event, &back, &closed));
        self.tell_editor(sid, msg).await?;
        let Some(live) = self.sessions.get_mut(sid) else {
            return self.next_session().await;
        };
        let text = notices::for_agent(
            &live.calls,
            &closed,
            prompt.is_some(),
            transcript.as_deref(),
        );
        match (prompt, text) {
            (Some(id), Some(text)) => {
                // the editor's turn goes on: the agent's answer to this answers its prompt
                let msg = rpc::request(
                    &id,
                    "session/prompt",
                    json!({"sessionId": agent_sid, "prompt": [{"type": "text", "text": text}]}),
                );
                self.editor_reqs.insert(
                    rpc::key(&id),
                    EditorReq {
                        method: "session/prompt".into(),
                        sid: Some(sid.to_string()),
                        resend: None,
                        generation: self.generation,
                        params: Value::Null,
                    },
                );
                let bytes = serde_json::to_vec(&msg).unwrap_or_default();
                self.send_agent(&bytes).await;
                let entry =
                    json!({"from": "proxy", "to": "agent", "gen": self.generation, "msg": msg});
                self.record(sid, entry, bytes.len());
            }
            (None, Some(text)) => {
                live.tell_agent = Some(match live.tell_agent.take() {
                    Some(before) => format!("{before}\n\n{text}"),
                    None => text,
                });
            }
            (_, None) => {}
        }
        self.next_session().await
    }

    /// Every session is back: the editor's requests the dead agent never answered asked
    /// again (or answered with why not), then what the editor sent meanwhile.
    async fn finish(&mut self) -> Result<(), ProxyError> {
        let died = self
            .restart
            .take()
            .map_or_else(|| "stopped".to_string(), |r| r.died);
        let stale: Vec<(String, EditorReq)> = self
            .editor_reqs
            .iter()
            .filter(|(_, r)| r.generation < self.generation)
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        for (key, mut req) in stale {
            match req.resend.clone() {
                Some(mut msg) => {
                    if let Some(sid) = &req.sid
                        && let Some(live) = self.sessions.get_mut(sid)
                    {
                        rpc::set_session_id(&mut msg, &live.agent_sid);
                        if matches!(req.method.as_str(), "session/load" | "session/resume") {
                            live.loading = Some(HashMap::new());
                        }
                    }
                    req.generation = self.generation;
                    self.editor_reqs.insert(key, req);
                    let bytes = serde_json::to_vec(&msg).unwrap_or_default();
                    self.send_agent(&bytes).await;
                }
                None => {
                    self.editor_reqs.remove(&key);
                    if let Ok(id) = serde_json::from_str::<Value>(&key) {
                        let text = format!(
                            "the agent ({}) {died} before it answered this; Lazarus started it again: ask again",
                            self.agent_name
                        );
                        let answer = rpc::error_response(&id, rpc::INTERNAL_ERROR, &text);
                        self.send_editor(&serde_json::to_vec(&answer).unwrap_or_default())
                            .await?;
                    }
                }
            }
        }
        while let Some(line) = self.held.pop_front() {
            self.on_editor_line(line).await?;
        }
        Ok(())
    }
}

/// "1st", "2nd", …
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The agent answers a request of the proxy's own.
pub async fn own_answer<W: AsyncWrite + Unpin>(
    p: &mut Proxy<W>,
    own: Own,
    msg: Value,
) -> Result<(), ProxyError> {
    let result = msg.get("result").cloned();
    match own {
        Own::Initialize => match result {
            Some(r) => {
                p.init_result = Some(r);
                match p.auth.clone() {
                    Some(auth) => p.ask_agent(Own::Authenticate, "authenticate", auth).await,
                    None => p.next_session().await?,
                }
            }
            None => {
                tracing::warn!(
                    "acp proxy: the restarted agent refused initialize ({}): stopping it",
                    rpc::error_text(&msg)
                );
                if let Some(a) = p.agent.as_mut() {
                    a.kill();
                }
            }
        },
        Own::Authenticate => p.next_session().await?,
        Own::Reattach { sid, how } => match result {
            Some(_) => {
                let agent_sid = p.sessions.get(&sid).map(|l| l.agent_sid.clone());
                let entry = json!({"from": "proxy", "event": "reattached", "gen": p.generation,
                    "how": how.as_str(), "agent_session_id": agent_sid});
                p.record(&sid, entry, 0);
                match how {
                    How::Resume => p.back(&sid, Back::Loaded).await?,
                    How::Load => {
                        let now = Instant::now();
                        if let Some(l) = p.sessions.get_mut(&sid) {
                            l.swallowing = Some(now);
                        }
                        if let Some(r) = p.restart.as_mut() {
                            r.quiet = Some((sid, now, now + REPLAY_QUIET));
                        }
                    }
                }
            }
            None => p.ask_fresh(&sid, None, rpc::error_text(&msg)).await,
        },
        Own::Fresh { sid, load, why } => {
            let agent_sid = result
                .as_ref()
                .and_then(|r| r.get("sessionId"))
                .and_then(Value::as_str)
                .map(str::to_string);
            match (agent_sid, result) {
                (Some(agent_sid), Some(result)) => {
                    p.remap(&sid, &agent_sid);
                    let entry = json!({"from": "proxy", "event": "reattached", "gen": p.generation,
                        "how": "new", "agent_session_id": agent_sid, "lost": why});
                    p.record(&sid, entry, 0);
                    match load {
                        Some((id, _)) => load_from_journal(p, &sid, id, result, why).await?,
                        None => p.back(&sid, Back::Lost(why)).await?,
                    }
                }
                _ => {
                    let err = rpc::error_text(&msg);
                    let text = format!(
                        "the agent could not take this session back ({why}) nor make a new one for it ({err})"
                    );
                    match load {
                        Some((id, _)) => {
                            let answer = rpc::error_response(&id, rpc::INTERNAL_ERROR, &text);
                            p.send_editor(&serde_json::to_vec(&answer).unwrap_or_default())
                                .await?;
                        }
                        None => {
                            let msg = notices::message_update(&sid, &format!("Lazarus: {text}."));
                            p.tell_editor(&sid, msg).await?;
                            if let Some(id) = p.sessions.get_mut(&sid).and_then(|l| l.prompt.take())
                            {
                                let answer = rpc::error_response(&id, rpc::INTERNAL_ERROR, &text);
                                p.send_editor(&serde_json::to_vec(&answer).unwrap_or_default())
                                    .await?;
                            }
                            p.next_session().await?;
                        }
                    }
                }
            }
        }
        Own::Setting => {}
    }
    Ok(())
}

/// The agent answered the editor's load (or resume) of a session.
pub async fn load_answered<W: AsyncWrite + Unpin>(
    p: &mut Proxy<W>,
    req: EditorReq,
    line: Vec<u8>,
    msg: Value,
) -> Result<(), ProxyError> {
    let sid = req.sid.clone().unwrap_or_default();
    let replayed = p
        .sessions
        .get_mut(&sid)
        .and_then(|l| l.loading.take())
        .unwrap_or_default();
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    if msg.get("result").is_none() {
        if p.sessions.get(&sid).is_some_and(|l| l.recorded) {
            // the agent lost it; the journal has it
            p.ask_fresh(&sid, Some((id, req.method.clone())), rpc::error_text(&msg))
                .await;
            return Ok(());
        }
        return p.send_editor(&line).await;
    }
    if let Some(live) = p.sessions.get(&sid)
        && !live.recorded
    {
        let meta = p.meta(&sid, &live.cwd.clone(), &live.mcp_servers.clone());
        match p.journal.create(&sid, meta).await {
            Ok(()) => {
                if let Some(l) = p.sessions.get_mut(&sid) {
                    l.recorded = true;
                }
                let asked = rpc::request(&id, &req.method, req.params.clone());
                let entry = json!({"from": "editor", "gen": req.generation, "msg": asked});
                p.record(&sid, entry, 0);
            }
            Err(e) => tracing::error!("acp proxy: cannot make a journal for session {sid:?}: {e}"),
        }
    }
    let len = line.len();
    let entry = json!({"from": "agent", "gen": p.generation, "msg": msg});
    p.record(&sid, entry, len);
    let has = |id: &str| replayed.contains_key(id);
    let closed = p.close_open(&sid, BEFORE_START, &has).await?;
    // calls closed before that the agent's replay still shows running (OpenCode leaves a
    // killed call `in_progress` for good)
    let again: Vec<(usize, Closed)> = match p.sessions.get(&sid) {
        Some(l) => (0..l.calls.all().len())
            .filter(|i| !closed.iter().any(|(c, _)| c == i))
            .filter_map(|i| {
                let c = l.calls.get(i);
                let shown = replayed.get(&c.live_id)?;
                let how = match c.ending {
                    Some(super::calls::Ending::Closed(how)) => how,
                    _ => return None,
                };
                (!matches!(shown.as_str(), "completed" | "failed")).then_some((i, how))
            })
            .collect(),
        None => Vec::new(),
    };
    for (i, how) in &again {
        if let Some(l) = p.sessions.get(&sid) {
            let u = notices::call_update(&sid, l.calls.get(*i), *how, BEFORE_START, true);
            p.tell_editor(&sid, u).await?;
        }
    }
    if !closed.is_empty() {
        let event = format!("the agent ({}) was started again", p.agent_name);
        let text = notices::for_editor(&event, &Back::Loaded, &closed);
        p.tell_editor(&sid, notices::message_update(&sid, &text))
            .await?;
        if let Some(l) = p.sessions.get_mut(&sid) {
            l.tell_agent = notices::for_agent(&l.calls, &closed, true, None);
        }
    }
    p.durable(Some(&sid)).await?;
    p.send_editor(&line).await
}

/// The editor's load of a session its agent lost: the journal's replay, the calls it left
/// open closed, and the answer of the new agent session the proxy made.
async fn load_from_journal<W: AsyncWrite + Unpin>(
    p: &mut Proxy<W>,
    sid: &str,
    id: Value,
    mut result: Value,
    why: String,
) -> Result<(), ProxyError> {
    let entries = p.journal.entries(sid).await;
    for m in notices::replay_for_editor(sid, &entries) {
        p.send_editor(&serde_json::to_vec(&m).unwrap_or_default())
            .await?;
    }
    let closed = p.close_open(sid, BEFORE_START, &|_| true).await?;
    let event = format!("the agent ({}) was started again", p.agent_name);
    let text = notices::for_editor(&event, &Back::Lost(why), &closed);
    p.tell_editor(sid, notices::message_update(sid, &text))
        .await?;
    let transcript = notices::transcript(&entries);
    if let Some(l) = p.sessions.get_mut(sid) {
        l.tell_agent = notices::for_agent(&l.calls, &closed, !closed.is_empty(), Some(&transcript));
    }
    if let Some(o) = result.as_object_mut() {
        o.remove("sessionId");
    }
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    let bytes = serde_json::to_vec(&answer).unwrap_or_default();
    let entry = json!({"from": "proxy", "to": "editor", "gen": p.generation, "msg": answer});
    p.record(sid, entry, bytes.len());
    p.durable(Some(sid)).await?;
    p.send_editor(&bytes).await
}

/// A message of a load's replay was swallowed: the quiet wait starts again.
pub fn replay_seen<W>(p: &mut Proxy<W>) {
    if let Some(r) = p.restart.as_mut()
        && let Some((_, start, wake)) = r.quiet.as_mut()
    {
        *wake = (Instant::now() + REPLAY_QUIET).min(*start + REPLAY_QUIET_MAX);
    }
}

/// The replay went quiet, or the agent took too long to answer.
pub async fn on_timer<W: AsyncWrite + Unpin>(p: &mut Proxy<W>) -> Result<(), ProxyError> {
    let now = Instant::now();
    let Some(r) = p.restart.as_mut() else {
        return Ok(());
    };
    if let Some((sid, _, wake)) = r.quiet.clone()
        && now >= wake
    {
        r.quiet = None;
        if let Some(l) = p.sessions.get_mut(&sid) {
            l.swallowing = None;
        }
        return p.back(&sid, Back::Loaded).await;
    }
    if now >= r.deadline {
        tracing::warn!(
            "acp proxy: the restarted agent did not answer within {AGENT_ANSWER_TIMEOUT:?}: stopping it"
        );
        r.deadline = now + AGENT_ANSWER_TIMEOUT;
        if let Some(a) = p.agent.as_mut() {
            a.kill();
        }
    }
    Ok(())
}
