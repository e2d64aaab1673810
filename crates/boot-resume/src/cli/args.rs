//! Every command-line argument of `lazarus boot-resume`, in one place.
use crate::discover::Source;
use crate::inject::Preset;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `lazarus boot-resume`.
#[derive(Debug, clap::Args)]
pub struct BootResumeArgs {
    /// install / uninstall the systemd triggers, or watch for wake.
    #[command(subcommand)]
    pub command: Option<BootResumeCommand>,
    /// Scan settings.
    #[command(flatten)]
    pub scan: ScanArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum BootResumeCommand {
    /// Write the systemd drop-in and wake trigger units.
    Install(InstallArgs),
    /// Remove exactly what `install` wrote.
    Uninstall(UninstallArgs),
    /// Stay running, detect system wake (CLOCK_BOOTTIME vs CLOCK_MONOTONIC) and scan then.
    Watch(Box<WatchArgs>),
}

/// What started the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// After the gateway (re)started (ExecStartPost).
    GatewayRestart,
    /// After the system woke from sleep.
    SystemWake,
    /// By hand.
    Manual,
}

/// Scan and injection settings.
#[derive(Debug, Clone, Args)]
pub struct ScanArgs {
    /// What started this run (logged; system-wake also implies the wake semantics).
    #[arg(long, value_enum, default_value = "manual")]
    pub trigger: Trigger,
    /// FORMAT:PATH to scan instead of the default locations (repeatable). FORMAT is one of
    /// lazarus, openclaw, pi, claude-code, codex, auto; PATH a directory (searched
    /// recursively for .jsonl; for openclaw through sessions.json / openclaw-agent.sqlite)
    /// or a file.
    #[arg(long = "source", value_name = "FORMAT:PATH")]
    pub sources: Vec<Source>,
    /// Only sessions active this recently (e.g. 20m, 2h, 1h30m, 90s; 0 = no limit).
    #[arg(long, default_value = "20m", value_parser = parse_window)]
    pub window: WindowArg,
    /// Skip sessions whose name (session key or file name) matches this regex ('' = none).
    #[arg(long, default_value = "cron|heartbeat|subagent|system")]
    pub skip_pattern: String,
    /// Classify and report, inject nothing, write no state.
    #[arg(long)]
    pub dry_run: bool,
    /// One JSON object per session per line on stdout.
    #[arg(long)]
    pub json: bool,
    /// In the table, also list finished sessions and those outside the window.
    #[arg(long)]
    pub all: bool,
    /// Inject into a Lazarus gateway: `lazarus` or `lazarus=URL` (default http://127.0.0.1:7077;
    /// https works).
    #[arg(long, value_name = "lazarus[=URL]")]
    pub inject: Option<String>,
    /// Run this command to resume each non-Lazarus session. Split into words like a POSIX
    /// shell would ('quoted words' stay one argument; nothing is expanded), then
    /// {session_id} {session_key} {path} {cwd} {verdict} {idempotency_key} {message}
    /// {permission_mode} {openclaw_params} are substituted inside each argument. Never run
    /// through a shell.
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "preset")]
    pub inject_command: Option<String>,
    /// Built-in command per format (repeatable): openclaw, claude, codex, pi.
    #[arg(long, value_enum)]
    pub preset: Vec<Preset>,
    /// The resume message.
    #[arg(long)]
    pub message: Option<String>,
    /// Also resume `failed` sessions whose error is transient (429, 5xx, overloaded...).
    #[arg(long)]
    pub resume_failed_transient: bool,
    /// Before injecting, wait until this http(s):// URL answers 2xx or this command exits 0.
    #[arg(long, value_name = "URL|COMMAND")]
    pub wait_ready: Option<String>,
    /// How long --wait-ready may wait.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub ready_timeout: Duration,
    /// Fixed delay before injecting (prefer --wait-ready).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub delay: Duration,
    /// Try again sessions whose last resume failed for a permanent reason (after fixing it).
    #[arg(long)]
    pub retry_failed: bool,
    /// Attempts per interruption, across runs (transient failures only are retried).
    #[arg(long, default_value_t = 3)]
    pub max_attempts: u32,
    /// First retry backoff (doubles per attempt).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub retry_backoff: Duration,
    /// How long a resume command may take to be accepted: to exit 0, or (claude, codex, pi)
    /// for the session to record the resume message. Otherwise it is stopped and the
    /// attempt fails.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub command_grace: Duration,
    /// State file (default $XDG_STATE_HOME/lazarus/boot-resume/state.json).
    #[arg(long)]
    pub state_file: Option<PathBuf>,
    /// Lock file (default $XDG_STATE_HOME/lazarus/boot-resume/lock).
    #[arg(long)]
    pub lock_file: Option<PathBuf>,
    /// Decision log, JSON lines (default $XDG_STATE_HOME/lazarus/boot-resume/decisions.jsonl).
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// Lazarus gateway token file (default $XDG_STATE_HOME/lazarus/gateway.token; env LAZARUS_TOKEN wins).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Worker threads for scanning (default: CPU count, at most 8).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `--window`: `None` = no limit.
pub type WindowArg = Option<Duration>;

/// Arguments of `install`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Install for the user manager (default).
    #[arg(long, conflicts_with = "system")]
    pub user: bool,
    /// Install for the system manager.
    #[arg(long)]
    pub system: bool,
    /// The gateway unit to hook into with an ExecStartPost drop-in (e.g. openclaw-gateway).
    #[arg(long)]
    pub gateway_unit: Option<String>,
    /// Unit directory (default ~/.config/systemd/user or /etc/systemd/system).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// For --system: run the wake scan as this user.
    #[arg(long)]
    pub run_as: Option<String>,
    /// Extra boot-resume arguments for the units (after `--`), e.g. `-- --preset openclaw`.
    #[arg(last = true)]
    pub extra: Vec<String>,
}

/// Arguments of `uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// The user manager's unit directory (default).
    #[arg(long, conflicts_with = "system")]
    pub user: bool,
    /// The system manager's unit directory.
    #[arg(long)]
    pub system: bool,
    /// Unit directory used at install.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Arguments of `watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// How often to sample the clocks.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub interval: Duration,
    /// A BOOTTIME lead over MONOTONIC larger than this is a sleep.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub threshold: Duration,
    /// Scan settings used after each wake.
    #[command(flatten)]
    pub scan: ScanArgs,
}

/// Parses a duration in one syntax, humantime's (`20m`, `90s`, `1h30m`, `1h 30m`, `500ms`,
/// `2d`); a bare number is seconds, as before.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration: expected e.g. 20m, 90s, 1h30m".into());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|e| format!("bad duration {s:?}: {e}"));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("bad duration {s:?}: {e} (expected e.g. 20m, 90s, 1h30m, 500ms)"))
}

fn parse_window(s: &str) -> Result<WindowArg, String> {
    let d = parse_duration(s)?;
    Ok((!d.is_zero()).then_some(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_one_syntax_old_forms_still_accepted() {
        let d = |s| parse_duration(s).expect(s);
        assert_eq!(d("20m"), Duration::from_secs(1200));
        assert_eq!(d("30"), Duration::from_secs(30));
        assert_eq!(d("1h30m"), Duration::from_secs(5400));
        assert_eq!(d("1h 30m"), Duration::from_secs(5400));
        assert_eq!(d("500ms"), Duration::from_millis(500));
        assert_eq!(d("2d"), Duration::from_secs(2 * 86400));
        assert_eq!(d("10min"), Duration::from_secs(600));
        assert_eq!(d("0"), Duration::ZERO);
        for bad in ["", "m", "20x", "-5s", "1.5.3h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} parsed");
        }
    }
}
