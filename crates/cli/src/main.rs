//! The `lazarus` binary: parses arguments and wires the library crates together.
use clap::{Parser, Subcommand};

mod boot_resume;

#[derive(Debug, Parser)]
#[command(name = "lazarus", version, about = "Durable, resumable AI-agent sessions")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Find agent sessions cut off by a restart or wake and resume them.
    BootResume(boot_resume::BootResumeArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::BootResume(args) => boot_resume::run(args)?,
    };
    std::process::exit(code);
}
