//! The `lazarus boot-resume` command.
use crate::classify::Format;
use crate::discover::{self, Env, ProcessEnv, Source};
use crate::inject::{self, Preset, ResumeRequest, Template};
use crate::scan::{self, Action, Report, ScanOptions};
use crate::state::{self, DecisionLog, Entry, Fingerprint, State};
use crate::systemd::{self, InstallOptions, Mode};
use crate::verdict::{SkipWhy, Verdict};
use crate::watch;
use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

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
    /// Only sessions active this recently (e.g. 20m, 2h, 90s; 0 = no limit).
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
    /// Inject into a Lazarus gateway: `lazarus` or `lazarus=URL` (default http://127.0.0.1:7077).
    #[arg(long, value_name = "lazarus[=URL]")]
    pub inject: Option<String>,
    /// Run this command to resume each non-Lazarus session; argv split on whitespace, then
    /// {session_id} {session_key} {path} {cwd} {verdict} {idempotency_key} {message}
    /// {openclaw_params} substituted inside each argument. Never run through a shell.
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "preset")]
    pub inject_command: Option<String>,
    /// Built-in command per format (repeatable): openclaw, claude, codex.
    #[arg(long, value_enum)]
    pub preset: Vec<Preset>,
    /// The resume message.
    #[arg(long)]
    pub message: Option<String>,
    /// Also resume `failed` sessions whose error looks transient (429, 5xx, overloaded...).
    #[arg(long)]
    pub resume_failed_transient: bool,
    /// Before injecting, wait until this http:// URL answers 2xx or this command exits 0.
    #[arg(long, value_name = "URL|COMMAND")]
    pub wait_ready: Option<String>,
    /// How long --wait-ready may wait.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub ready_timeout: Duration,
    /// Fixed delay before injecting (prefer --wait-ready).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub delay: Duration,
    /// Attempts per interruption, across runs.
    #[arg(long, default_value_t = 3)]
    pub max_attempts: u32,
    /// First retry backoff (doubles per attempt).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub retry_backoff: Duration,
    /// A resume command still running after this long counts as started and is left running.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
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

/// Parses `20m`, `90s`, `1h30m`, `500ms`, `2d`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return Err("empty duration".into());
    }
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if n_end == 0 {
            return Err(format!("bad duration {s:?}: expected e.g. 20m, 90s, 1h30m"));
        }
        let n: u64 = rest[..n_end]
            .parse()
            .map_err(|_| format!("bad duration {s:?}"))?;
        rest = &rest[n_end..];
        let u_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..u_end];
        rest = &rest[u_end..];
        let d = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" | "min" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            "d" => Duration::from_secs(n * 86400),
            _ => {
                return Err(format!(
                    "bad duration unit {unit:?} in {s:?}: use ms, s, m, h or d"
                ));
            }
        };
        total += d;
    }
    Ok(total)
}

fn parse_window(s: &str) -> Result<WindowArg, String> {
    let d = parse_duration(s)?;
    Ok((!d.is_zero()).then_some(d))
}

/// Runs `lazarus boot-resume`; returns the process exit code.
pub fn run(args: BootResumeArgs) -> anyhow::Result<i32> {
    match args.command {
        Some(BootResumeCommand::Install(a)) => install(a),
        Some(BootResumeCommand::Uninstall(a)) => {
            let mode = if a.system { Mode::System } else { Mode::User };
            let dir = a
                .dir
                .unwrap_or_else(|| systemd::default_dir(mode, &ProcessEnv));
            let removed = systemd::uninstall(&dir)?;
            for p in removed {
                println!("removed {}", p.display());
            }
            Ok(0)
        }
        Some(BootResumeCommand::Watch(w)) => {
            let mut scan = w.scan;
            scan.trigger = Trigger::SystemWake;
            eprintln!(
                "lazarus boot-resume watch: sampling clocks every {:?}, wake threshold {:?}",
                w.interval, w.threshold
            );
            watch::watch(
                &mut watch::SystemClock,
                w.interval,
                w.threshold,
                &mut std::thread::sleep,
                &mut || true,
                &mut |slept| {
                    eprintln!("woke after ~{}s asleep: scanning", slept.as_secs());
                    if let Err(e) = run_scan(&scan, &ProcessEnv) {
                        eprintln!("boot-resume scan failed: {e:#}");
                    }
                    true
                },
            );
            Ok(0)
        }
        None => run_scan(&args.scan, &ProcessEnv),
    }
}

fn install(a: InstallArgs) -> anyhow::Result<i32> {
    let mode = if a.system { Mode::System } else { Mode::User };
    let dir = a
        .dir
        .unwrap_or_else(|| systemd::default_dir(mode, &ProcessEnv));
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("cannot find the absolute path of the running lazarus binary")?;
    let o = InstallOptions {
        mode,
        dir: dir.clone(),
        gateway_unit: a.gateway_unit,
        exe,
        extra_args: a.extra,
        run_as: a.run_as,
    };
    let m = systemd::install(&o)?;
    for f in &m.files {
        println!("wrote {}", f.display());
    }
    let ctl = if mode == Mode::User {
        "systemctl --user"
    } else {
        "systemctl"
    };
    println!(
        "next: {ctl} daemon-reload && {ctl} enable --now {}",
        m.enable.join(" ")
    );
    Ok(0)
}

fn state_dir(env: &dyn Env) -> PathBuf {
    discover::xdg_state_home(env).join("lazarus/boot-resume")
}

/// Which injector a session gets.
#[derive(Debug, Clone)]
enum Inj {
    Lazarus { url: String },
    Command(Template),
}

struct Injectors {
    lazarus: Option<String>,
    command: Option<Template>,
    presets: Vec<Preset>,
    auto: bool,
}

impl Injectors {
    fn from_args(a: &ScanArgs) -> anyhow::Result<Injectors> {
        let lazarus = match a.inject.as_deref() {
            None => None,
            Some("lazarus") => Some(inject::DEFAULT_GATEWAY.to_string()),
            Some(s) => match s.strip_prefix("lazarus=") {
                Some(url) if !url.is_empty() => Some(url.trim_end_matches('/').to_string()),
                _ => anyhow::bail!("bad --inject {s:?}: expected `lazarus` or `lazarus=URL`"),
            },
        };
        let command = a
            .inject_command
            .as_deref()
            .map(Template::parse)
            .transpose()?;
        let auto = lazarus.is_none() && command.is_none() && a.preset.is_empty();
        Ok(Injectors {
            lazarus,
            command,
            presets: a.preset.clone(),
            auto,
        })
    }

    fn for_format(&self, f: Format) -> Option<Inj> {
        if self.auto {
            return match f {
                Format::Lazarus => Some(Inj::Lazarus {
                    url: inject::DEFAULT_GATEWAY.into(),
                }),
                Format::Openclaw => Some(Inj::Command(Preset::Openclaw.template())),
                Format::ClaudeCode => Some(Inj::Command(Preset::Claude.template())),
                Format::Codex => Some(Inj::Command(Preset::Codex.template())),
                Format::Pi => None,
            };
        }
        if f == Format::Lazarus {
            return self.lazarus.clone().map(|url| Inj::Lazarus { url });
        }
        if let Some(t) = &self.command {
            return Some(Inj::Command(t.clone()));
        }
        self.presets
            .iter()
            .find(|p| p.format() == f)
            .map(|p| Inj::Command(p.template()))
    }
}

fn token(a: &ScanArgs, env: &dyn Env) -> Option<String> {
    if let Some(t) = env.var("LAZARUS_TOKEN") {
        return Some(t.trim().to_string());
    }
    let p = a
        .token_file
        .clone()
        .unwrap_or_else(|| discover::xdg_state_home(env).join("lazarus/gateway.token"));
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Scans, decides, injects and reports. Returns the exit code: 0, or 1 if an injection failed.
pub fn run_scan(a: &ScanArgs, env: &dyn Env) -> anyhow::Result<i32> {
    let started = Instant::now();
    let injectors = Injectors::from_args(a)?;
    let sd = state_dir(env);
    let _lock = if a.dry_run {
        None
    } else {
        let lp = a.lock_file.clone().unwrap_or_else(|| sd.join("lock"));
        match state::try_lock(&lp)? {
            Some(l) => Some(l),
            None => {
                eprintln!(
                    "another lazarus boot-resume is running (lock {} is held); nothing to do",
                    lp.display()
                );
                return Ok(0);
            }
        }
    };
    let state_path = a
        .state_file
        .clone()
        .unwrap_or_else(|| sd.join("state.json"));
    let mut st = State::load(&state_path)?;
    let mut log = match (&a.log_file, a.dry_run) {
        (Some(p), _) => DecisionLog::open(p)?,
        (None, false) => DecisionLog::open(&sd.join("decisions.jsonl"))?,
        (None, true) => DecisionLog::none(),
    };
    let trigger = a.trigger;
    log.log(
        "start",
        serde_json::json!({"trigger": trigger, "dry_run": a.dry_run, "pid": std::process::id()}),
    );

    let explicit = !a.sources.is_empty();
    let sources = if explicit {
        a.sources.clone()
    } else {
        discover::default_sources(env)
    };
    let (cands, problems) = discover::candidates(&sources, explicit);
    for p in &problems {
        eprintln!("warning: {p}");
        log.log("problem", serde_json::json!({"problem": p}));
    }
    let skip_pattern = if a.skip_pattern.is_empty() {
        None
    } else {
        Some(
            regex::Regex::new(&a.skip_pattern)
                .with_context(|| format!("bad --skip-pattern {:?}", a.skip_pattern))?,
        )
    };
    let mut opts = ScanOptions {
        window: a.window,
        skip_pattern,
        now: SystemTime::now(),
        ..Default::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t.max(1);
    }
    let pb = (std::io::stderr().is_terminal() && cands.len() >= 500).then(|| {
        let pb = indicatif::ProgressBar::new(cands.len() as u64);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} scanning {pos}/{len} sessions [{bar:30}] {per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb
    });
    let mut reports = scan::scan(&cands, &opts, pb.as_ref());
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let scanned = started.elapsed();

    // Decide.
    let message = a
        .message
        .clone()
        .unwrap_or_else(|| inject::DEFAULT_MESSAGE.to_string());
    let mut todo: Vec<(usize, Inj, ResumeRequest)> = Vec::new();
    for (i, r) in reports.iter_mut().enumerate() {
        if !r.verdict.is_resumable(a.resume_failed_transient) {
            continue;
        }
        let Some(fmt) = r.format() else { continue };
        let key = inject::idempotency_key(
            fmt,
            &r.session,
            r.size,
            r.mtime_ns,
            r.last_record_id.as_deref(),
        );
        r.idempotency_key = Some(key.clone());
        let fp = Fingerprint {
            size: r.size,
            mtime_ns: r.mtime_ns,
            last_record_id: r.last_record_id.clone(),
        };
        if let Some(e) = st.sessions.get(&State::key(r.format, &r.session, &r.path))
            && e.fingerprint == fp
        {
            let inner = r.verdict;
            if e.resumed {
                r.set_verdict(Verdict::Skipped(SkipWhy::AlreadyResumed));
                r.reason = format!(
                    "resume already injected at {} for this tail and nothing changed since (tail: {inner})",
                    e.last_attempt
                );
                continue;
            }
            if e.attempts >= a.max_attempts {
                r.set_verdict(Verdict::Skipped(SkipWhy::MaxAttempts));
                r.reason = format!(
                    "{} attempts failed for this interruption (last: {}); tail: {inner}",
                    e.attempts,
                    e.last_error.clone().unwrap_or_default()
                );
                continue;
            }
        }
        let Some(inj) = injectors.for_format(fmt) else {
            r.action_detail = Some(format!(
                "no injector for format {} (see --inject, --inject-command, --preset)",
                r.format
            ));
            continue;
        };
        if a.dry_run {
            r.action = Action::WouldResume;
            continue;
        }
        todo.push((
            i,
            inj,
            ResumeRequest {
                format: fmt,
                session_id: r.session.clone(),
                session_key: r.session_key.clone(),
                path: r.path.clone(),
                cwd: r.cwd.clone(),
                verdict: r.verdict,
                reason: r.reason.clone(),
                idempotency_key: key,
                message: message.clone(),
            },
        ));
    }

    // Inject.
    if !todo.is_empty() {
        if !a.delay.is_zero() {
            std::thread::sleep(a.delay);
        }
        let ready = match &a.wait_ready {
            Some(t) => {
                match inject::wait_ready(t, a.ready_timeout) {
                    Ok(waited) => {
                        log.log("ready", serde_json::json!({"target": t, "waited_ms": waited.as_millis() as u64}));
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            None => Ok(()),
        };
        let tok = token(a, env);
        for (i, inj, req) in todo {
            let r = &mut reports[i];
            if let Err(e) = &ready {
                r.action = Action::Failed;
                r.action_detail = Some(e.clone());
                continue;
            }
            let skey = State::key(r.format, &r.session, &r.path);
            let fp = Fingerprint {
                size: r.size,
                mtime_ns: r.mtime_ns,
                last_record_id: r.last_record_id.clone(),
            };
            let mut entry = match st.sessions.get(&skey) {
                Some(e) if e.fingerprint == fp => e.clone(),
                _ => Entry {
                    fingerprint: fp,
                    idempotency_key: req.idempotency_key.clone(),
                    attempts: 0,
                    resumed: false,
                    last_attempt: String::new(),
                    last_error: None,
                },
            };
            let mut backoff = a.retry_backoff;
            loop {
                entry.attempts += 1;
                entry.last_attempt = jiff::Timestamp::now().to_string();
                let res = match &inj {
                    Inj::Lazarus { url } => {
                        inject::post_resume(url, tok.as_deref(), &req, Duration::from_secs(10))
                    }
                    Inj::Command(t) => inject::command_cwd(t, &req).and_then(|cwd| {
                        let argv = t.build(&req)?;
                        std::fs::create_dir_all(&sd).map_err(|source| {
                            inject::InjectError::Spawn {
                                program: argv[0].clone(),
                                source,
                            }
                        })?;
                        let out = sd.join(format!("inject-{}.log", req.idempotency_key));
                        inject::run_command(&argv, cwd.as_deref(), &out, a.command_grace)
                    }),
                };
                match res {
                    Ok(detail) => {
                        entry.resumed = true;
                        entry.last_error = None;
                        r.action = Action::Resumed;
                        r.action_detail = Some(detail);
                    }
                    Err(e) => {
                        entry.last_error = Some(e.to_string());
                        r.action = Action::Failed;
                        r.action_detail = Some(format!(
                            "attempt {}/{}: {e}",
                            entry.attempts, a.max_attempts
                        ));
                    }
                }
                log.log(
                    "attempt",
                    serde_json::json!({"format": r.format, "session": r.session, "path": r.path, "attempt": entry.attempts,
                        "idempotency_key": req.idempotency_key, "ok": entry.resumed, "detail": r.action_detail}),
                );
                st.sessions.insert(skey.clone(), entry.clone());
                st.save(&state_path)?;
                if entry.resumed || entry.attempts >= a.max_attempts {
                    break;
                }
                std::thread::sleep(backoff);
                backoff = backoff.saturating_mul(2);
            }
        }
    }

    for r in &reports {
        log.log(
            "decision",
            serde_json::json!({"trigger": trigger, "report": r}),
        );
    }
    let failed = reports.iter().any(|r| r.action == Action::Failed);
    log.log("end", serde_json::json!({"sessions": reports.len(), "elapsed_ms": started.elapsed().as_millis() as u64}));

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.json {
        for r in &reports {
            serde_json::to_writer(&mut out, r)?;
            out.write_all(b"\n")?;
        }
    } else {
        print_table(&mut out, &reports, a.all)?;
        writeln!(out, "{}", summary(&reports, scanned, a.dry_run))?;
    }
    out.flush()?;
    Ok(if failed { 1 } else { 0 })
}

fn print_table(out: &mut dyn Write, reports: &[Report], all: bool) -> std::io::Result<()> {
    let shown: Vec<&Report> = reports
        .iter()
        .filter(|r| {
            all || !(r.verdict == Verdict::Finished
                || r.verdict == Verdict::Skipped(SkipWhy::OutsideWindow))
        })
        .collect();
    if shown.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{:<30} {:<12} {:<12} {:<38} REASON",
        "VERDICT", "ACTION", "FORMAT", "SESSION"
    )?;
    for r in shown {
        let mut reason = r.reason.clone();
        if r.torn && !reason.contains("torn") {
            reason.push_str(" [torn]");
        }
        if let Some(d) = &r.action_detail {
            reason.push_str(&format!(" -> {d}"));
        }
        let sess: String = r.session_key.clone().unwrap_or_else(|| r.session.clone());
        writeln!(
            out,
            "{:<30} {:<12} {:<12} {:<38} {}",
            r.verdict.to_string(),
            r.action.as_str(),
            r.format,
            sess,
            reason
        )?;
    }
    Ok(())
}

fn summary(reports: &[Report], took: Duration, dry: bool) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    let mut acts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reports {
        let k = match r.verdict {
            Verdict::Skipped(w) => format!("skipped/{}", w.as_str()),
            v => v.as_str().to_string(),
        };
        *by.entry(k).or_default() += 1;
        *acts.entry(r.action.as_str()).or_default() += 1;
    }
    let v: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let a: Vec<String> = acts
        .iter()
        .filter(|(k, _)| **k != "none")
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    format!(
        "{} sessions scanned in {} ms{}; {}; verdicts: {}",
        reports.len(),
        took.as_millis(),
        if dry { " (dry run)" } else { "" },
        if a.is_empty() {
            "nothing to resume".to_string()
        } else {
            a.join(", ")
        },
        v.join(", ")
    )
}
