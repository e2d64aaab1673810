//! Shared by the ACP tests (`acp.rs`, `acp_wrap.rs`, `acp_acpx.rs`): the scripted model, the
//! client that allows every call once, and what the editor was shown.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate, TextContent, ToolCallStatus};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;

/// Every update the client received, in order.
pub type Seen = Arc<Mutex<Vec<SessionUpdate>>>;

/// A prompt of one text block.
pub fn text(t: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(t))]
}

/// Lines in a file (0 when it is missing): how often the side effect happened.
pub fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Each status the editor was shown for `call`, with the content that came with it.
pub fn statuses(seen: &Seen, call: &str) -> Vec<(ToolCallStatus, String)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(t) if t.tool_call_id.0.as_ref() == call => Some((
                t.status,
                serde_json::to_string(&t.content).unwrap_or_default(),
            )),
            SessionUpdate::ToolCallUpdate(t) if t.tool_call_id.0.as_ref() == call => Some((
                t.fields.status?,
                serde_json::to_string(&t.fields.content).unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

/// Every agent message the editor was shown, joined.
pub fn said(seen: &Seen) -> String {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The model: a shell call for a prompt saying "append", which appends a line to `effect`
/// and sleeps `sleep_secs` (the kill lands then); `answer` once it is told its turn was
/// interrupted; "Fine." to anything else.
pub async fn model(answer: &str, sleep_secs: u32) -> ScriptedServer {
    ScriptedServer::start(Script::new([
        Step::reply(ScriptedResponse::text(answer))
            .when(When::AnyMessageContains {
                text: "interrupted".into(),
            })
            .repeat(),
        Step::reply(ScriptedResponse::tool_call(
            "c1",
            "shell",
            json!({"command": format!("echo ran >> effect; sleep {sleep_secs}")}),
        ))
        .when(When::LastUserContains {
            text: "append".into(),
        }),
        Step::reply(ScriptedResponse::text("Fine.")).repeat(),
    ]))
    .await
    .unwrap()
}

/// A client that allows every call once and keeps every update in `$seen`.
#[allow(unused_macros)] // acp_acpx.rs drives acpx, not this client
macro_rules! client {
    ($seen:expr) => {{
        let s = $seen.clone();
        agent_client_protocol::Client
            .v1()
            .on_receive_notification(
                async move |n: agent_client_protocol::v1::schema::SessionNotification, _cx| {
                    s.lock().unwrap().push(n.update);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |_r: agent_client_protocol::v1::schema::RequestPermissionRequest,
                            responder,
                            _cx| {
                    use agent_client_protocol::v1::schema::{
                        RequestPermissionOutcome, RequestPermissionResponse,
                        SelectedPermissionOutcome,
                    };
                    responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                            "allow_once",
                        )),
                    ))
                },
                agent_client_protocol::on_receive_request!(),
            )
    }};
}
