//! `lazarus run`: run an agent session from the terminal; run it again after any crash and
//! it continues where it stopped.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use clap::Args;
use lazarus_agent::provider::CancellationToken;
use lazarus_agent::runner::{
    RunEvent, RunOutcome, Runner, RunnerConfig, StopReason, sandbox_record,
};
use lazarus_session::{CreateOptions, SessionError, SessionId, Store};
use serde_json::json;

use crate::Usage;
use crate::args::{ModelArgs, StoreArgs};
use crate::term::{escape, escape_text};

/// Exit code when stopped by SIGINT/SIGTERM.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit code when `--max-turns` was reached with work left.
pub const EXIT_MAX_TURNS: i32 = 3;

const AFTER_HELP: &str = "\
Examples:
  lazarus run -p 'make the tests pass'              a new session in this directory
  echo 'explain main.rs' | lazarus run              the prompt from standard input
  lazarus run --session fix-tests -p 'go on'        continue fix-tests (created if missing)
  lazarus run --session fix-tests                   resume only: an unknown id is an error
  lazarus run -c                                    resume this workspace's newest session

Exit codes: 0 done (idle); 1 error (the model failed after retries, …); 2 usage error
(nothing to do, an unknown tool, …); 3 stopped at --max-turns with work left; 130
interrupted by SIGINT/SIGTERM. In every case the session stays resumable.";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct RunArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Directory the tools work in (all paths confined to it) [default: current directory].
    /// A resumed session always uses this, never the workspace its header records.
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
    prompt: Option<String>,
}

pub fn run(args: RunArgs) -> Result<i32> {
    let checked = check_arguments(&args)?;
    run_checked(args, checked)
}

/// `lazarus resume`: pick the session on a terminal (arrow keys, type to filter), show its
/// last turns, then resume it as `run --session ID` would.
pub fn resume(mut args: RunArgs) -> Result<i32> {
    if args.session.is_none() && !args.continue_ {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return Err(Usage(
                "lazarus resume picks a session on a terminal; elsewhere give --session ID (or -c for this workspace's newest)".into(),
            )
            .into());
        }
        args.store.check()?;
        let store = args.store.open()?;
        match pick(&*store)? {
            Some(chosen) => {
                preview(&*store, &chosen.id);
                if let Some(recorded) = &chosen.workspace
                    && args.workspace.is_none()
                    && std::env::current_dir()
                        .ok()
                        .and_then(|d| d.canonicalize().ok())
                        .is_none_or(|d| d.to_string_lossy() != recorded.as_str())
                {
                    eprintln!(
                        "note: {} was created in {}; its tools now work in the current directory (give --workspace to choose)",
                        chosen.id,
                        escape(recorded)
                    );
                }
                args.session = Some(chosen.id);
            }
            None => {
                eprintln!("nothing chosen; nothing resumed");
                return Ok(EXIT_INTERRUPTED);
            }
        }
    }
    let checked = check_arguments(&args)?;
    run_checked(args, checked)
}

/// One line of the picker: title, status, workspace, age, id.
struct Choice(lazarus_session::SessionSummary);

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::sessions::{ago, fit, short_path};
        let s = &self.0;
        let title = s.title.as_deref().unwrap_or("(no input yet)");
        let ws = s.workspace.as_deref().map(short_path).unwrap_or_default();
        write!(
            f,
            "{:<40}  {:<11}  {:<24}  {:<12}  {}",
            fit(&escape(title), 40, false),
            s.status.to_string(),
            fit(&escape(&ws), 24, true),
            ago(&s.updated_at),
            s.id
        )
    }
}

fn pick(store: &dyn Store) -> Result<Option<lazarus_session::SessionSummary>> {
    let mut list: Vec<_> = store
        .list()?
        .into_iter()
        .filter(|s| s.status != lazarus_session::Status::Corrupt)
        .collect();
    if list.is_empty() {
        bail!(
            "no sessions in {} to resume; start one with lazarus run -p PROMPT",
            store.location()
        );
    }
    list.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
    let choices: Vec<Choice> = list.into_iter().map(Choice).collect();
    let answer = inquire::Select::new("Resume which session?", choices)
        .with_page_size(12)
        .with_help_message("↑↓ move · type to filter · Enter resumes · Esc cancels")
        // typed text filters on the whole title, id and workspace (the row shows them cut)
        .with_scorer(&|typed, choice, _, _| {
            let typed = typed.to_lowercase();
            let s = &choice.0;
            let hit = [
                Some(s.id.as_str()),
                s.title.as_deref(),
                s.workspace.as_deref(),
            ]
            .into_iter()
            .flatten()
            .any(|field| field.to_lowercase().contains(&typed));
            hit.then_some(0)
        })
        .prompt();
    match answer {
        Ok(c) => Ok(Some(c.0)),
        Err(
            inquire::InquireError::OperationCanceled | inquire::InquireError::OperationInterrupted,
        ) => Ok(None),
        Err(e) => Err(anyhow::Error::from(e).context("the session picker")),
    }
}

/// The chosen session's last turns, so the user sees where it stands before it continues.
fn preview(store: &dyn Store, id: &SessionId) {
    let Ok(st) = store.load(id) else { return };
    let mut lines: Vec<String> = st
        .pending_inputs
        .iter()
        .rev()
        .map(|p| format!("> {} (pending)", p.text))
        .map(|l| {
            escape(
                &l.lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(100)
                    .collect::<String>(),
            )
            .into_owned()
        })
        .collect();
    // what the model is sent (a compaction's summarised text is not kept in the state)
    for entry in st.live_context().1.iter().rev() {
        if lines.len() >= 4 {
            break;
        }
        let line = match entry {
            lazarus_session::ContextEntry::User { text, .. } => format!("> {}", text),
            lazarus_session::ContextEntry::Assistant { items, .. } => items
                .iter()
                .find_map(|i| match i {
                    lazarus_session::record::Item::Text { text } => Some(text.clone()),
                    lazarus_session::record::Item::ToolCall { name, .. } => {
                        Some(format!("→ {name}"))
                    }
                    _ => None,
                })
                .unwrap_or_default(),
            lazarus_session::ContextEntry::ToolResult { .. } => continue,
        };
        if line.is_empty() {
            continue;
        }
        let one: String = line
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(100)
            .collect();
        lines.push(escape(&one).into_owned());
        if lines.len() == 4 {
            break;
        }
    }
    eprintln!("last turns of {id}:");
    for l in lines.iter().rev() {
        eprintln!("  {l}");
    }
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
/// anything touches the disk: a command that will be refused writes nothing.
fn check_arguments(args: &RunArgs) -> Result<Checked> {
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().context("current directory")?,
    };
    let workspace = workspace
        .canonicalize()
        .with_context(|| format!("workspace {} must exist", workspace.display()))?;
    let toolbox = args.model.toolbox()?;
    args.store.check()?;
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
    let cfg = args.model.runner_config(workspace.clone(), true)?;
    let runner = Runner::new(cfg.clone())?.with_toolbox(toolbox);
    Ok(Checked {
        interactive,
        workspace,
        cfg,
        runner,
        prompt,
    })
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
        mut prompt,
    } = checked;
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
    let session = open_session(&*store, &args, &cfg, prompt.is_some())?;
    let id = session.id().to_string();
    eprintln!("session {id} ({})", session.location());
    eprintln!("workspace: {}", workspace.display());
    eprintln!("{}", cfg.sandbox.describe());
    let session = Arc::new(Mutex::new(session));
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
    loop {
        let cancel = current
            .lock()
            .map_err(|_| anyhow::anyhow!("cancel lock poisoned"))?
            .clone();
        let mut live = Live::new(json_out);
        let retries = live.retries.clone();
        let mut observer = move |ev: RunEvent<'_>| live.show(&ev);
        let outcome = runner
            .drive(&session, "run", &cancel, &mut observer)
            .await?;
        drop(observer);
        if LINE_OPEN.load(Ordering::Relaxed) {
            print_line("");
        }
        let code = report_outcome(&id, outcome, &retries, interactive);
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
    have_prompt: bool,
) -> Result<lazarus_session::Session> {
    let workspace = &cfg.workspace;
    let create = |id: Option<SessionId>| {
        store.create(CreateOptions {
            id,
            meta: Some(json!({
                "workspace": workspace,
                "model": cfg.model,
                "system_prompt": args.model.system_prompt,
                "sandbox": sandbox_record(&cfg.sandbox),
            })),
        })
    };
    if args.continue_ {
        let ws = workspace.to_string_lossy();
        let latest = store
            .list()?
            .into_iter()
            .filter(|s| s.workspace.as_deref() == Some(&*ws))
            .max_by(|a, b| a.updated_at.cmp(&b.updated_at));
        let Some(latest) = latest else {
            bail!("no session of workspace {ws} to continue; start one with -p PROMPT");
        };
        return Ok(store.open(&latest.id)?);
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
            let near = nearest_ids(id, store.list().unwrap_or_default().iter().map(|s| &s.id));
            let hint = match near.as_slice() {
                [] => String::new(),
                ids => format!(
                    "did you mean {}? ",
                    ids.iter()
                        .map(|i| crate::term::escape(i))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            bail!(
                "no session {} in {location}; {hint}--session resumes: to create it, add a prompt (-p) or --new",
                crate::term::escape(id)
            )
        }
        Err(e) => Err(e.into()),
    }
}

/// The existing ids closest to a mistyped one (at most three, closest first).
fn nearest_ids<'a>(wanted: &str, ids: impl Iterator<Item = &'a SessionId>) -> Vec<String> {
    let mut scored: Vec<(f64, &str)> = ids
        .map(|id| {
            (
                strsim::normalized_damerau_levenshtein(wanted, id),
                id.as_str(),
            )
        })
        .filter(|(score, _)| *score >= 0.6)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, id)| id.to_string())
        .collect()
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

/// `workspace-write (no network; Landlock ABI 7, …)` from a receipt's `sandbox`.
fn describe_sandbox_record(v: &serde_json::Value) -> String {
    let Some(mode) = v["mode"].as_str() else {
        return "not recorded".into();
    };
    let net = if v["network"].as_bool() == Some(true) {
        "network allowed"
    } else {
        "no network"
    };
    format!("{mode} ({net}; {})", v["detail"].as_str().unwrap_or("?"))
}

/// Whether stdout's last line is unfinished (streamed text without its newline yet).
static LINE_OPEN: AtomicBool = AtomicBool::new(false);

/// Prints one line; a closed stdout must not stop the run (every record is durable already).
fn print_line(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}").and_then(|_| out.flush());
    LINE_OPEN.store(false, Ordering::Relaxed);
}

fn print_raw(s: &str) {
    if s.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{s}").and_then(|_| out.flush());
    LINE_OPEN.store(!s.ends_with('\n'), Ordering::Relaxed);
}

/// Live output of a run: records or text on stdout; model retries as one transient status
/// line on a terminal's stderr (gone once the request succeeds) and one line at the end if
/// it never does — never one line per attempt.
struct Live {
    json: bool,
    /// Retries of the current model request.
    retries: Arc<AtomicU32>,
    /// The retry status line, while a request is being retried (terminals only).
    status: Option<indicatif::ProgressBar>,
}

impl Live {
    fn new(json: bool) -> Self {
        Live {
            json,
            retries: Arc::new(AtomicU32::new(0)),
            status: None,
        }
    }

    fn show(&mut self, ev: &RunEvent<'_>) {
        match ev {
            RunEvent::Retry { error, wait } => {
                let n = self.retries.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::info!(attempt = n, error, "model request failed; retrying");
                if !std::io::stderr().is_terminal() {
                    return;
                }
                let bar = self.status.get_or_insert_with(|| {
                    let b = indicatif::ProgressBar::new_spinner();
                    b.enable_steady_tick(std::time::Duration::from_millis(120));
                    b
                });
                let short: String = error.chars().take(100).collect();
                bar.set_message(format!(
                    "model request failed ({}); attempt {} in {} ms",
                    escape(&short),
                    n + 1,
                    wait.as_millis()
                ));
                return;
            }
            RunEvent::Record { kind, .. } if *kind == "turn_start" => {
                self.retries.store(0, Ordering::Relaxed);
                // one turn's text never runs into the next one's
                if !self.json && LINE_OPEN.load(Ordering::Relaxed) {
                    print_line("");
                }
            }
            _ => {}
        }
        // Anything else means the model answered (or the run moved on): the status goes.
        if let Some(bar) = self.status.take() {
            bar.finish_and_clear();
        }
        show_event(ev, self.json);
    }
}

fn show_event(ev: &RunEvent<'_>, json: bool) {
    if json {
        if let RunEvent::Record {
            seq,
            ts,
            kind,
            data,
        } = ev
        {
            print_line(&json!({"seq": seq, "ts": ts, "kind": kind, "data": data}).to_string());
        }
        return;
    }
    match ev {
        RunEvent::Text(t) => print_raw(&escape_text(t)),
        RunEvent::Reasoning(_) => {}
        RunEvent::Retry { .. } => {}
        RunEvent::ToolRunning {
            name, arguments, ..
        } => print_line(&format!("\n→ {} {}", escape(name), escape(arguments))),
        RunEvent::Record { kind, data, .. } => match *kind {
            "tool_outcome" => {
                let result = data["result"].as_str().unwrap_or("");
                let mut lines: Vec<&str> = result.lines().take(12).collect();
                if result.lines().count() > 12 {
                    lines.push("…");
                }
                print_line(&format!(
                    "← [{}] {}",
                    data["status"].as_str().unwrap_or("?"),
                    escape_text(&lines.join("\n  "))
                ));
            }
            "resume" => print_line(&format!(
                "resumed ({}): {} bytes of crash debris cut{}, {} records replayed, {} calls reused, {} re-run, {} in doubt, {} not started, {} leftover process groups terminated, {} inputs pending{}; every tool call has exactly one result: {}; sandbox: {}",
                data["trigger"].as_str().unwrap_or("?"),
                data["truncated_bytes"],
                data["truncated_saved_to"]
                    .as_str()
                    .map(|f| format!(" (saved to {f})"))
                    .unwrap_or_default(),
                data["records_replayed"],
                data["calls_reused"],
                data["calls_rerun"],
                data["calls_in_doubt"],
                data["calls_not_started"],
                data["processes_terminated"],
                data["inputs_pending"],
                data["open_turn"]
                    .as_u64()
                    .map(|t| format!(", turn {t} requested again"))
                    .unwrap_or_default(),
                data["every_call_has_one_result"],
                describe_sandbox_record(&data["sandbox"])
            )),
            // A failed response ends the run; its one line goes to stderr then.
            _ => {}
        },
    }
}
