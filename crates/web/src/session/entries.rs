//! The timeline entries of the session page: inputs, system events, turns (the response,
//! its usage, the fork form), resume receipts, forks, stops, compactions and unreadable
//! records.

use std::collections::HashMap;

use lazarus_session::record::Item;
use maud::{Markup, html};

use super::cards::card;
use super::text::long_text;
use super::{Ctx, seq_time};
use crate::fmt::count;
use crate::timeline::{Body, CallCard, Entry, Turn};

pub(super) fn entry(ctx: &Ctx, e: &Entry) -> Markup {
    let class = match &e.body {
        Body::Input { .. } => "entry input",
        Body::Control(_) => "entry control",
        Body::Turn(_) => "entry turn",
        Body::Resume(_) => "entry receipt",
        Body::Fork(_) => "entry fork",
        Body::Import(_) => "entry fork",
        Body::Stop(_) => "entry stop",
        Body::Compaction(_) => "entry compaction",
        Body::Unreadable { .. } => "entry unreadable",
        Body::Host { .. } => "entry host",
        Body::World(_) => "entry world",
        Body::NeedsOwner(_) => "entry needs-owner",
    };
    html! {
        li class=(class) id=(e.key) data-seq=(e.seq) data-touched=(e.touched) {
            @match &e.body {
                Body::Input { input, answered_in } => {
                    div.meta {
                        span.who { (input.source) }
                        " " span.msgid title="message id (an input is recorded once per id)" { (input.input_id) }
                        " " (seq_time(ctx, e.seq, &e.ts))
                    }
                    div.text { (long_text(&input.text)) }
                    div.foot {
                        @match answered_in {
                            Some(t) => { "given to the model in turn " (t) }
                            None => span.pending { "pending: not yet given to the model" },
                        }
                    }
                }
                Body::Control(c) => {
                    div.meta {
                        span.who { "system event" } " " span.msgid title="input id" { (c.input_id) }
                        " " (seq_time(ctx, e.seq, &e.ts))
                    }
                    div.text { strong { (c.action) } @if let Some(r) = &c.reason { ": " (r) } }
                }
                Body::Turn(t) => { (turn(ctx, e, t)) }
                Body::Resume(r) => {
                    div.banner-head {
                        strong { "Resumed" } " · trigger " code { (r.trigger) } " · " (seq_time(ctx, e.seq, &e.ts))
                    }
                    dl.counts {
                        div { dt { "records replayed" } dd { (r.records_replayed) } }
                        div { dt { "calls reused" } dd { (r.calls_reused) } }
                        div { dt { "calls re-run" } dd { (r.calls_rerun) } }
                        div class=@if r.calls_in_doubt > 0 { "hl" } { dt { "calls in doubt" } dd { (r.calls_in_doubt) } }
                        @for d in &r.in_doubt {
                            div.wide.hl { dt { "not run again: " code { (d.call_id) } } dd { (d.tool) ": " (d.why) } }
                        }
                        @if let Some(w) = r.world_seq {
                            div.wide { dt { "world" } dd { @if w == 0 { "the one recorded with the session" } @else { "the one recorded at #" (w) } } }
                        }
                        div { dt { "calls not started" } dd { (r.calls_not_started) } }
                        @if let Some(m) = &r.mcp {
                            div class=@if m.calls_in_doubt > 0 { "hl" } { dt { "MCP calls" } dd { (m.calls_reused) " reused, " (m.calls_rerun) " re-run, " (m.calls_in_doubt) " in doubt" } }
                            @if m.tasks_reattached > 0 {
                                div class=@if m.tasks_lost > 0 { "hl" } { dt { "MCP tasks reattached" } dd { (m.tasks_reattached) " (" (m.tasks_finished_while_away) " finished while away, " (m.tasks_still_working) " still working, " (m.tasks_lost) " lost)" } }
                            }
                        }
                        div { dt { "processes terminated" } dd { (r.processes_terminated) } }
                        div { dt { "inputs pending" } dd { (r.inputs_pending) } }
                        div { dt { "open turn" } dd { @match r.open_turn { Some(t) => { "turn " (t) " requested again" }, None => "none" } } }
                        div class=@if !r.every_call_has_one_result { "hl" } { dt { "every call has one result" } dd { @if r.every_call_has_one_result { "yes" } @else { "no" } } }
                        div class=@if r.truncated_bytes > 0 { "hl" } {
                            dt { "crash debris cut" }
                            dd {
                                @if r.truncated_bytes == 0 { "none" } @else {
                                    (count(r.truncated_bytes)) " bytes"
                                    @if let Some(f) = &r.truncated_saved_to { ", saved to " code { (f) } }
                                }
                            }
                        }
                        @for a in &r.approvals {
                            div.wide {
                                dt { "waited for approval" }
                                dd {
                                    (a.tool) " " code { (a.call_id) } ": "
                                    @match (a.decision, &a.by) {
                                        (Some(d), Some(by)) => {
                                            strong { @if d == lazarus_session::record::Decision::Allow { "allowed" } @else { "denied" } }
                                            " by " (by)
                                            @if let Some(ms) = a.waited_ms { " after " (super::cards::duration(ms)) }
                                        }
                                        _ => "still waiting",
                                    }
                                }
                            }
                        }
                        @if let Some(sb) = &r.sandbox {
                            div.wide { dt { "shell sandbox" } dd { code { (sb.mode) } @if sb.network { ", network on" } @else { ", no network" } " — " (sb.detail) } }
                        }
                    }
                }
                Body::Fork(f) => {
                    div.banner-head {
                        strong { "Forked" } " from " a href={ "/sessions/" (f.parent) } { (f.parent) }
                        " at turn " (f.at_turn) " (its record #" (f.parent_seq) ") · " (seq_time(ctx, e.seq, &e.ts))
                    }
                    p.muted { "Everything above is the parent's history, copied; everything below is this session's own." }
                }
                Body::Import(i) => {
                    div.banner-head {
                        strong { "Imported" } " from " (i.agent)
                        @if let Some(v) = &i.agent_version { " " (v) }
                        " · " code { (i.source) } " · " (i.bytes) " bytes · sha256 " code { (i.sha256.get(..12).unwrap_or(&i.sha256)) }
                        " · " (seq_time(ctx, e.seq, &e.ts))
                    }
                    @for d in &i.dropped {
                        p.muted { "Not imported: " (d.count) " × " (d.what) " (" (d.why) ")" }
                    }
                }
                Body::Stop(s) => {
                    div.banner-head {
                        strong { "Stopped" } " · " (s.reason)
                        @if let Some(t) = s.turn { " · in turn " (t) }
                        " · " (seq_time(ctx, e.seq, &e.ts))
                    }
                    p.muted { "Work was left; a resume continues from here." }
                }
                Body::Compaction(c) => {
                    div.banner-head {
                        strong { "Compacted" } " · " code { (c.trigger) }
                        " · records #" (c.from_seq) "–#" (c.through_seq) " summarised · about "
                        (count(c.tokens_before)) " → " (count(c.tokens_after)) " tokens sent"
                        " · " (seq_time(ctx, e.seq, &e.ts))
                    }
                    p.muted { "From here on the model gets this summary instead of the records above; they stay in the ledger." }
                    div.text { (long_text(&c.summary)) }
                }
                Body::World(w) => {
                    div.banner-head {
                        strong { @match w.reason {
                            lazarus_session::record::WorldReason::Changed => "World changed",
                            lazarus_session::record::WorldReason::Adopted => "World recorded",
                            lazarus_session::record::WorldReason::Created => "World",
                        } }
                        " by " (w.by)
                        @if !w.changed.is_empty() { " · " (w.changed.join(", ")) }
                        " · " (seq_time(ctx, e.seq, &e.ts))
                    }
                    (super::world::facts(w))
                }
                Body::NeedsOwner(n) => {
                    div.banner-head {
                        strong { "Left alone" } " by " (n.by) " · " (seq_time(ctx, e.seq, &e.ts))
                    }
                    p { (n.reason) }
                    p.muted { "Resume it in its world with " code { (n.resume_with) } }
                }
                Body::Host { kind, data } => { (super::host::record(ctx, e.seq, &e.ts, kind, data)) }
                Body::Unreadable { kind, data, why } => {
                    div.meta { strong { "record " (kind) } " " (seq_time(ctx, e.seq, &e.ts)) }
                    p.warn { (why) }
                    pre { (serde_json::to_string_pretty(data).unwrap_or_default()) }
                }
            }
        }
    }
}

fn turn(ctx: &Ctx, e: &Entry, t: &Turn) -> Markup {
    let cards: HashMap<&str, &CallCard> = t.calls.iter().map(|c| (c.call_id.as_str(), c)).collect();
    html! {
        div.meta {
            span.who { "turn " (t.turn) } " " (seq_time(ctx, e.seq, &e.ts))
            @if !t.inputs.is_empty() {
                " · gave the model "
                @for (i, s) in t.inputs.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href={ "#r" (s) } { "#" (s) }
                }
            }
        }
        @match &t.response {
            None => {
                p.waiting {
                    @if ctx.running { "waiting for the model…" }
                    @else { "no response recorded: the request was cut off (a resume requests this turn again)" }
                }
            }
            Some(resp) => {
                @let r = &resp.data;
                @if let Some(f) = &r.failure {
                    div.failure {
                        strong { "The model request failed" }
                        @if let Some(st) = f.status { " (HTTP " (st) ")" }
                        ": " (f.message)
                        @if f.transient { " — transient: running again may succeed" }
                    }
                }
                @for item in &r.items {
                    @match item {
                        Item::Text { text } => div.text.model { (long_text(text)) },
                        Item::Reasoning { text } => details.reasoning {
                            summary { "reasoning · " (count(text.chars().count() as u64)) " characters" }
                            pre { (text) }
                        },
                        Item::ProviderReasoning { api, text, .. } => details.reasoning {
                            summary {
                                "reasoning (" (api) ", sent back verbatim) · "
                                @if text.is_empty() { "redacted" } @else { (count(text.chars().count() as u64)) " characters" }
                            }
                            pre { (text) }
                        },
                        Item::ToolCall { call_id, .. } => {
                            @if let Some(c) = cards.get(call_id.as_str()) { (card(ctx, e, t, c)) }
                        },
                    }
                }
                div.usage {
                    @if let Some(m) = &r.model { code { (m) } " · " }
                    @if let Some(u) = &r.usage {
                        @if let Some(p) = u.prompt_tokens {
                            (count(p)) " prompt"
                            @if let Some(k) = u.cached_tokens { " (" (count(k)) " cached)" }
                            " · "
                        }
                        @if let Some(c) = u.completion_tokens { (count(c)) " completion" " · " }
                        @if let Some(tot) = u.total_tokens { (count(tot)) " total tokens" " · " }
                    }
                    @if let Some(sr) = &r.stop_reason { "finish: " (sr) " · " }
                    @if !r.attempts.is_empty() {
                        span title=(attempts_text(r)) { (r.attempts.len()) " failed attempt(s) retried · " }
                    }
                    (seq_time(ctx, resp.seq, &resp.ts))
                }
            }
        }
        @if t.complete {
            @if let Some(children) = ctx.forks_at.get(&t.turn) {
                p.forked-here {
                    "↳ forked after this turn: "
                    @for c in children { a href={ "/sessions/" (c) } { (c) } " " }
                }
            }
            @if ctx.gateway {
                details.fork-action {
                    summary { "Fork after turn " (t.turn) }
                    form.fork-form data-turn=(t.turn) {
                        label { "new session id " input name="id" placeholder="(a new UUID)" pattern="[A-Za-z0-9_][A-Za-z0-9._\\-]{0,127}" autocomplete="off"; }
                        " " button type="submit" { "Fork" }
                        span.form-error hidden {}
                    }
                }
            }
        }
    }
}

fn attempts_text(r: &lazarus_session::record::Response) -> String {
    r.attempts
        .iter()
        .map(|a| {
            format!(
                "after {} ms: {}",
                a.waited_ms,
                match (&a.status, &a.error) {
                    (Some(s), Some(e)) => format!("HTTP {s}: {e}"),
                    (Some(s), None) => format!("HTTP {s}"),
                    (None, Some(e)) => e.clone(),
                    (None, None) => "failed".into(),
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
