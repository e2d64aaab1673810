//! The `lazarus` binary: parses arguments and wires the library crates together.
//!
//! Exit codes: 0 success; 1 error (or, for `verify`, problems found); 2 usage error;
//! 130 interrupted by SIGINT/SIGTERM (the session stays resumable).

use clap::{Parser, Subcommand};
// jemalloc for the whole process (why: the crate's docs)
use lazarus_allocator as _;

mod acp;
mod approvals;
mod args;
mod boot_resume;
mod config;
mod config_cmd;
mod db;
mod fmt;
mod mcp;
mod paths;
mod run;
mod serve;
mod sessions;
mod term;
mod ui;

const AFTER_HELP: &str = "\
Examples:
  lazarus run -p 'make the tests pass'           start a session in this directory
  lazarus run --session fix-tests -p 'go on'     create or continue the session fix-tests
  lazarus run -c                                 resume this workspace's newest session
  lazarus sessions list --status in_doubt        sessions cut off during a tool call
  lazarus serve                                  the HTTP gateway on 127.0.0.1:7077

Exit codes:
  0    success
  1    error (for `sessions verify`: problems found)
  2    usage error (a bad argument, nothing to do)
  3    `run` stopped: a tool call waits for approval (it prints the command that answers)
  4    `run` stopped at --max-turns with work left (run again to continue)
  130  interrupted by SIGINT/SIGTERM (the session stays resumable)
  141  stdout closed (broken pipe)

Environment: LAZARUS_SESSION_DIR, LAZARUS_STORE, LAZARUS_MODEL, OPENAI_BASE_URL,
OPENAI_API_KEY, LAZARUS_TOKEN, LAZARUS_LOG (e.g. info, debug), NO_COLOR.";

#[derive(Debug, Parser)]
#[command(
    name = "lazarus",
    version,
    about = "Durable, resumable AI-agent sessions",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an agent session (resumes it when it already exists).
    Run(Box<run::RunArgs>),
    /// Pick a session on the terminal (arrow keys, type to filter) and resume it.
    Resume(Box<run::RunArgs>),
    /// Serve many durable sessions over HTTP (the gateway).
    Serve(Box<serve::ServeArgs>),
    /// Manage sessions: create, send, list, show, verify, repair, fork, tree, export,
    /// import, rm, prune.
    Sessions(sessions::SessionsArgs),
    /// PostgreSQL store administration.
    Db(db::DbArgs),
    /// Find agent sessions cut off by a restart or wake and resume them.
    BootResume(Box<boot_resume::BootResumeArgs>),
    /// Show the configuration: each setting, its value and where it comes from.
    Config(config_cmd::ConfigArgs),
    /// MCP servers: list the configured ones, check what each offers.
    Mcp(mcp::McpArgs),
    /// Serve Lazarus sessions to an editor over the Agent Client Protocol (stdio).
    Acp(Box<acp::AcpArgs>),
    /// The `always` approval grants: list them, revoke one.
    Approvals(approvals::ApprovalsArgs),
    /// The web view of a store, read-only (sessions, timelines, receipts, fork trees).
    Ui(Box<ui::UiArgs>),
    /// Print a shell completion script: `lazarus completions bash > ~/.local/share/bash-completion/completions/lazarus`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `lazarus man | man -l -`, `lazarus man sessions`.
    Man {
        /// A subcommand whose page to print [default: the main page]
        subcommand: Option<String>,
    },
}

fn main() {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("error: {}", term::escape_text(&format!("{e:#}")));
            std::process::exit(2);
        }
    };
    init_tracing(matches!(cli.command, Command::Serve(_)));
    let result = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Resume(args) => run::resume(*args),
        Command::Serve(args) => serve::run(*args),
        Command::Sessions(args) => sessions::run(args),
        Command::BootResume(args) => boot_resume::run(*args),
        Command::Db(args) => db::run(args),
        Command::Completions { shell } => {
            use std::io::Write;
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "lazarus", &mut script);
            std::io::stdout()
                .lock()
                .write_all(&script)
                .map(|_| 0)
                .map_err(Into::into)
        }
        Command::Man { subcommand } => man(subcommand.as_deref()),
        Command::Config(args) => config_cmd::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Approvals(args) => approvals::run(args),
        Command::Acp(args) => acp::run(*args),
        Command::Ui(args) => ui::run(*args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                std::process::exit(141);
            }
            // the chain carries what others wrote (an MCP server's stderr, a model's text,
            // a file's name): shown, never obeyed by the terminal
            eprintln!("error: {}", term::escape_text(&format!("{e:#}")));
            let usage = e.chain().any(|c| c.downcast_ref::<Usage>().is_some());
            // a session's inbox at its limit: nothing was added, try again later
            let full = e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<lazarus_session::SessionError>(),
                    Some(lazarus_session::SessionError::InboxFull { .. })
                )
            });
            std::process::exit(if usage {
                2
            } else if full {
                EXIT_TRY_LATER
            } else {
                1
            });
        }
    }
}

/// Exit code when a session's inbox is at its limit: nothing was added; try again once its
/// writer has recorded what waits (sysexits' `EX_TEMPFAIL`).
pub const EXIT_TRY_LATER: i32 = 75;

/// A usage error found after parsing (a combination clap cannot express): exit code 2, like
/// clap's own.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The command line, with the configuration file's values as the defaults of their flags
/// (so flags and environment win over it).
fn parse() -> anyhow::Result<Cli> {
    use clap::{CommandFactory, FromArgMatches};
    let file = config::load()?;
    let cmd = config::apply_defaults(Cli::command(), file);
    let matches = cmd.get_matches();
    if let Some((_, sub)) = matches.subcommand() {
        args::note_given(sub);
    }
    Ok(Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()))
}

/// A manual page (roff): `lazarus`'s, or one subcommand's (`lazarus man sessions`).
fn man(subcommand: Option<&str>) -> anyhow::Result<i32> {
    use std::io::Write;
    let cmd = <Cli as clap::CommandFactory>::command();
    let page = match subcommand {
        None => cmd,
        Some(name) => {
            let Some(sub) = cmd.find_subcommand(name) else {
                let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
                return Err(Usage(format!(
                    "no subcommand {:?}; one of {}",
                    term::escape(name),
                    names.join(", ")
                ))
                .into());
            };
            // clap names are 'static; this process prints one page and exits.
            let full: &'static str = Box::leak(format!("lazarus-{name}").into_boxed_str());
            sub.clone().name(full).bin_name(format!("lazarus {name}"))
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    std::io::stdout().lock().write_all(&out)?;
    Ok(0)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Logs on stderr (`LAZARUS_LOG` as an env filter). Colour only on a terminal, and never with
/// `NO_COLOR`. A server logs each failed model attempt; an interactive command says it once,
/// at the end, instead.
fn init_tracing(server: bool) {
    use std::io::IsTerminal;
    let default = if server {
        "warn"
    } else {
        "warn,lazarus_agent::provider=error"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAZARUS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument of every command says what it is for (`--help`, completions and the
    /// manual page all show it).
    #[test]
    fn every_argument_has_help() {
        let mut missing = Vec::new();
        let mut stack = vec![(
            String::from("lazarus"),
            <Cli as clap::CommandFactory>::command(),
        )];
        while let Some((path, cmd)) = stack.pop() {
            if cmd.get_about().is_none() && path != "lazarus" {
                missing.push(format!("{path} (the command)"));
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_name() != "help" {
                    stack.push((format!("{path} {}", sub.get_name()), sub.clone()));
                }
            }
        }
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
