//! Each message on its way: from the editor to the agent and back, forwarded as it came
//! (only a session id the agent knows by another name, and a request id a dead agent's
//! request still holds, are changed), journaled, and followed where it matters (sessions
//! made and loaded, prompts open, permission decisions).

use serde_json::{Value, json};
use tokio::io::AsyncWrite;

use super::rpc::{self, Kind};
use super::{AgentReq, EditorReq, Live, Own, Proxy, ProxyError, restart};

/// Editor requests asked again of a restarted agent when it died before answering them:
/// the ones that change nothing twice.
const ASK_AGAIN: &[&str] = &[
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/set_mode",
    "session/set_model",
    "session/set_config_option",
];

/// The settings of a session asked again after a restart.
const SETTINGS: &[&str] = &[
    "session/set_mode",
    "session/set_model",
    "session/set_config_option",
];

fn owned_kind(msg: &Value) -> (Option<Value>, Option<String>, bool) {
    match rpc::kind(msg) {
        Kind::Request { id, method } => (Some(id.clone()), Some(method.to_string()), true),
        Kind::Notification { method } => (None, Some(method.to_string()), true),
        Kind::Response { id, .. } => (Some(id.clone()), None, true),
        Kind::Other => (None, None, false),
    }
}

impl<W: AsyncWrite + Unpin> Proxy<W> {
    pub(super) async fn on_editor_line(&mut self, line: Vec<u8>) -> Result<(), ProxyError> {
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            // not JSON: the agent answers it as it would
            if self.restart.is_some() {
                self.held.push_back(line);
            } else {
                self.send_agent(&line).await;
            }
            return Ok(());
        };
        let (id, method, rpc_like) = owned_kind(&msg);
        if let (Some(id), None, true) = (&id, &method, rpc_like) {
            return self.editor_answer(line, msg, id.clone()).await;
        }
        if self.restart.is_some() {
            self.held.push_back(line);
            return Ok(());
        }
        match (id, method) {
            (Some(id), Some(method)) => self.editor_request(line, msg, id, method).await,
            (None, Some(_)) => {
                let sid = rpc::session_id(&msg).map(str::to_string);
                let (msg, bytes) = self.to_agent_sid(msg, line, sid.as_deref());
                self.send_agent(&bytes).await;
                if let Some(sid) = sid {
                    let entry = json!({"from": "editor", "gen": self.generation, "msg": msg});
                    self.record(&sid, entry, bytes.len());
                }
                Ok(())
            }
            _ => {
                self.send_agent(&line).await;
                Ok(())
            }
        }
    }

    /// `msg` with the agent's id of session `sid`, and its bytes (`line` when unchanged).
    fn to_agent_sid(&self, mut msg: Value, line: Vec<u8>, sid: Option<&str>) -> (Value, Vec<u8>) {
        if let Some(sid) = sid
            && let Some(live) = self.sessions.get(sid)
            && live.agent_sid != sid
        {
            rpc::set_session_id(&mut msg, &live.agent_sid);
            let bytes = serde_json::to_vec(&msg).unwrap_or(line);
            return (msg, bytes);
        }
        (msg, line)
    }

    async fn editor_request(
        &mut self,
        line: Vec<u8>,
        mut msg: Value,
        id: Value,
        method: String,
    ) -> Result<(), ProxyError> {
        let sid = rpc::session_id(&msg).map(str::to_string);
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let mut changed = false;
        match method.as_str() {
            "initialize" => self.init_params = Some(params.clone()),
            "authenticate" => self.auth = Some(params.clone()),
            "session/load" | "session/resume" => {
                if let Err(why) = self
                    .prepare_load(sid.as_deref().unwrap_or(""), &params)
                    .await
                {
                    let answer = rpc::error_response(&id, rpc::INTERNAL_ERROR, &why);
                    let bytes = serde_json::to_vec(&answer).unwrap_or_default();
                    return self.send_editor(&bytes).await;
                }
            }
            "session/prompt" => {
                if let Some(live) = sid.as_deref().and_then(|s| self.sessions.get_mut(s)) {
                    live.prompt = Some(id.clone());
                    if let Some(tell) = live.tell_agent.take()
                        && let Some(blocks) = msg
                            .get_mut("params")
                            .and_then(|p| p.get_mut("prompt"))
                            .and_then(Value::as_array_mut)
                    {
                        blocks.insert(0, json!({"type": "text", "text": tell}));
                        changed = true;
                    }
                }
                if let Some(sid) = &sid {
                    let text =
                        super::notices::prompt_text(params.get("prompt").unwrap_or(&Value::Null));
                    if !text.trim().is_empty() {
                        self.journal
                            .title(sid, lazarus_session::store::title_of(&text));
                    }
                }
            }
            m if SETTINGS.contains(&m) => {
                if let Some(live) = sid.as_deref().and_then(|s| self.sessions.get_mut(s)) {
                    let same = |(k, p): &(String, Value)| {
                        k == m && p.get("configId") == params.get("configId")
                    };
                    live.settings.retain(|s| !same(s));
                    live.settings.push((m.to_string(), params.clone()));
                }
            }
            _ => {}
        }
        let line = if changed {
            serde_json::to_vec(&msg).unwrap_or(line)
        } else {
            line
        };
        let (msg, bytes) = self.to_agent_sid(msg, line, sid.as_deref());
        let keep_params = matches!(
            method.as_str(),
            "session/new" | "session/load" | "session/resume"
        );
        self.editor_reqs.insert(
            rpc::key(&id),
            EditorReq {
                resend: ASK_AGAIN.contains(&method.as_str()).then(|| msg.clone()),
                method,
                sid: sid.clone(),
                generation: self.generation,
                params: if keep_params { params } else { Value::Null },
            },
        );
        self.send_agent(&bytes).await;
        if let Some(sid) = sid {
            let entry = json!({"from": "editor", "gen": self.generation, "msg": msg});
            self.record(&sid, entry, bytes.len());
        }
        Ok(())
    }

    /// Before forwarding an editor's load of `sid`: its journal opened (or none yet), its
    /// calls as recorded, the agent's id for it. The error says why it cannot be loaded here.
    async fn prepare_load(&mut self, sid: &str, params: &Value) -> Result<(), String> {
        if !self.sessions.get(sid).is_some_and(|l| l.recorded) {
            let opened = self.journal.open(sid).await?;
            let live = match opened {
                Some(o) => Live {
                    agent_sid: o.agent_session_id.unwrap_or_else(|| sid.to_string()),
                    calls: o.calls,
                    recorded: true,
                    ..Live::default()
                },
                None => Live {
                    agent_sid: sid.to_string(),
                    ..Live::default()
                },
            };
            self.sessions.insert(sid.to_string(), live);
        }
        let Some(live) = self.sessions.get_mut(sid) else {
            return Ok(());
        };
        live.cwd = params.get("cwd").cloned().unwrap_or(Value::Null);
        live.mcp_servers = params.get("mcpServers").cloned().unwrap_or(json!([]));
        live.loading = Some(Default::default());
        if live.agent_sid != sid {
            self.editor_sid
                .insert(live.agent_sid.clone(), sid.to_string());
        }
        Ok(())
    }

    /// The editor answers an agent's request.
    async fn editor_answer(
        &mut self,
        line: Vec<u8>,
        mut msg: Value,
        id: Value,
    ) -> Result<(), ProxyError> {
        let Some(req) = self.agent_reqs.remove(&rpc::key(&id)) else {
            if self.restart.is_none() {
                self.send_agent(&line).await;
            }
            return Ok(());
        };
        if req.generation != self.generation {
            // it answers an agent that has stopped: the question died with it
            if let Some(sid) = &req.sid {
                let entry = json!({"from": "editor", "gen": req.generation, "msg": msg,
                    "dropped": "its agent had stopped"});
                self.record(sid, entry, line.len());
            }
            return Ok(());
        }
        let bytes = if msg.get("id") != Some(&req.agent_id) {
            msg["id"] = req.agent_id.clone();
            serde_json::to_vec(&msg).unwrap_or(line)
        } else {
            line
        };
        if let Some(sid) = &req.sid {
            let entry = json!({"from": "editor", "gen": req.generation, "msg": msg});
            self.record(sid, entry, bytes.len());
            if req.method == "session/request_permission" {
                // a decision that lets a call run is on disk before the agent acts on it
                self.durable(Some(sid)).await?;
            }
        }
        self.send_agent(&bytes).await;
        Ok(())
    }

    pub(super) async fn on_agent_line(&mut self, line: Vec<u8>) -> Result<(), ProxyError> {
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            return self.send_editor(&line).await;
        };
        match owned_kind(&msg) {
            (Some(id), None, true) => {
                let key = rpc::key(&id);
                if let Some(own) = self.own.remove(&key) {
                    return restart::own_answer(self, own, msg).await;
                }
                match self.editor_reqs.remove(&key) {
                    Some(req) => self.agent_answer(req, line, msg).await,
                    None => self.send_editor(&line).await,
                }
            }
            (Some(id), Some(method), true) => self.agent_request(line, msg, id, method).await,
            (None, Some(method), true) => self.agent_notification(line, msg, &method).await,
            _ => self.send_editor(&line).await,
        }
    }

    /// `msg` with the editor's id of its session, and its bytes.
    fn to_editor_sid(&self, mut msg: Value, line: Vec<u8>) -> (Option<String>, Value, Vec<u8>) {
        let Some(agent_sid) = rpc::session_id(&msg).map(str::to_string) else {
            return (None, msg, line);
        };
        let sid = self.editor_sid_of(&agent_sid);
        if sid == agent_sid {
            return (Some(sid), msg, line);
        }
        rpc::set_session_id(&mut msg, &sid);
        let bytes = serde_json::to_vec(&msg).unwrap_or(line);
        (Some(sid), msg, bytes)
    }

    async fn agent_request(
        &mut self,
        line: Vec<u8>,
        msg: Value,
        id: Value,
        method: String,
    ) -> Result<(), ProxyError> {
        let entry_msg = msg.clone();
        let (sid, mut msg, mut bytes) = self.to_editor_sid(msg, line);
        // an id a dead agent's question still holds at the editor: this one gets another
        let mut editor_id = id.clone();
        if self.agent_reqs.contains_key(&rpc::key(&id)) {
            editor_id = Value::String(format!(
                "{}-g{}-{}",
                self.own_prefix,
                self.generation,
                rpc::key(&id)
            ));
            msg["id"] = editor_id.clone();
            bytes = serde_json::to_vec(&msg).unwrap_or(bytes);
        }
        self.agent_reqs.insert(
            rpc::key(&editor_id),
            AgentReq {
                generation: self.generation,
                agent_id: id,
                method,
                sid: sid.clone(),
            },
        );
        if let Some(sid) = &sid {
            let entry = json!({"from": "agent", "gen": self.generation, "msg": entry_msg});
            self.record(sid, entry, bytes.len());
        }
        self.send_editor(&bytes).await
    }

    async fn agent_notification(
        &mut self,
        line: Vec<u8>,
        msg: Value,
        method: &str,
    ) -> Result<(), ProxyError> {
        let len = line.len();
        let entry_msg = msg.clone();
        let (sid, _msg, bytes) = self.to_editor_sid(msg, line);
        let Some(sid) = sid else {
            return self.send_editor(&bytes).await;
        };
        let mut replay = false;
        if method == "session/update"
            && let Some(live) = self.sessions.get_mut(&sid)
        {
            if live.swallowing.is_some() {
                // the replay of the proxy's own load: the editor has all this
                let entry = json!({"from": "agent", "gen": self.generation, "msg": entry_msg, "replay": true});
                self.record(&sid, entry, len);
                restart::replay_seen(self);
                return Ok(());
            }
            if let Some(loading) = live.loading.as_mut() {
                replay = true;
                let u = entry_msg.get("params").and_then(|p| p.get("update"));
                if let (Some(call), Some(status)) = (
                    u.and_then(|u| u.get("toolCallId")).and_then(Value::as_str),
                    u.and_then(|u| u.get("status")).and_then(Value::as_str),
                ) {
                    loading.insert(call.to_string(), status.to_string());
                } else if let Some(call) =
                    u.and_then(|u| u.get("toolCallId")).and_then(Value::as_str)
                {
                    loading.entry(call.to_string()).or_default();
                }
            }
        }
        let mut entry = json!({"from": "agent", "gen": self.generation, "msg": entry_msg});
        if replay {
            entry["replay"] = json!(true);
        }
        self.send_editor(&bytes).await?;
        self.record(&sid, entry, len);
        Ok(())
    }

    /// The agent answers an editor's request.
    async fn agent_answer(
        &mut self,
        req: EditorReq,
        line: Vec<u8>,
        msg: Value,
    ) -> Result<(), ProxyError> {
        let ok = msg.get("result").is_some();
        match req.method.as_str() {
            "initialize" if ok => self.init_result = msg.get("result").cloned(),
            "session/new" if ok => {
                if let Some(sid) = msg
                    .get("result")
                    .and_then(|r| r.get("sessionId"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                {
                    let id = msg.get("id").cloned().unwrap_or(Value::Null);
                    self.session_made(&sid, &req, &id).await;
                    let entry = json!({"from": "agent", "gen": self.generation, "msg": msg});
                    self.record(&sid, entry, line.len());
                    self.durable(Some(&sid)).await?;
                }
                return self.send_editor(&line).await;
            }
            "session/load" | "session/resume" => {
                return restart::load_answered(self, req, line, msg).await;
            }
            "session/prompt" => {
                if let Some(sid) = &req.sid {
                    if let Some(live) = self.sessions.get_mut(sid) {
                        live.prompt = None;
                    }
                    let entry = json!({"from": "agent", "gen": self.generation, "msg": msg});
                    self.record(sid, entry, line.len());
                    // the turn's answer: what it acknowledges is on disk first
                    self.durable(Some(sid)).await?;
                }
                return self.send_editor(&line).await;
            }
            _ => {}
        }
        if let Some(sid) = &req.sid {
            let entry = json!({"from": "agent", "gen": self.generation, "msg": msg});
            self.record(sid, entry, line.len());
        }
        self.send_editor(&line).await
    }

    /// A new session: its journal, with the request that made it.
    pub(super) async fn session_made(&mut self, sid: &str, req: &EditorReq, id: &Value) {
        let cwd = req.params.get("cwd").cloned().unwrap_or(Value::Null);
        let mcp = req.params.get("mcpServers").cloned().unwrap_or(json!([]));
        let recorded = match self.journal.create(sid, self.meta(sid, &cwd, &mcp)).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("acp proxy: cannot make a journal for session {sid:?}: {e}");
                false
            }
        };
        self.sessions.insert(
            sid.to_string(),
            Live {
                agent_sid: sid.to_string(),
                cwd,
                mcp_servers: mcp,
                recorded,
                warned: !recorded,
                ..Live::default()
            },
        );
        let asked = rpc::request(id, &req.method, req.params.clone());
        let entry = json!({"from": "editor", "gen": req.generation, "msg": asked});
        self.record(sid, entry, 0);
    }

    /// The header of a session's journal: who the agent is, the workspace, the MCP servers
    /// (without their secrets: environment and header values, secret-looking arguments).
    pub(super) fn meta(&self, sid: &str, cwd: &Value, mcp: &Value) -> Value {
        let servers: Vec<Value> = mcp
            .as_array()
            .into_iter()
            .flatten()
            .map(redact_server)
            .collect();
        json!({
            "host": super::HOST,
            "workspace": cwd,
            "acp": {
                "agent": self.cfg.agent,
                "agent_info": self.init_result.as_ref().and_then(|r| r.get("agentInfo")),
                "agent_session_id": sid,
                "cwd": cwd,
                "mcp_servers": servers,
            },
        })
    }

    /// A new agent session `agent_sid` for the editor's `sid`.
    pub(super) fn remap(&mut self, sid: &str, agent_sid: &str) {
        self.editor_sid.retain(|_, e| e != sid);
        if agent_sid != sid {
            self.editor_sid
                .insert(agent_sid.to_string(), sid.to_string());
        }
        if let Some(live) = self.sessions.get_mut(sid) {
            live.agent_sid = agent_sid.to_string();
        }
    }

    /// Asks the agent for a new session for `sid` (its old one is lost to it).
    pub(super) async fn ask_fresh(
        &mut self,
        sid: &str,
        load: Option<(Value, String)>,
        why: String,
    ) {
        let (cwd, mcp) = match self.sessions.get(sid) {
            Some(l) => (l.cwd.clone(), l.mcp_servers.clone()),
            None => (Value::Null, json!([])),
        };
        self.ask_agent(
            Own::Fresh {
                sid: sid.to_string(),
                load,
                why,
            },
            "session/new",
            json!({"cwd": cwd, "mcpServers": mcp}),
        )
        .await;
    }
}

/// An MCP server as the editor gave it, without its secrets.
fn redact_server(s: &Value) -> Value {
    let names = |v: Option<&Value>| -> Vec<Value> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("name").cloned())
            .collect()
    };
    let args: Vec<String> = s
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let mut out = json!({ "name": s.get("name") });
    if let Some(c) = s.get("command") {
        out["command"] = c.clone();
        out["args"] = json!(lazarus_session::record::redact_args(&args));
        out["env"] = json!(names(s.get("env")));
    }
    if let Some(u) = s.get("url").and_then(Value::as_str) {
        out["url"] = json!(lazarus_session::record::redact_url(u));
        out["headers"] = json!(names(s.get("headers")));
    }
    if let Some(t) = s.get("type") {
        out["type"] = t.clone();
    }
    out
}
