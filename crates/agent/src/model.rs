//! Provider-neutral types for the model conversation.
//!
//! These are what the runner stores in the ledger and rebuilds the model context from, so
//! every type is serde (de)serialisable with snake_case tags.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One tool call as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id (or a generated `text_call_…` id for calls recognised in text).
    pub call_id: String,
    pub name: String,
    /// The arguments as raw JSON text, exactly as the model sent it (may be invalid JSON when
    /// the model was cut off).
    pub arguments: String,
}

/// One message of the chat context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        /// Reasoning items the provider must get back verbatim; each is sent only on the
        /// API that issued it, before the text and the calls.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        provider_items: Vec<ProviderItem>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of a tool call, fed back to the model.
    Tool {
        call_id: String,
        content: String,
    },
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::Tool {
            call_id: call_id.into(),
            content: content.into(),
        }
    }

    /// An assistant message with text and calls only.
    pub fn assistant(text: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message::Assistant {
            provider_items: Vec::new(),
            text,
            tool_calls,
        }
    }

    /// The assistant message to append to the context for a model response: its provider
    /// reasoning items (verbatim), its text items (joined) and its tool calls. Plain
    /// reasoning text is not sent back.
    pub fn assistant_from(response: &ModelResponse) -> Self {
        let text: String = response
            .items
            .iter()
            .filter_map(|i| match i {
                OutputItem::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("");
        Message::Assistant {
            provider_items: response
                .items
                .iter()
                .filter_map(|i| match i {
                    OutputItem::ProviderReasoning { api, item, .. } => Some(ProviderItem {
                        api: api.clone(),
                        item: item.clone(),
                    }),
                    _ => None,
                })
                .collect(),
            text: if text.is_empty() { None } else { Some(text) },
            tool_calls: response.tool_calls().cloned().collect(),
        }
    }
}

/// A provider's own output item, kept verbatim to be sent back on the API that issued it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderItem {
    /// `responses` or `anthropic` (see [`crate::provider::Api`]).
    pub api: String,
    pub item: Value,
}

/// A tool as described to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One chat-completions request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    pub stream: bool,
}

/// One item of model output, in the order the model produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    Text {
        text: String,
    },
    /// Serialised flat: `{"type":"tool_call","call_id":…,"name":…,"arguments":…}`.
    ToolCall(ToolCall),
    Reasoning {
        text: String,
    },
    /// Reasoning that must go back verbatim on the API that issued it (a Responses
    /// `reasoning` item with `encrypted_content`, an Anthropic `thinking` block with its
    /// `signature` or a `redacted_thinking` block). `text` is the readable part.
    ProviderReasoning {
        api: String,
        text: String,
        item: Value,
    },
}

/// Token usage as reported by the provider. Fields it adds (e.g. `prompt_tokens_details`)
/// are kept verbatim in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Of `prompt_tokens`, how many were read from the prompt cache. Filled by the client
    /// from the provider's own field, which stays in `extra` as sent.
    #[serde(default, skip)]
    pub cached_tokens: Option<u64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A complete model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    pub items: Vec<OutputItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// `finish_reason` verbatim (`stop`, `length`, `tool_calls`, …; empty if none was sent).
    pub stop_reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Every response field the client does not interpret, kept verbatim so the ledger can
    /// round-trip it: unknown top-level fields as they are (`id`, `created`, `timings`, …),
    /// unknown fields of the choice under `"choice"`, unknown fields of the message (or of
    /// the stream deltas) under `"message"`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub provider_extra: Map<String, Value>,
}

impl ModelResponse {
    /// The tool calls of this response, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> + '_ {
        self.items.iter().filter_map(|i| match i {
            OutputItem::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// Whether the model was cut off at the token limit (chat `length`, Anthropic
    /// `max_tokens`, Responses `max_output_tokens`).
    pub fn is_truncated(&self) -> bool {
        matches!(
            self.stop_reason.as_str(),
            "length" | "max_tokens" | "max_output_tokens"
        )
    }

    /// All text items joined.
    pub fn text(&self) -> String {
        self.items
            .iter()
            .filter_map(|i| match i {
                OutputItem::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_items_serialise_with_snake_case_tags() {
        let items = vec![
            OutputItem::Text { text: "hi".into() },
            OutputItem::ToolCall(ToolCall {
                call_id: "c1".into(),
                name: "shell".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            }),
            OutputItem::Reasoning { text: "hm".into() },
        ];
        let v = serde_json::to_value(&items).unwrap();
        assert_eq!(
            v,
            json!([
                {"type":"text","text":"hi"},
                {"type":"tool_call","call_id":"c1","name":"shell","arguments":"{\"command\":\"ls\"}"},
                {"type":"reasoning","text":"hm"}
            ])
        );
        let back: Vec<OutputItem> = serde_json::from_value(v).unwrap();
        assert_eq!(back, items);
    }

    #[test]
    fn messages_round_trip() {
        let msgs = vec![
            Message::system("s"),
            Message::user("u"),
            Message::Assistant {
                provider_items: vec![],
                text: None,
                tool_calls: vec![ToolCall {
                    call_id: "a".into(),
                    name: "n".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::tool_result("a", "out"),
        ];
        let v = serde_json::to_value(&msgs).unwrap();
        assert_eq!(v[0], json!({"role":"system","content":"s"}));
        assert_eq!(v[3], json!({"role":"tool","call_id":"a","content":"out"}));
        let back: Vec<Message> = serde_json::from_value(v).unwrap();
        assert_eq!(back, msgs);
    }

    #[test]
    fn response_round_trips_provider_extra() {
        let mut extra = Map::new();
        extra.insert("timings".into(), json!({"prompt_n": 3}));
        let r = ModelResponse {
            items: vec![OutputItem::Text { text: "x".into() }],
            usage: Some(Usage {
                prompt_tokens: Some(1),
                completion_tokens: Some(2),
                total_tokens: Some(3),
                cached_tokens: None,
                extra: Map::from_iter([(
                    "prompt_tokens_details".to_string(),
                    json!({"cached_tokens": 0}),
                )]),
            }),
            stop_reason: "stop".into(),
            model: Some("m".into()),
            provider_extra: extra,
        };
        let s = serde_json::to_string(&r).unwrap();
        let back: ModelResponse = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            Message::assistant_from(&r),
            Message::Assistant {
                provider_items: vec![],
                text: Some("x".into()),
                tool_calls: vec![]
            }
        );
    }
}
