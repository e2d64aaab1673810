//! Compaction end to end against the scripted server: a 200-turn session with a small
//! `--context-window` compacts by itself and never sends a request estimated over the window
//! (request bytes / 4, the client's own estimate, recomputed here from the bodies the server
//! received); kill -9 at every compaction step (mid summarising request, right after the
//! `compaction` record, right after the next `turn_start`) and resume; forks before, at and
//! after a compaction; `sessions compact`; `sessions verify` clean throughout.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lazarus_agent::runner::COMPACTED_PREFIX;
use lazarus_session::{LocalStore, SessionId, Status, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");
const WINDOW: u64 = 2000;
const SUMMARY: &str =
    "SUMMARY: the user asked to read notes.txt, again and again; it says the same each time.";

fn summary_step() -> Step {
    Step::reply(ScriptedResponse::text(SUMMARY))
        .when(When::HasTools { yes: false })
        .repeat()
}

fn lazarus(dir: &Path, ws: &Path, url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        "run",
        "--json",
        "--session",
        "s",
        "--model",
        "m",
        "--tools",
        "read_file",
    ])
    .arg("--session-dir")
    .arg(dir)
    .arg("--workspace")
    .arg(ws)
    .args(["--base-url", url])
    .args(extra)
    .env("OPENAI_API_KEY", "k")
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    c
}

fn sessions(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("sessions")
        .args(args)
        .arg("--session-dir")
        .arg(dir)
        .output()
        .unwrap()
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "a line of notes, ".repeat(24)).unwrap();
    ws
}

/// The client's estimate of a request: its JSON bytes over 4, rounded up.
fn tokens(req: &Value) -> u64 {
    (req.to_string().len() as u64).div_ceil(4)
}

fn records(dir: &Path, id: &str) -> Vec<lazarus_session::StoredRecord> {
    LocalStore::open(dir)
        .unwrap()
        .records(&SessionId::parse(id).unwrap(), 0, usize::MAX)
        .unwrap()
}

fn verify_clean(dir: &Path, id: &str) {
    let o = sessions(dir, &["verify", id]);
    assert!(
        o.status.success(),
        "verify {id}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn has_summary(req: &Value) -> bool {
    req.to_string()
        .contains(&json!(COMPACTED_PREFIX).to_string()[1..30])
}

#[test]
fn two_hundred_turns_in_a_small_window() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            summary_step(),
            Step::reply(
                ScriptedResponse::tool_call("c", "read_file", json!({"path": "notes.txt"}))
                    .with_text("Reading it again."),
            )
            .repeat(),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let window = WINDOW.to_string();
    let status = lazarus(
        dir.path(),
        ws.path(),
        &server.base_url(),
        &[
            "-p",
            "go",
            "--max-turns",
            "200",
            "--context-window",
            &window,
        ],
    )
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert!(status.code().is_some(), "the run ended by itself");
    let st = LocalStore::open(dir.path())
        .unwrap()
        .load(&SessionId::literal("s"))
        .unwrap();
    assert_eq!(st.turn, 200, "200 turns made");
    let recs = records(dir.path(), "s");
    let compactions: Vec<&Value> = recs
        .iter()
        .filter(|r| r.kind == "compaction")
        .map(|r| &r.data)
        .collect();
    let reqs = rt.block_on(async { server.requests() });
    let summarising = reqs.iter().filter(|r| r.get("tools").is_none()).count();
    eprintln!(
        "{} requests, {} compactions, largest request {} tokens (window {WINDOW})",
        reqs.len(),
        compactions.len(),
        reqs.iter().map(tokens).max().unwrap_or(0)
    );
    assert!(
        compactions.len() >= 10,
        "compacted again and again: {}",
        compactions.len()
    );
    assert_eq!(
        summarising,
        compactions.len(),
        "one summarising request per compaction"
    );
    assert_eq!(reqs.len(), 200 + compactions.len());
    for (i, r) in reqs.iter().enumerate() {
        assert!(
            tokens(r) <= WINDOW,
            "request {} is {} tokens",
            i + 1,
            tokens(r)
        );
    }
    for c in &compactions {
        assert_eq!(c["trigger"], "auto");
        assert!(
            c["tokens_after"].as_u64() < c["tokens_before"].as_u64(),
            "{c}"
        );
    }
    // after the first compaction, every turn request carries the summary
    let first = reqs.iter().position(|r| r.get("tools").is_none()).unwrap();
    assert!(
        reqs[first + 1..]
            .iter()
            .filter(|r| r.get("tools").is_some())
            .all(has_summary)
    );
    assert!(!reqs[..first].iter().any(has_summary));
    // the whole history stays in the ledger
    assert_eq!(recs.iter().filter(|r| r.kind == "response").count(), 200);
    verify_clean(dir.path(), "s");
}

/// A finite script: `n` tool turns, then an answer. Each step serves once (a re-requested
/// turn takes the next one), the summary any number of times, `summary_delay_ms` late.
fn finite_script(n: usize, summary_delay_ms: u64) -> Script {
    let mut steps = vec![summary_step().delay_ms(summary_delay_ms)];
    for i in 1..=n {
        steps.push(
            Step::reply(
                ScriptedResponse::tool_call(
                    format!("c{i}"),
                    "read_file",
                    json!({"path": "notes.txt"}),
                )
                .with_text(format!("Reading it, time {i}.")),
            )
            .when(When::HasTools { yes: true }),
        );
    }
    steps.push(Step::reply(ScriptedResponse::text("Done reading.")).repeat());
    Script::new(steps)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum KillAt {
    /// While the first summarising request is in flight (no record yet).
    MidSummary,
    /// Right after the first `compaction` record.
    AfterCompaction,
    /// Right after the `turn_start` that follows it.
    AfterNextTurnStart,
}

#[test]
fn killed_at_every_compaction_step_then_resumed() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for at in [
        KillAt::MidSummary,
        KillAt::AfterCompaction,
        KillAt::AfterNextTurnStart,
    ] {
        let server = rt
            .block_on(ScriptedServer::start(finite_script(14, 400)))
            .unwrap();
        let url = server.base_url();
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace();
        let window = WINDOW.to_string();
        let args = [
            "-p",
            "go",
            "--message-id",
            "m1",
            "--context-window",
            window.as_str(),
        ];
        let mut child = lazarus(dir.path(), ws.path(), &url, &args).spawn().unwrap();
        let kill = |child: &mut std::process::Child| {
            let pid = rustix::process::Pid::from_child(child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        };
        if at == KillAt::MidSummary {
            let t0 = Instant::now();
            loop {
                let reqs = rt.block_on(async { server.requests() });
                if reqs.iter().any(|r| r.get("tools").is_none()) {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "{at:?}: no summarising request"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            kill(&mut child);
        } else {
            let out = BufReader::new(child.stdout.take().unwrap());
            let mut compacted = false;
            for line in out.lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if v["kind"] == "compaction" {
                    compacted = true;
                    if at == KillAt::AfterCompaction {
                        kill(&mut child);
                        break;
                    }
                }
                if compacted && v["kind"] == "turn_start" {
                    kill(&mut child);
                    break;
                }
            }
            assert!(compacted, "{at:?}: never compacted");
        }
        let _ = child.wait();
        let at_kill = records(dir.path(), "s");
        let compactions_at_kill = at_kill.iter().filter(|r| r.kind == "compaction").count();
        match at {
            KillAt::MidSummary => assert_eq!(compactions_at_kill, 0, "{at:?}"),
            _ => assert_eq!(compactions_at_kill, 1, "{at:?}"),
        }
        // run again until it finishes
        let mut finished = false;
        for _ in 0..4 {
            let st = lazarus(dir.path(), ws.path(), &url, &args)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            if st.code() == Some(0) {
                finished = true;
                break;
            }
        }
        assert!(finished, "{at:?}: did not finish");
        let st = LocalStore::open(dir.path())
            .unwrap()
            .load(&SessionId::literal("s"))
            .unwrap();
        assert_eq!(st.status(), Status::Idle, "{at:?}");
        assert!(st.compaction.is_some(), "{at:?}");
        let recs = records(dir.path(), "s");
        assert_eq!(
            recs.iter().filter(|r| r.kind == "input").count(),
            1,
            "{at:?}"
        );
        let reqs = rt.block_on(async { server.requests() });
        for r in &reqs {
            assert!(
                tokens(r) <= WINDOW,
                "{at:?}: a request of {} tokens",
                tokens(r)
            );
        }
        let compactions = recs.iter().filter(|r| r.kind == "compaction").count();
        let summarising = reqs.iter().filter(|r| r.get("tools").is_none()).count();
        match at {
            // the killed summarising request was made again, once; nothing else repeated
            KillAt::MidSummary => assert_eq!(summarising, compactions + 1, "{at:?}"),
            _ => assert_eq!(summarising, compactions, "{at:?}: a compaction repeated"),
        }
        assert!(recs.iter().any(|r| r.kind == "resume") || at != KillAt::AfterNextTurnStart);
        let turn_requests = reqs.iter().filter(|r| r.get("tools").is_some()).count() as u64;
        // each turn requested once, only a turn open at the kill twice
        assert!(
            turn_requests == st.turn || turn_requests == st.turn + 1,
            "{at:?}: {turn_requests} turn requests for {} turns",
            st.turn
        );
        verify_clean(dir.path(), "s");
        rt.block_on(server.shutdown());
    }
}

#[test]
fn forks_before_at_and_after_a_compaction_and_sessions_compact() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(finite_script(10, 0)))
        .unwrap();
    let url = server.base_url();
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace();
    let window = WINDOW.to_string();
    let st = lazarus(
        dir.path(),
        ws.path(),
        &url,
        &["-p", "go", "--context-window", &window],
    )
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert_eq!(st.code(), Some(0));
    let store = LocalStore::open(dir.path()).unwrap();
    let full = store.load(&SessionId::literal("s")).unwrap();
    // the turn the first compaction follows
    let recs = records(dir.path(), "s");
    let first = recs
        .iter()
        .find(|r| r.kind == "compaction")
        .expect("compacted");
    let t = full.turn_seqs.iter().filter(|&&s| s < first.seq).count() as u64;
    assert!(
        t >= 2 && t < full.turn,
        "compaction after turn {t} of {}",
        full.turn
    );
    for (at, summarised) in [(t - 1, false), (t, true), (t + 1, true)] {
        let id = format!("f{at}");
        let o = sessions(
            dir.path(),
            &["fork", "s", "--at-turn", &at.to_string(), "--id", &id],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let before = rt.block_on(async { server.request_count() });
        let mut c = Command::new(BIN);
        c.args([
            "run",
            "--session",
            &id,
            "--model",
            "m",
            "--tools",
            "read_file",
            "-p",
            "one more",
        ])
        // a larger window than the parent's: a change of its world
        .args([
            "--context-window",
            "100000",
            "--base-url",
            &url,
            "--change-world",
        ])
        .arg("--session-dir")
        .arg(dir.path())
        .arg("--workspace")
        .arg(ws.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        assert_eq!(c.status().unwrap().code(), Some(0), "fork at {at}");
        let reqs = rt.block_on(async { server.requests() });
        let req = &reqs[before];
        assert_eq!(has_summary(req), summarised, "fork at {at}: {req}");
        let forked = store.load(&SessionId::parse(&id).unwrap()).unwrap();
        assert_eq!(forked.compaction.is_some(), summarised, "fork at {at}");
        verify_clean(dir.path(), &id);
    }
    // sessions compact on the idle session: a manual compaction, sent from then on
    let o = sessions(
        dir.path(),
        &[
            "compact",
            "s",
            "--json",
            "--model",
            "m",
            "--base-url",
            &url,
            "--keep-turns",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["compacted"], true, "{v}");
    let last = records(dir.path(), "s").into_iter().last().unwrap();
    assert_eq!(
        (last.kind.as_str(), &last.data["trigger"]),
        ("compaction", &json!("manual"))
    );
    let shown = sessions(dir.path(), &["show", "s"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("COMPACTION (manual)") && shown.contains("SUMMARY:"),
        "{shown}"
    );
    verify_clean(dir.path(), "s");
    // a running (locked) or owing session is refused, nothing written
    let o = sessions(
        dir.path(),
        &["compact", "nope", "--model", "m", "--base-url", &url],
    );
    assert!(!o.status.success());
}

/// Across compactions on the Anthropic and Responses APIs, the signed thinking blocks /
/// encrypted reasoning items of the turns kept verbatim still go back byte-identical, and no
/// altered value is ever sent.
#[test]
fn provider_reasoning_of_kept_turns_survives_compaction() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for api in ["anthropic", "responses"] {
        let mut steps = vec![summary_step()];
        for i in 1..=12 {
            steps.push(
                Step::reply(
                    ScriptedResponse::tool_call(
                        format!("toolu_{i}"),
                        "read_file",
                        json!({"path": "notes.txt"}),
                    )
                    .with_reasoning(format!("Turn {i}: read it."))
                    .with_text(format!("Reading it, time {i}.")),
                )
                .when(When::HasTools { yes: true }),
            );
        }
        steps.push(Step::reply(ScriptedResponse::text("Done.")).repeat());
        let server = rt
            .block_on(ScriptedServer::start(Script::new(steps)))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace();
        let window = (WINDOW + 600).to_string();
        let st = lazarus(
            dir.path(),
            ws.path(),
            &server.base_url(),
            &["-p", "go", "--api", api, "--context-window", &window],
        )
        .env("ANTHROPIC_API_KEY", "k")
        .stdout(Stdio::null())
        .status()
        .unwrap();
        assert_eq!(st.code(), Some(0), "{api}");
        let recs = records(dir.path(), "s");
        assert!(
            recs.iter().any(|r| r.kind == "compaction"),
            "{api}: compacted"
        );
        let reqs = rt.block_on(async { server.requests() });
        let trips = rt.block_on(async { server.opaque_round_trips() });
        assert!(
            rt.block_on(async { server.unknown_opaque() }).is_empty(),
            "{api}"
        );
        // every turn request after a compaction carries the reasoning of the turns it kept
        let mut checked = 0;
        for (n, r) in reqs.iter().enumerate() {
            if r.get("tools").is_none() || !has_summary(r) {
                continue;
            }
            let sent = match api {
                "anthropic" => lazarus_testkit::anthropic::opaque_in_request(r),
                _ => lazarus_testkit::responses::opaque_in_request(r),
            };
            assert!(
                !sent.is_empty(),
                "{api}: request {} kept no reasoning",
                n + 1
            );
            for v in &sent {
                let t = trips.iter().find(|t| &t.value == v).expect("issued");
                assert!(t.echoed_in.contains(&(n + 1)), "{api}");
            }
            checked += 1;
        }
        assert!(checked > 0, "{api}: no request after a compaction");
        verify_clean(dir.path(), "s");
    }
}
