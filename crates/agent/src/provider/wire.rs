//! What every dialect's parser shares: the live [`Delta`]s, JSON objects taken apart with
//! their unknown keys kept, and short snippets of bad input for error messages.

use serde_json::{Map, Value};

use super::error::ProviderError;

/// Something new that arrived in a chunk, for live output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    Text(String),
    Reasoning(String),
    ToolCallStart { index: u64, name: String },
}

/// Moves the keys of `known` out of `obj`, returning them; `obj` keeps the unknown ones.
pub(crate) fn split_known(obj: &mut Map<String, Value>, known: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for k in known {
        if let Some(v) = obj.remove(*k) {
            out.insert((*k).to_string(), v);
        }
    }
    out
}

/// `data` as a JSON object; `what` names it in the error (a response body, a stream event).
pub(crate) fn parse_object(data: &[u8], what: &str) -> Result<Map<String, Value>, ProviderError> {
    match serde_json::from_slice::<Value>(data) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ProviderError::InvalidResponse {
            detail: format!("{what} is not a JSON object"),
        }),
        Err(e) => Err(ProviderError::InvalidResponse {
            detail: format!(
                "{what} is not JSON ({e}): {}",
                snippet(&String::from_utf8_lossy(data))
            ),
        }),
    }
}

/// `s` cut to 300 bytes (at a character boundary) for an error message.
pub(crate) fn snippet(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}
