//! `lazarus run`: run an agent session from the terminal; run it again after any crash and
//! it continues where it stopped. `picker` holds `lazarus resume`, `live` what a run prints.

mod approve;
pub(crate) mod live;
mod picker;
mod world;

pub use picker::resume;

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use clap::Args;
use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{
    RunEvent, RunOutcome, Runner, RunnerConfig, StopReason, sandbox_record,
};
use lazarus_session::record::{World, WorldReason};
use lazarus_session::{CreateOptions, SessionError, SessionId, Store};
use serde_json::json;

use crate::Usage;
use crate::args::{ModelArgs, StoreArgs};
use crate::term::escape;
use live::{Live, end_open_line, print_line};

/// Exit code when stopped by SIGINT/SIGTERM.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit code when `--max-turns` was reached with work left.
pub const EXIT_MAX_TURNS: i32 = 4;
pub use approve::EXIT_AWAITING_APPROVAL;

const AFTER_HELP: &str = "\
Examples:
  lazarus run -p 'make the tests pass'              a new session in this directory
  echo 'explain main.rs' | lazarus run              the prompt from standard input
  lazarus run --session fix-tests -p 'go on'        continue fix-tests (created if missing)
  lazarus run --session fix-tests                   resume only: an unknown id is an error
  lazarus run -c                                    resume this workspace's newest session

Exit codes: 0 done (idle); 1 error (the model failed after retries, …); 2 usage error
(nothing to do, an unknown tool, …); 3 a tool call waits for approval and there is no
terminal to ask on (the commands that answer are printed); 4 stopped at --max-turns with work
left; 130 interrupted by SIGINT/SIGTERM. In every case the session stays resumable.";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct RunArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Directory the tools work in (all paths confined to it) [default: a new session: the
    /// current directory; a resumed one: the workspace its world records].
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Session to resume; with a prompt or --new, the id of a session to create [default: a
    /// new session, named by a UUID v7]
    #[arg(long, conflicts_with = "continue_")]
    pub session: Option<SessionId>,
    /// Resume the session of this workspace with the newest activity.
    #[arg(short = 'c', long = "continue")]
    pub continue_: bool,
    /// Create the session even without a prompt (with --session: it must not exist yet).
    #[arg(long, conflicts_with = "continue_")]
    pub new: bool,
    /// Id of this input: the same id is recorded once, across runs and crashes.
    #[arg(long)]
    pub message_id: Option<String>,
    /// The prompt (also read from standard input when it is not a terminal).
    #[arg(short = 'p', long)]
    pub prompt: Option<String>,
    /// One JSON line per durable record on stdout.
    #[arg(long)]
    pub json: bool,
    /// A resumed session runs in the world it recorded (workspace, tools, MCP servers,
    /// approval and sandbox policy, model); a flag that differs from it is refused. With
    /// this, the flags given become its new world, recorded as a `world` record.
    #[arg(long)]
    pub change_world: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Everything `run` needs, checked before anything is written.
struct Checked {
    /// A line prompt on the terminal: each line a durable input, Ctrl-C cancels the turn,
    /// Ctrl-D leaves.
    interactive: bool,
    workspace: PathBuf,
    cfg: RunnerConfig,
    runner: Runner,
    /// The built-in tools offered; the MCP servers' are added once they started.
    toolbox: lazarus_agent::tools::Toolbox,
    mcp: lazarus_mcp::config::Servers,
    prompt: Option<String>,
    /// The world the session runs in (recorded with a new session; checked, adopted or
    /// changed by the runner for an existing one).
    world: lazarus_session::record::World,
    /// The session `--continue` chose.
    continued: Option<SessionId>,
}

pub fn run(args: RunArgs) -> Result<i32> {
    let checked = check_arguments(&args)?;
    run_checked(args, checked)
}

fn run_checked(args: RunArgs, checked: Checked) -> Result<i32> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(run_async(args, checked))
}

/// Every argument (workspace, tools, model settings, store, prompt) is checked here, before
/// anything touches the disk: a command that will be refused writes nothing. A session that
/// recorded its world runs in it ([`world::plan`]): a flag that differs is refused here.
fn check_arguments(args: &RunArgs) -> Result<Checked> {
    args.store.check()?;
    // the session this run continues, and the world it recorded
    let (continued, existing) = existing_session(args)?;
    if let Some(st) = &existing
        && let Some(host) = st.host_program()
    {
        bail!(
            "session {} is written through the Python package (host: {host}); the program that wrote it resumes it, not `lazarus run` (read it with `lazarus sessions show {}`)",
            st.id(),
            st.id()
        );
    }
    if let Some(why) = existing.as_ref().and_then(|s| s.world_unreadable.as_ref()) {
        bail!("{why}");
    }
    let recorded = existing
        .as_ref()
        .and_then(|s| s.world.as_ref())
        .map(|w| &w.world);
    let plan = world::plan(&args.model, args.workspace.as_ref(), recorded)?;
    let workspace = plan.workspace.clone();
    let toolbox = plan.model.toolbox()?;
    if !plan.recorded {
        crate::mcp::note_unused_project_file(&workspace, &plan.model.mcp_config, plan.model.no_mcp);
    }
    for name in &plan.not_in_world {
        eprintln!(
            "mcp: {} is not started: it is not part of this session's world (add --mcp-config FILE --change-world to offer it)",
            escape(name)
        );
    }
    let prompt = read_prompt(args)?;
    if prompt.is_none() && args.message_id.is_some() {
        return Err(Usage(
            "--message-id names a prompt, and none was given (-p PROMPT or standard input)".into(),
        )
        .into());
    }
    let interactive = prompt.is_none()
        && !args.json
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal();
    if prompt.is_none() && !interactive && args.session.is_none() && !args.continue_ && !args.new {
        return Err(Usage(
            "nothing to do: give a prompt (-p PROMPT or on standard input), --session ID or \
             --continue to resume, or --new to create an empty session"
                .into(),
        )
        .into());
    }
    let mut cfg = plan.model.runner_config(workspace.clone(), true)?;
    cfg.api_key_env = Some(plan.model.api_key_var().to_string());
    // OpenTelemetry on: each call passes its span on (an MCP call in `_meta`)
    if lazarus_telemetry::live::enabled() {
        cfg.trace_context = Some(lazarus_telemetry::spans::traceparent);
    }
    // the session files are not the shell's to read
    cfg.sandbox = Arc::new(cfg.sandbox.as_ref().clone().deny(args.store.local_dir()?));
    let grants = crate::approvals::grants()
        .map(|g| g.into_iter().map(|g| g.tool).collect())
        .unwrap_or_default();
    let reason = if existing.is_some() {
        WorldReason::Adopted
    } else {
        WorldReason::Created
    };
    let mut world = cfg.world(
        &toolbox,
        plan.mcp.servers.iter().map(|s| s.world_entry()).collect(),
        grants,
        "run",
        reason,
    );
    if let (Some(st), Some(r)) = (&existing, recorded) {
        let differences = r.differences(&world);
        if !differences.is_empty() {
            if !args.change_world {
                return Err(world::refusal(st.id(), &differences));
            }
            world.reason = WorldReason::Changed;
        }
    }
    let runner = Runner::new(cfg.clone())?;
    Ok(Checked {
        interactive,
        workspace,
        cfg,
        runner,
        toolbox,
        mcp: plan.mcp,
        prompt,
        world,
        continued,
    })
}

/// The session this run continues, if it exists (read, not opened: nothing is written):
/// `--continue`'s choice (also returned), or `--session ID` without `--new`.
fn existing_session(
    args: &RunArgs,
) -> Result<(Option<SessionId>, Option<lazarus_session::SessionState>)> {
    // no session directory yet: no session, and nothing is made to look
    if !args.continue_ && (args.session.is_none() || args.new) {
        return Ok((None, None));
    }
    if let Some(dir) = args.store.local_dir()?
        && !dir.exists()
    {
        if args.continue_ {
            bail!(
                "no session to continue in {}; start one with -p PROMPT",
                dir.display()
            );
        }
        return Ok((None, None));
    }
    let id = if args.continue_ {
        let workspace = match &args.workspace {
            Some(w) => w.clone(),
            None => std::env::current_dir().context("current directory")?,
        };
        let ws = workspace
            .canonicalize()
            .with_context(|| format!("workspace {} must exist", workspace.display()))?;
        let ws = ws.to_string_lossy();
        let store = args.store.open()?;
        let latest = store
            .list()?
            .into_iter()
            .filter(|s| s.workspace.as_deref() == Some(&*ws))
            .max_by(|a, b| a.updated_at.cmp(&b.updated_at));
        let Some(latest) = latest else {
            bail!("no session of workspace {ws} to continue; start one with -p PROMPT");
        };
        let state = store.load(&latest.id)?;
        return Ok((Some(latest.id), Some(state)));
    } else {
        match &args.session {
            Some(id) if !args.new => id.clone(),
            _ => return Ok((None, None)),
        }
    };
    let store = args.store.open()?;
    match store.load(&id) {
        Ok(state) => Ok((None, Some(state))),
        Err(SessionError::NotFound { .. }) => Ok((None, None)),
        Err(e) => Err(e.into()),
    }
}

/// The prompt: `-p`, or standard input when it is not a terminal (empty input is none).
fn read_prompt(args: &RunArgs) -> Result<Option<String>> {
    if let Some(p) = &args.prompt {
        return Ok(Some(p.clone()));
    }
    if std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let mut s = String::new();
    std::io::stdin()
        .take(16 * 1024 * 1024)
        .read_to_string(&mut s)
        .context("reading the prompt from standard input")?;
    Ok((!s.trim().is_empty()).then_some(s))
}

async fn run_async(args: RunArgs, checked: Checked) -> Result<i32> {
    let Checked {
        interactive,
        workspace,
        cfg,
        runner,
        mut toolbox,
        mcp,
        mut prompt,
        world,
        continued,
    } = checked;
    // the MCP servers start before anything is written: one that fails stops the run here
    let mcp = crate::mcp::start(&mcp, &workspace, &cfg.sandbox).await?;
    let mut world = world;
    if let Some(source) = &mcp {
        toolbox.add_source(source.clone());
        // what each server and Lazarus agreed on, for the world a new session records
        source.record_protocol_versions(&mut world.tools.mcp);
    }
    let runner = runner.with_toolbox(toolbox).with_world(world.clone());
    let store = args.store.open()?;
    let mut editor = if interactive {
        Some(rustyline::DefaultEditor::new().context("opening the line editor")?)
    } else {
        None
    };
    if let Some(ed) = editor.as_mut()
        && args.session.is_none()
        && !args.continue_
        && !args.new
    {
        // A new session is created by its first line (none: nothing written).
        eprintln!("lazarus: type a prompt (Enter sends, Ctrl-C cancels a turn, Ctrl-D leaves)");
        match read_line(ed)? {
            Some(line) => prompt = Some(line),
            None => return Ok(0),
        }
    }
    let mut session = open_session(&*store, &args, &cfg, &world, continued, prompt.is_some())?;
    let id = session.id().to_string();
    eprintln!("session {id} ({})", session.location());
    eprintln!("workspace: {}", workspace.display());
    eprintln!("{}", describe_world(&world, session.state()));
    eprintln!("{}", cfg.sandbox.describe());
    if let Some(h) = &session.open_report().previous_holder {
        eprintln!("note: {h} held {id} and died without letting go; its lock was taken over");
    }
    // what waited in the inbox was recorded at open, before anything of ours
    for d in session.take_drained().into_iter().filter(|d| !d.duplicate) {
        if args.json {
            print_line(
                &json!({"seq": d.seq, "ts": d.ts, "kind": d.kind, "data": d.data}).to_string(),
            );
        } else {
            eprintln!(
                "note: message {} (accepted into the inbox earlier) recorded at seq {}",
                escape(&d.message_id),
                d.seq
            );
        }
    }
    let session = Arc::new(Mutex::new(session));
    let code = converse(&args, &id, &cfg, &runner, &session, &mut editor, prompt).await;
    // let go of the writer; what was delivered meanwhile is recorded, not stranded
    if let Some(s) =
        Arc::into_inner(session).map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
    {
        lazarus_session::handoff::close(&*store, s)?;
    }
    code
}

/// Runs the session until it is idle (and, on a terminal, each line the user types after):
/// the exit code.
async fn converse(
    args: &RunArgs,
    id: &str,
    cfg: &RunnerConfig,
    runner: &Runner,
    session: &Arc<Mutex<lazarus_session::Session>>,
    editor: &mut Option<rustyline::DefaultEditor>,
    prompt: Option<String>,
) -> Result<i32> {
    let interactive = editor.is_some();
    if let Some(text) = &prompt {
        let message_id = args
            .message_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let ack = session
            .lock()
            .map_err(|_| anyhow::anyhow!("session lock poisoned"))?
            .append_input(&message_id, "user", text)?;
        if ack.duplicate {
            eprintln!(
                "message {message_id} was already recorded at seq {}; not sent again",
                ack.seq
            );
        } else if args.json {
            print_line(&json!({"seq": ack.seq, "ts": ack.ts, "kind": "input", "data": {"input_id": message_id, "source": "user", "text": text}}).to_string());
        }
    }
    let current = Arc::new(Mutex::new(CancellationToken::new()));
    spawn_signal_handler(current.clone(), cfg.stop_reason.clone());
    let json_out = args.json;
    // OpenTelemetry spans while the run works, only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    let telemetry = lazarus_telemetry::live::Live::from_env(Some(cfg.model.clone()))?;
    let code = drive_loop(
        runner,
        session,
        id,
        editor,
        &current,
        cfg,
        &args.store,
        json_out,
        interactive,
        telemetry.as_ref(),
    )
    .await;
    if let Some(t) = &telemetry {
        tokio::task::block_in_place(|| t.shutdown());
    }
    code
}

/// Drives the session until it is idle, then (interactive) reads the next line and goes on.
#[allow(clippy::too_many_arguments)]
async fn drive_loop(
    runner: &Runner,
    session: &Arc<Mutex<lazarus_session::Session>>,
    id: &str,
    editor: &mut Option<rustyline::DefaultEditor>,
    current: &Arc<Mutex<CancellationToken>>,
    cfg: &RunnerConfig,
    store: &crate::args::StoreArgs,
    json_out: bool,
    interactive: bool,
    telemetry: Option<&lazarus_telemetry::live::Live>,
) -> Result<i32> {
    loop {
        let cancel = current
            .lock()
            .map_err(|_| anyhow::anyhow!("cancel lock poisoned"))?
            .clone();
        let mut live = Live::new(json_out);
        let retries = live.retries.clone();
        let mut observer = move |ev: RunEvent<'_>| {
            if let (
                Some(t),
                RunEvent::Record {
                    seq,
                    ts,
                    kind,
                    data,
                },
            ) = (telemetry, &ev)
            {
                t.record(id, *seq, ts, kind, data);
            }
            live.show(&ev)
        };
        let outcome = runner.drive(session, "run", &cancel, &mut observer).await?;
        drop(observer);
        end_open_line();
        if let RunOutcome::AwaitingApproval { call_id } = &outcome {
            // the question is recorded; the answer is recorded before the call can start
            let asked = tokio::task::block_in_place(|| {
                approve::ask(
                    session,
                    id,
                    call_id,
                    (store, &cfg.workspace),
                    json_out,
                    (&cancel, &cfg.stop_reason),
                    |tool| approve::ToolFacts {
                        keyed: runner.grant_key(tool).is_some(),
                    },
                )
            })?;
            match asked {
                approve::Asked::Decided if !cancel.is_cancelled() => continue,
                approve::Asked::Cancelled => return Ok(EXIT_INTERRUPTED),
                _ => return Ok(EXIT_AWAITING_APPROVAL),
            }
        }
        let code = report_outcome(id, outcome, &retries, interactive);
        // SIGTERM is the system stopping us, not the user cancelling a turn.
        let terminated = code == EXIT_INTERRUPTED && cfg.stop_reason.get() == "sigterm";
        let Some(ed) = editor.as_mut().filter(|_| !terminated) else {
            return Ok(code);
        };
        let Some(line) = tokio::task::block_in_place(|| read_line(ed))? else {
            return Ok(0);
        };
        session
            .lock()
            .map_err(|_| anyhow::anyhow!("session lock poisoned"))?
            .append_input(&uuid::Uuid::now_v7().to_string(), "user", &line)?;
        *current
            .lock()
            .map_err(|_| anyhow::anyhow!("cancel lock poisoned"))? = CancellationToken::new();
    }
}

/// One line from the terminal (`None`: Ctrl-D, the user leaves). Ctrl-C at the prompt clears
/// the line; empty lines are skipped.
fn read_line(ed: &mut rustyline::DefaultEditor) -> Result<Option<String>> {
    loop {
        match ed.readline("> ") {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => {
                let _ = ed.add_history_entry(line.as_str());
                return Ok(Some(line));
            }
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(rustyline::error::ReadlineError::Eof) => return Ok(None),
            Err(e) => return Err(anyhow::Error::from(e).context("reading a line")),
        }
    }
}

/// Says how a drive ended; its exit code.
fn report_outcome(id: &str, outcome: RunOutcome, retries: &AtomicU32, interactive: bool) -> i32 {
    match outcome {
        RunOutcome::Idle => 0,
        RunOutcome::AwaitingApproval { .. } => EXIT_AWAITING_APPROVAL,
        RunOutcome::MaxTurns => {
            eprintln!("stopped after --max-turns; run again with --session {id} to continue");
            EXIT_MAX_TURNS
        }
        RunOutcome::Cancelled if interactive => {
            eprintln!("turn cancelled (recorded; the session stays resumable)");
            EXIT_INTERRUPTED
        }
        RunOutcome::Cancelled => {
            eprintln!("interrupted; run again with --session {id} to continue");
            EXIT_INTERRUPTED
        }
        RunOutcome::Failed { message, transient } => {
            let attempts = retries.load(Ordering::Relaxed) + 1;
            let attempts = if attempts == 1 {
                String::new()
            } else {
                format!(" after {attempts} attempts")
            };
            let then = if transient {
                "once the server answers, run again with"
            } else {
                "fix the cause, then run again with"
            };
            eprintln!(
                "error: model request failed{attempts}: {}; session {id} is kept: {then} --session {id}",
                escape(&message)
            );
            1
        }
    }
}

/// Opens or creates the session. `--session ID` resumes; creating takes a prompt or `--new`,
/// so a mistyped id is an error (naming the nearest ids), never a new empty session. The
/// workspace is the operator's (`--workspace` or the current directory), never the one a
/// session's header names: that is only a record.
fn open_session(
    store: &dyn Store,
    args: &RunArgs,
    cfg: &RunnerConfig,
    world: &lazarus_session::record::World,
    continued: Option<SessionId>,
    have_prompt: bool,
) -> Result<lazarus_session::Session> {
    let workspace = &cfg.workspace;
    let create = |id: Option<SessionId>| {
        let mut world = world.clone();
        world.reason = WorldReason::Created;
        store.create(CreateOptions {
            id,
            meta: Some(json!({
                "workspace": workspace,
                "model": cfg.model,
                "system_prompt": args.model.system_prompt,
                "sandbox": sandbox_record(&cfg.sandbox),
                "world": world,
            })),
        })
    };
    if let Some(id) = continued {
        return Ok(store.open(&id)?);
    }
    let Some(id) = &args.session else {
        return Ok(create(None)?);
    };
    if args.new {
        return match create(Some(id.clone())) {
            Err(e @ SessionError::AlreadyExists { .. }) => {
                Err(anyhow::Error::from(e).context("--new creates; drop it to resume the session"))
            }
            r => Ok(r?),
        };
    }
    match store.open(id) {
        Ok(s) => Ok(s),
        Err(SessionError::NotFound { .. }) if have_prompt => Ok(create(Some(id.clone()))?),
        Err(SessionError::NotFound { location, .. }) => {
            let hint = crate::fmt::did_you_mean(store, id);
            bail!(
                "no session {} in {location}; {hint}--session resumes: to create it, add a prompt (-p) or --new",
                crate::term::escape(id)
            )
        }
        Err(e) => Err(e.into()),
    }
}

/// One line saying which world the run is in.
fn describe_world(world: &World, state: &lazarus_session::SessionState) -> String {
    let mcp: Vec<&str> = world.tools.mcp.iter().map(|s| s.name.as_str()).collect();
    let what = format!(
        "{} built-in tools{}, approval {}, sandbox {}, model {}",
        world.tools.builtin.len(),
        if mcp.is_empty() {
            String::new()
        } else {
            format!(", MCP {}", mcp.join(", "))
        },
        world.approval.mode,
        world.sandbox.mode,
        world
            .provider
            .as_ref()
            .map_or_else(|| "none".into(), |p| escape(&p.model))
    );
    match (world.reason, &state.world) {
        (WorldReason::Created, _) => format!("world: recorded with the session ({what})"),
        (WorldReason::Changed, _) => {
            format!("world: changed by --change-world, recorded as a world record ({what})")
        }
        (WorldReason::Adopted, None) => {
            format!("world: recorded now; the session had none ({what})")
        }
        (WorldReason::Adopted, Some(w)) => {
            format!("world: the session's, recorded at seq {} ({what})", w.seq)
        }
    }
}

/// SIGINT/SIGTERM cancel the current turn (durably: the runner records why); a second one
/// while that turn is still stopping exits at once (the session stays resumable).
fn spawn_signal_handler(current: Arc<Mutex<CancellationToken>>, reason: StopReason) {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        loop {
            // SIGINT is the user (Ctrl-C): boot-resume leaves such a stop alone. SIGTERM is
            // the system (shutdown, a service manager): it resumes it.
            let why = tokio::select! {
                _ = int.recv() => "sigint",
                _ = term.recv() => "sigterm",
            };
            let cancel = current.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if !cancel.is_cancelled() {
                eprintln!("\nstopping: cancelling the model request and any running tool…");
                reason.set(why);
                cancel.cancel();
            } else {
                eprintln!("second signal: exiting now (the session stays resumable)");
                std::process::exit(EXIT_INTERRUPTED);
            }
        }
    });
}
