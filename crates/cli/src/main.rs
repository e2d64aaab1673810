//! The `lazarus` binary: parses arguments and wires the library crates together.
//!
//! Exit codes: 0 success; 1 error (or, for `verify`, problems found); 2 usage error;
//! 130 interrupted by SIGINT/SIGTERM (the session stays resumable).

use clap::{Parser, Subcommand};

mod args;
mod boot_resume;
mod db;
mod paths;
mod run;
mod serve;
mod sessions;
mod term;

#[derive(Debug, Parser)]
#[command(
    name = "lazarus",
    version,
    about = "Durable, resumable AI-agent sessions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an agent session (resumes it when it already exists).
    Run(Box<run::RunArgs>),
    /// Serve many durable sessions over HTTP (the gateway).
    Serve(Box<serve::ServeArgs>),
    /// Manage session ledgers: create, send, list, show, verify, repair, fork, tree.
    Sessions(sessions::SessionsArgs),
    /// PostgreSQL store administration.
    Db(db::DbArgs),
    /// Find agent sessions cut off by a restart or wake and resume them.
    BootResume(Box<boot_resume::BootResumeArgs>),
}

fn main() {
    let cli = Cli::parse();
    init_tracing(matches!(cli.command, Command::Serve(_)));
    let result = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Serve(args) => serve::run(*args),
        Command::Sessions(args) => sessions::run(args),
        Command::BootResume(args) => boot_resume::run(*args),
        Command::Db(args) => db::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                std::process::exit(141);
            }
            eprintln!("error: {e:#}");
            let usage = e.chain().any(|c| c.downcast_ref::<Usage>().is_some());
            std::process::exit(if usage { 2 } else { 1 });
        }
    }
}

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
