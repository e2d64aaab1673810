//! Edges of the runner's resume path that the crash tests do not reach by timing (each found
//! as a surviving mutant by `scripts/mutants.sh runner`):
//!
//! * a tool that finishes while a stop arrives keeps its outcome (it is not left for resume
//!   to close in doubt: its result is known);
//! * a `resume` event on an idle session is a resume: it leaves a receipt;
//! * a torn tail alone makes a resume, and its receipt says what was cut and where it went;
//! * only the finished calls of the last turn with calls count as reused;
//! * a receipt names the turn that was open and the inputs still waiting;
//! * a base model's call written several times in a row runs once, and the repeats are
//!   recorded in the response and told in that call's result;
//! * a resume event that arrives while the run goes on is answered with a receipt;
//! * `max_turns` stops a model that never stops asking for tools;
//! * a request over the context window is never sent (the turn fails, recorded);
//! * a compact request is answered with a compaction before anything else, and one with
//!   nothing to summarise (or a threshold passed with nothing to summarise) ends, never loops.

use std::sync::Arc;

use lazarus_agent::model::ToolSpec;
use lazarus_agent::provider::{CancellationToken, ProviderConfig};
use lazarus_agent::runner::{RunOutcome, Runner, RunnerConfig, SharedSession};
use lazarus_agent::tools::{Rerun, Tool, ToolContext, ToolFuture, ToolHooks, ToolOutput, Toolbox};
use lazarus_session::record::{
    Item, OutcomeStatus, Record, Response, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};
use lazarus_session::{CreateOptions, LocalStore, Session, SessionId, SessionState, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use serde_json::{Value, json};

/// A tool that does `act` once it has started, and answers what `act` returns (not
/// idempotent: an interrupted call of it is in doubt).
struct Acting {
    spec: ToolSpec,
    act: Box<dyn Fn(&ToolContext) -> String + Send + Sync>,
}

fn acting(name: &str, act: impl Fn(&ToolContext) -> String + Send + Sync + 'static) -> Arc<Acting> {
    Arc::new(Acting {
        spec: ToolSpec {
            name: name.into(),
            description: format!("the test's {name}"),
            parameters: json!({"type": "object"}),
        },
        act: Box::new(act),
    })
}

impl Tool for Acting {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn rerun(&self) -> Rerun {
        Rerun {
            idempotent: false,
            basis: None,
        }
    }

    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        _arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if let Err(e) = hooks.started(None) {
                return ToolOutput::rejected(e);
            }
            ToolOutput::ok((self.act)(ctx))
        })
    }
}

/// A server that answers every request with `text`.
fn answering(rt: &tokio::runtime::Runtime, text: &str) -> ScriptedServer {
    rt.block_on(ScriptedServer::start(Script::new([Step::reply(
        ScriptedResponse::text(text),
    )
    .repeat()])))
        .unwrap()
}

fn drive(
    url: &str,
    store: &LocalStore,
    id: &'static str,
    toolbox: Toolbox,
) -> (RunOutcome, SessionState) {
    drive_with(url, store, id, |_| toolbox, |_| {})
}

/// Runs `id` until the runner returns; the toolbox may hold the session (a tool that
/// writes to it while the run goes on), and the config may be changed.
fn drive_with(
    url: &str,
    store: &LocalStore,
    id: &'static str,
    toolbox: impl FnOnce(&SharedSession) -> Toolbox,
    tweak: impl FnOnce(&mut RunnerConfig),
) -> (RunOutcome, SessionState) {
    let ws = tempfile::tempdir().unwrap();
    let mut cfg = RunnerConfig::new(ProviderConfig::new(url), "m", ws.path().to_path_buf());
    tweak(&mut cfg);
    let session = store.open(&SessionId::literal(id)).unwrap();
    let shared: SharedSession = Arc::new(std::sync::Mutex::new(session));
    let runner = Runner::new(cfg).unwrap().with_toolbox(toolbox(&shared));
    // On a thread of its own, bounded: a runner that never answers what it owes may spin
    // without yielding, where no timer inside its runtime would fire.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let outcome =
            rt.block_on(runner.drive(&shared, "test", &CancellationToken::new(), &mut |_| {}));
        drop(runner);
        drop(shared);
        let _ = tx.send(outcome);
    });
    let outcome = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the run ended within 60 s")
        .unwrap();
    (outcome, store.load(&SessionId::literal(id)).unwrap())
}

fn create(store: &LocalStore, id: &'static str) -> Session {
    store
        .create(CreateOptions {
            id: Some(SessionId::literal(id)),
            meta: None,
        })
        .unwrap()
}

fn create_with_input(store: &LocalStore, id: &'static str) {
    create(store, id).append_input("i1", "user", "go").unwrap();
}

#[test]
fn a_tool_that_finishes_as_the_stop_arrives_keeps_its_outcome() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call("c1", "finish", json!({}))),
            Step::reply(ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "f");
    let mut toolbox = Toolbox::standard();
    // finishes its work, and the stop (the run's cancel token) arrives just as it does
    toolbox.register(acting("finish", |ctx| {
        ctx.cancel.cancel();
        "finished".into()
    }));
    let (outcome, st) = drive(&server.base_url(), &store, "f", toolbox);
    assert_eq!(outcome, RunOutcome::Cancelled);
    let call = st.call("c1").expect("the call");
    let out = call.outcome.as_ref().expect("its outcome was recorded");
    assert_eq!(out.status, OutcomeStatus::Ok);
    assert_eq!(out.result, "finished");
}

#[test]
fn a_resume_event_on_an_idle_session_leaves_a_receipt() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "r");
    let (outcome, st) = drive(&server.base_url(), &store, "r", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    assert!(st.last_receipt.is_none(), "a first run is not a resume");
    store
        .open(&SessionId::literal("r"))
        .unwrap()
        .append_control("e1", "resume", Some("boot"))
        .unwrap();
    let before = store.load(&SessionId::literal("r")).unwrap().last_seq;
    let (outcome, st) = drive(&server.base_url(), &store, "r", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    let receipt = st.last_receipt.expect("a resume event leaves a receipt");
    assert_eq!(receipt.trigger, "test");
    assert_eq!(receipt.records_replayed, before, "{receipt:?}");
    assert!(receipt.sandbox.is_some(), "{receipt:?}");
    assert_eq!((receipt.inputs_pending, receipt.open_turn), (0, None));
}

#[test]
fn a_torn_tail_alone_is_a_resume_whose_receipt_names_the_cut() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "t");
    let (outcome, _) = drive(&server.base_url(), &store, "t", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    // a write cut off mid-line by a crash
    let torn = br#"{"seq":99,"kind":"inp"#;
    let path = store.path_of(&SessionId::literal("t"));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, torn).unwrap();
    drop(f);
    let (outcome, st) = drive(&server.base_url(), &store, "t", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    let receipt = st.last_receipt.expect("a torn tail leaves a receipt");
    assert_eq!(receipt.truncated_bytes, torn.len() as u64, "{receipt:?}");
    let saved = receipt
        .truncated_saved_to
        .expect("where the cut bytes went");
    assert_eq!(std::fs::read(dir.path().join(&saved)).unwrap(), torn);
}

/// Appends turn `turn` (after `prev`, consuming a new input) asking for `calls`; each call is
/// started, and finished when its flag says so. Returns the seq of the turn's start.
fn hand_made_turn(s: &mut Session, turn: u64, prev: Option<u64>, calls: &[(&str, bool)]) -> u64 {
    let inp = s.append_input(&format!("m{turn}"), "user", "go").unwrap();
    let start = s
        .append(Record::TurnStart(TurnStart {
            turn,
            prev_seq: prev,
            inputs: vec![inp.seq],
        }))
        .unwrap();
    s.append(Record::Response(Response {
        turn,
        items: calls
            .iter()
            .map(|(id, _)| Item::ToolCall {
                call_id: (*id).into(),
                name: "shell".into(),
                arguments: json!({"command": "true"}).to_string(),
            })
            .collect(),
        usage: None,
        stop_reason: Some("tool_calls".into()),
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
    for (id, finished) in calls {
        s.append(Record::ToolIntent(ToolIntent {
            call_id: (*id).into(),
            turn,
            tool: "shell".into(),
            arguments: json!({"command": "true"}).to_string(),
            idempotent: false,
            idempotency_key: format!("c:{id}"),
            rerun_basis: None,
        }))
        .unwrap();
        s.append(Record::ToolStart(ToolStart {
            call_id: (*id).into(),
            process: None,
        }))
        .unwrap();
        if *finished {
            s.append(Record::ToolOutcome(ToolOutcome {
                call_id: (*id).into(),
                status: OutcomeStatus::Ok,
                result: "ok".into(),
                exit_code: Some(0),
                duration_ms: Some(1),
            }))
            .unwrap();
        }
    }
    start.seq
}

#[test]
fn only_the_finished_calls_of_the_last_turn_with_calls_are_reused() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut s = create(&store, "u");
    // turn 1: two finished calls; turn 2: one finished, one cut off after it started
    let t1 = hand_made_turn(&mut s, 1, None, &[("a1", true), ("a2", true)]);
    hand_made_turn(&mut s, 2, Some(t1), &[("b1", true), ("b2", false)]);
    drop(s);
    let (outcome, st) = drive(&server.base_url(), &store, "u", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    let r = st.last_receipt.expect("a cut-off session leaves a receipt");
    assert_eq!((r.calls_reused, r.calls_in_doubt), (1, 1), "{r:?}");
}

#[test]
fn a_receipt_names_the_open_turn_and_the_inputs_still_waiting() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "o");
    let mut s = store.open(&SessionId::literal("o")).unwrap();
    let first = s.state().last_seq;
    // cut off while turn 1 waited for the model, a second message already recorded
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![first],
    }))
    .unwrap();
    s.append_input("i2", "user", "and then").unwrap();
    drop(s);
    let (outcome, st) = drive(&server.base_url(), &store, "o", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    let r = st.last_receipt.expect("a cut-off turn leaves a receipt");
    assert_eq!((r.inputs_pending, r.open_turn), (1, Some(1)), "{r:?}");
}

/// A session a gateway left to its owner (`needs_owner`) with a turn cut off: its owner's
/// resume is a resume like any other — the receipt, the open turn asked again — and it
/// answers the refusal. (Found by a PostgreSQL takeover test: the `needs_owner` status hid
/// the cut-off turn, and the owner went on without a receipt.)
#[test]
fn the_owner_of_a_session_left_alone_resumes_it_with_a_receipt() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "n");
    let mut s = store.open(&SessionId::literal("n")).unwrap();
    let first = s.state().last_seq;
    s.append(Record::TurnStart(TurnStart {
        turn: 1,
        prev_seq: None,
        inputs: vec![first],
    }))
    .unwrap();
    s.append(Record::NeedsOwner(lazarus_session::record::NeedsOwner {
        by: "serve gw:1".into(),
        reason: "this gateway cannot honour its world".into(),
        resume_with: "lazarus run --session n".into(),
    }))
    .unwrap();
    assert_eq!(s.state().status(), lazarus_session::Status::NeedsOwner);
    drop(s);
    let (outcome, st) = drive(&server.base_url(), &store, "n", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    let r = st
        .last_receipt
        .clone()
        .expect("a resume of a session left alone leaves a receipt");
    assert_eq!(r.open_turn, Some(1), "{r:?}");
    assert!(st.needs_owner.is_none());
    assert_eq!(st.status(), lazarus_session::Status::Idle);
}

#[test]
fn a_base_models_repeated_text_calls_run_once_and_the_repeats_are_recorded_and_told() {
    let call = |path: &str| {
        format!(
            "```json\n{{\"name\": \"list_dir\", \"arguments\": {{\"path\": \"{path}\"}}}}\n```\n"
        )
    };
    // the same call written three times in a row, then text, then another call once
    let text = format!("{0}{0}{0}And the other one:\n{1}", call("."), call("sub"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::text(&text)),
            Step::reply(ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "x");
    let (outcome, st) = drive(&server.base_url(), &store, "x", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    let calls: Vec<_> = st.calls.iter().collect();
    assert_eq!(
        calls.len(),
        2,
        "three repeats ran as one call, the other on its own"
    );
    let (first, other) = (&calls[0].call_id, &calls[1].call_id);
    let response = store
        .records(&SessionId::literal("x"), 0, 1000)
        .unwrap()
        .into_iter()
        .find(|r| r.kind == "response")
        .expect("the response");
    assert_eq!(
        response.data["provider_extra"]["lazarus_repeated_calls"],
        json!({ first.as_str(): 2 }),
        "{}",
        response.data
    );
    let result = |id: &str| st.call(id).unwrap().outcome.clone().unwrap().result;
    assert!(
        result(first).ends_with("[Lazarus: this call was written 3 times in a row; it ran once.]"),
        "{}",
        result(first)
    );
    assert!(!result(other).contains("[Lazarus:"), "{}", result(other));
}

#[test]
fn a_resume_event_that_arrives_while_running_is_answered_with_a_receipt() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call("p1", "poke", json!({}))),
            Step::reply(ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "w");
    let (outcome, st) = drive_with(
        &server.base_url(),
        &store,
        "w",
        |shared| {
            let mut toolbox = Toolbox::standard();
            // records a resume event in its own session, as a sender would meanwhile
            let session = shared.clone();
            toolbox.register(acting("poke", move |_| {
                let mut s = session.lock().unwrap_or_else(|p| p.into_inner());
                match s.append_control("e-running", "resume", Some("wake")) {
                    Ok(_) => "sent".into(),
                    Err(e) => format!("not sent: {e}"),
                }
            }));
            toolbox
        },
        |_| {},
    );
    assert_eq!(outcome, RunOutcome::Idle);
    assert_eq!(
        st.call("p1").unwrap().outcome.as_ref().unwrap().result,
        "sent"
    );
    let r = st
        .last_receipt
        .expect("the event is answered with a receipt");
    assert_eq!(r.trigger, "event", "{r:?}");
    assert!(st.pending_control.is_none());
}

#[test]
fn max_turns_stops_a_model_that_never_stops_asking_for_tools() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::tool_call("c", "list_dir", json!({"path": "."})),
        )
        .repeat()])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "m");
    let (outcome, st) = drive_with(
        &server.base_url(),
        &store,
        "m",
        |_| Toolbox::standard(),
        |cfg| cfg.max_turns = 3,
    );
    assert_eq!(outcome, RunOutcome::MaxTurns);
    assert_eq!(st.turn, 3, "three turns made, no fourth started");
    assert_eq!(server.request_count(), 3);
}

#[test]
fn a_compact_request_is_answered_with_a_compaction_before_anything_else() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done; and this is the summary");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "k");
    let (_, st) = drive(&server.base_url(), &store, "k", Toolbox::standard());
    assert_eq!(st.turn, 1);
    store
        .open(&SessionId::literal("k"))
        .unwrap()
        .append_input("i2", "user", "more")
        .unwrap();
    let (_, st) = drive(&server.base_url(), &store, "k", Toolbox::standard());
    assert_eq!(st.turn, 2);
    store
        .open(&SessionId::literal("k"))
        .unwrap()
        .append_control("k1", "compact", None)
        .unwrap();
    let requests = server.request_count();
    let (outcome, st) = drive(&server.base_url(), &store, "k", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    assert!(
        st.compaction.is_some(),
        "the request was answered by a compaction"
    );
    assert!(st.pending_control.is_none());
    assert_eq!(st.turn, 2, "no turn was made for it");
    assert_eq!(
        server.request_count(),
        requests + 1,
        "one summarising request"
    );
}

#[test]
fn a_compact_request_with_nothing_to_summarise_ends_idle_without_a_turn() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create(&store, "n")
        .append_control("k1", "compact", None)
        .unwrap();
    let (outcome, st) = drive(&server.base_url(), &store, "n", Toolbox::standard());
    assert_eq!(outcome, RunOutcome::Idle);
    assert!(st.compaction.is_none());
    assert_eq!((st.turn, server.request_count()), (0, 0));
}

#[test]
fn over_the_threshold_with_nothing_to_summarise_the_turn_is_still_made() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "z");
    let (outcome, st) = drive_with(
        &server.base_url(),
        &store,
        "z",
        |_| Toolbox::standard(),
        |cfg| cfg.compaction.compact_at = Some(1),
    );
    assert_eq!(outcome, RunOutcome::Idle);
    assert!(st.compaction.is_none(), "nothing to summarise");
    assert_eq!((st.turn, server.request_count()), (1, 1));
}

#[test]
fn a_request_over_the_context_window_is_never_sent_and_the_turn_fails_recorded() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = answering(&rt, "done");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    create_with_input(&store, "c");
    let (outcome, st) = drive_with(
        &server.base_url(),
        &store,
        "c",
        |_| Toolbox::standard(),
        |cfg| cfg.compaction.context_window = Some(10),
    );
    let RunOutcome::Failed { message, transient } = outcome else {
        panic!("the turn fails: {outcome:?}")
    };
    assert!(message.contains("over --context-window 10"), "{message}");
    assert!(!transient);
    assert_eq!(server.request_count(), 0, "nothing over the window is sent");
    assert_eq!(st.turn, 1, "the failed turn is recorded");
}
