//! `lazarus acp --wrap -- AGENT ARGS…`: a durable proxy in front of any ACP agent.
//!
//! The editor talks to the proxy as to the agent; the proxy forwards every message both ways
//! unchanged (the bytes that came in) and journals it into a Lazarus session per ACP session
//! ([`journal`]), following each tool call from announcement to end ([`calls`]).
//!
//! When the agent dies (kill -9, OOM, a crash), the proxy keeps the editor's connection: it
//! closes each call the agent never ended — *in doubt* when it may have run, *not run* when
//! its permission question was still open or refused — tells the editor (each such call
//! `failed`, with why), starts the agent again, initializes it as the editor did, and takes
//! each open session back: `session/resume` when the agent has it, else `session/load` (its
//! replay swallowed: the editor has the history), else, or when that fails, a new session
//! with the conversation the journal recorded. Then it tells the agent what happened, in
//! boot-resume's words ([`notices`]): as the continuation of the editor's open prompt, whose
//! answer is then the agent's answer to that, or in front of the editor's next prompt.
//!
//! When the proxy itself starts again (the editor restarted it) and the editor loads a
//! session, the agent's replay goes to the editor as usual, and the calls the journal left
//! open are closed and shown the same way; an agent that cannot load the session gets a new
//! one, and the editor gets the journal's replay instead of a blank transcript.
//!
//! The proxy never waits for the disk to forward a message, except before forwarding what
//! acknowledges or authorizes something: a turn's answer, a person's permission decision.

mod calls;
mod child;
mod journal;
mod notices;
mod restart;
mod route;
pub mod rpc;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use lazarus_session::SharedStore;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

pub use calls::{Call, Calls, Closed};
pub use journal::{HOST, ledger_id};

use child::{Agent, Read};
use journal::Journal;

/// How many times the agent may die within [`RESTART_WINDOW`] before the proxy gives up.
pub const RESTARTS_MAX: usize = 5;
/// See [`RESTARTS_MAX`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// How long a restarted agent has to answer `initialize` and each session's load.
pub const AGENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// After a proxy's `session/load`, the agent's replay is swallowed until it has been quiet
/// this long (an agent may go on replaying after it answered: Gemini CLI does) …
pub const REPLAY_QUIET: Duration = Duration::from_millis(300);
/// … but no longer than this.
pub const REPLAY_QUIET_MAX: Duration = Duration::from_secs(5);
/// Lines waiting to be handled, per side.
const QUEUE_LINES: usize = 4096;

/// What the proxy runs.
pub struct ProxyConfig {
    /// The agent's command and arguments.
    pub agent: Vec<String>,
    /// Where the journal's sessions live.
    pub store: SharedStore,
}

/// Why the proxy stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot start the agent {agent:?}: {source} (is it installed and on PATH?)")]
    Spawn {
        agent: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the agent {agent:?} stopped {deaths} times within {window:?} (last: {last}); Lazarus gave up restarting it"
    )]
    Crashing {
        agent: String,
        deaths: usize,
        window: Duration,
        last: String,
    },
    #[error("writing to the editor: {0}")]
    Editor(std::io::Error),
    #[error("the journal: {0}")]
    Journal(std::io::Error),
}

/// An editor request the agent has not answered yet.
#[derive(Debug, Clone)]
struct EditorReq {
    method: String,
    /// The editor's session it is about.
    sid: Option<String>,
    /// The message as forwarded, for asking the next agent again (methods that are safe to
    /// ask twice; `None` for the others).
    resend: Option<Value>,
    generation: u64,
    /// What it asked, for a `session/new`'s or a load's answer.
    params: Value,
}

/// An agent request the editor has not answered yet.
#[derive(Debug, Clone)]
struct AgentReq {
    generation: u64,
    /// The id the agent gave it (the editor may see another: see `route`).
    agent_id: Value,
    method: String,
    sid: Option<String>,
}

/// A request of the proxy's own to the agent.
#[derive(Debug, Clone)]
enum Own {
    Initialize,
    Authenticate,
    /// Taking session `sid` back after a restart, by `how`.
    Reattach {
        sid: String,
        how: restart::How,
    },
    /// A new agent session for `sid`, whose old one the agent could not take back. `load`:
    /// the editor's load request it answers.
    Fresh {
        sid: String,
        load: Option<(Value, String)>,
        why: String,
    },
    /// A setting asked again (mode, model, option): its answer changes nothing here.
    Setting,
}

/// One ACP session the editor has open through this proxy.
#[derive(Debug, Default)]
struct Live {
    /// The agent's id for it (the editor's, unless the agent lost it and made another).
    agent_sid: String,
    cwd: Value,
    mcp_servers: Value,
    calls: Calls,
    /// The editor's prompt the agent has not answered.
    prompt: Option<Value>,
    /// What the agent must be told in front of the editor's next prompt.
    tell_agent: Option<String>,
    /// The last `session/set_mode`, `set_model`, `set_config_option` (by method; by option
    /// id for the last), asked again after a restart.
    settings: Vec<(String, Value)>,
    /// A journal for it exists.
    recorded: bool,
    /// Swallowing the replay of the proxy's own load (since when).
    swallowing: Option<Instant>,
    /// The editor's load in progress: the status of each call its replay showed.
    loading: Option<HashMap<String, String>>,
    /// The editor was told its journal cannot be written.
    warned: bool,
}

/// The proxy.
struct Proxy<W> {
    cfg: ProxyConfig,
    agent_name: String,
    journal: Journal,
    out: W,
    agent: Option<Agent>,
    agent_tx: mpsc::Sender<(u64, Read)>,
    generation: u64,
    /// The editor's `initialize` request, and the agent's answer to it.
    init_params: Option<Value>,
    init_result: Option<Value>,
    /// The editor's `authenticate` request.
    auth: Option<Value>,
    sessions: HashMap<String, Live>,
    /// Agent session id → the editor's, where they differ.
    editor_sid: HashMap<String, String>,
    editor_reqs: HashMap<String, EditorReq>,
    agent_reqs: HashMap<String, AgentReq>,
    own: HashMap<String, Own>,
    own_prefix: String,
    own_next: u64,
    restart: Option<restart::Restart>,
    /// Editor lines held while the agent restarts.
    held: VecDeque<Vec<u8>>,
    deaths: VecDeque<Instant>,
}

/// Runs the proxy between the editor (`editor_in`, `editor_out`) and the agent until the
/// editor goes.
pub async fn run<R, W>(cfg: ProxyConfig, editor_in: R, editor_out: W) -> Result<(), ProxyError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let journal = Journal::start(cfg.store.clone()).map_err(ProxyError::Journal)?;
    let (editor_tx, mut editor_rx) = mpsc::channel(QUEUE_LINES);
    tokio::spawn(child::read_lines(editor_in, (), editor_tx));
    let (agent_tx, mut agent_rx) = mpsc::channel(QUEUE_LINES);
    let agent_name = cfg
        .agent
        .first()
        .map(|a| {
            std::path::Path::new(a)
                .file_name()
                .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    let agent = Agent::spawn(&cfg.agent, 0, agent_tx.clone()).map_err(|e| ProxyError::Spawn {
        agent: cfg.agent.join(" "),
        source: e,
    })?;
    let mut p = Proxy {
        agent_name,
        journal,
        out: editor_out,
        agent: Some(agent),
        agent_tx,
        generation: 0,
        init_params: None,
        init_result: None,
        auth: None,
        sessions: HashMap::new(),
        editor_sid: HashMap::new(),
        editor_reqs: HashMap::new(),
        agent_reqs: HashMap::new(),
        own: HashMap::new(),
        own_prefix: format!(
            "lazarus-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ),
        own_next: 0,
        restart: None,
        held: VecDeque::new(),
        deaths: VecDeque::new(),
        cfg,
    };
    let result = p.serve(&mut editor_rx, &mut agent_rx).await;
    if let Some(mut a) = p.agent.take() {
        a.stop().await;
    }
    if let Err(e) = p.journal.barrier().await {
        tracing::error!("acp proxy: the journal could not record everything: {e}");
    }
    result
}

impl<W: AsyncWrite + Unpin> Proxy<W> {
    async fn serve(
        &mut self,
        editor_rx: &mut mpsc::Receiver<((), Read)>,
        agent_rx: &mut mpsc::Receiver<(u64, Read)>,
    ) -> Result<(), ProxyError> {
        loop {
            let timer = self.restart.as_ref().and_then(|r| r.wake_at());
            tokio::select! {
                e = editor_rx.recv() => match e {
                    Some(((), Read::Line(line))) => self.on_editor_line(line).await?,
                    Some(((), Read::TooLong(n))) => tracing::warn!(
                        "acp proxy: dropped a message of {n} bytes from the editor (the limit is {} bytes)",
                        child::LINE_BYTES_MAX
                    ),
                    // the editor went: so does everything
                    Some(((), Read::End(_))) | None => return Ok(()),
                },
                a = agent_rx.recv() => match a {
                    Some((g, _)) if g != self.generation => {} // a dead agent's last words
                    Some((_, Read::Line(line))) => self.on_agent_line(line).await?,
                    Some((_, Read::TooLong(n))) => tracing::warn!(
                        "acp proxy: dropped a message of {n} bytes from the agent (the limit is {} bytes)",
                        child::LINE_BYTES_MAX
                    ),
                    Some((_, Read::End(e))) => {
                        if let Some(e) = e {
                            tracing::warn!("acp proxy: reading the agent: {e}");
                        }
                        self.agent_died().await?
                    }
                    None => return Ok(()),
                },
                _ = sleep_until(timer), if timer.is_some() => self.on_timer().await?,
            }
        }
    }

    /// Writes one message to the editor.
    async fn send_editor(&mut self, line: &[u8]) -> Result<(), ProxyError> {
        let w = async {
            self.out.write_all(line).await?;
            self.out.write_all(b"\n").await?;
            self.out.flush().await
        };
        w.await.map_err(ProxyError::Editor)
    }

    /// Writes a message of the proxy's own to the editor, and journals it.
    async fn tell_editor(&mut self, sid: &str, msg: Value) -> Result<(), ProxyError> {
        let bytes = serde_json::to_vec(&msg).unwrap_or_default();
        self.send_editor(&bytes).await?;
        self.record(
            sid,
            json!({"from": "proxy", "to": "editor", "gen": self.generation, "msg": msg}),
            bytes.len(),
        );
        Ok(())
    }

    /// Writes one message to the agent (an error: it is dying, and its end comes next).
    async fn send_agent(&mut self, line: &[u8]) {
        if let Some(a) = self.agent.as_mut()
            && let Err(e) = a.send(line).await
        {
            tracing::debug!("acp proxy: writing to the agent: {e}");
        }
    }

    /// Sends a request of the proxy's own to the agent.
    async fn ask_agent(&mut self, purpose: Own, method: &str, params: Value) {
        self.own_next += 1;
        let id = Value::String(format!("{}-{}", self.own_prefix, self.own_next));
        self.own.insert(rpc::key(&id), purpose.clone());
        let msg = rpc::request(&id, method, params);
        let bytes = serde_json::to_vec(&msg).unwrap_or_default();
        self.send_agent(&bytes).await;
        let sid = match &purpose {
            Own::Reattach { sid, .. } | Own::Fresh { sid, .. } => Some(sid.clone()),
            _ => None,
        };
        if let Some(sid) = sid {
            self.record(
                &sid,
                json!({"from": "proxy", "to": "agent", "gen": self.generation, "msg": msg}),
                bytes.len(),
            );
        }
    }

    /// Journals an entry of session `sid` (if it has a journal), and applies it to its
    /// calls, journaling what changed.
    fn record(&mut self, sid: &str, entry: Value, len: usize) {
        let Some(live) = self.sessions.get_mut(sid) else {
            return;
        };
        let changes = live.calls.apply(&entry);
        if !live.recorded {
            return;
        }
        self.journal.entry(sid, entry, len);
        for c in changes {
            self.journal.change(sid, &live.calls, c);
        }
    }

    /// Waits until the journal holds everything so far; a failure is told to the editor
    /// once per session (the proxy goes on forwarding: the agent still works, unprotected).
    async fn durable(&mut self, sid: Option<&str>) -> Result<(), ProxyError> {
        if let Err(e) = self.journal.barrier().await
            && let Some(sid) = sid
            && let Some(live) = self.sessions.get_mut(sid)
            && !live.warned
        {
            live.warned = true;
            let text = format!(
                "Lazarus cannot record this session ({e}): from here on it is not protected against the agent's crash."
            );
            let msg = notices::message_update(sid, &text);
            let bytes = serde_json::to_vec(&msg).unwrap_or_default();
            self.send_editor(&bytes).await?;
        }
        Ok(())
    }

    /// The editor's session id for the agent's `agent_sid`.
    fn editor_sid_of(&self, agent_sid: &str) -> String {
        self.editor_sid
            .get(agent_sid)
            .cloned()
            .unwrap_or_else(|| agent_sid.to_string())
    }

    async fn on_timer(&mut self) -> Result<(), ProxyError> {
        restart::on_timer(self).await
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}
