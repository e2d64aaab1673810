//! A session a Python program writes, as people read it: an Agents SDK session as a
//! conversation (user, assistant, tool calls and their outputs), a LangGraph thread as its
//! steps (the node that made each, every channel's value as JSON, pending writes,
//! interrupts), and each host record decoded in the timeline. Values are read with the
//! allowlist the package loads by: what lies outside it is shown labelled, as it is.

use lazarus_session::host_blob::{Allowlist, NOT_DECODED};
use lazarus_session::host_view::{self, ConvItem, GraphStep};
use lazarus_session::record::{HostBlob, HostWrites};
use maud::{Markup, html};
use serde_json::Value;

use super::read::Loaded;
use super::text::long_text;
use super::{Ctx, seq_time};

/// What a host session is now, above its timeline; nothing for any other session.
pub(super) fn overview(l: &Loaded) -> Markup {
    let meta = l.summary.meta.as_ref();
    let host = meta.and_then(|m| m["host"].as_str());
    let name = meta
        .and_then(|m| m["host_id"].as_str())
        .unwrap_or(l.summary.id.as_str());
    let st = &l.timeline.state;
    match host {
        Some(host_view::LANGGRAPH) => {
            let steps = host_view::graph_steps(&st.host.graph, &Allowlist::strict());
            let parents: std::collections::HashSet<(&str, &str)> = steps
                .iter()
                .filter_map(|s| Some((s.ns.as_str(), s.parent_id.as_deref()?)))
                .collect();
            html! {
                section.thread #thread {
                    h2 { "Thread " code { (name) } " now: " (steps.len()) " checkpoint" @if steps.len() != 1 { "s" } }
                    @if steps.is_empty() { p.muted { "No checkpoint (the thread is empty or was deleted)." } }
                    ol.graph-steps {
                        @for (i, s) in steps.iter().enumerate() {
                            @let newest = !parents.contains(&(s.ns.as_str(), s.checkpoint_id.as_str()));
                            (step(s, newest, i + 3 >= steps.len()))
                        }
                    }
                }
            }
        }
        Some(_) => html! {
            section.conversation #conversation {
                h2 { "Conversation now: " (st.host.items.len()) " item" @if st.host.items.len() != 1 { "s" } }
                ol.chat {
                    @for (seq, v) in &st.host.items { (chat_item(*seq, v)) }
                }
            }
        },
        None => html! {},
    }
}

fn step(s: &GraphStep, newest: bool, open: bool) -> Markup {
    html! {
        li.graph-step data-checkpoint=(s.checkpoint_id) {
            details open[open] {
                summary {
                    strong { "step " (s.step.map_or("?".into(), |n| n.to_string())) }
                    " (" (s.source.as_deref().unwrap_or("?")) ")"
                    @if !s.ran.is_empty() { " after " strong.node { (s.ran.join(", ")) } }
                    @if !s.ns.is_empty() { " · subgraph " code { (s.ns) } }
                    @if !s.interrupts.is_empty() { " " span.pill.interrupt { "interrupted" } }
                    " · " span.muted { "checkpoint " code { (s.checkpoint_id) } " #" (s.seq) }
                }
                dl.channels {
                    @for (channel, v) in &s.values {
                        div { dt { (channel) } dd { (json(v)) } }
                    }
                }
                @for i in &s.interrupts {
                    div.interrupt-box { strong { "Interrupted, waiting for an answer: " } (json(i)) }
                }
                @let writes: Vec<_> = s.writes.iter().filter(|w| w.channel != host_view::INTERRUPT && !w.channel.starts_with("branch:to:")).collect();
                @if !writes.is_empty() {
                    p.muted { @if newest { "Pending writes (made after this checkpoint, not yet in one):" } @else { "Writes of the next step's tasks:" } }
                    ul.writes {
                        @for w in writes {
                            li { strong.node { (w.node) } " → " code { (w.channel) } (json(&w.value)) }
                        }
                    }
                }
            }
        }
    }
}

/// A value as pretty JSON; one outside the allowlist (or not readable) says so first.
fn json(v: &Value) -> Markup {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    html! {
        @if let Some(why) = not_decoded(v) {
            p.warn.not-decoded { "Not decoded (shown as stored): " (why) }
        }
        (long_text(&text))
    }
}

/// The first label of something not decoded in `v`.
fn not_decoded(v: &Value) -> Option<&str> {
    match v {
        Value::Object(o) => o
            .get(NOT_DECODED)
            .and_then(Value::as_str)
            .or_else(|| o.values().find_map(not_decoded)),
        Value::Array(a) => a.iter().find_map(not_decoded),
        _ => None,
    }
}

fn chat_item(seq: u64, v: &Value) -> Markup {
    match host_view::conv_item(v) {
        ConvItem::User(t) => bubble("user", "User", seq, html! { (long_text(&t)) }),
        ConvItem::Assistant(t) => bubble("assistant", "Assistant", seq, html! { (long_text(&t)) }),
        ConvItem::System(t) => bubble("system", "Instructions", seq, html! { (long_text(&t)) }),
        ConvItem::Reasoning(t) => bubble("reasoning", "Reasoning", seq, html! { (long_text(&t)) }),
        ConvItem::Call {
            call_id,
            name,
            arguments,
        } => bubble(
            "call",
            "Tool call",
            seq,
            html! { strong { (name) } " " span.msgid { (call_id) } (long_text(&arguments)) },
        ),
        ConvItem::Output { call_id, output } => bubble(
            "output",
            "Tool output",
            seq,
            html! { span.msgid { (call_id) } (long_text(&output)) },
        ),
        ConvItem::Other(v) => bubble("other", "Item", seq, json(&v)),
    }
}

fn bubble(class: &str, who: &str, seq: u64, body: Markup) -> Markup {
    html! {
        li class={ "chat-item " (class) } {
            div.meta { span.who { (who) } " " span.seq { "#" (seq) } }
            (body)
        }
    }
}

/// A host record in the timeline, decoded.
pub(super) fn record(ctx: &Ctx, seq: u64, ts: &str, kind: &str, data: &Value) -> Markup {
    let allow = Allowlist::strict();
    let blob = |b: &Value| match serde_json::from_value::<HostBlob>(b.clone()) {
        Ok(b) => host_view::value(&b, &allow),
        Err(_) => b.clone(),
    };
    let head = |what: Markup| html! { div.meta { strong { (what) } " " (seq_time(ctx, seq, ts)) } };
    match kind {
        "host_item" => {
            html! { (head(html! { "history item" })) ol.chat { (chat_item(seq, &data["item"])) } }
        }
        "host_items" => html! {
            (head(html! { "history items, added at once" }))
            ol.chat { @for v in data["items"].as_array().map(Vec::as_slice).unwrap_or_default() { (chat_item(seq, v)) } }
        },
        "host_pop" => head(html! { "popped the newest item (recorded at #" (data["seq"]) ")" }),
        "host_clear" => head(
            html! { "cleared: what was recorded through #" (data["through_seq"]) " left (the ledger keeps it)" },
        ),
        "host_call_intent" => html! {
            (head(html! { "call announced: " code { (data["tool"].as_str().unwrap_or("?")) } " " span.msgid { (data["call_id"].as_str().unwrap_or("?")) } }))
            @if let Some(a) = data["arguments"].as_str() { (long_text(a)) }
        },
        "host_call_outcome" => html! {
            (head(html! { "call ended " span.msgid { (data["call_id"].as_str().unwrap_or("?")) } }))
            (long_text(data["result"].as_str().unwrap_or("")))
        },
        "host_checkpoint" => {
            let meta = blob(&data["metadata"]);
            html! {
                (head(html! { "checkpoint " code { (data["checkpoint_id"].as_str().unwrap_or("?")) } " · step " (meta["step"]) " (" (meta["source"].as_str().unwrap_or("?")) ")" }))
                dl.channels {
                    @for c in data["channels"].as_array().map(Vec::as_slice).unwrap_or_default() {
                        @let channel = c["channel"].as_str().unwrap_or("?");
                        @if !channel.starts_with("branch:to:") && c["value"]["type"] != "empty" {
                            div { dt { (channel) } dd { (json(&blob(&c["value"]))) } }
                        }
                    }
                }
            }
        }
        "host_writes" | "host_pending_writes" => {
            match serde_json::from_value::<HostWrites>(data.clone()) {
                Ok(w) => html! {
                    (head(html! { "writes of " strong.node { (host_view::node_of(&w.task_path, &w.task_id)) } " against " code { (w.checkpoint_id) } }))
                    ul.writes {
                        @for one in &w.writes {
                            @if !one.channel.starts_with("branch:to:") {
                                li { code { (one.channel) } (json(&host_view::value(&one.value, &allow))) }
                            }
                        }
                    }
                },
                Err(_) => raw(ctx, seq, ts, kind, data),
            }
        }
        "host_forget" => head(html! {
            "forgot " (data["checkpoints"].as_array().map_or(0, Vec::len)) " checkpoint(s) and their writes ("
            (data["why"].as_str().unwrap_or("-")) "; the ledger keeps them)"
        }),
        _ => raw(ctx, seq, ts, kind, data),
    }
}

fn raw(ctx: &Ctx, seq: u64, ts: &str, kind: &str, data: &Value) -> Markup {
    html! {
        div.meta { strong { (kind) } " " (seq_time(ctx, seq, ts)) }
        pre { (serde_json::to_string_pretty(data).unwrap_or_default()) }
    }
}
