//! Between the ledger and the model: the state replayed into the messages a request sends,
//! and a model's response turned into the `response` record (call ids made unique).

use lazarus_session::record::{Attempt as RecAttempt, Item, Response, Usage as RecUsage};
use lazarus_session::{ContextEntry, SessionState};
use serde_json::Value;

use super::{COMPACTED_PREFIX, Runner};
use crate::model::{Message, ModelResponse, OutputItem, ProviderItem, ToolCall};
use crate::provider::{drop_truncated_tool_calls, merge_repeated_calls};

impl Runner {
    /// The model context: system prompt, examples, then the transcript from the ledger.
    pub fn messages(&self, st: &SessionState) -> Vec<Message> {
        let mut out = Vec::new();
        let system = st
            .header
            .meta
            .as_ref()
            .and_then(|m| m.get("system_prompt"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .or_else(|| self.cfg.system_prompt.clone());
        if let Some(s) = system {
            out.push(Message::system(s));
        }
        out.extend(self.cfg.examples.iter().cloned());
        let (summary, live) = st.live_context();
        if let Some(summary) = summary {
            out.push(Message::user(format!("{COMPACTED_PREFIX}{summary}")));
        }
        for entry in live {
            match entry {
                ContextEntry::User { text, .. } => out.push(Message::user(text.clone())),
                ContextEntry::Assistant { items, .. } => {
                    // Reasoning a provider issued goes back verbatim (to that API only).
                    let provider_items = items
                        .iter()
                        .filter_map(|i| match i {
                            Item::ProviderReasoning { api, item, .. } => Some(ProviderItem {
                                api: api.clone(),
                                item: item.clone(),
                            }),
                            _ => None,
                        })
                        .collect();
                    let text: String = items
                        .iter()
                        .filter_map(|i| match i {
                            Item::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    let tool_calls = items
                        .iter()
                        .filter_map(|i| match i {
                            Item::ToolCall {
                                call_id,
                                name,
                                arguments,
                            } => Some(ToolCall {
                                call_id: call_id.clone(),
                                name: name.clone(),
                                arguments: arguments.clone(),
                            }),
                            _ => None,
                        })
                        .collect();
                    out.push(Message::Assistant {
                        provider_items,
                        text: (!text.is_empty()).then_some(text),
                        tool_calls,
                    });
                }
                ContextEntry::ToolResult { call, .. } => {
                    let call = &st.calls[*call];
                    out.push(Message::tool_result(
                        call.call_id.clone(),
                        st.tool_result_text(&call.call_id).to_string(),
                    ))
                }
            }
        }
        out
    }
}

/// Base models repeat a call or get cut off mid-call: keep what is usable.
/// Calls written as text by a base model that repeats itself are merged (each kept call
/// with the number of repeats it absorbed, by position among the calls); calls the API gave
/// natively never are: each has its own id and gets its own intent, outcome and result.
pub(super) fn clean_calls(response: &mut ModelResponse, from_text: bool) -> Vec<(usize, usize)> {
    let merged = if from_text {
        merge_repeated_calls(&mut response.items)
    } else {
        Vec::new()
    };
    if response.is_truncated() {
        drop_truncated_tool_calls(response);
    }
    merged
}

/// The note a merged call's result carries, so the model knows its repeats ran once.
pub(super) fn repeats_note(repeats: usize) -> String {
    format!(
        "\n[Lazarus: this call was written {} times in a row; it ran once.]",
        repeats + 1
    )
}

pub(super) fn record_attempts(attempts: &[crate::provider::Attempt]) -> Vec<RecAttempt> {
    attempts
        .iter()
        .map(|a| RecAttempt {
            status: a.status,
            error: a.error.clone(),
            waited_ms: a.waited_ms,
        })
        .collect()
}

/// Maps the model's response to the ledger record; call ids are made unique in the session.
pub(super) fn to_record(
    st: &SessionState,
    turn: u64,
    r: ModelResponse,
    failed_attempts: &[crate::provider::Attempt],
) -> Response {
    let mut seen = std::collections::HashSet::new();
    let items = r
        .items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            OutputItem::Text { text } => Item::Text { text },
            OutputItem::Reasoning { text } => Item::Reasoning { text },
            OutputItem::ProviderReasoning { api, text, item } => {
                Item::ProviderReasoning { api, text, item }
            }
            OutputItem::ToolCall(c) => {
                let mut id = c.call_id;
                // an id the session already used (providers that number calls per turn
                // reuse them) gets one of ours; the ledger refuses a call id twice
                let mut n = 0;
                while id.is_empty() || st.call_id_used(&id) || !seen.insert(id.clone()) {
                    id = match n {
                        0 => format!("call_t{turn}_{i}"),
                        _ => format!("call_t{turn}_{i}_{n}"),
                    };
                    n += 1;
                }
                Item::ToolCall {
                    call_id: id,
                    name: c.name,
                    arguments: c.arguments,
                }
            }
        })
        .collect();
    let mut extra = r.provider_extra;
    let usage = r.usage.map(|u| {
        // usage fields Lazarus does not model are kept verbatim too
        if !u.extra.is_empty() {
            extra.insert("usage".into(), Value::Object(u.extra.clone()));
        }
        RecUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
            cached_tokens: u.cached_tokens,
        }
    });
    Response {
        turn,
        items,
        usage,
        stop_reason: (!r.stop_reason.is_empty()).then_some(r.stop_reason),
        failure: None,
        model: r.model,
        provider_extra: (!extra.is_empty()).then_some(extra),
        attempts: record_attempts(failed_attempts),
    }
}
