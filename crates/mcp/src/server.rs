//! One running MCP server, on the official Rust SDK (`rmcp`).
//!
//! * **stdio**: a child process started in its own session and process group (so everything
//!   it starts goes with it; no controlling terminal; no descriptor of lazarus's but 0-2), with a minimal environment plus the configured `env`, that dies with the
//!   process that started it (`PR_SET_PDEATHSIG`) and is killed, group and all, when the
//!   server is dropped. What it prints on stderr is kept (the last 8 KiB) for error messages.
//! * **Streamable HTTP**: the endpoint, with a bearer token read from the configured
//!   environment variable and the extra headers.
//!
//! Starting speaks MCP 2026-07-28 to a server that offers it (`server/discover`, the Tasks
//! extension declared) and falls back to `initialize` at 2025-11-25 for an older one; then it
//! lists the tools page by page, within the server's `startup_timeout`. A
//! `notifications/tools/list_changed` makes it list them again. [`McpServer::call`] sends one
//! `tools/call` with the idempotency key, a progress token and (OpenTelemetry on) the
//! `traceparent` in `_meta`; progress notifications are passed on; a call that outlives
//! `tool_timeout`, or is abandoned (Ctrl-C), is cancelled with `notifications/cancelled`. A
//! server that answers with a task handle ([`CallEnd::Task`]) is polled by [`crate::task`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    CustomResult, ExtensionCapabilities, Implementation, ListToolsRequest, NumberOrString,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, RequestMetaObject,
    ServerResult, TASKS_EXTENSION_ID, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, ClientServiceExt, RoleClient};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::McpError;
use crate::config::{Server, Transport};
use crate::content::{self, listed, snippet};
use lazarus_agent::sandbox::{Confinement, Sandbox};

/// Environment variables a stdio server inherits (Codex's list); the rest comes from `env`.
pub const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
];

/// Pages of `tools/list` read at most (a server paging in a circle is an error).
pub const TOOL_PAGES_MAX: usize = 100;

/// How long a server that failed to start is given to finish what it says on stderr.
const STDERR_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Bytes of a server's stderr kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;

pub use crate::content::{ListedTool, RESULT_BYTES_MAX};

/// The `_meta` key of the idempotency key every call carries.
pub const IDEMPOTENCY_KEY_META: &str = "lazarus/idempotency-key";

/// The `_meta` key of the W3C trace context a call carries when OpenTelemetry is on (SEP-414).
pub const TRACEPARENT_META: &str = "traceparent";

/// Who the server says it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    /// The protocol version agreed on (`2026-07-28`, or an older one through `initialize`).
    pub protocol_version: String,
    /// Both sides declared the Tasks extension (`io.modelcontextprotocol/tasks`): the server
    /// may answer any `tools/call` with a task handle.
    pub tasks: bool,
}

/// How a call ended, as far as the server told.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEnd {
    /// The server answered (`is_error` when the tool reported an error).
    Answered { text: String, is_error: bool },
    /// The server answered the request with a protocol error (unknown tool, bad arguments):
    /// nothing ran, as far as it says.
    Refused(String),
    /// No answer within the tool timeout: the call was cancelled.
    TimedOut,
    /// Abandoned (the run was stopped): the call was cancelled.
    Abandoned,
    /// The connection broke or the server died while the call ran: its effect is unknown.
    Lost(String),
    /// The server made the call a task (the Tasks extension): poll it ([`crate::task`]).
    Task(rmcp::model::Task),
}

/// Notifications the server sends, for the calls waiting on them.
#[derive(Default)]
pub(crate) struct Notes {
    /// Progress senders by progress token.
    progress: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    /// The tool list changed since it was last listed.
    pub(crate) tools_changed: AtomicBool,
}

#[derive(Clone)]
pub(crate) struct Handler {
    notes: Arc<Notes>,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let key = token_key(&params.progress_token);
        let text = match (&params.message, params.total) {
            (Some(m), Some(t)) => format!("{m} ({}/{t})", params.progress),
            (Some(m), None) => m.clone(),
            (None, Some(t)) => format!("{}/{t}", params.progress),
            (None, None) => format!("{}", params.progress),
        };
        if let Some(tx) = lock(&self.notes.progress).get(&key) {
            let _ = tx.send(text);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notes.tools_changed.store(true, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientConfig {
        // the Tasks extension, declared: rmcp sends it with every 2026-07-28 request
        let mut capabilities = ClientCapabilities::default();
        let mut extensions = ExtensionCapabilities::new();
        extensions.insert(TASKS_EXTENSION_ID.to_string(), Default::default());
        capabilities.extensions = Some(extensions);
        ClientConfig::new(
            capabilities,
            Implementation::new("lazarus", env!("CARGO_PKG_VERSION")),
        )
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn token_key(t: &ProgressToken) -> String {
    match &t.0 {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

/// A running server.
pub struct McpServer {
    pub config: Server,
    pub info: ServerInfo,
    pub(crate) client: RunningService<RoleClient, Handler>,
    pub(crate) notes: Arc<Notes>,
    tools: RwLock<Vec<ListedTool>>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    /// A stdio server's reaper: dropped with the server, it kills the server and everything
    /// it started (so does this process's death).
    _reaper: Option<crate::reaper::Reaper>,
    /// The process spawned for a stdio server (its reaper); reaped by tokio once dropped.
    _child: Option<tokio::process::Child>,
    /// The sandbox a stdio server runs in, if it does (kept while it runs).
    _confinement: Option<Confinement>,
    /// On 2026-07-28, the `subscriptions/listen` stream that brings `list_changed` (a
    /// notification is only sent to a client that listens): ended with the server.
    _listener: Option<Listener>,
}

/// A background task ended when dropped.
pub(crate) struct Listener(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.config.name)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Starts `config`'s server (`cwd`: where a stdio server runs when its configuration
    /// names no directory), initializes it and lists its tools, within its startup timeout.
    ///
    /// A stdio server configured with `sandbox = true` runs confined by `sandbox` as a shell
    /// call in `cwd` is (writing only there and in a private `$TMPDIR`).
    pub async fn start(
        config: Server,
        cwd: &std::path::Path,
        sandbox: Option<&Sandbox>,
    ) -> Result<McpServer, McpError> {
        let mut confinement = None;
        let mut reaper = None;
        let mut child = None;
        let name = config.name.clone();
        let startup = config.startup_timeout;
        let notes = Arc::new(Notes::default());
        let handler = Handler {
            notes: notes.clone(),
        };
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let fail = |why: String| McpError::Startup {
            server: name.clone(),
            why,
        };
        let client = match &config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd: own_cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                // the server runs under a reaper that kills it and everything it starts when
                // this process lets go of it or dies (see `reaper`); not killed on drop:
                // dropping the reaper's pipe is what stops it, whole
                let (kept, read_end) = crate::reaper::pipe()
                    .map_err(|e| fail(format!("cannot make its reaper's pipe: {e}")))?;
                reaper = Some(kept);
                let fd = crate::reaper::ReaperFd::of(&read_end);
                cmd.args(args)
                    .current_dir(own_cwd.as_deref().unwrap_or(cwd))
                    .kill_on_drop(false);
                // its own session and group (no controlling terminal) and only fds 0-2 past
                // the exec, then the reaper (see `reaper`): the first steps, so a sandbox's
                // own steps run in the server.
                // SAFETY: both steps make raw, async-signal-safe system calls only.
                unsafe {
                    cmd.pre_exec(|| lazarus_agent::process::detach_from_caller());
                    cmd.pre_exec(move || crate::reaper::enter(fd));
                }
                if config.sandbox {
                    let Some(sandbox) = sandbox else {
                        return Err(fail(
                            "sandbox = true, and this command has no sandbox to run it in".into(),
                        ));
                    };
                    let confined = sandbox
                        .confine(cwd, &mut cmd)
                        .map_err(|e| fail(format!("sandbox = true, and the sandbox cannot be entered: {e}; set sandbox = false to run it unconfined")))?;
                    confinement = Some(confined);
                } else {
                    cmd.env_clear().envs(
                        INHERITED_ENV
                            .iter()
                            .filter_map(|k| std::env::var_os(k).map(|v| (*k, v))),
                    );
                }
                cmd.envs(env)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                // spawned here, not by the SDK's child-process transport, which kills the
                // process it started when dropped: that is the reaper, which must live to kill
                // what is below it
                let mut spawned = cmd
                    .spawn()
                    .map_err(|e| fail(format!("cannot start {command:?}: {e}")))?;
                // the reaper has its copy of the read end; ours would only leak
                drop(read_end);
                let (Some(stdout), Some(stdin)) = (spawned.stdout.take(), spawned.stdin.take())
                else {
                    return Err(fail("its standard input or output was not piped".into()));
                };
                let stderr = spawned.stderr.take();
                child = Some(spawned);
                let transport = (stdout, stdin);
                let mut stderr_reader = None;
                if let Some(mut err) = stderr {
                    let tail = stderr_tail.clone();
                    stderr_reader = Some(tokio::spawn(async move {
                        use tokio::io::AsyncReadExt;
                        let mut buf = [0u8; 4096];
                        while let Ok(n) = err.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            let mut t = lock(&tail);
                            t.extend_from_slice(&buf[..n]);
                            let over = t.len().saturating_sub(STDERR_TAIL_BYTES);
                            t.drain(..over);
                        }
                    }));
                }
                // a server that exits at once says why on stderr: read it to the end first
                let stderr_read = || async {
                    if let Some(reader) = stderr_reader {
                        let _ = tokio::time::timeout(STDERR_WAIT, reader).await;
                    }
                };
                let served = tokio::time::timeout(
                    startup,
                    handler.serve_with_lifecycle(transport, crate::lifecycle::mode()),
                )
                .await;
                match served {
                    Ok(Ok(c)) => c,
                    Ok(Err(e)) => {
                        stderr_read().await;
                        return Err(fail(with_stderr(
                            &format!("initialize failed: {}", crate::lifecycle::start_error(&e)),
                            &stderr_tail,
                        )));
                    }
                    Err(_) => {
                        // dropping the reaper's pipe (on return) stops the server, whole
                        return Err(fail(with_stderr(
                            &format!(
                                "no answer to initialize within {} s (startup_timeout_sec)",
                                startup.as_secs()
                            ),
                            &stderr_tail,
                        )));
                    }
                }
            }
            Transport::Http {
                url,
                bearer_token_env_var,
                headers,
            } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.clone());
                if let Some(var) = bearer_token_env_var {
                    let token = std::env::var(var).map_err(|_| {
                        fail(format!(
                            "bearer_token_env_var names {var}, which is not set in the environment"
                        ))
                    })?;
                    cfg = cfg.auth_header(token);
                }
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let k = http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| {
                        fail(format!("http_headers: {k:?} is not a header name: {e}"))
                    })?;
                    let v = http::HeaderValue::from_str(v).map_err(|e| {
                        fail(format!("http_headers: the value of {k} is not valid: {e}"))
                    })?;
                    custom.insert(k, v);
                }
                cfg = cfg.custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(cfg);
                match tokio::time::timeout(
                    startup,
                    handler.serve_with_lifecycle(transport, crate::lifecycle::mode()),
                )
                .await
                {
                    Ok(Ok(c)) => c,
                    Ok(Err(e)) => {
                        return Err(fail(format!(
                            "initialize at {url} failed: {}",
                            crate::lifecycle::start_error(&e)
                        )));
                    }
                    Err(_) => {
                        return Err(fail(format!(
                            "no answer from {url} to initialize within {} s (startup_timeout_sec)",
                            startup.as_secs()
                        )));
                    }
                }
            }
        };
        let info = client
            .peer_info()
            .map(|p| ServerInfo {
                name: p
                    .server_info
                    .as_ref()
                    .map(|i| i.name.clone())
                    .unwrap_or_default(),
                version: p
                    .server_info
                    .as_ref()
                    .map(|i| i.version.clone())
                    .unwrap_or_default(),
                protocol_version: p.protocol_version.to_string(),
                tasks: !p.protocol_version.has_initialize() && p.capabilities.supports_tasks(),
            })
            .unwrap_or_default();
        let mut server = McpServer {
            config,
            info,
            client,
            notes,
            tools: RwLock::new(Vec::new()),
            stderr_tail,
            _reaper: reaper,
            _child: child,
            _confinement: confinement,
            _listener: None,
        };
        match tokio::time::timeout(startup, server.list_tools()).await {
            Ok(Ok(tools)) => *server.tools.write().unwrap_or_else(|p| p.into_inner()) = tools,
            Ok(Err(e)) => return Err(fail(e)),
            Err(_) => {
                return Err(fail(format!(
                    "no answer to tools/list within {} s (startup_timeout_sec)",
                    startup.as_secs()
                )));
            }
        }
        server.notes.tools_changed.store(false, Ordering::SeqCst);
        server._listener = server.listen_for_tool_changes().await;
        Ok(server)
    }

    /// Lists every tool (all pages, at most [`TOOL_PAGES_MAX`]), keeping those the
    /// configuration offers. A tool the SDK cannot read (no `inputSchema`, say) is an error
    /// naming it, unless the configuration leaves it out (`disabled_tools`).
    async fn list_tools(&self) -> Result<Vec<ListedTool>, String> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..TOOL_PAGES_MAX {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let answer = self
                .client
                .peer()
                .send_request(ClientRequest::ListToolsRequest(
                    ListToolsRequest::with_param(params),
                ))
                .await
                .map_err(|e| self.with_stderr(&format!("tools/list failed: {e}")))?;
            let (tools, next) = match answer {
                ServerResult::ListToolsResult(r) => (r.tools, r.next_cursor),
                // the SDK could not read the list as one: find the tool it could not read
                ServerResult::CustomResult(CustomResult(v)) => self.read_tools_by_hand(&v)?,
                other => {
                    return Err(format!(
                        "tools/list was answered with something else: {}",
                        snippet(&serde_json::to_string(&other).unwrap_or_default())
                    ));
                }
            };
            for t in tools {
                if !self.config.offers(&t.name) {
                    continue;
                }
                out.push(listed(t));
            }
            match next {
                Some(c) if !c.is_empty() => cursor = Some(c),
                _ => return Ok(out),
            }
        }
        Err(format!(
            "tools/list has more than {TOOL_PAGES_MAX} pages; is the server paging in a circle?"
        ))
    }

    /// Reads a `tools/list` answer tool by tool: every tool the configuration offers must be
    /// readable.
    fn read_tools_by_hand(&self, v: &Value) -> Result<(Vec<Tool>, Option<String>), String> {
        let Some(items) = v.get("tools").and_then(Value::as_array) else {
            return Err(format!(
                "tools/list answer has no `tools` array: {}",
                snippet(&v.to_string())
            ));
        };
        let mut tools = Vec::new();
        for item in items {
            let name = item.get("name").and_then(Value::as_str).unwrap_or("");
            match serde_json::from_value::<Tool>(item.clone()) {
                Ok(t) => tools.push(t),
                Err(_) if !name.is_empty() && !self.config.offers(name) => {}
                Err(e) => {
                    let why = if item.get("inputSchema").is_none() {
                        "it has no inputSchema (the MCP spec requires one)".to_string()
                    } else {
                        format!("it cannot be read ({e})")
                    };
                    return Err(format!(
                        "its tool {name:?} is not usable: {why}; fix the server, or leave the tool out with disabled_tools = [{name:?}]"
                    ));
                }
            }
        }
        let next = v
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok((tools, next))
    }

    /// The tools as last listed; listed again first when the server said they changed.
    pub async fn tools(&self) -> Vec<ListedTool> {
        if self.notes.tools_changed.swap(false, Ordering::SeqCst) {
            match self.list_tools().await {
                Ok(t) => *self.tools.write().unwrap_or_else(|p| p.into_inner()) = t,
                Err(e) => {
                    tracing::warn!(server = %self.config.name, error = %e, "cannot list the changed tools; keeping the old list")
                }
            }
        }
        self.tools_now()
    }

    /// The tools as last listed (no request).
    pub fn tools_now(&self) -> Vec<ListedTool> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the server said its tool list changed since it was last listed.
    pub fn tools_changed(&self) -> bool {
        self.notes.tools_changed.load(Ordering::SeqCst)
    }

    /// Calls `tool` with `arguments`, carrying `idempotency_key` and `traceparent` in
    /// `_meta`; `progress` gets each progress notification; `cancel` abandons the call.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        idempotency_key: Option<&str>,
        traceparent: Option<&str>,
        progress: &mut (dyn FnMut(&str) + Send),
        cancel: &tokio_util::sync::CancellationToken,
    ) -> CallEnd {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let mut meta = RequestMetaObject::default();
        if let Some(key) = idempotency_key {
            meta.0
                .insert(IDEMPOTENCY_KEY_META.into(), Value::String(key.into()));
        }
        if let Some(tp) = traceparent {
            meta.0
                .insert(TRACEPARENT_META.into(), Value::String(tp.into()));
        }
        if !meta.0.is_empty() {
            params.meta = Some(meta);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // the SDK gives the request its progress token; progress for it comes here
        let mut handle = match self
            .client
            .peer()
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => {
                return CallEnd::Lost(self.with_stderr(&format!("cannot send the call: {e}")));
            }
        };
        lazarus_agent::failpoint::hit("mcp/request-sent");
        let token = token_key(&handle.progress_token);
        let (tx, mut rx) = mpsc::unbounded_channel();
        lock(&self.notes.progress).insert(token.clone(), tx);
        let deadline = tokio::time::sleep(self.config.tool_timeout);
        tokio::pin!(deadline);
        let end = loop {
            tokio::select! {
                r = &mut handle.rx => break Some(match r {
                    Ok(answer) => self.ended(answer),
                    Err(_) => self.ended(Err(rmcp::ServiceError::TransportClosed)),
                }),
                Some(text) = rx.recv() => progress(&text),
                _ = &mut deadline => break None,
                _ = cancel.cancelled() => break None,
            }
        };
        lock(&self.notes.progress).remove(&token);
        while let Ok(text) = rx.try_recv() {
            progress(&text);
        }
        match end {
            Some(end) => end,
            None => {
                // tell the server (notifications/cancelled); its effect stays unknown
                let timed_out = !cancel.is_cancelled();
                let reason = if timed_out {
                    "tool_timeout_sec passed"
                } else {
                    "the run was stopped"
                };
                if let Err(e) = handle.cancel(Some(reason.into())).await {
                    tracing::warn!(server = %self.config.name, error = %e, "cannot send notifications/cancelled");
                }
                if timed_out {
                    CallEnd::TimedOut
                } else {
                    CallEnd::Abandoned
                }
            }
        }
    }

    fn ended(&self, r: Result<ServerResult, rmcp::ServiceError>) -> CallEnd {
        match r {
            Ok(ServerResult::CallToolResult(result)) => CallEnd::Answered {
                text: content::render(&result),
                is_error: result.is_error == Some(true),
            },
            Ok(ServerResult::CreateTaskResult(created)) => CallEnd::Task(created.task),
            Ok(other) => CallEnd::Lost(format!(
                "the server answered with something that is not a tool result: {}",
                snippet(&serde_json::to_string(&other).unwrap_or_default())
            )),
            Err(rmcp::ServiceError::McpError(e)) => {
                CallEnd::Refused(format!("error {}: {}", e.code.0, e.message))
            }
            Err(e) => CallEnd::Lost(self.with_stderr(&e.to_string())),
        }
    }

    /// `what`, with the server's last stderr lines when it has some.
    pub(crate) fn with_stderr(&self, what: &str) -> String {
        with_stderr(what, &self.stderr_tail)
    }

    /// Stops the server: a stdio server and everything it started are killed (by its
    /// reaper, once the reaper's pipe is dropped with the server).
    pub async fn stop(self) {
        drop(self);
    }
}

fn with_stderr(what: &str, tail: &Mutex<Vec<u8>>) -> String {
    let t = lock(tail);
    let text = String::from_utf8_lossy(&t);
    let last: Vec<&str> = text.lines().rev().take(5).collect();
    if last.is_empty() {
        return what.to_string();
    }
    let mut lines: Vec<&str> = last.into_iter().rev().collect();
    lines.retain(|l| !l.trim().is_empty());
    format!("{what} (its stderr: {})", lines.join(" | "))
}

/// The configured servers, started in parallel; the first failure is the error (every
/// server started so far is stopped).
pub async fn start_all(
    servers: &[Server],
    cwd: &std::path::Path,
    sandbox: Option<Arc<Sandbox>>,
) -> Result<Vec<Arc<McpServer>>, McpError> {
    let mut set = tokio::task::JoinSet::new();
    for (i, s) in servers.iter().cloned().enumerate() {
        let cwd = cwd.to_path_buf();
        let sandbox = sandbox.clone();
        set.spawn(async move { (i, McpServer::start(s, &cwd, sandbox.as_deref()).await) });
    }
    let mut started: BTreeMap<usize, McpServer> = BTreeMap::new();
    let mut failure = None;
    while let Some(j) = set.join_next().await {
        match j {
            Ok((i, Ok(s))) => {
                started.insert(i, s);
            }
            Ok((_, Err(e))) => {
                failure.get_or_insert(e);
            }
            Err(e) => {
                failure.get_or_insert(McpError::Server {
                    server: "?".into(),
                    why: e.to_string(),
                });
            }
        }
    }
    if let Some(e) = failure {
        for (_, s) in started {
            s.stop().await;
        }
        return Err(e);
    }
    Ok(started.into_values().map(Arc::new).collect())
}
