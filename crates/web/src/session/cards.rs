//! The tool-call cards of a turn: intent → start → outcome, the arguments, the result, and
//! the notices for a call cut off while running or closed as in doubt.

use lazarus_session::record::{Approval, Decision, OutcomeStatus};
use maud::{Markup, html};

use super::text::long_text;
use super::{Ctx, seq_time};
use crate::timeline::{CallCard, CallStage, Entry, Turn};

fn outcome_word(s: OutcomeStatus) -> &'static str {
    match s {
        OutcomeStatus::Ok => "ok",
        OutcomeStatus::Error => "error",
        OutcomeStatus::Timeout => "timeout",
        OutcomeStatus::Cancelled => "cancelled",
        OutcomeStatus::InDoubt => "in doubt",
        OutcomeStatus::NotRun => "not run",
    }
}

pub(super) fn card(ctx: &Ctx, e: &Entry, t: &Turn, c: &CallCard) -> Markup {
    let stage = c.stage();
    let cut_off = stage == CallStage::Started && !ctx.running;
    let (stage_class, state) = match stage {
        CallStage::Asked if c.awaits_decision() => ("awaiting", "waits for approval".to_string()),
        CallStage::Asked => ("asked", "not started".to_string()),
        CallStage::Intended => ("intended", "intended, not started".to_string()),
        CallStage::Started if ctx.running => ("started", "running".to_string()),
        CallStage::Started => (
            "started",
            "cut off while running: effect unknown".to_string(),
        ),
        CallStage::Done => (
            "done",
            c.outcome
                .as_ref()
                .map(|o| outcome_word(o.data.status).to_string())
                .unwrap_or_default(),
        ),
    };
    let idx = t.calls.iter().position(|x| std::ptr::eq(x, c)).unwrap_or(0);
    let mut class = format!("call stage-{stage_class}");
    if c.in_doubt() {
        class.push_str(" in-doubt");
    }
    if cut_off {
        class.push_str(" cut-off");
    }
    if let Some(o) = &c.outcome {
        class.push_str(match o.data.status {
            OutcomeStatus::Ok => " out-ok",
            OutcomeStatus::Error | OutcomeStatus::Timeout => " out-error",
            _ => " out-other",
        });
    }
    html! {
        div class=(class) id={ (e.key) "-call" (idx) } data-call-id=(c.call_id) {
            div.call-head {
                span.tool { (marked(&c.name)) }
                " " code.callid title="call id" { (c.call_id) }
                @if let Some(i) = &c.intent {
                    " " span.idem { @if i.data.idempotent { "idempotent" } @else { "not idempotent" } }
                }
                " " span.call-state { (state) }
            }
            ol.steps {
                @if let Some(r) = &c.approval_request {
                    li.step.on.approval-step {
                        "approval asked " (seq_time(ctx, r.seq, &r.ts))
                        @match &c.approval {
                            Some(d) => {
                                " · " strong.decision { (decision_words(&d.data)) }
                                " by " (d.data.by) " (" (d.data.scope.as_str()) ")"
                                @if let Some(w) = waited(&r.data.requested_at, &d.data.decided_at) { " after " (w) }
                                " " (seq_time(ctx, d.seq, &d.ts))
                                @if let Some(why) = d.data.reason.as_deref().filter(|w| !w.trim().is_empty()) {
                                    " · reason: " q.decision-reason { (marked(why)) }
                                }
                            }
                            None => { " · " span.muted { "no decision yet" } }
                        }
                    }
                }
                li class=@if c.intent.is_some() { "step on" } @else { "step" } {
                    "intent " @match &c.intent { Some(s) => (seq_time(ctx, s.seq, &s.ts)), None => span.muted { "—" } }
                }
                li class=@if c.start.is_some() { "step on" } @else { "step" } {
                    "start "
                    @match &c.start {
                        Some(s) => {
                            (seq_time(ctx, s.seq, &s.ts))
                            @if let Some(p) = &s.data.process { " · process group " (p.pgid) }
                        }
                        None => span.muted { "—" }
                    }
                }
                @if let Some(k) = &c.task {
                    li.step.on.task-step {
                        "task " code.task-id title="the MCP server's task id" { (k.data.task_id) }
                        " · " strong.task-status { (task_status(c)) }
                        " · " span.task-age title="since the task was created" { (task_age(ctx, c)) }
                        " " (seq_time(ctx, k.seq, &k.ts))
                        @if let Some(m) = c.task_status.as_ref().and_then(|s| s.data.message.as_deref()) {
                            " · " q { (marked(m)) }
                        }
                    }
                }
                li class=@if c.outcome.is_some() { "step on" } @else { "step" } {
                    "outcome "
                    @match &c.outcome {
                        Some(o) => {
                            strong { (outcome_word(o.data.status)) }
                            @if let Some(x) = o.data.exit_code { " · exit " (x) }
                            @if let Some(d) = o.data.duration_ms { " · " (duration(d)) }
                            " " (seq_time(ctx, o.seq, &o.ts))
                        }
                        None => span.muted { "—" }
                    }
                }
            }
            @if c.approval_request.is_some() {
                // what a person decides on: the argument that runs first, every one whole
                div.args.approval-args { (arguments_whole(&c.name, &c.arguments)) }
            } @else {
                div.args { (arguments(&c.arguments)) }
            }
            @if let (Some(r), true) = (&c.approval_request, c.awaits_decision()) {
                div.notice.awaiting-approval {
                    strong { "Waits for approval." }
                    " " (marked(&r.data.reason)) " (" (r.data.mode) "). Nothing of this call runs until a person allows it; denied, it never runs and the model is told why."
                    @if ctx.gateway {
                        form.approval-form data-session=(ctx.id) data-call=(c.call_id) {
                            input type="text" name="reason" maxlength="4096" placeholder="reason (optional)" {}
                            button type="submit" name="decision" value="allow" data-scope="once" { "Allow" }
                            button type="submit" name="decision" value="allow" data-scope="session" { "Allow for this session" }
                            button type="submit" name="decision" value="deny" data-scope="once" .deny { "Deny" }
                            span.approval-status {}
                        }
                    } @else {
                        p.muted { "Answer with " code { "lazarus sessions approve " (ctx.id) " " (c.call_id) } " or " code { "lazarus sessions deny " (ctx.id) " " (c.call_id) } "." }
                    }
                }
            }
            @if let Some(d) = c.approval.as_ref().filter(|d| d.data.decision == Decision::Deny) {
                div.notice.denied {
                    strong { "Denied" } " by " (d.data.by)
                    @if let Some(why) = &d.data.reason { ": " (marked(why)) }
                    ". It never ran."
                }
            }
            @if cut_off {
                div.notice.pending-doubt {
                    strong { "Cut off while running." }
                    @if c.task.is_some() {
                        " Its task is recorded: at resume the MCP server is asked for it again (never a second call); it is in doubt only if the server no longer knows it."
                    } @else {
                        " Its effect is unknown. At resume it is run again if it is idempotent; otherwise it is closed as in doubt and the model is told so — never silently run twice."
                    }
                }
            }
            @if let Some(o) = &c.outcome {
                @if c.in_doubt() {
                    div.notice.doubt {
                        strong { "In doubt." }
                        " This call was cut off while it ran; Lazarus did not run it again"
                        @if let Some(why) = &c.in_doubt_why { " because " (why) }
                        ". The model received this notice:"
                        pre.notice-text { (o.data.result) }
                    }
                } @else {
                    div.result { (long_text(&o.data.result)) }
                }
            }
        }
    }
}

/// The task's latest recorded status.
fn task_status(c: &CallCard) -> String {
    let status = c.task_status.as_ref().map(|s| s.data.status);
    status
        .or(c.task.as_ref().map(|k| k.data.status))
        .map(|s| s.as_str().replace('_', " "))
        .unwrap_or_default()
}

/// How old the task is: from its handle to its end (the terminal status, else the outcome),
/// or to now while it has none.
fn task_age(ctx: &Ctx, c: &CallCard) -> String {
    let Some(k) = &c.task else {
        return String::new();
    };
    let ended = c
        .task_status
        .as_ref()
        .filter(|s| s.data.status.is_terminal())
        .map(|s| s.ts.clone())
        .or_else(|| c.outcome.as_ref().map(|o| o.ts.clone()));
    let to = ended.unwrap_or_else(|| lazarus_ledger::clock::format_ts(ctx.now));
    lazarus_ledger::clock::millis_between(&k.data.created_at, &to)
        .map(duration)
        .unwrap_or_else(|| "age unknown".into())
}

fn decision_words(a: &Approval) -> &'static str {
    match a.decision {
        Decision::Allow => "allowed",
        Decision::Deny => "denied",
    }
}

/// From a request's time to its decision's, in words.
fn waited(from: &str, to: &str) -> Option<String> {
    lazarus_ledger::clock::millis_between(from, to).map(duration)
}

pub(super) fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms / 1000) % 60)
    }
}

/// The arguments of a call a person decides (or decided) on, as every approval surface
/// shows them (`lazarus_session::approval::arguments_shown`): the one the tool executes
/// first, each whole in its own block — never collapsed, never cut — with invisible format
/// characters marked.
fn arguments_whole(tool: &str, raw: &str) -> Markup {
    let shown = lazarus_session::approval::arguments_shown(tool, raw);
    html! {
        dl.arguments {
            @for (i, (key, value)) in shown.iter().enumerate() {
                dt class=@if i == 0 { "arg executed" } @else { "arg" } { (marked(key)) }
                dd { pre { (marked(value)) } }
            }
        }
    }
}

/// `text` with each Unicode format character (bidirectional controls, zero-width
/// characters: `lazarus_session::unicode::is_format`) shown as a visible mark naming it, so
/// what a person reads is what the text holds.
pub(super) fn marked(text: &str) -> Markup {
    if !text.chars().any(lazarus_session::unicode::is_format) {
        return html! { (text) };
    }
    let mut parts: Vec<(&str, Option<char>)> = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if lazarus_session::unicode::is_format(c) {
            parts.push((&text[start..at], Some(c)));
            start = at + c.len_utf8();
        }
    }
    parts.push((&text[start..], None));
    html! {
        @for (plain, mark) in &parts {
            (plain)
            @if let Some(c) = mark {
                @let code = format!("U+{:04X}", *c as u32);
                span.format-char title={ "an invisible format character (" (code) ") is here" } { "⟨" (code) "⟩" }
            }
        }
    }
}

/// Tool arguments: pretty JSON when they are JSON (the model wrote them; may be invalid).
fn arguments(raw: &str) -> Markup {
    let pretty = serde_json::from_str::<serde_json::Value>(raw)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok());
    html! {
        @match pretty {
            Some(p) => { (long_text(&p)) }
            None => { (long_text(raw)) span.muted { " (not valid JSON)" } }
        }
    }
}
