//! The tasks golden (`tests/golden/tasks.jsonl`, record kinds revision 5): an MCP call that
//! became a task on its server, the run killed while the task worked, and the resume that
//! polled the same task to its end and recorded its result.

use lazarus_ledger::Header;
use lazarus_session::record::*;
use serde_json::json;

use super::{TS, encode};

pub const FINGERPRINT: &str =
    "sha256:0e1f3c5a7b9d2e4f6a8c0b2d4f6e8a0c2e4a6c8e0b2d4f6a8c0e2a4c6e8b0d2f";
pub const TASK_ID: &str = "Izxh9304i5-M2AExvp4OXWZyzVHWfCCFCuHRTyNy560";

pub fn task_records() -> Vec<Record> {
    let arguments = r#"{"quarter":"Q3"}"#;
    let basis = json!({
        "source": "mcp",
        "server": "reports",
        "server_info": {"name": "reports", "version": "4.1.4"},
        "tool": "build_report",
        "annotations": {},
        "trusted": false,
        "tasks": true,
    });
    vec![
        Record::Input(Input {
            input_id: "msg-1".into(),
            source: "user".into(),
            text: "Build the Q3 report.".into(),
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
                name: "mcp__reports__build_report".into(),
                arguments: arguments.into(),
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
            tool: "mcp__reports__build_report".into(),
            arguments: arguments.into(),
            idempotent: false,
            idempotency_key: "golden-tasks/call_1".into(),
            rerun_basis: basis.as_object().cloned(),
        }),
        Record::ToolStart(ToolStart {
            call_id: "call_1".into(),
            process: None,
        }),
        Record::ToolTask(ToolTask {
            call_id: "call_1".into(),
            server: "reports".into(),
            fingerprint: FINGERPRINT.into(),
            task_id: TASK_ID.into(),
            status: TaskStatus::Working,
            ttl_ms: Some(900_000),
            poll_interval_ms: Some(500),
            created_at: "2026-12-02T10:00:00.020Z".into(),
        }),
        Record::ToolTaskStatus(ToolTaskStatus {
            call_id: "call_1".into(),
            task_id: TASK_ID.into(),
            status: TaskStatus::Completed,
            message: None,
        }),
        Record::ToolOutcome(ToolOutcome {
            call_id: "call_1".into(),
            status: OutcomeStatus::Ok,
            result: "report for Q3 built".into(),
            exit_code: None,
            duration_ms: Some(41_230),
        }),
        Record::Resume(ResumeReceipt {
            trigger: "run".into(),
            records_replayed: 6,
            every_call_has_one_result: true,
            mcp: Some(McpCalls {
                tasks_reattached: 1,
                tasks_still_working: 1,
                ..McpCalls::default()
            }),
            ..ResumeReceipt::default()
        }),
    ]
}

pub fn render_tasks() -> String {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        id: "golden-tasks".into(),
        created_at: TS.into(),
        parent: None,
        meta: Some(json!({"workspace": "/home/dana/project"})),
        unsynced_bytes_max: None,
    };
    encode(&header, &task_records())
}
