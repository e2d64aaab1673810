//! Tool calls written as text, and tidying of repeated / truncated calls.
//!
//! Small local models often write a call in `content` instead of `tool_calls`:
//! - a fenced block (```` ```json ```` or a bare ```` ``` ````) holding `{"name":…,"arguments":{…}}`
//!   or a list of such objects;
//! - a `<tool_call>{"name":…,"arguments":{…}}</tool_call>` element.
//!
//! Recognised calls get deterministic ids `text_call_<hash>_<n>` (hash of the whole text),
//! so the same response always yields the same ids.

use serde_json::Value;

use crate::model::{ModelResponse, OutputItem, ToolCall};

const TAG_OPEN: &str = "<tool_call>";
const TAG_CLOSE: &str = "</tool_call>";
const FENCE: &str = "```";

/// FNV-1a, 64 bit: a small stable hash (not for security).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Parses `{"name": "...", "arguments": {...}}` (arguments may also be a JSON string or
/// absent) or a non-empty list of them. `None` unless every element is a valid call.
fn parse_calls(json: &str) -> Option<Vec<(String, String)>> {
    let v: Value = serde_json::from_str(json.trim()).ok()?;
    let one = |v: &Value| -> Option<(String, String)> {
        let o = v.as_object()?;
        let name = o.get("name")?.as_str()?.trim();
        if name.is_empty() {
            return None;
        }
        let args = match o.get("arguments") {
            None | Some(Value::Null) => "{}".to_string(),
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Object(_)) => s.clone(),
                _ => return None,
            },
            Some(a @ Value::Object(_)) => a.to_string(),
            Some(_) => return None,
        };
        Some((name.to_string(), args))
    };
    match &v {
        Value::Array(list) if !list.is_empty() => list.iter().map(one).collect(),
        Value::Object(_) => one(&v).map(|c| vec![c]),
        _ => None,
    }
}

/// Finds tool calls written in `text`. Returns the calls and the text with the recognised
/// blocks removed (trimmed), or `None` when there is none.
pub fn recognise_text_tool_calls(text: &str) -> Option<(Vec<ToolCall>, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut rest = String::new();
    let mut pos = 0;
    while pos < text.len() {
        let tail = &text[pos..];
        let tag = tail.find(TAG_OPEN);
        let fence = tail.find(FENCE);
        let (start, is_tag) = match (tag, fence) {
            (Some(t), Some(f)) if t < f => (t, true),
            (Some(t), None) => (t, true),
            (_, Some(f)) => (f, false),
            (None, None) => break,
        };
        let abs = pos + start;
        let (inner, end) = if is_tag {
            let body_start = abs + TAG_OPEN.len();
            match text[body_start..].find(TAG_CLOSE) {
                Some(e) => (
                    &text[body_start..body_start + e],
                    body_start + e + TAG_CLOSE.len(),
                ),
                None => break, // unterminated: leave as text
            }
        } else {
            let after = abs + FENCE.len();
            // Info string up to the end of the line: accept "", "json", "tool_call", "tool_code".
            let line_end = match text[after..].find('\n') {
                Some(n) => after + n,
                None => break,
            };
            let info = text[after..line_end].trim().to_ascii_lowercase();
            let body_start = line_end + 1;
            let Some(e) = text[body_start..].find(FENCE) else {
                break;
            };
            let end = body_start + e + FENCE.len();
            if !matches!(info.as_str(), "" | "json" | "tool_call" | "tool_code") {
                rest.push_str(&text[pos..end]);
                pos = end;
                continue;
            }
            (&text[body_start..body_start + e], end)
        };
        match parse_calls(inner) {
            Some(calls) => {
                rest.push_str(&text[pos..abs]);
                found.extend(calls);
            }
            None => rest.push_str(&text[pos..end]),
        }
        pos = end;
    }
    if found.is_empty() {
        return None;
    }
    if pos < text.len() {
        rest.push_str(&text[pos..]);
    }
    let hash = fnv1a(text.as_bytes()) as u32;
    let calls = found
        .into_iter()
        .enumerate()
        .map(|(n, (name, arguments))| ToolCall {
            call_id: format!("text_call_{hash:08x}_{n}"),
            name,
            arguments,
        })
        .collect();
    Some((calls, rest.trim().to_string()))
}

/// When `response` has no native tool calls, turns calls written in its text into
/// `ToolCall` items (appended after the remaining text). Returns how many were recognised.
pub fn apply_text_tool_calls(response: &mut ModelResponse) -> usize {
    if response.tool_calls().next().is_some() {
        return 0;
    }
    let text = response.text();
    let Some((calls, remaining)) = recognise_text_tool_calls(&text) else {
        return 0;
    };
    let n = calls.len();
    let mut items: Vec<OutputItem> = response
        .items
        .drain(..)
        .filter(|i| !matches!(i, OutputItem::Text { .. }))
        .collect();
    if !remaining.is_empty() {
        items.push(OutputItem::Text { text: remaining });
    }
    items.extend(calls.into_iter().map(OutputItem::ToolCall));
    response.items = items;
    n
}

fn same_call(a: &ToolCall, b: &ToolCall) -> bool {
    if a.name != b.name {
        return false;
    }
    match (
        serde_json::from_str::<Value>(&a.arguments),
        serde_json::from_str::<Value>(&b.arguments),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.arguments.trim() == b.arguments.trim(),
    }
}

/// Removes tool calls identical (same name, equal arguments as JSON) to the tool call right
/// before them — only reasoning or blank text may stand between. Returns the number removed.
/// Small base models repeat the same call until `max_tokens`.
pub fn dedup_consecutive_tool_calls(items: &mut Vec<OutputItem>) -> usize {
    merge_repeated_calls(items).iter().map(|(_, n)| n).sum()
}

/// [`dedup_consecutive_tool_calls`], saying which kept call absorbed how many repeats: pairs
/// of (position of the kept call among the tool calls left, repeats removed).
pub fn merge_repeated_calls(items: &mut Vec<OutputItem>) -> Vec<(usize, usize)> {
    let mut merged: Vec<(usize, usize)> = Vec::new();
    let mut prev: Option<ToolCall> = None;
    let mut kept_calls = 0usize;
    items.retain(|item| match item {
        OutputItem::ToolCall(c) => {
            if prev.as_ref().is_some_and(|p| same_call(p, c)) {
                let at = kept_calls - 1;
                match merged.last_mut() {
                    Some((i, n)) if *i == at => *n += 1,
                    _ => merged.push((at, 1)),
                }
                false
            } else {
                prev = Some(c.clone());
                kept_calls += 1;
                true
            }
        }
        OutputItem::Text { text } if !text.trim().is_empty() => {
            prev = None;
            true
        }
        _ => true,
    });
    merged
}

/// When the response was cut off (`stop_reason == "length"`), removes trailing tool calls
/// whose arguments are not valid JSON (the model was stopped mid-call). Returns them.
pub fn drop_truncated_tool_calls(response: &mut ModelResponse) -> Vec<ToolCall> {
    let mut dropped = Vec::new();
    if !response.is_truncated() {
        return dropped;
    }
    while let Some(OutputItem::ToolCall(c)) = response.items.last() {
        if serde_json::from_str::<Value>(&c.arguments).is_ok() {
            break;
        }
        if let Some(OutputItem::ToolCall(c)) = response.items.pop() {
            dropped.push(c);
        }
    }
    dropped.reverse();
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn recognises_fenced_json() {
        let t = "I'll look.\n```json\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n```\nDone?";
        let (calls, rest) = recognise_text_tool_calls(t).expect("a call");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "list_dir");
        assert_eq!(calls[0].arguments, "{\"path\":\".\"}");
        assert!(calls[0].call_id.starts_with("text_call_"));
        assert_eq!(rest, "I'll look.\n\nDone?");
        // Deterministic ids.
        let (again, _) = recognise_text_tool_calls(t).expect("a call");
        assert_eq!(again, calls);
    }

    #[test]
    fn recognises_tool_call_elements_and_lists() {
        let t = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call><tool_call>{\"name\":\"b\"}</tool_call>";
        let (calls, rest) = recognise_text_tool_calls(t).expect("calls");
        assert_eq!(
            calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(calls[1].arguments, "{}");
        assert_ne!(calls[0].call_id, calls[1].call_id);
        assert_eq!(rest, "");

        let t = "```\n[{\"name\":\"a\",\"arguments\":{}},{\"name\":\"b\",\"arguments\":\"{\\\"k\\\":2}\"}]\n```";
        let (calls, _) = recognise_text_tool_calls(t).expect("calls");
        assert_eq!(calls[1].arguments, "{\"k\":2}");
    }

    #[test]
    fn leaves_other_code_and_unterminated_blocks_alone() {
        assert!(recognise_text_tool_calls("```rust\nfn main() {}\n```").is_none());
        assert!(recognise_text_tool_calls("```json\n{\"a\": 1}\n```").is_none());
        assert!(recognise_text_tool_calls("<tool_call>{\"name\":\"a\"").is_none());
        assert!(recognise_text_tool_calls("plain text").is_none());
        // A python block then a real call: only the call is taken out.
        let t = "```python\nprint(1)\n```\n```json\n{\"name\":\"shell\",\"arguments\":{\"command\":\"ls\"}}\n```";
        let (calls, rest) = recognise_text_tool_calls(t).expect("call");
        assert_eq!(calls.len(), 1);
        assert_eq!(rest, "```python\nprint(1)\n```");
    }

    fn call(id: &str, name: &str, args: &str) -> OutputItem {
        OutputItem::ToolCall(ToolCall {
            call_id: id.into(),
            name: name.into(),
            arguments: args.into(),
        })
    }

    #[test]
    fn dedups_repeated_calls_and_drops_truncated_tail() {
        let mut r = ModelResponse {
            items: vec![
                call("1", "ls", "{\"path\": \"docs\"}"),
                call("2", "ls", "{\"path\":\"docs\"}"),
                OutputItem::Text { text: "  ".into() },
                call("3", "ls", "{ \"path\" : \"docs\" }"),
                call("4", "ls", "{\"path\":\"src\"}"),
                call("5", "ls", "{\""),
            ],
            usage: None,
            stop_reason: "length".into(),
            model: None,
            provider_extra: Default::default(),
        };
        let dropped = drop_truncated_tool_calls(&mut r);
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].call_id, "5");
        assert_eq!(dedup_consecutive_tool_calls(&mut r.items), 2);
        let ids: Vec<_> = r.tool_calls().map(|c| c.call_id.as_str()).collect();
        assert_eq!(ids, ["1", "4"]);
        r.stop_reason = "stop".into();
        r.items.push(call("6", "ls", "{"));
        assert!(drop_truncated_tool_calls(&mut r).is_empty());
    }

    #[test]
    fn apply_only_without_native_calls() {
        let mut r = ModelResponse {
            items: vec![OutputItem::Text {
                text: "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call> ok".into(),
            }],
            usage: None,
            stop_reason: "stop".into(),
            model: None,
            provider_extra: Default::default(),
        };
        assert_eq!(apply_text_tool_calls(&mut r), 1);
        assert_eq!(r.text(), "ok");
        assert_eq!(r.tool_calls().count(), 1);
        assert_eq!(apply_text_tool_calls(&mut r), 0, "has native calls now");
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(s in ".{0,400}") {
            let _ = recognise_text_tool_calls(&s);
        }

        #[test]
        fn never_panics_on_tool_call_like_text(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("<tool_call>".to_string()), Just("</tool_call>".to_string()),
                    Just("```".to_string()), Just("```json\n".to_string()), Just("\n".to_string()),
                    Just("{\"name\":\"a\",\"arguments\":{}}".to_string()), Just("[".to_string()),
                    Just("]".to_string()), Just("é".to_string()), "[a-z{}\":,]{0,8}",
                ], 0..20)
        ) {
            let s: String = parts.concat();
            if let Some((calls, rest)) = recognise_text_tool_calls(&s) {
                prop_assert!(!calls.is_empty());
                prop_assert!(rest.len() <= s.len());
                for c in &calls {
                    prop_assert!(serde_json::from_str::<Value>(&c.arguments).is_ok());
                }
            }
        }
    }
}
