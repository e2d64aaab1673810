//! Golden files pin the exact bytes of every record kind. `docs/FORMAT.md` shows the same
//! lines, and this test checks that too. Regenerate after an intended format change with
//! `LAZARUS_BLESS=1 cargo test -p lazarus-session --test golden` and review the diff.

use std::path::PathBuf;

use lazarus_ledger::frame::{Envelope, decode_line, encode_line};
use lazarus_ledger::{Header, Parent};
use lazarus_session::SessionId;
use lazarus_session::record::*;
use lazarus_session::{LocalStore, Record, Status, Store};
use serde_json::json;

const TS: &str = "2026-12-02T10:00:00.000Z";

#[path = "golden/revision6.rs"]
mod revision6;
#[path = "support/tasks.rs"]
mod tasks;
use tasks::{render_tasks, task_records};

fn records() -> Vec<Record> {
    vec![
        Record::Fork(ForkPoint {
            parent: "golden-parent".into(),
            parent_seq: 0,
            at_turn: 0,
        }),
        Record::Input(Input {
            input_id: "msg-1".into(),
            source: "user".into(),
            text: "Count the files in src/.".into(),
        }),
        Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![2],
        }),
        Record::Response(Response {
            turn: 1,
            items: vec![
                Item::Reasoning {
                    text: "A shell call answers this.".into(),
                },
                Item::Text {
                    text: "Counting.".into(),
                },
                Item::ToolCall {
                    call_id: "call_1".into(),
                    name: "shell".into(),
                    arguments: r#"{"command":"ls src | wc -l"}"#.into(),
                },
            ],
            usage: Some(Usage {
                prompt_tokens: Some(120),
                completion_tokens: Some(18),
                total_tokens: Some(138),
                cached_tokens: None,
            }),
            stop_reason: Some("tool_calls".into()),
            failure: None,
            model: Some("gemma-3-270m".into()),
            provider_extra: json!({"system_fingerprint": "b1-fp", "x_vendor": {"cached": true}})
                .as_object()
                .cloned(),
            attempts: vec![Attempt {
                status: Some(429),
                error: Some("rate limited".into()),
                waited_ms: 0,
            }],
        }),
        Record::ToolIntent(ToolIntent {
            call_id: "call_1".into(),
            turn: 1,
            tool: "shell".into(),
            arguments: r#"{"command":"ls src | wc -l"}"#.into(),
            idempotent: false,
            idempotency_key: "golden:call_1".into(),
            rerun_basis: None,
        }),
        Record::ToolStart(ToolStart {
            call_id: "call_1".into(),
            process: Some(ProcessRef {
                pgid: 4242,
                start_time_ticks: 987654,
            }),
        }),
        Record::Interrupted(Interrupted {
            reason: "sigterm".into(),
            turn: Some(1),
        }),
        Record::Control(Control {
            input_id: "boot-resume-7f3a".into(),
            action: "resume".into(),
            reason: Some("gateway-restart".into()),
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "call_1".into(),
            status: OutcomeStatus::InDoubt,
            result: "The call was interrupted; its effect is unknown. Check before retrying."
                .into(),
            exit_code: None,
            duration_ms: None,
        }),
        Record::Resume(ResumeReceipt {
            trigger: "event".into(),
            truncated_bytes: 97,
            truncated_saved_to: Some("golden.jsonl.cut-20261202T100003.000000Z".into()),
            records_replayed: 8,
            calls_reused: 0,
            calls_rerun: 0,
            calls_in_doubt: 1,
            calls_not_started: 0,
            processes_terminated: 1,
            inputs_pending: 0,
            open_turn: None,
            every_call_has_one_result: true,
            sandbox: None,
            mcp: None,
            approvals: vec![],
            world_seq: None,
            in_doubt: vec![],
        }),
        Record::TurnStart(TurnStart {
            turn: 2,
            prev_seq: Some(3),
            inputs: vec![],
        }),
        Record::Response(Response {
            turn: 2,
            items: vec![
                Item::ProviderReasoning {
                    api: "anthropic".into(),
                    text: "The call is in doubt; look before acting.".into(),
                    item: json!({"type": "thinking",
                        "thinking": "The call is in doubt; look before acting.",
                        "signature": "EqQBCkYIBxgCKkBsaWtlIGEgcmVhbCBzaWduYXR1cmU="}),
                },
                Item::Text {
                    text: "The count may not have run; I will check first.".into(),
                },
            ],
            usage: Some(Usage {
                prompt_tokens: Some(2150),
                completion_tokens: Some(40),
                total_tokens: Some(2190),
                cached_tokens: Some(2048),
            }),
            stop_reason: Some("end_turn".into()),
            failure: None,
            model: None,
            provider_extra: None,
            attempts: vec![],
        }),
        Record::Compaction(Compaction {
            trigger: "manual".into(),
            from_seq: 1,
            through_seq: 12,
            summary: "The user asked to count the files in src/; the count call was \
                      interrupted (in doubt) and the assistant chose to check first."
                .into(),
            tokens_before: 2190,
            tokens_after: 160,
            model: Some("claude-haiku-4-5".into()),
            usage: Some(Usage {
                prompt_tokens: Some(2300),
                completion_tokens: Some(38),
                total_tokens: Some(2338),
                cached_tokens: None,
            }),
            attempts: vec![],
        }),
    ]
}

/// An imported session: the `import` record first, then the conversation it held, with a
/// compaction the source agent made (trigger `import`).
fn import_records() -> Vec<Record> {
    vec![
        Record::Import(Import {
            agent: "claude-code".into(),
            agent_version: Some("2.1.332".into()),
            format_version: None,
            source: "/home/dana/.claude/projects/-home-dana-project/6c244e51.jsonl".into(),
            source_session: Some("6c244e51-cbbc-4421-844e-19ff53e1b86f".into()),
            bytes: 48213,
            sha256: "9f2c4e0b7a1d3c5e8f6a2b4d6c8e0a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f".into(),
            dropped: vec![Dropped {
                what: "attachment".into(),
                count: 10,
                why: "bookkeeping the model was not sent as conversation".into(),
            }],
            related: vec![],
        }),
        Record::Input(Input {
            input_id: "import-8942a624".into(),
            source: "import".into(),
            text: "please make the file".into(),
        }),
        Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![2],
        }),
        Record::Response(Response {
            turn: 1,
            items: vec![Item::ToolCall {
                call_id: "toolu_01".into(),
                name: "Bash".into(),
                arguments: r#"{"command":"echo hi > out.txt"}"#.into(),
            }],
            usage: None,
            stop_reason: Some("tool_use".into()),
            failure: None,
            model: Some("claude-opus-5-5".into()),
            provider_extra: None,
            attempts: vec![],
        }),
        Record::ToolIntent(ToolIntent {
            call_id: "toolu_01".into(),
            turn: 1,
            tool: "Bash".into(),
            arguments: r#"{"command":"echo hi > out.txt"}"#.into(),
            idempotent: false,
            idempotency_key: "import:toolu_01".into(),
            rerun_basis: None,
        }),
        Record::ToolStart(ToolStart {
            call_id: "toolu_01".into(),
            process: None,
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "toolu_01".into(),
            status: OutcomeStatus::Ok,
            result: "(Bash completed with no output)".into(),
            exit_code: None,
            duration_ms: None,
        }),
        Record::TurnStart(TurnStart {
            turn: 2,
            prev_seq: Some(3),
            inputs: vec![],
        }),
        Record::Response(Response {
            turn: 2,
            items: vec![Item::Text {
                text: "Done: wrote out.txt.".into(),
            }],
            usage: None,
            stop_reason: Some("end_turn".into()),
            failure: None,
            model: Some("claude-opus-5-5".into()),
            provider_extra: None,
            attempts: vec![],
        }),
        Record::Compaction(Compaction {
            trigger: "import".into(),
            from_seq: 1,
            through_seq: 9,
            summary: "The user asked for out.txt; it was written with echo.".into(),
            tokens_before: 0,
            tokens_after: 0,
            model: None,
            usage: None,
            attempts: vec![],
        }),
    ]
}

/// A session under `--ask-for-approval untrusted`: one call allowed for the session, one
/// denied (closed without starting), then the answer.
fn approval_records() -> Vec<Record> {
    let call = |id: &str, name: &str, arguments: &str| Item::ToolCall {
        call_id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    };
    vec![
        Record::Input(Input {
            input_id: "msg-1".into(),
            source: "user".into(),
            text: "Clean the build directory.".into(),
        }),
        Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![1],
        }),
        Record::Response(Response {
            turn: 1,
            items: vec![
                call("call_1", "shell", r#"{"command":"rm -r build"}"#),
                call(
                    "call_2",
                    "write_file",
                    r#"{"path":"NOTES","content":"cleaned"}"#,
                ),
            ],
            usage: None,
            stop_reason: Some("tool_calls".into()),
            failure: None,
            model: None,
            provider_extra: None,
            attempts: vec![],
        }),
        Record::ApprovalRequest(ApprovalRequest {
            call_id: "call_1".into(),
            tool: "shell".into(),
            arguments: r#"{"command":"rm -r build"}"#.into(),
            mode: "untrusted".into(),
            reason: "shell is not read-only".into(),
            requested_at: TS.into(),
        }),
        Record::Approval(Approval {
            input_id: approval_input_id("call_1"),
            call_id: "call_1".into(),
            decision: Decision::Allow,
            scope: Scope::Session,
            reason: None,
            by: "cli".into(),
            decided_at: "2026-12-02T10:00:42.000Z".into(),
        }),
        Record::ToolIntent(ToolIntent {
            call_id: "call_1".into(),
            turn: 1,
            tool: "shell".into(),
            arguments: r#"{"command":"rm -r build"}"#.into(),
            idempotent: false,
            idempotency_key: "golden-approvals/call_1".into(),
            rerun_basis: None,
        }),
        Record::ToolStart(ToolStart {
            call_id: "call_1".into(),
            process: None,
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "call_1".into(),
            status: OutcomeStatus::Ok,
            result: "".into(),
            exit_code: Some(0),
            duration_ms: Some(9),
        }),
        Record::ApprovalRequest(ApprovalRequest {
            call_id: "call_2".into(),
            tool: "write_file".into(),
            arguments: r#"{"path":"NOTES","content":"cleaned"}"#.into(),
            mode: "untrusted".into(),
            reason: "write_file is not read-only".into(),
            requested_at: "2026-12-02T10:00:43.000Z".into(),
        }),
        Record::Approval(Approval {
            input_id: approval_input_id("call_2"),
            call_id: "call_2".into(),
            decision: Decision::Deny,
            scope: Scope::Once,
            reason: Some("no notes in the repository".into()),
            by: "token:ops".into(),
            decided_at: "2026-12-02T10:01:00.000Z".into(),
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "call_2".into(),
            status: OutcomeStatus::NotRun,
            result: "denied by token:ops: no notes in the repository".into(),
            exit_code: None,
            duration_ms: None,
        }),
        Record::TurnStart(TurnStart {
            turn: 2,
            prev_seq: Some(2),
            inputs: vec![],
        }),
        Record::Response(Response {
            turn: 2,
            items: vec![Item::Text {
                text: "Removed build/; I did not write NOTES.".into(),
            }],
            usage: None,
            stop_reason: Some("stop".into()),
            failure: None,
            model: None,
            provider_extra: None,
            attempts: vec![],
        }),
    ]
}

/// A session the Python package wrote for an OpenAI Agents SDK program: items, one popped,
/// a tool call announced and finished, one announced and cut off (in doubt), then a clear.
fn host_records() -> Vec<Record> {
    let item = |v: serde_json::Value| Record::from(HostItem { item: v });
    vec![
        item(json!({"role": "user", "content": "What is the weather in Paris?"})),
        item(
            json!({"type": "function_call", "call_id": "call_w", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}),
        ),
        Record::from(HostCallIntent {
            call_id: "call_w".into(),
            tool: "get_weather".into(),
            arguments: Some(r#"{"city":"Paris"}"#.into()),
        }),
        Record::from(HostCallOutcome {
            call_id: "call_w".into(),
            result: "sunny, 21 C".into(),
        }),
        item(json!({"type": "function_call_output", "call_id": "call_w", "output": "sunny, 21 C"})),
        item(json!({"role": "assistant", "content": "Sunny, 21 C."})),
        Record::from(HostPop { seq: 6 }),
        Record::from(HostCallIntent {
            call_id: "call_x".into(),
            tool: "send_email".into(),
            arguments: None,
        }),
        Record::from(HostClear { through_seq: 8 }),
        item(json!({"role": "user", "content": "Start over."})),
    ]
}

fn render_host() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden-host".into(),
        created_at: TS.into(),
        parent: None,
        meta: Some(json!({"host": "openai-agents"})),
        unsynced_bytes_max: None,
    };
    encode(&header, &host_records())
}

/// A thread the Python package's LangGraph saver wrote: a checkpoint with two channels and
/// a task's writes (one retried with a different value, one to a special channel), a second
/// checkpoint changing one channel, then the thread deleted and begun again.
fn graph_records() -> Vec<Record> {
    let blob = |t: &str, b: &str| HostBlob {
        type_tag: t.into(),
        b64: b.into(),
    };
    let checkpoint = |id: &str, parent: Option<&str>, channels: Vec<HostChannelValue>| {
        Record::from(HostCheckpoint {
            ns: String::new(),
            checkpoint_id: id.into(),
            parent_id: parent.map(Into::into),
            checkpoint: blob("msgpack", "gqFpoWE="),
            metadata: blob("msgpack", "gaRzdGVwAA=="),
            channels,
        })
    };
    let value = |channel: &str, version: &str, b64: &str| HostChannelValue {
        channel: channel.into(),
        version: version.into(),
        value: blob("msgpack", b64),
    };
    let writes = |task: &str, idx: i64, channel: &str, b64: &str| {
        Record::from(HostWrites {
            ns: String::new(),
            checkpoint_id: "cp-1".into(),
            task_id: task.into(),
            task_path: "~__pregel_pull, a".into(),
            writes: vec![HostWrite {
                idx,
                channel: channel.into(),
                value: blob("msgpack", b64),
            }],
        })
    };
    vec![
        checkpoint(
            "cp-1",
            None,
            vec![value("a", "1", "oXg="), value("b", "1", "oXk=")],
        ),
        writes("task-a", 0, "a", "oXo="),
        writes("task-a", -3, "__interrupt__", "gA=="),
        writes("task-a", -3, "__interrupt__", "kA=="),
        checkpoint("cp-2", Some("cp-1"), vec![value("a", "2", "oXo=")]),
        Record::from(HostClear { through_seq: 5 }),
        checkpoint("cp-3", None, vec![value("a", "1", "oXE=")]),
    ]
}

fn render_graph() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden-graph".into(),
        created_at: TS.into(),
        parent: None,
        meta: Some(json!({"host": "langgraph"})),
        unsynced_bytes_max: None,
    };
    encode(&header, &graph_records())
}

/// The world `lazarus run` recorded for a session (its header's `meta.world`), and the one
/// a later `run --change-world` recorded.
fn world(reason: WorldReason, sandbox: &str) -> World {
    World {
        reason,
        by: "run".into(),
        workspace: Some("/home/dana/project".into()),
        tools: WorldTools {
            builtin: vec!["edit_file", "list_dir", "read_file", "shell", "write_file"]
                .into_iter()
                .map(String::from)
                .collect(),
            mcp: vec![WorldMcpServer {
                name: "files".into(),
                fingerprint:
                    "sha256:5f0c6d0a4e1e7e9b3c0b8a1d2f4e6a8c0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f90".into(),
                transport: "stdio".into(),
                command: Some("npx".into()),
                args: vec![
                    "-y".into(),
                    "@modelcontextprotocol/server-filesystem".into(),
                    ".".into(),
                ],
                cwd: None,
                env: vec!["FILES_TOKEN".into()],
                url: None,
                bearer_token_env_var: None,
                headers: vec![],
                enabled_tools: None,
                disabled_tools: vec![],
                trusted: false,
                sandbox: false,
                source: "/home/dana/project/.mcp.json".into(),
                protocol_version: None,
            }],
        },
        approval: WorldApproval {
            mode: "untrusted".into(),
            grants: vec!["read_file".into()],
        },
        sandbox: WorldSandbox {
            mode: sandbox.into(),
            network: false,
            max_processes: 1024,
            allow_unix_sockets: vec![],
            environment: json!({"inherit": "core", "ignore_default_excludes": false, "exclude": [], "set": [], "include_only": []}),
            allow_vcs_write: false,
        },
        provider: Some(WorldProvider {
            api: "chat".into(),
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "gemma-3-270m".into(),
            context_window: Some(32768),
            api_key_env: Some("OPENAI_API_KEY".into()),
        }),
        changed: if reason == WorldReason::Changed {
            vec!["sandbox".into()]
        } else {
            vec![]
        },
    }
}

/// A session `run` made (its world in the header), cut off during a shell call; a gateway
/// that could not honour its world left it alone and recorded a message sent to it; then a
/// `run --change-world` recorded a new world and resumed it.
fn world_records() -> Vec<Record> {
    vec![
        Record::Input(Input {
            input_id: "msg-1".into(),
            source: "user".into(),
            text: "Clean the build.".into(),
        }),
        Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![1],
        }),
        Record::Response(Response {
            turn: 1,
            items: vec![Item::ToolCall {
                call_id: "call_1".into(),
                name: "shell".into(),
                arguments: r#"{"command":"make clean"}"#.into(),
            }],
            usage: None,
            stop_reason: Some("tool_calls".into()),
            failure: None,
            model: None,
            provider_extra: None,
            attempts: vec![],
        }),
        Record::ToolIntent(ToolIntent {
            call_id: "call_1".into(),
            turn: 1,
            tool: "shell".into(),
            arguments: r#"{"command":"make clean"}"#.into(),
            idempotent: false,
            idempotency_key: "golden-world/call_1".into(),
            rerun_basis: None,
        }),
        Record::ToolStart(ToolStart {
            call_id: "call_1".into(),
            process: None,
        }),
        Record::NeedsOwner(NeedsOwner {
            by: "serve gw1:4242".into(),
            reason: "workspace /home/dana/project is outside this gateway's roots (/srv/lazarus/workspaces); start the gateway with --allow-workspace /home/dana/project to run it here".into(),
            resume_with: "lazarus run --session golden-world --session-dir /home/dana/.local/state/lazarus/sessions".into(),
        }),
        Record::Input(Input {
            input_id: "msg-2".into(),
            source: "api".into(),
            text: "Also remove dist/.".into(),
        }),
        Record::World(Box::new(world(WorldReason::Changed, "read-only"))),
        Record::Resume(ResumeReceipt {
            trigger: "run".into(),
            records_replayed: 8,
            calls_in_doubt: 1,
            inputs_pending: 1,
            every_call_has_one_result: true,
            world_seq: Some(8),
            in_doubt: vec![InDoubtCall {
                call_id: "call_1".into(),
                tool: "shell".into(),
                why: "shell is not idempotent: running it again could repeat its effect".into(),
            }],
            ..ResumeReceipt::default()
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "call_1".into(),
            status: OutcomeStatus::InDoubt,
            result: lazarus_session::IN_DOUBT_NOTICE.into(),
            exit_code: None,
            duration_ms: None,
        }),
    ]
}

fn render_world() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden-world".into(),
        created_at: TS.into(),
        parent: None,
        meta: Some(json!({
            "workspace": "/home/dana/project",
            "model": "gemma-3-270m",
            "world": world(WorldReason::Created, "workspace-write"),
        })),
        unsynced_bytes_max: None,
    };
    encode(&header, &world_records())
}

fn render_approvals() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden-approvals".into(),
        created_at: TS.into(),
        parent: None,
        meta: None,
        unsynced_bytes_max: None,
    };
    encode(&header, &approval_records())
}

fn render_import() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden-import".into(),
        created_at: TS.into(),
        parent: None,
        meta: Some(json!({"workspace": "/home/dana/project", "model": "claude-opus-5-5"})),
        unsynced_bytes_max: None,
    };
    encode(&header, &import_records())
}

fn encode(header: &Header, records: &[Record]) -> String {
    let mut out = Vec::new();
    let mut line = Vec::new();
    encode_line(
        &mut line,
        0,
        TS,
        "header",
        &serde_json::to_vec(header).unwrap(),
    );
    out.extend_from_slice(&line);
    for (i, rec) in records.iter().enumerate() {
        encode_line(
            &mut line,
            i as u64 + 1,
            TS,
            rec.kind(),
            &rec.data_json().unwrap(),
        );
        out.extend_from_slice(&line);
    }
    String::from_utf8(out).unwrap()
}

fn render() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden".into(),
        created_at: TS.into(),
        parent: Some(Parent {
            id: "golden-parent".into(),
            seq: 0,
        }),
        meta: Some(json!({"workspace": "/home/dana/project"})),
        unsynced_bytes_max: None,
    };
    encode(&header, &records())
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

#[test]
fn golden_session_is_pinned() {
    for (name, rendered, recs) in [
        ("golden.jsonl", render(), records()),
        ("import.jsonl", render_import(), import_records()),
        ("approvals.jsonl", render_approvals(), approval_records()),
        ("host.jsonl", render_host(), host_records()),
        ("graph.jsonl", render_graph(), graph_records()),
        ("world.jsonl", render_world(), world_records()),
        ("tasks.jsonl", render_tasks(), task_records()),
        (
            "graph6.jsonl",
            revision6::render_graph(),
            revision6::graph_records(),
        ),
        (
            "host6.jsonl",
            revision6::render_host(),
            revision6::host_records(),
        ),
    ] {
        if std::env::var_os("LAZARUS_BLESS").is_some() {
            std::fs::write(golden_path(name), &rendered).unwrap();
        }
        let golden = std::fs::read_to_string(golden_path(name)).unwrap();
        assert_eq!(
            rendered, golden,
            "record encoding of {name} changed; bless and review if intended"
        );
        // each golden line decodes to the same typed record, and re-encodes to the same bytes
        for (line, rec) in golden.lines().skip(1).zip(recs) {
            let env: Envelope<Record> = decode_line(line.as_bytes()).unwrap();
            assert_eq!(env.data, rec);
        }
    }
    // every kind is covered
    let kinds: std::collections::BTreeSet<_> = records()
        .iter()
        .chain(import_records().iter())
        .chain(approval_records().iter())
        .chain(host_records().iter())
        .chain(graph_records().iter())
        .chain(world_records().iter())
        .chain(task_records().iter())
        .chain(revision6::graph_records().iter())
        .chain(revision6::host_records().iter())
        .map(|r| r.kind())
        .collect();
    for k in KINDS {
        assert!(kinds.contains(k), "the golden files lack kind {k}");
    }
}

#[test]
fn golden_import_replays_and_refuses_a_second_import_record() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("golden-import.jsonl"), render_import()).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("golden-import")).unwrap();
    assert_eq!(st.last_seq, 10);
    assert_eq!(
        st.imported.as_ref().map(|i| i.agent.as_str()),
        Some("claude-code")
    );
    assert_eq!(st.status(), Status::Idle);
    // an import record anywhere but first is refused, naming the rule
    let err = st.check(&import_records()[0]).unwrap_err();
    assert!(
        err.to_string().contains("first record after the header"),
        "{err}"
    );
    // an import compaction in a session that was not imported is refused
    let plain = store.load(&SessionId::literal("golden-import")).unwrap();
    let mut fresh = lazarus_session::SessionState::new(plain.header.clone());
    fresh.apply(1, import_records()[1].clone());
    let Record::Compaction(mut c) = import_records()[9].clone() else {
        unreachable!()
    };
    c.through_seq = 1;
    let err = fresh.check(&Record::Compaction(c)).unwrap_err();
    assert!(err.to_string().contains("imported session"), "{err}");
}

#[test]
fn golden_session_replays_as_a_valid_session() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("golden.jsonl"), render()).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("golden")).unwrap();
    assert_eq!(st.last_seq, 13);
    assert_eq!(st.compaction.as_ref().map(|c| c.through_seq), Some(12));
    assert!(st.every_call_has_one_result());
    assert_eq!(st.status(), Status::Idle);
    assert_eq!(st.forked_at_turn, Some(0));
}

#[test]
fn golden_approvals_replay_with_the_grant_and_refuse_a_second_decision() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("golden-approvals.jsonl"),
        render_approvals(),
    )
    .unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("golden-approvals")).unwrap();
    assert_eq!(st.status(), Status::Idle);
    assert!(st.every_call_has_one_result());
    assert_eq!(st.session_grants.get("shell"), Some(&5));
    let c1 = st.call("call_1").unwrap();
    assert_eq!(c1.approval.as_ref().unwrap().waited_ms(), Some(42_000));
    let c2 = st.call("call_2").unwrap();
    assert_eq!(c2.decision().unwrap().decision, Decision::Deny);
    assert!(c2.intent.is_none());
    // every prefix replays; the one ending at a request awaits a person and owes nothing
    let recs = approval_records();
    let mut fresh = lazarus_session::SessionState::new(st.header.clone());
    for (i, r) in recs.iter().enumerate() {
        fresh.check(r).unwrap();
        fresh.apply(i as u64 + 1, r.clone());
        if matches!(r, Record::ApprovalRequest(_)) {
            assert_eq!(fresh.status(), Status::AwaitingApproval);
            assert!(!fresh.owes_work());
            // the call cannot start before the decision: its intent is refused
            let Record::ToolIntent(intent) = recs[5].clone() else {
                unreachable!()
            };
            let intent = ToolIntent {
                call_id: r.data_value()["call_id"].as_str().unwrap().into(),
                tool: r.data_value()["tool"].as_str().unwrap().into(),
                ..intent
            };
            let err = fresh.check(&Record::ToolIntent(intent)).unwrap_err();
            assert!(err.to_string().contains("waits for approval"), "{err}");
        }
    }
    // a second, different decision on a decided call is refused, naming the first
    let Record::Approval(mut again) = recs[4].clone() else {
        unreachable!()
    };
    again.input_id = "another-id".into();
    again.decision = Decision::Deny;
    let err = st.check(&Record::Approval(again)).unwrap_err();
    assert!(err.to_string().contains("allow at seq 5"), "{err}");
    // a denied call never starts
    let Record::ToolIntent(intent) = recs[5].clone() else {
        unreachable!()
    };
    let mut fresh = lazarus_session::SessionState::new(st.header.clone());
    for (i, r) in recs.iter().take(10).enumerate() {
        fresh.apply(i as u64 + 1, r.clone());
    }
    let denied = ToolIntent {
        call_id: "call_2".into(),
        tool: "write_file".into(),
        ..intent
    };
    let err = fresh.check(&Record::ToolIntent(denied)).unwrap_err();
    assert!(err.to_string().contains("denied at seq 10"), "{err}");
}

#[test]
fn golden_host_history_replays_with_pops_clears_and_a_call_in_doubt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("golden-host.jsonl"), render_host()).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("golden-host")).unwrap();
    // a host call announced without an outcome is in doubt, as a native call's start is
    assert_eq!(st.status(), Status::InDoubt);
    assert!(
        !st.owes_work(),
        "Lazarus's runner owes a host session nothing"
    );
    let items: Vec<u64> = st.host.items.iter().map(|(s, _)| *s).collect();
    assert_eq!(items, vec![10]);
    let doubt: Vec<&str> = st.host.in_doubt().map(|(id, _)| id).collect();
    assert_eq!(doubt, vec!["call_x"]);
    // only the newest item may be popped; an outcome needs its intent; one per call
    let mut fresh = lazarus_session::SessionState::new(st.header.clone());
    for (i, r) in host_records().into_iter().enumerate().take(5) {
        fresh.check(&r).unwrap();
        fresh.apply(i as u64 + 1, r);
    }
    let err = fresh.check(&Record::from(HostPop { seq: 2 })).unwrap_err();
    assert!(err.to_string().contains("newest item"), "{err}");
    let err = fresh
        .check(&Record::from(HostCallOutcome {
            call_id: "call_w".into(),
            result: "again".into(),
        }))
        .unwrap_err();
    assert!(err.to_string().contains("finished twice"), "{err}");
    let err = fresh
        .check(&Record::from(HostCallOutcome {
            call_id: "nobody".into(),
            result: "x".into(),
        }))
        .unwrap_err();
    assert!(err.to_string().contains("no host_call_intent"), "{err}");
    let err = fresh
        .check(&Record::from(HostItem {
            item: json!("text"),
        }))
        .unwrap_err();
    assert!(err.to_string().contains("JSON object"), "{err}");
}

#[test]
fn golden_graph_replays_checkpoints_values_and_writes_and_a_delete() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("golden-graph.jsonl"), render_graph()).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let st = store.load(&SessionId::literal("golden-graph")).unwrap();
    assert!(
        !st.owes_work(),
        "Lazarus's runner owes a host session nothing"
    );
    // after the delete (host_clear through seq 5) only the thread begun again is there
    let g = &st.host.graph;
    let ids: Vec<&str> = g.checkpoints.keys().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids, vec!["cp-3"]);
    assert_eq!(g.values.len(), 1);
    assert!(g.writes.is_empty());

    // before it: two checkpoints, values by version, one write per (task, index)
    let mut before = lazarus_session::SessionState::new(st.header.clone());
    for (i, r) in graph_records().into_iter().enumerate().take(5) {
        before.check(&r).unwrap();
        before.apply(i as u64 + 1, r);
    }
    let g = &before.host.graph;
    assert_eq!(g.checkpoints.len(), 2);
    let a: Vec<&str> = g
        .values
        .iter()
        .filter(|((_, c, _), _)| c == "a")
        .map(|(_, (_, b))| b.b64.as_str())
        .collect();
    assert_eq!(a, vec!["oXg=", "oXo="], "channel a at versions 1 and 2");
    let w = &g.writes[&(String::new(), "cp-1".to_string())];
    assert_eq!(w.len(), 2);
    assert_eq!(
        w[&("task-a".to_string(), -3)].value.b64,
        "kA==",
        "the newest write of a special channel stands"
    );
    // writes against a checkpoint nobody recorded (or one deleted) are refused
    for cp in ["cp-9", "cp-2"] {
        let mut against = match &graph_records()[1] {
            Record::Host(Host::Writes(w)) => w.clone(),
            _ => unreachable!(),
        };
        against.checkpoint_id = cp.into();
        let target = if cp == "cp-2" { &st } else { &before };
        let err = target.check(&Record::from(against)).unwrap_err();
        assert!(err.to_string().contains("no host_checkpoint"), "{err}");
    }
}

#[test]
fn format_doc_shows_every_golden_line() {
    let doc_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMAT.md");
    let doc = std::fs::read_to_string(doc_path).unwrap();
    // the import golden's own kind (its other lines repeat kinds shown above)
    let import_line = render_import()
        .lines()
        .find(|l| l.contains(r#""kind":"import""#))
        .map(str::to_string);
    // the approvals golden's own kinds
    let approval_lines: Vec<String> = render_approvals()
        .lines()
        .filter(|l| l.contains(r#""kind":"approval"#))
        .take(2)
        .map(str::to_string)
        .collect();
    assert_eq!(approval_lines.len(), 2);
    // the host golden: the first line of each of its kinds
    let mut host_lines: Vec<String> = Vec::new();
    for kind in [
        "host_item",
        "host_pop",
        "host_clear",
        "host_call_intent",
        "host_call_outcome",
    ] {
        let tag = format!(r#""kind":"{kind}""#);
        host_lines.extend(
            render_host()
                .lines()
                .find(|l| l.contains(&tag))
                .map(str::to_string),
        );
    }
    assert_eq!(host_lines.len(), 5);
    // the graph golden: the first line of each of its own kinds
    for kind in ["host_checkpoint", "host_writes"] {
        let tag = format!(r#""kind":"{kind}""#);
        host_lines.extend(
            render_graph()
                .lines()
                .find(|l| l.contains(&tag))
                .map(str::to_string),
        );
    }
    assert_eq!(host_lines.len(), 7);
    // revision 6's graph golden: its header (a thread id kept) and its own kinds
    let graph6 = revision6::render_graph();
    host_lines.extend(
        graph6
            .lines()
            .filter(|l| {
                l.contains(r#""kind":"header""#)
                    || l.contains(r#""kind":"host_forget""#)
                    || l.contains(r#""checkpoint_id":"cp-2","task_id":"task-a""#)
            })
            .map(str::to_string),
    );
    assert_eq!(host_lines.len(), 10);
    host_lines.extend(
        revision6::render_host()
            .lines()
            .find(|l| l.contains(r#""kind":"host_items""#))
            .map(str::to_string),
    );
    assert_eq!(host_lines.len(), 11);
    // the world golden: its header (the world a session is made with) and its own kinds
    let world = render_world();
    let world_lines: Vec<&str> = world
        .lines()
        .filter(|l| {
            l.contains(r#""kind":"header""#)
                || l.contains(r#""kind":"world""#)
                || l.contains(r#""kind":"needs_owner""#)
        })
        .collect();
    assert_eq!(world_lines.len(), 3);
    // the tasks golden: its own kinds, and the receipt that counts the task reattached
    let tasks = render_tasks();
    let task_lines: Vec<&str> = tasks
        .lines()
        .filter(|l| l.contains(r#""kind":"tool_task"#) || l.contains(r#""kind":"resume""#))
        .collect();
    assert_eq!(task_lines.len(), 3);
    for line in render()
        .lines()
        .chain(import_line.as_deref())
        .chain(approval_lines.iter().map(String::as_str))
        .chain(host_lines.iter().map(String::as_str))
        .chain(world_lines.iter().copied())
        .chain(task_lines.iter().copied())
    {
        assert!(
            doc.contains(line),
            "docs/FORMAT.md lacks the golden line:\n{line}"
        );
    }
}

#[test]
fn unknown_kinds_and_fields_are_named_errors() {
    let mut line = Vec::new();
    encode_line(&mut line, 1, TS, "teleport", b"{}");
    let err = decode_line::<Record>(&line[..line.len() - 1]).unwrap_err();
    assert!(
        err.to_string().contains("unknown record kind \"teleport\""),
        "{err}"
    );
    encode_line(
        &mut line,
        1,
        TS,
        "input",
        br#"{"input_id":"a","source":"user","text":"t","priority":9}"#,
    );
    let err = decode_line::<Record>(&line[..line.len() - 1]).unwrap_err();
    assert!(err.to_string().contains("priority"), "{err}");
}

#[test]
fn golden_world_replays_its_worlds_and_who_left_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = render_world();
    let path = dir.path().join("golden-world.jsonl");
    let store = LocalStore::open(dir.path()).unwrap();
    let id = SessionId::literal("golden-world");
    // replay each prefix: the world in force and the status
    let lines: Vec<&str> = text.lines().collect();
    let upto = |n: usize| {
        std::fs::write(&path, lines[..=n].join("\n") + "\n").unwrap();
        store.load(&id).unwrap()
    };
    let st = upto(0);
    let w = st.world.as_ref().expect("the header's world");
    assert_eq!(
        (w.seq, w.world.sandbox.mode.as_str()),
        (0, "workspace-write")
    );
    let st = upto(5);
    assert_eq!(st.status(), Status::InDoubt);
    // left alone: the work waits for its owner, and a message recorded meanwhile too
    for n in [6, 7] {
        let st = upto(n);
        assert_eq!(st.status(), Status::NeedsOwner, "through seq {n}");
        assert_eq!(st.needs_owner.as_ref().map(|(s, _)| *s), Some(6));
        assert!(st.owes_work());
    }
    // a world recorded anew answers it; the receipt names the world the resume ran in
    let st = upto(8);
    assert!(st.needs_owner.is_none());
    let w = st.world.as_ref().unwrap();
    assert_eq!((w.seq, w.world.sandbox.mode.as_str()), (8, "read-only"));
    assert_eq!(w.world.changed, vec!["sandbox"]);
    let st = upto(10);
    assert_eq!(st.last_receipt.as_ref().and_then(|r| r.world_seq), Some(8));
    // the recorded worlds differ in the sandbox only, and say so naming the recorded value
    let first = world(WorldReason::Created, "workspace-write");
    let d = first.differences(&world(WorldReason::Changed, "read-only"));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].facet, "sandbox");
    assert!(
        d[0].what
            .contains("recorded workspace-write, here read-only"),
        "{}",
        d[0]
    );
}

#[test]
fn a_world_or_a_refusal_after_a_stop_leaves_it_a_stop() {
    let mut st = lazarus_session::SessionState::new(Header::new(FORMAT, "s"));
    let stop = Record::Interrupted(Interrupted {
        reason: "sigint".into(),
        turn: None,
    });
    st.check(&stop).unwrap();
    st.apply(1, stop);
    let w = Record::World(Box::new(world(WorldReason::Adopted, "off")));
    st.check(&w).unwrap();
    st.apply(2, w);
    assert_eq!(st.status(), Status::Stopped);
    assert!(
        st.interrupted.is_some(),
        "a world record is not an answer to a stop"
    );
}

#[test]
fn a_header_world_this_build_cannot_read_is_named_not_guessed() {
    let mut h = Header::new(FORMAT, "s");
    h.meta = Some(
        json!({"world": {"reason": "created", "by": "run", "tools": {"builtin": []}, "teleport": true}}),
    );
    let st = lazarus_session::SessionState::new(h);
    assert!(st.world.is_none());
    let why = st.world_unreadable.expect("named");
    assert!(why.contains("upgrade lazarus"), "{why}");
}

#[test]
fn golden_tasks_replay_the_handle_and_refuse_a_task_out_of_place() {
    let dir = tempfile::tempdir().unwrap();
    let text = render_tasks();
    let path = dir.path().join("golden-tasks.jsonl");
    let store = LocalStore::open(dir.path()).unwrap();
    let id = SessionId::literal("golden-tasks");
    let lines: Vec<&str> = text.lines().collect();
    let upto = |n: usize| {
        std::fs::write(&path, lines[..=n].join("\n") + "\n").unwrap();
        store.load(&id).unwrap()
    };
    // the handle recorded, no outcome: cut off mid-call, the task to be polled again
    let st = upto(6);
    assert_eq!(st.status(), Status::InDoubt);
    assert!(st.owes_work());
    let task = st.call("call_1").unwrap().task.as_deref().unwrap().clone();
    assert_eq!(
        (task.task_id.as_str(), task.status, task.seq, task.ttl_ms),
        (tasks::TASK_ID, TaskStatus::Working, 6, Some(900_000))
    );
    assert_eq!(task.fingerprint, tasks::FINGERPRINT);
    // a second handle for the call, and a status naming another task, are refused
    let again = Record::ToolTask(match &task_records()[5] {
        Record::ToolTask(t) => t.clone(),
        _ => unreachable!(),
    });
    let err = st.check(&again).unwrap_err();
    assert!(err.to_string().contains("a task already"), "{err}");
    let other = Record::ToolTaskStatus(ToolTaskStatus {
        call_id: "call_1".into(),
        task_id: "another".into(),
        status: TaskStatus::Completed,
        message: None,
    });
    let err = st.check(&other).unwrap_err();
    assert!(err.to_string().contains("another"), "{err}");
    // a handle before the call started is refused
    let before = upto(4);
    let err = before.check(&again).unwrap_err();
    assert!(err.to_string().contains("no tool_start"), "{err}");
    // the status change, then the outcome: the call is finished; a status after it refused
    let st = upto(7);
    let t = st.call("call_1").unwrap().task.as_deref().unwrap();
    assert_eq!((t.status, t.status_seq), (TaskStatus::Completed, 7));
    let st = upto(9);
    assert_eq!(st.status(), Status::Interrupted);
    assert!(st.every_call_has_one_result());
    let late = Record::ToolTaskStatus(ToolTaskStatus {
        call_id: "call_1".into(),
        task_id: tasks::TASK_ID.into(),
        status: TaskStatus::Completed,
        message: None,
    });
    assert!(st.check(&late).is_err());
    let m = st.last_receipt.as_ref().unwrap().mcp.clone().unwrap();
    assert_eq!((m.tasks_reattached, m.tasks_still_working), (1, 1));
}
