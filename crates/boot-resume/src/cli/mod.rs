//! The `lazarus boot-resume` command: arguments ([`args`]), the scan run in steps
//! ([`scan_cmd`]), which injector a session gets ([`injectors`]), terminal and JSON output
//! ([`output`]), and the systemd / watch subcommands ([`install`]).
pub mod args;
mod injectors;
mod install;
mod output;
mod scan_cmd;

pub use args::{
    BootResumeArgs, BootResumeCommand, InstallArgs, ScanArgs, Trigger, UninstallArgs, WatchArgs,
    WindowArg, parse_duration,
};
pub use scan_cmd::run_scan;

use crate::discover::ProcessEnv;

/// Runs `lazarus boot-resume`; returns the process exit code.
pub fn run(args: BootResumeArgs) -> anyhow::Result<i32> {
    match args.command {
        Some(BootResumeCommand::Install(a)) => install::install(a),
        Some(BootResumeCommand::Uninstall(a)) => install::uninstall(a),
        Some(BootResumeCommand::Watch(w)) => install::watch(*w),
        None => run_scan(&args.scan, &ProcessEnv),
    }
}
