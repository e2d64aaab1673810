//! One scan run, as named steps: [`Run::open`] (lock, state, decision log), [`Run::scan`]
//! (discovery and classification), [`Run::decide`] (what to resume), [`Run::inject`] (each
//! resume, accepted or failed, retried only when the failure is transient), [`Run::finish`]
//! (decision log and output).
use super::args::ScanArgs;
use super::injectors::{Inj, Injectors};
use super::output;
use crate::discover::{self, Env};
use crate::inject::{self, InjectError, ResumeRequest, TranscriptAck};
use crate::scan::{self, Action, Report, ScanOptions};
use crate::state::{DecisionLog, Entry, Fingerprint, InstanceLock, State};
use crate::verdict::{SkipWhy, Verdict};
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// A resume to inject: the report it belongs to, how, and what.
struct Job {
    index: usize,
    inj: Inj,
    req: ResumeRequest,
}

struct Run<'a> {
    a: &'a ScanArgs,
    env: &'a dyn Env,
    started: Instant,
    state_dir: PathBuf,
    state_path: PathBuf,
    state: State,
    log: DecisionLog,
    _lock: Option<InstanceLock>,
}

fn state_dir(env: &dyn Env) -> PathBuf {
    discover::xdg_state_home(env).join("lazarus/boot-resume")
}

fn token(a: &ScanArgs, env: &dyn Env) -> Option<String> {
    if let Some(t) = env.var("LAZARUS_TOKEN") {
        return Some(t.trim().to_string());
    }
    let p = a
        .token_file
        .clone()
        .unwrap_or_else(|| discover::xdg_state_home(env).join("lazarus/gateway.token"));
    crate::fsutil::read_small(&p, 64 * 1024)
        .ok()
        .map(|s| String::from_utf8_lossy(&s).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn fingerprint(r: &Report) -> Fingerprint {
    Fingerprint {
        size: r.size,
        mtime_ns: r.mtime_ns,
        last_record_id: r.last_record_id.clone(),
    }
}

impl<'a> Run<'a> {
    /// Step 1: take the single-instance lock (unless dry-run), load the state, open the log.
    /// `None` when another instance holds the lock.
    fn open(a: &'a ScanArgs, env: &'a dyn Env) -> anyhow::Result<Option<Run<'a>>> {
        let sd = state_dir(env);
        let lock = if a.dry_run {
            None
        } else {
            let lp = a.lock_file.clone().unwrap_or_else(|| sd.join("lock"));
            match crate::state::try_lock(&lp)? {
                Some(l) => Some(l),
                None => {
                    eprintln!(
                        "another lazarus boot-resume is running (lock {} is held); nothing to do",
                        lp.display()
                    );
                    return Ok(None);
                }
            }
        };
        let state_path = a
            .state_file
            .clone()
            .unwrap_or_else(|| sd.join("state.json"));
        let state = State::load(&state_path)?;
        let log = match (&a.log_file, a.dry_run) {
            (Some(p), _) => DecisionLog::open(p)?,
            (None, false) => DecisionLog::open(&sd.join("decisions.jsonl"))?,
            (None, true) => DecisionLog::none(),
        };
        let mut run = Run {
            a,
            env,
            started: Instant::now(),
            state_dir: sd,
            state_path,
            state,
            log,
            _lock: lock,
        };
        run.log.log(
            "start",
            serde_json::json!({"trigger": a.trigger, "dry_run": a.dry_run, "pid": std::process::id()}),
        );
        Ok(Some(run))
    }

    /// Step 2: find the sessions and classify each.
    fn scan(&mut self) -> anyhow::Result<Vec<Report>> {
        let a = self.a;
        let explicit = !a.sources.is_empty();
        let sources = if explicit {
            a.sources.clone()
        } else {
            discover::default_sources(self.env)
        };
        let (cands, problems) = discover::candidates(&sources, explicit);
        for p in &problems {
            eprintln!("warning: {}", output::escape_controls(p));
            self.log.log("problem", serde_json::json!({"problem": p}));
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
        let pb = output::progress(cands.len(), 500, "scanning");
        let reports = scan::scan(&cands, &opts, pb.as_ref());
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        Ok(reports)
    }

    /// Step 3: which sessions get a resume. Sessions resumed or failed permanently for the
    /// same tail are skipped; so are those out of attempts.
    fn decide(&mut self, reports: &mut [Report], injectors: &Injectors) -> Vec<Job> {
        let a = self.a;
        let message = a
            .message
            .clone()
            .unwrap_or_else(|| inject::DEFAULT_MESSAGE.to_string());
        let mut jobs = Vec::new();
        for (index, r) in reports.iter_mut().enumerate() {
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
            if let Some(e) = self
                .state
                .sessions
                .get(&State::key(r.format, &r.session, &r.path))
                && e.fingerprint == fingerprint(r)
            {
                let inner = r.verdict;
                let skip = if e.resumed {
                    Some((
                        SkipWhy::AlreadyResumed,
                        format!(
                            "resume already injected at {} for this tail and nothing changed since (tail: {inner})",
                            e.last_attempt
                        ),
                    ))
                } else if e.attempts >= a.max_attempts {
                    Some((
                        SkipWhy::MaxAttempts,
                        format!(
                            "{} attempts failed for this interruption (last: {}); tail: {inner}",
                            e.attempts,
                            e.last_error.clone().unwrap_or_default()
                        ),
                    ))
                } else if e.permanent_failure {
                    Some((
                        SkipWhy::PermanentFailure,
                        format!(
                            "the last resume failed for a reason retrying cannot fix: {}; fix it and pass --retry-failed (tail: {inner})",
                            e.last_error.clone().unwrap_or_default()
                        ),
                    ))
                } else {
                    None
                };
                if let Some((why, reason)) = skip
                    && !(why == SkipWhy::PermanentFailure && a.retry_failed)
                {
                    r.set_verdict(Verdict::Skipped(why));
                    r.reason = reason;
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
            jobs.push(Job {
                index,
                inj,
                req: ResumeRequest {
                    format: fmt,
                    session_id: r.session.clone(),
                    session_key: r.session_key.clone(),
                    path: r.path.clone(),
                    cwd: r.cwd.clone(),
                    permission_mode: r.permission_mode.clone(),
                    verdict: r.verdict,
                    reason: r.reason.clone(),
                    idempotency_key: key,
                    // The default message says what is known of a cut-off call; one given
                    // with --message is sent as it was written.
                    message: match a.message {
                        Some(_) => message.clone(),
                        None => inject::resume_message(
                            &message,
                            r.verdict,
                            r.interrupted_call.as_deref(),
                        ),
                    },
                },
            });
        }
        jobs
    }

    /// One attempt at one job.
    fn attempt(&self, job: &Job, token: Option<&str>) -> Result<(String, bool), InjectError> {
        let req = &job.req;
        match &job.inj {
            Inj::Lazarus { url } => inject::post_resume(url, token, req, Duration::from_secs(10)),
            Inj::Command(t) => {
                let cwd = inject::command_cwd(t, req)?;
                let argv = t.build(req)?;
                let out = self
                    .state_dir
                    .join(format!("inject-{}.log", req.idempotency_key));
                let ack = (t.ack_by_transcript && Path::new(&req.path).is_file())
                    .then(|| TranscriptAck::new(Path::new(&req.path), &req.message));
                inject::run_command(
                    &argv,
                    cwd.as_deref(),
                    &out,
                    self.a.command_grace,
                    ack.as_ref(),
                )
                .map(|d| (d, false))
            }
        }
    }

    /// Step 4: inject each resume. An attempt counts only once accepted; each attempt is
    /// saved to the state file before the next; only transient failures are retried.
    fn inject(&mut self, reports: &mut [Report], jobs: Vec<Job>) -> anyhow::Result<()> {
        use backon::{BlockingRetryable, ExponentialBuilder};
        if jobs.is_empty() {
            return Ok(());
        }
        let a = self.a;
        if !a.delay.is_zero() {
            std::thread::sleep(a.delay);
        }
        let ready = match &a.wait_ready {
            Some(t) => match inject::wait_ready(t, a.ready_timeout) {
                Ok(waited) => {
                    self.log.log(
                        "ready",
                        serde_json::json!({"target": t, "waited_ms": waited.as_millis() as u64}),
                    );
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            },
            None => Ok(()),
        };
        let tok = token(a, self.env);
        let pb = output::progress(jobs.len(), 1, "resuming");
        for job in jobs {
            let r = &mut reports[job.index];
            if let Some(pb) = &pb {
                pb.set_message(output::escape_controls(&r.session));
            }
            if let Err(e) = &ready {
                r.action = Action::Failed;
                r.action_detail = Some(e.clone());
                continue;
            }
            let skey = State::key(r.format, &r.session, &r.path);
            let fp = fingerprint(r);
            let mut entry = match self.state.sessions.get(&skey) {
                Some(e) if e.fingerprint == fp => e.clone(),
                _ => Entry {
                    fingerprint: fp,
                    idempotency_key: job.req.idempotency_key.clone(),
                    attempts: 0,
                    resumed: false,
                    last_attempt: String::new(),
                    last_error: None,
                    permanent_failure: false,
                },
            };
            let left = a.max_attempts.saturating_sub(entry.attempts).max(1);
            let policy = ExponentialBuilder::default()
                .with_min_delay(a.retry_backoff)
                .with_factor(2.0)
                .with_max_delay(a.retry_backoff.saturating_mul(64))
                .with_max_times(left as usize - 1);
            let try_once = || {
                entry.attempts += 1;
                entry.last_attempt = jiff::Timestamp::now().to_string();
                let res = self.attempt(&job, tok.as_deref());
                match &res {
                    Ok(_) => {
                        entry.resumed = true;
                        entry.last_error = None;
                        entry.permanent_failure = false;
                    }
                    Err(e) => {
                        entry.last_error = Some(e.to_string());
                        entry.permanent_failure = !e.is_transient();
                    }
                }
                self.log.log(
                    "attempt",
                    serde_json::json!({"format": r.format, "id": r.session, "path": r.path,
                        "attempt": entry.attempts, "idempotency_key": job.req.idempotency_key,
                        "ok": res.is_ok(), "transient": res.as_ref().err().map(InjectError::is_transient),
                        "detail": match &res { Ok((d, _)) => d.clone(), Err(e) => e.to_string() }}),
                );
                self.state.sessions.insert(skey.clone(), entry.clone());
                if let Err(e) = self.state.save(&self.state_path) {
                    // The resume may have happened: stop rather than risk a second one.
                    return Err(Err(e));
                }
                res.map_err(Ok)
            };
            let res = try_once
                .retry(policy)
                .when(|e| matches!(e, Ok(e) if e.is_transient()))
                .notify(|e, d| {
                    if let Ok(e) = e {
                        output::note(
                            pb.as_ref(),
                            &format!(
                                "{}: {}; retrying in {}",
                                output::escape_controls(&r.session),
                                output::escape_controls(&e.to_string()),
                                humantime::format_duration(d)
                            ),
                        );
                    }
                })
                .call();
            let attempts = self.state.sessions.get(&skey).map_or(0, |e| e.attempts);
            match res {
                Ok((detail, left_to_owner)) => {
                    r.action = if left_to_owner {
                        Action::LeftToOwner
                    } else {
                        Action::Resumed
                    };
                    r.action_detail = Some(detail);
                }
                Err(Ok(e)) => {
                    r.action = Action::Failed;
                    let kind = if e.is_transient() {
                        "transient"
                    } else {
                        "permanent, not retried"
                    };
                    r.action_detail = Some(format!(
                        "attempt {attempts}/{}: {e} ({kind})",
                        a.max_attempts
                    ));
                }
                Err(Err(e)) => return Err(e.into()),
            }
            if let Some(pb) = &pb {
                pb.inc(1);
                output::note(
                    Some(pb),
                    &format!(
                        "{} {} {}: {}",
                        r.action.as_str(),
                        r.format,
                        output::escape_controls(&r.session),
                        output::escape_controls(r.action_detail.as_deref().unwrap_or(""))
                    ),
                );
            }
        }
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        Ok(())
    }

    /// Step 5: log every decision and print the result. Exit 1 if an injection failed.
    fn finish(mut self, reports: &[Report], scanned: Duration) -> anyhow::Result<i32> {
        for r in reports {
            self.log.log(
                "decision",
                serde_json::json!({"trigger": self.a.trigger, "report": r}),
            );
        }
        let failed = reports.iter().any(|r| r.action == Action::Failed);
        self.log.log(
            "end",
            serde_json::json!({"sessions": reports.len(), "elapsed_ms": self.started.elapsed().as_millis() as u64}),
        );
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        if self.a.json {
            output::print_json(&mut out, reports)?;
        } else {
            output::print_table(&mut out, reports, self.a.all)?;
            writeln!(out, "{}", output::summary(reports, scanned, self.a.dry_run))?;
        }
        out.flush()?;
        Ok(if failed { 1 } else { 0 })
    }
}

/// Scans, decides, injects and reports. Returns the exit code: 0, or 1 if an injection failed.
pub fn run_scan(a: &ScanArgs, env: &dyn Env) -> anyhow::Result<i32> {
    let injectors = Injectors::from_args(a)?;
    let Some(mut run) = Run::open(a, env)? else {
        return Ok(0);
    };
    let mut reports = run.scan()?;
    let scanned = run.started.elapsed();
    let jobs = run.decide(&mut reports, &injectors);
    run.inject(&mut reports, jobs)?;
    run.finish(&reports, scanned)
}
