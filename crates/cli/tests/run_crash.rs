//! `lazarus run` killed with SIGKILL at many points, then run again until it finishes.
//!
//! The model is a scripted OpenAI-compatible server in this test process (real HTTP + SSE),
//! so it outlives the killed runner and counts every request. The script: turn 1 calls
//! `shell` (appends a line to side.txt, then sleeps), turn 2 calls `read_file`, turn 3
//! answers with text. After every scenario: the side-effect file never has a second line,
//! each turn whose response was recorded was requested exactly once, an in-doubt call's
//! notice reached the model, every kill left a resume receipt, the run finished and the
//! ledger verifies; and over all scenarios every resume path (in doubt, reused, re-run, not
//! started) was taken at least once. `LAZARUS_RUN_CRASH_ROUNDS` repeats the kill points
//! (default 1 round of 18 scenarios).
//!
//! The same scenarios run on each wire protocol (`--api chat`, `responses`, `anthropic`).
//! Turns 1 and 2 come with reasoning; on Responses and Anthropic that is an encrypted
//! reasoning item or a signed thinking block, and every one the ledger recorded must reach
//! each later request byte-identical, across the kills.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use lazarus_agent::provider::Api;
use lazarus_agent::runner::IN_DOUBT_NOTICE;
use lazarus_session::SessionId;
use lazarus_session::record::OutcomeStatus;
use lazarus_session::{CallState, LocalStore, Status, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

/// A session id written in the test (checked; a bad one is a bug in the test).
#[allow(dead_code)]
fn sid(id: &str) -> lazarus_session::SessionId {
    lazarus_session::SessionId::parse(id).expect("a valid session id")
}

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn script() -> Script {
    Script::new([
        Step::reply(
            ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo ran >> side.txt; sleep 1"}),
            )
            .with_reasoning("A shell call does it.")
            .with_text("Running it.")
            .chunk_delay_ms(15),
        )
        .when(When::LastUserContains { text: "go".into() })
        .repeat(),
        Step::after_tool_result(
            "c1",
            ScriptedResponse::tool_call("c2", "read_file", json!({"path": "side.txt"}))
                .with_reasoning("Now check the file.")
                .chunk_delay_ms(15),
        )
        .repeat(),
        Step::after_tool_result("c2", ScriptedResponse::text("All done.").chunk_delay_ms(15))
            .repeat(),
    ])
}

fn lazarus(dir: &Path, ws: &Path, url: &str, extra: &[&str]) -> Command {
    lazarus_on(Api::Chat, dir, ws, url, extra)
}

fn lazarus_on(api: Api, dir: &Path, ws: &Path, url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["run", "--json", "--session", "s", "--max-tokens", "64"])
        .args(["--api", api.as_str()])
        .arg("--session-dir")
        .arg(dir)
        .arg("--workspace")
        .arg(ws)
        .args(["--base-url", url])
        .args(extra)
        .env("OPENAI_API_KEY", "test")
        .env("ANTHROPIC_API_KEY", "test")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    c
}

/// Runs until the `nth` record of `kind` is printed, waits `delay`, then SIGKILLs.
fn run_and_kill(mut cmd: Command, kind: &str, nth: usize, delay: Duration) -> bool {
    let mut child = cmd.spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = 0;
    let mut killed = false;
    for line in out.lines() {
        let Ok(line) = line else { break };
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["kind"] == kind {
            seen += 1;
            if seen == nth {
                std::thread::sleep(delay);
                let pid = rustix::process::Pid::from_child(&child);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                killed = true;
                break;
            }
        }
    }
    let _ = child.wait();
    killed
}

/// Input records of session `s`, counted line by line (a map keyed by input id would hide
/// a duplicate).
fn input_records(store: &LocalStore) -> usize {
    store
        .records(&SessionId::literal("s"), 0, usize::MAX)
        .unwrap()
        .iter()
        .filter(|r| r.kind == "input")
        .count()
}

/// The turn a request asks for: each turn before it ended in one tool call, so it is the
/// number of tool results plus one (read from the chat-shaped view of any protocol).
fn turn_of(api: Api, req: &Value) -> usize {
    let view = match api {
        Api::Chat => req.clone(),
        Api::Responses => lazarus_testkit::responses::normalize(req),
        Api::Anthropic => lazarus_testkit::anthropic::normalize(req),
    };
    view["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count() + 1)
        .unwrap_or(0)
}

struct Scenario {
    kind: &'static str,
    nth: usize,
    delay_ms: u64,
}

/// What the resume receipts of a scenario say was done, summed.
#[derive(Default, Debug)]
struct Paths {
    in_doubt: u64,
    reused: u64,
    rerun: u64,
    not_started: u64,
}

impl Paths {
    fn add(&mut self, o: &Paths) {
        self.in_doubt += o.in_doubt;
        self.reused += o.reused;
        self.rerun += o.rerun;
        self.not_started += o.not_started;
    }
}

fn run_scenario(rt: &tokio::runtime::Runtime, api: Api, sc: &Scenario) -> (String, Paths) {
    let lazarus =
        |dir: &Path, ws: &Path, url: &str, extra: &[&str]| lazarus_on(api, dir, ws, url, extra);
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let url = server.base_url();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let label = format!(
        "--api {api}: kill after {} #{} +{}ms",
        sc.kind, sc.nth, sc.delay_ms
    );
    let first = lazarus(
        dir.path(),
        ws.path(),
        &url,
        &["-p", "go", "--message-id", "m1"],
    );
    let killed = run_and_kill(first, sc.kind, sc.nth, Duration::from_millis(sc.delay_ms));
    assert!(killed, "{label}: the kill point was never reached");
    let store = LocalStore::open(dir.path()).unwrap();
    let at_kill = store.load(&SessionId::literal("s")).unwrap();
    let open_at_kill = at_kill.open_turn.map(|t| t as usize);
    let in_doubt_expected = at_kill
        .calls
        .iter()
        .any(|c| c.state() == CallState::StartedNoOutcome && c.name == "shell");
    // Run again, as the user would, until it finishes (also re-sending the same message id).
    let mut finished = false;
    for _ in 0..4 {
        let status = lazarus(
            dir.path(),
            ws.path(),
            &url,
            &["-p", "go", "--message-id", "m1"],
        )
        .stdout(Stdio::null())
        .status()
        .unwrap();
        if status.code() == Some(0) {
            finished = true;
            break;
        }
    }
    assert!(finished, "{label}: run did not finish");
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert_eq!(st.status(), Status::Idle, "{label}");
    assert!(st.every_call_has_one_result(), "{label}");
    assert_eq!(
        input_records(&store),
        1,
        "{label}: the input was recorded once"
    );
    let side = std::fs::read_to_string(ws.path().join("side.txt")).unwrap_or_default();
    assert!(
        side.lines().count() <= 1,
        "{label}: side effect ran twice: {side:?}"
    );
    // Each turn with a recorded response was requested once; only the turn open at the
    // kill may have been requested a second time.
    let requests = rt.block_on(async { server.requests() });
    for turn in 1..=3 {
        let n = requests.iter().filter(|r| turn_of(api, r) == turn).count();
        if Some(turn) == open_at_kill {
            assert!(
                (1..=2).contains(&n),
                "{label}: open turn {turn} requested {n} times"
            );
        } else {
            assert_eq!(n, 1, "{label}: turn {turn} requested {n} times");
        }
    }
    let c1 = st.call("c1").unwrap();
    if in_doubt_expected {
        assert_eq!(
            c1.outcome.as_ref().unwrap().status,
            OutcomeStatus::InDoubt,
            "{label}"
        );
        let turn2 = requests.iter().find(|r| turn_of(api, r) == 2).unwrap();
        assert!(
            turn2
                .to_string()
                .contains(&IN_DOUBT_NOTICE.replace('"', "\\\"")[..60]),
            "{label}: the in-doubt notice did not reach the model"
        );
    } else {
        assert_ne!(
            c1.outcome.as_ref().unwrap().status,
            OutcomeStatus::InDoubt,
            "{label}"
        );
    }
    // Provider reasoning: every item the ledger recorded went back, byte-identical, in
    // every later request (the last request, turn 3, carries them all), and nothing the
    // server never issued (an altered signature) was ever sent.
    if api != Api::Chat {
        let recorded: Vec<String> = store
            .records(&SessionId::literal("s"), 0, usize::MAX)
            .unwrap()
            .iter()
            .filter(|r| r.kind == "response")
            .flat_map(|r| r.data["items"].as_array().cloned().unwrap_or_default())
            .filter(|i| i["type"] == "provider_reasoning")
            .map(|i| {
                assert_eq!(i["api"], api.as_str(), "{label}");
                let opaque = if api == Api::Anthropic {
                    "signature"
                } else {
                    "encrypted_content"
                };
                i["item"][opaque].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(
            recorded.len(),
            2,
            "{label}: turns 1 and 2 recorded their reasoning"
        );
        let trips = rt.block_on(async { server.opaque_round_trips() });
        let last = requests.len();
        for value in &recorded {
            let trip = trips
                .iter()
                .find(|t| &t.value == value)
                .expect("issued by the server");
            assert!(
                trip.echoed_in.contains(&last),
                "{label}: {value} not sent back in the last request: {trip:?}"
            );
        }
        assert!(
            rt.block_on(async { server.unknown_opaque() }).is_empty(),
            "{label}: an opaque value came back altered"
        );
    }
    let receipt = st.last_receipt.as_ref().expect("a resume receipt");
    assert!(receipt.every_call_has_one_result, "{label}");
    let report =
        lazarus_ledger::verify_file(&store.path_of(&sid("s")), store.ledger_options()).unwrap();
    assert!(report.is_clean(), "{label}: {:?}", report.problems);
    rt.block_on(server.shutdown());
    let mut paths = Paths::default();
    for r in store
        .records(&SessionId::literal("s"), 0, usize::MAX)
        .unwrap()
    {
        if r.kind == "resume" {
            paths.in_doubt += r.data["calls_in_doubt"].as_u64().unwrap();
            paths.reused += r.data["calls_reused"].as_u64().unwrap();
            paths.rerun += r.data["calls_rerun"].as_u64().unwrap();
            paths.not_started += r.data["calls_not_started"].as_u64().unwrap();
        }
    }
    let line = format!(
        "{label}: open turn at kill {open_at_kill:?}, in doubt {in_doubt_expected}, requests {}, {paths:?}",
        requests.len()
    );
    (line, paths)
}

#[test]
fn kill_minus_nine_anywhere_then_resume_finishes_without_repeats() {
    kill_anywhere_then_resume(Api::Chat);
}

#[test]
fn kill_minus_nine_anywhere_then_resume_on_the_responses_api() {
    kill_anywhere_then_resume(Api::Responses);
}

#[test]
fn kill_minus_nine_anywhere_then_resume_on_the_anthropic_api() {
    kill_anywhere_then_resume(Api::Anthropic);
}

fn kill_anywhere_then_resume(api: Api) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rounds: usize = std::env::var("LAZARUS_RUN_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let points = [
        ("turn_start", 1),
        ("response", 1),
        ("tool_intent", 1),
        ("tool_start", 1),
        ("tool_outcome", 1),
        ("turn_start", 2),
        ("response", 2),
        ("tool_start", 2),
        ("tool_outcome", 2),
    ];
    let mut n = 0;
    let mut reached = Paths::default();
    for round in 0..rounds {
        for (kind, nth) in points {
            // The idempotent read_file is fast: only an immediate kill lands between its
            // start and its outcome, so that point gets two immediate kills.
            let late = if (kind, nth) == ("tool_start", 2) {
                0
            } else {
                40 + 37 * round as u64 % 60
            };
            for delay_ms in [0, late] {
                let (line, paths) = run_scenario(
                    &rt,
                    api,
                    &Scenario {
                        kind,
                        nth,
                        delay_ms,
                    },
                );
                eprintln!("{line}");
                reached.add(&paths);
                n += 1;
            }
        }
    }
    // Two paths need a kill inside a window of a few milliseconds (between a start or an
    // intent and the next durable record); on a busy machine the kill can land late, so
    // those scenarios are repeated (a bounded number of times) until the path is taken.
    for attempt in 0..8 {
        let point = if reached.rerun == 0 {
            ("tool_start", 2)
        } else if reached.not_started == 0 {
            ("tool_intent", 1)
        } else {
            break;
        };
        let (line, paths) = run_scenario(
            &rt,
            api,
            &Scenario {
                kind: point.0,
                nth: point.1,
                delay_ms: 0,
            },
        );
        eprintln!("again ({attempt}): {line}");
        reached.add(&paths);
        n += 1;
    }
    eprintln!("{n} kill scenarios passed; resume paths taken: {reached:?}");
    // Every resume path must have been exercised, or the scenarios above proved nothing
    // about it.
    assert!(
        reached.in_doubt > 0,
        "no kill left a call in doubt: {reached:?}"
    );
    assert!(
        reached.reused > 0,
        "no resume reused a finished call: {reached:?}"
    );
    assert!(
        reached.rerun > 0,
        "no resume re-ran an idempotent call: {reached:?}"
    );
    assert!(
        reached.not_started > 0,
        "no resume found a call not yet started: {reached:?}"
    );
}

#[test]
fn same_message_id_across_runs_is_one_input() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("hello"),
        )
        .repeat()])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        let st = lazarus(
            dir.path(),
            ws.path(),
            &server.base_url(),
            &["-p", "hi", "--message-id", "same"],
        )
        .stdout(Stdio::null())
        .status()
        .unwrap();
        assert_eq!(st.code(), Some(0));
    }
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("s")).unwrap();
    assert_eq!(input_records(&store), 1);
    assert_eq!(st.turn, 1, "one input, one turn");
    assert_eq!(rt.block_on(async { server.request_count() }), 1);
}

#[test]
fn closed_stdout_loses_and_repeats_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut child = lazarus(dir.path(), ws.path(), &server.base_url(), &["-p", "go"])
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once: every write gets EPIPE
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the run completes despite EPIPE");
    let st = LocalStore::open(dir.path())
        .unwrap()
        .load(&SessionId::literal("s"))
        .unwrap();
    assert_eq!(st.status(), Status::Idle);
    assert_eq!(st.turn, 3);
    let side = std::fs::read_to_string(ws.path().join("side.txt")).unwrap();
    assert_eq!(side.lines().count(), 1);
    assert_eq!(rt.block_on(async { server.request_count() }), 3);
}
