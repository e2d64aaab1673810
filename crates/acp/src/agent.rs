//! `lazarus acp`: an ACP v1 agent over stdio serving Lazarus's own runner. Every ACP session
//! is a Lazarus session (the same id, a ledger in the store): `session/new` makes one whose
//! world is the client's `cwd` and `mcpServers`; `session/prompt` records the prompt as an
//! input and drives the session, streaming what happens as `session/update`s; a call that
//! needs a person's decision is asked with `session/request_permission`, and the answer is
//! the durable approval record (by `acp`); `session/load` replays the ledger — a call cut off
//! by a crash shown `failed`, with the words that say its effect is unknown — and the next
//! prompt resumes it (its receipt, the model told what is in doubt).
//!
//! Handlers return at once: the work of a request runs in a task of its own, so a
//! `session/cancel` is read while a prompt runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind,
    PromptCapabilities, PromptRequest, PromptResponse, RequestPermissionOutcome,
    RequestPermissionRequest, ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities,
    SessionInfo, SessionListCapabilities, SessionNotification, SessionResumeCapabilities,
    SessionUpdate, StopReason, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Agent, Client, ConnectTo, Error};
use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{RunEvent, RunOutcome, Runner, SharedSession};
use lazarus_session::record::{Approval, Decision, Scope, approval_input_id};
use lazarus_session::{CreateOptions, InboxMessage, SessionError, SessionId};
use serde_json::json;

use crate::convert;
use crate::host::Host;
use crate::updates;

/// Who decides, in a decision an editor's person made (`approval.by`).
pub const DECIDED_BY: &str = "acp";

/// A session this connection holds: its writer, its runner, the turn that runs.
struct Live {
    id: SessionId,
    shared: SharedSession,
    runner: Runner,
    /// The running turn's cancel token.
    cancel: Mutex<Option<CancellationToken>>,
    prompting: AtomicBool,
    /// Its MCP servers, alive while the session is.
    _keep: Box<dyn std::any::Any + Send + Sync>,
}

struct State<H: Host> {
    host: Arc<H>,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
}

type Cx = agent_client_protocol::v1::ConnectionTo<Client>;

fn error(message: impl Into<String>) -> Error {
    let message = message.into();
    Error::internal_error().data(json!({ "message": message }))
}

fn invalid(message: impl Into<String>) -> Error {
    let message = message.into();
    Error::invalid_params().data(json!({ "message": message }))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serves ACP v1 on `transport` (stdio for `lazarus acp`) until the client goes.
pub async fn serve<H: Host>(
    host: Arc<H>,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), Error> {
    let state = Arc::new(State {
        host,
        sessions: Mutex::new(HashMap::new()),
    });
    let (s1, s2, s3, s4, s5, s6, s7) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
    );
    Agent
        .v1()
        .name("lazarus")
        .on_receive_request(
            async move |req: InitializeRequest, responder, _cx| {
                let _ = req;
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(true)
                                .prompt_capabilities(
                                    PromptCapabilities::new().embedded_context(true),
                                )
                                .mcp_capabilities(McpCapabilities::new().http(true))
                                .session_capabilities(
                                    SessionCapabilities::new()
                                        .list(SessionListCapabilities::new())
                                        .resume(SessionResumeCapabilities::new()),
                                ),
                        )
                        .agent_info(Implementation::new("lazarus", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, cx: Cx| {
                let st = s1.clone();
                cx.spawn(async move {
                    match st.new_session(&req.cwd, &req.mcp_servers).await {
                        Ok(id) => responder.respond(NewSessionResponse::new(id.to_string())),
                        Err(e) => responder.respond_with_error(e),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, cx: Cx| {
                let st = s2.clone();
                let c = cx.clone();
                cx.spawn(async move {
                    let id = req.session_id.0.to_string();
                    match st.open(&id, &req.cwd, &req.mcp_servers).await {
                        Ok(live) => {
                            if let Err(e) = st.replay(&live, &c).await {
                                return responder.respond_with_error(e);
                            }
                            responder.respond(LoadSessionResponse::new())
                        }
                        Err(e) => responder.respond_with_error(e),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ResumeSessionRequest, responder, cx: Cx| {
                let st = s3.clone();
                cx.spawn(async move {
                    let id = req.session_id.0.to_string();
                    match st.open(&id, &req.cwd, &req.mcp_servers).await {
                        Ok(_) => responder.respond(ResumeSessionResponse::new()),
                        Err(e) => responder.respond_with_error(e),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest, responder, cx: Cx| {
                let st = s4.clone();
                cx.spawn(async move {
                    match st.list(req.cwd.as_deref()).await {
                        Ok(list) => responder.respond(ListSessionsResponse::new(list)),
                        Err(e) => responder.respond_with_error(e),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, cx: Cx| {
                let st = s5.clone();
                let c = cx.clone();
                cx.spawn(async move {
                    match st.prompt(&req, &c).await {
                        Ok(stop) => responder.respond(PromptResponse::new(stop)),
                        Err(e) => responder.respond_with_error(e),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx: Cx| {
                if let Some(live) = lock(&s6.sessions).get(n.session_id.0.as_ref())
                    && let Some(c) = lock(&live.cancel).as_ref()
                {
                    c.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await?;
    drop(s7);
    Ok(())
}

impl<H: Host> State<H> {
    /// The workspace a client names: absolute, existing, symbolic links resolved.
    fn workspace(cwd: &Path) -> Result<PathBuf, Error> {
        if !cwd.is_absolute() {
            return Err(invalid(format!(
                "cwd {} is not an absolute path",
                cwd.display()
            )));
        }
        cwd.canonicalize()
            .map_err(|e| invalid(format!("cwd {}: {e}", cwd.display())))
    }

    async fn new_session(
        &self,
        cwd: &Path,
        mcp: &[agent_client_protocol::v1::schema::McpServer],
    ) -> Result<SessionId, Error> {
        let workspace = Self::workspace(cwd)?;
        let servers = convert::mcp_servers(mcp).map_err(invalid)?;
        let prepared = self
            .host
            .prepare(&workspace, servers)
            .await
            .map_err(error)?;
        let world = prepared
            .runner
            .world()
            .cloned()
            .ok_or_else(|| error("the host gave a runner without a world"))?;
        let store = self.host.store();
        let meta = json!({
            "workspace": workspace,
            "model": prepared.runner.config().model,
            "world": world,
        });
        let session = blocking(move || {
            store.create(CreateOptions {
                id: None,
                meta: Some(meta),
            })
        })
        .await?;
        let id = SessionId::parse(session.id()).map_err(|e| error(e.to_string()))?;
        self.keep(id.clone(), session, prepared);
        Ok(id)
    }

    fn keep(
        &self,
        id: SessionId,
        session: lazarus_session::Session,
        prepared: crate::host::Prepared,
    ) -> Arc<Live> {
        let live = Arc::new(Live {
            id: id.clone(),
            shared: Arc::new(Mutex::new(session)),
            runner: prepared.runner,
            cancel: Mutex::new(None),
            prompting: AtomicBool::new(false),
            _keep: prepared.keep,
        });
        lock(&self.sessions).insert(id.to_string(), live.clone());
        live
    }

    /// Opens session `id` for this connection (its writer), in the world the client names:
    /// the session runs only in the one it recorded, or the answer says what differs.
    async fn open(
        &self,
        id: &str,
        cwd: &Path,
        mcp: &[agent_client_protocol::v1::schema::McpServer],
    ) -> Result<Arc<Live>, Error> {
        if let Some(live) = lock(&self.sessions).get(id) {
            return Ok(live.clone());
        }
        let sid = SessionId::parse(id).map_err(|e| invalid(e.to_string()))?;
        let workspace = Self::workspace(cwd)?;
        let servers = convert::mcp_servers(mcp).map_err(invalid)?;
        let store = self.host.store();
        let s = sid.clone();
        let session = blocking(move || store.open(&s)).await?;
        let prepared = self
            .host
            .prepare(&workspace, servers)
            .await
            .map_err(error)?;
        if let Err(refusal) = prepared.runner.world_check(session.state()) {
            return Err(invalid(refusal.to_string()));
        }
        Ok(self.keep(sid, session, prepared))
    }

    /// Sends the session's whole history as updates, oldest first; a call cut off by a
    /// crash last, `failed`, with what is known of it.
    async fn replay(&self, live: &Live, cx: &Cx) -> Result<(), Error> {
        let store = self.host.store();
        let id = live.id.clone();
        let sid: agent_client_protocol::v1::schema::SessionId = id.to_string().into();
        let mut after = 0;
        loop {
            let (s, i) = (store.clone(), id.clone());
            let page = blocking(move || s.records(&i, after, 1000)).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for r in &page {
                for u in updates::of_record(&r.kind, &r.data, false) {
                    cx.send_notification(SessionNotification::new(sid.clone(), u))?;
                }
            }
        }
        let cut_off: Vec<String> = {
            let s = lock(&live.shared);
            s.state()
                .unresolved_calls()
                .filter(|c| c.start.is_some())
                .map(|c| c.call_id.clone())
                .collect()
        };
        for call in cut_off {
            cx.send_notification(SessionNotification::new(
                sid.clone(),
                updates::call_status(&call, ToolCallStatus::Failed, Some(updates::CUT_OFF_NOTICE)),
            ))?;
        }
        Ok(())
    }

    async fn list(&self, cwd: Option<&Path>) -> Result<Vec<SessionInfo>, Error> {
        let store = self.host.store();
        let list = blocking(move || store.list()).await?;
        let cwd = cwd.map(|c| c.to_string_lossy().into_owned());
        Ok(list
            .into_iter()
            .filter(|s| s.status != lazarus_session::Status::Corrupt)
            .filter(|s| s.meta.as_ref().is_none_or(|m| m.get("host").is_none()))
            .filter_map(|s| {
                let ws = s.workspace.clone()?;
                if cwd.as_ref().is_some_and(|c| *c != ws) {
                    return None;
                }
                Some(
                    SessionInfo::new(s.id.to_string(), ws)
                        .title(s.title.clone())
                        .updated_at(Some(s.updated_at.clone())),
                )
            })
            .collect())
    }

    /// Records the prompt and drives the session until the turn ends (asking the person when
    /// a call waits for a decision).
    async fn prompt(&self, req: &PromptRequest, cx: &Cx) -> Result<StopReason, Error> {
        let id = req.session_id.0.to_string();
        let live = lock(&self.sessions).get(&id).cloned().ok_or_else(|| {
            invalid(format!(
                "session {id} is not open here: session/load or session/resume it first"
            ))
        })?;
        if live.prompting.swap(true, Ordering::SeqCst) {
            return Err(invalid(format!(
                "session {id} is already answering a prompt"
            )));
        }
        let r = self.turn(&live, req, cx).await;
        live.prompting.store(false, Ordering::SeqCst);
        *lock(&live.cancel) = None;
        r
    }

    async fn turn(
        &self,
        live: &Arc<Live>,
        req: &PromptRequest,
        cx: &Cx,
    ) -> Result<StopReason, Error> {
        let text = convert::prompt_text(&req.prompt).map_err(invalid)?;
        let cancel = CancellationToken::new();
        *lock(&live.cancel) = Some(cancel.clone());
        let (shared, message_id) = (live.shared.clone(), uuid::Uuid::now_v7().to_string());
        blocking(move || {
            lock(&shared)
                .append_input(&message_id, "acp", &text)
                .map(|_| ())
        })
        .await?;
        let sid: agent_client_protocol::v1::schema::SessionId = req.session_id.clone();
        loop {
            let outcome = {
                let c = cx.clone();
                let s = sid.clone();
                let mut streamed = false;
                let mut observer = move |ev: RunEvent<'_>| {
                    let updates: Vec<SessionUpdate> = match ev {
                        RunEvent::Text(t) => {
                            streamed = true;
                            vec![updates::agent_text(t)]
                        }
                        RunEvent::Reasoning(t) => vec![updates::agent_thought(t)],
                        RunEvent::Record { kind, data, .. } => {
                            // text streamed already; a response not streamed shows its text
                            let live_turn = streamed || kind != "response";
                            if kind == "response" {
                                streamed = false;
                            }
                            updates::of_record(kind, &data, live_turn)
                        }
                        RunEvent::ToolProgress { call_id, text } => vec![updates::call_status(
                            call_id,
                            ToolCallStatus::InProgress,
                            Some(text),
                        )],
                        _ => Vec::new(),
                    };
                    for u in updates {
                        let _ = c.send_notification(SessionNotification::new(s.clone(), u));
                    }
                };
                live.runner
                    .drive(&live.shared, "acp", &cancel, &mut observer)
                    .await
                    .map_err(|e| error(e.to_string()))?
            };
            match outcome {
                RunOutcome::Idle => return Ok(StopReason::EndTurn),
                RunOutcome::MaxTurns => return Ok(StopReason::MaxTurnRequests),
                RunOutcome::Cancelled => return Ok(StopReason::Cancelled),
                RunOutcome::Failed { message, .. } => {
                    return Err(error(format!(
                        "the model request failed: {message}; the session is kept: prompt again to go on"
                    )));
                }
                RunOutcome::AwaitingApproval { call_id } => {
                    if !self.ask(live, &sid, &call_id, cx, &cancel).await? {
                        return Ok(StopReason::Cancelled);
                    }
                }
            }
        }
    }

    /// Asks the person about the waiting call `call_id` and records the answer (by
    /// [`DECIDED_BY`]); `allow_always` keeps a grant first. False when the prompt was
    /// cancelled meanwhile (the call keeps waiting).
    async fn ask(
        &self,
        live: &Arc<Live>,
        sid: &agent_client_protocol::v1::schema::SessionId,
        call_id: &str,
        cx: &Cx,
        cancel: &CancellationToken,
    ) -> Result<bool, Error> {
        let (tool, arguments) = {
            let s = lock(&live.shared);
            let call = s
                .state()
                .call(call_id)
                .ok_or_else(|| error(format!("call {call_id} vanished")))?;
            (call.name.clone(), call.arguments.clone())
        };
        let raw = serde_json::from_str::<serde_json::Value>(&arguments)
            .unwrap_or(serde_json::Value::String(arguments.clone()));
        let tool_call = ToolCallUpdate::new(
            call_id.to_string(),
            ToolCallUpdateFields::new()
                .title(updates::title_of(&tool, &arguments))
                .status(ToolCallStatus::Pending)
                .raw_input(raw),
        );
        let options = vec![
            PermissionOption::new("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                "allow_always",
                format!("Always allow {tool} (every session and workspace)"),
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        ];
        let asked = cx
            .send_request(RequestPermissionRequest::new(
                sid.clone(),
                tool_call,
                options,
            ))
            .block_task();
        let answer = tokio::select! {
            a = asked => a?,
            _ = cancel.cancelled() => return Ok(false),
        };
        let (decision, scope) = match answer.outcome {
            RequestPermissionOutcome::Selected(s) => match s.option_id.0.as_ref() {
                "allow_once" => (Decision::Allow, Scope::Once),
                "allow_always" => (Decision::Allow, Scope::Always),
                _ => (Decision::Deny, Scope::Once),
            },
            _ => return Ok(false),
        };
        if scope == Scope::Always
            && let Some(grants) = live.runner.config().approval.always.as_ref()
        {
            grants
                .grant(&tool, DECIDED_BY, live.id.as_str(), call_id)
                .map_err(|e| error(format!("keeping the `always` grant: {e}")))?;
        }
        let approval = Approval {
            input_id: approval_input_id(call_id),
            call_id: call_id.to_string(),
            decision,
            scope,
            reason: None,
            by: DECIDED_BY.into(),
            decided_at: lazarus_ledger::clock::now_ts(),
        };
        let shared = live.shared.clone();
        blocking(move || {
            lock(&shared)
                .append_message(&InboxMessage::approval(approval))
                .map(|_| ())
        })
        .await?;
        Ok(true)
    }
}

/// Runs store work off the async workers; a store error is the request's error.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| error(e.to_string()))?
        .map_err(|e| error(e.to_string()))
}
