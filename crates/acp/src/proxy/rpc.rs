//! JSON-RPC 2.0 as the proxy sees it: what a line is (request, notification, response), its
//! id as a map key, and the one field the proxy ever rewrites (`params.sessionId`). Messages
//! are kept as the `serde_json::Value` they parse to and forwarded as the bytes that came in
//! unless the proxy had to change them.

use serde_json::Value;

/// What one message is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind<'a> {
    /// A call the other side must answer.
    Request { id: &'a Value, method: &'a str },
    /// A message that wants no answer.
    Notification { method: &'a str },
    /// The answer to a request: `result` (ok) or `error`.
    Response { id: &'a Value, ok: bool },
    /// Not a JSON-RPC message (the line is forwarded as it is).
    Other,
}

/// What `msg` is.
pub fn kind(msg: &Value) -> Kind<'_> {
    let method = msg.get("method").and_then(Value::as_str);
    match (msg.get("id"), method) {
        (Some(id), Some(method)) => Kind::Request { id, method },
        (None, Some(method)) => Kind::Notification { method },
        (Some(id), None) if msg.get("result").is_some() => Kind::Response { id, ok: true },
        (Some(id), None) if msg.get("error").is_some() => Kind::Response { id, ok: false },
        _ => Kind::Other,
    }
}

/// A request id as a map key: its JSON text (`7` and `"7"` are different ids).
pub fn key(id: &Value) -> String {
    id.to_string()
}

/// The session a message names (`params.sessionId`), if any.
pub fn session_id(msg: &Value) -> Option<&str> {
    msg.get("params")?.get("sessionId")?.as_str()
}

/// Sets `params.sessionId` (only where the message has one).
pub fn set_session_id(msg: &mut Value, id: &str) {
    if let Some(s) = msg
        .get_mut("params")
        .and_then(|p| p.get_mut("sessionId"))
        .filter(|s| s.is_string())
    {
        *s = Value::String(id.to_string());
    }
}

/// A request, as the proxy sends one of its own.
pub fn request(id: &Value, method: &str, params: Value) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

/// An error answer. `-32603` (internal error) unless said otherwise; `data.message` repeats
/// the text, as editors show `data` when they show anything.
pub fn error_response(id: &Value, code: i64, message: &str) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message, "data": { "message": message } },
    })
}

/// JSON-RPC's "internal error".
pub const INTERNAL_ERROR: i64 = -32603;

/// A `session/update` notification carrying `update` for session `sid`.
pub fn session_update(sid: &str, update: Value) -> Value {
    notification(
        "session/update",
        serde_json::json!({ "sessionId": sid, "update": update }),
    )
}

/// The text of an error answer, for the ledger and for messages to people.
pub fn error_text(msg: &Value) -> String {
    let Some(e) = msg.get("error") else {
        return String::new();
    };
    let mut s = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error")
        .to_string();
    if let Some(d) = e.get("data") {
        let detail = d
            .get("details")
            .or_else(|| d.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| d.to_string());
        if !detail.is_empty() && detail != s {
            s.push_str(": ");
            s.push_str(&detail);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds() {
        let r = json!({"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}});
        assert_eq!(
            kind(&r),
            Kind::Request {
                id: &json!(1),
                method: "session/prompt"
            }
        );
        let n = json!({"jsonrpc":"2.0","method":"session/update","params":{}});
        assert_eq!(
            kind(&n),
            Kind::Notification {
                method: "session/update"
            }
        );
        let ok = json!({"jsonrpc":"2.0","id":"a","result":{}});
        assert_eq!(
            kind(&ok),
            Kind::Response {
                id: &json!("a"),
                ok: true
            }
        );
        let err = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}});
        assert_eq!(
            kind(&err),
            Kind::Response {
                id: &Value::Null,
                ok: false
            }
        );
        assert_eq!(kind(&json!([1, 2])), Kind::Other);
        assert_eq!(kind(&json!({"id": 3})), Kind::Other);
    }

    #[test]
    fn keys_tell_numbers_from_strings() {
        assert_ne!(key(&json!(7)), key(&json!("7")));
    }

    #[test]
    fn session_ids() {
        let mut m = json!({"method":"session/prompt","params":{"sessionId":"A","prompt":[]}});
        assert_eq!(session_id(&m), Some("A"));
        set_session_id(&mut m, "B");
        assert_eq!(session_id(&m), Some("B"));
        let mut none = json!({"method":"initialize","params":{}});
        set_session_id(&mut none, "B");
        assert_eq!(session_id(&none), None);
    }

    #[test]
    fn error_texts() {
        let g = json!({"id":1,"error":{"code":-32603,"message":"Internal error","data":{"details":"No previous sessions found for this project."}}});
        assert_eq!(
            error_text(&g),
            "Internal error: No previous sessions found for this project."
        );
        let plain = json!({"id":1,"error":{"code":-32602,"message":"Session not found"}});
        assert_eq!(error_text(&plain), "Session not found");
    }
}
