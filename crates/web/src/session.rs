//! The session page: the head (status, workspace, model, times, sizes, lineage), the damage
//! report when the log has bad lines, and the timeline; and the fragment the live page asks
//! for when records arrive (the entries changed after a seq, by id).

use std::collections::HashMap;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use lazarus_ledger::LedgerError;
use lazarus_session::record::{Item, OutcomeStatus};
use lazarus_session::{SessionError, SessionId, SessionSummary, Status, Store, StoredRecord};
use maud::{Markup, html};
use serde::Deserialize;

use crate::fmt::{self, bytes, count, status_badge};
use crate::page::{self, Kind};
use crate::timeline::{self, Body, CallCard, CallStage, Entry, Timeline, Turn};
use crate::{Mode, Web, WebState};

/// Records read from the store per call.
const READ_PAGE: usize = 1000;

/// One bad line of a session's log.
#[derive(Debug, Clone)]
pub struct Damage {
    pub path: String,
    pub line: u64,
    pub offset: u64,
    pub problem: String,
    /// Crash debris (a torn tail): invisible to readers, cut and saved aside at the next
    /// open for writing.
    pub debris: bool,
}

/// Everything the page shows of one session.
pub struct Loaded {
    pub summary: SessionSummary,
    pub status: Status,
    pub timeline: Timeline,
    /// Why reading stopped before the end (the records before it are shown).
    pub read_error: Option<String>,
    pub damage: Vec<Damage>,
    /// Sessions forked from this one, with the turn they were forked at.
    pub children: Vec<(SessionId, Option<u64>)>,
    pub running: bool,
}

/// The session's records from the store, as many as can be read: when a page of records
/// fails, the good records before the bad one are read one at a time, and the error is kept.
pub fn read_records(
    store: &dyn Store,
    id: &SessionId,
    mut push: impl FnMut(StoredRecord),
) -> Option<SessionError> {
    let mut after = 0;
    loop {
        match store.records(id, after, READ_PAGE) {
            Ok(batch) => {
                let n = batch.len();
                for r in batch {
                    after = r.seq;
                    push(r);
                }
                if n < READ_PAGE {
                    return None;
                }
            }
            Err(_) => loop {
                match store.records(id, after, 1) {
                    Ok(mut one) => match one.pop() {
                        Some(r) => {
                            after = r.seq;
                            push(r);
                        }
                        None => return None,
                    },
                    Err(e) => return Some(e),
                }
            },
        }
    }
}

/// The fork point recorded in `child` (the record right after its copied prefix).
pub(crate) fn fork_point_of(store: &dyn Store, child: &SessionId) -> Option<u64> {
    let mut after = 0;
    loop {
        let batch = store.records(child, after, READ_PAGE).ok()?;
        for r in &batch {
            if r.kind == "fork" {
                return r.data["at_turn"].as_u64();
            }
            after = r.seq;
        }
        if batch.len() < READ_PAGE {
            return None;
        }
    }
}

/// Children whose fork turn is looked up, at most (each lookup reads the child's prefix).
const CHILDREN_MAX: usize = 50;

/// Reads one session for its page (blocking).
pub fn load(web: &Web, id: &SessionId) -> Result<Loaded, SessionError> {
    let store = &*web.cfg.store;
    let summary = store.summary(id)?;
    let mut builder = timeline::Builder::new(timeline::header_of(&summary));
    let read_error = read_records(store, id, |r| builder.push(r));
    let timeline = builder.finish();
    let live = web.gateway().and_then(|g| g.live_status(id));
    // open in this gateway: its live state (the gateway holds the writer lock of an idle
    // session too, which the store's summary would take for a run); else the store's word
    let running = match live {
        Some(st) => st == Status::Running,
        None => summary.status == Status::Running,
    };
    let status = if running {
        Status::Running
    } else if read_error.is_some() {
        Status::Corrupt
    } else {
        timeline.status()
    };
    let mut damage = Vec::new();
    if let Some(local) = &web.cfg.local {
        // verify's report: every bad line, crash debris included (not while a writer may be
        // appending the last line right now)
        if (read_error.is_some() || !running)
            && let Ok(report) =
                lazarus_ledger::verify_file(&local.path_of(id), local.ledger_options())
        {
            damage.extend(report.problems.iter().map(|f| Damage {
                path: report.path.display().to_string(),
                line: f.line,
                offset: f.offset,
                problem: f.problem.to_string(),
                debris: f.recoverable,
            }));
        }
    }
    if damage.is_empty()
        && let Some(SessionError::Ledger(LedgerError::Corrupt(c))) = &read_error
    {
        damage.push(Damage {
            path: c.path.display().to_string(),
            line: c.line,
            offset: c.offset,
            problem: match &c.context {
                Some(ctx) => format!("{} ({ctx})", c.problem),
                None => c.problem.to_string(),
            },
            debris: false,
        });
    }
    let children = match web.list_recent() {
        Ok(list) => list
            .iter()
            .filter(|s| s.parent.as_deref() == Some(id.as_str()))
            .enumerate()
            .map(|(i, s)| {
                let turn = (i < CHILDREN_MAX)
                    .then(|| fork_point_of(store, &s.id))
                    .flatten();
                (s.id.clone(), turn)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    Ok(Loaded {
        summary,
        status,
        timeline,
        read_error: read_error.map(|e| e.to_string()),
        damage,
        children,
        running,
    })
}

fn path_id(p: Result<Path<String>, PathRejection>) -> Result<SessionId, String> {
    let Path(raw) = p.map_err(|e| e.body_text())?;
    SessionId::parse(&raw).map_err(|e| e.to_string())
}

async fn load_async(web: &WebState, id: SessionId) -> Result<Loaded, Response> {
    let w = web.clone();
    let r = tokio::task::spawn_blocking(move || load(&w, &id)).await;
    match r {
        Ok(Ok(l)) => Ok(l),
        Ok(Err(e @ SessionError::NotFound { .. })) => Err(page::error(
            web,
            StatusCode::NOT_FOUND,
            "No such session",
            &e.to_string(),
        )),
        Ok(Err(e)) => Err(page::error(
            web,
            StatusCode::INTERNAL_SERVER_ERROR,
            "This session cannot be read",
            &e.to_string(),
        )),
        Err(e) => Err(page::error(
            web,
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error",
            &e.to_string(),
        )),
    }
}

#[derive(Debug, Deserialize)]
pub struct PageQuery {
    /// Show records from this seq on (default: the latest `records_per_page`).
    from: Option<u64>,
}

pub async fn page(
    State(web): State<WebState>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Response {
    let id = match path_id(id) {
        Ok(id) => id,
        Err(e) => return page::error(&web, StatusCode::BAD_REQUEST, "Not a session id", &e),
    };
    let from = q.ok().and_then(|Query(q)| q.from);
    let l = match load_async(&web, id.clone()).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let limit = web.cfg.limits.records_per_page.max(1);
    let from = from
        .unwrap_or_else(|| l.timeline.last_seq.saturating_sub(limit - 1))
        .max(1);
    let title = l.summary.title.clone().unwrap_or_else(|| id.to_string());
    let ctx = Ctx::new(&web, &l);
    let stream = match web.cfg.mode {
        Mode::Gateway(_) => format!("/v1/sessions/{id}/stream"),
        Mode::ReadOnly => format!("/sessions/{id}/live"),
    };
    let hidden = l.timeline.visible_from(0).count() - l.timeline.visible_from(from).count();
    let main = html! {
        section #session data-session=(id) data-stream=(stream)
            data-last-seq=(l.timeline.last_seq) data-fragment={ "/sessions/" (id) "/timeline" } {
            (head(&ctx, &l))
            (damage(&l))
            div.actions {
                a href={ "/sessions/" (id) "/tree" } { "Fork tree" }
                a href={ "/sessions/" (id) "/export.jsonl" } download={ (id) ".jsonl" } data-export { "Download JSONL" }
                span #live-note .muted {}
            }
            @if hidden > 0 {
                p.earlier {
                    (count(hidden as u64)) " earlier entries are not shown (the page shows records from #" (from) " on). "
                    a href={ "/sessions/" (id) "?from=1" } { "Show every record" }
                }
            }
            ol #timeline .timeline {
                @for e in l.timeline.visible_from(from) { (entry(&ctx, e)) }
            }
            @if l.timeline.entries.is_empty() && l.read_error.is_none() {
                p.muted #empty-note { "Nothing recorded yet." }
            }
            @if ctx.gateway { (composer(&id)) }
        }
    };
    page::layout(&web, &title, Kind::Session, main).into_response()
}

#[derive(Debug, Deserialize)]
pub struct FragmentQuery {
    after: u64,
}

/// The entries changed after `after`, the head and the damage report: what the live page
/// swaps in (by element id) when the stream says records arrived.
pub async fn fragment(
    State(web): State<WebState>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<FragmentQuery>, QueryRejection>,
) -> Response {
    let id = match path_id(id) {
        Ok(id) => id,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let Ok(Query(q)) = q else {
        return (StatusCode::BAD_REQUEST, "give ?after=SEQ\n").into_response();
    };
    let l = match load_async(&web, id).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let ctx = Ctx::new(&web, &l);
    html! {
        div #update data-last-seq=(l.timeline.last_seq) {
            (head(&ctx, &l))
            (damage(&l))
            ol { @for e in l.timeline.visible_from(q.after + 1) { (entry(&ctx, e)) } }
        }
    }
    .into_response()
}

/// What rendering needs besides the entry.
struct Ctx<'a> {
    now: Timestamp,
    gateway: bool,
    running: bool,
    id: &'a str,
    forks_at: HashMap<u64, Vec<&'a SessionId>>,
}

impl<'a> Ctx<'a> {
    fn new(web: &Web, l: &'a Loaded) -> Self {
        let mut forks_at: HashMap<u64, Vec<&SessionId>> = HashMap::new();
        for (child, turn) in &l.children {
            if let Some(t) = turn {
                forks_at.entry(*t).or_default().push(child);
            }
        }
        Ctx {
            now: Timestamp::now(),
            gateway: web.gateway().is_some(),
            running: l.running,
            id: l.summary.id.as_str(),
            forks_at,
        }
    }
}

fn head(ctx: &Ctx, l: &Loaded) -> Markup {
    let s = &l.summary;
    let tl = &l.timeline;
    let calls = tl.calls().count();
    let in_doubt = tl.in_doubt_calls();
    let model = tl.model.clone().or_else(|| {
        s.meta
            .as_ref()
            .and_then(|m| m["model"].as_str())
            .map(str::to_string)
    });
    html! {
        div #session-head {
            h1 { (s.title.as_deref().unwrap_or(s.id.as_str())) }
            p.session-status {
                (status_badge(l.status))
                @if in_doubt > 0 {
                    " " span.pill.in-doubt-pill { (in_doubt) " in doubt" }
                }
                @if tl.receipts > 0 {
                    " " span.pill { (tl.receipts) @if tl.receipts == 1 { " resume" } @else { " resumes" } }
                }
            }
            dl.facts {
                div { dt { "id" } dd { code { (s.id) } } }
                div { dt { "workspace" } dd { @match &s.workspace { Some(w) => code title=(w) { (crate::list::short_path(w)) }, None => span.muted { "—" } } } }
                div { dt { "model" } dd { @match &model { Some(m) => code { (m) }, None => span.muted { "not recorded" } } } }
                div { dt { "created" } dd { (fmt::time(&s.created_at, &ctx.now)) } }
                div { dt { "last activity" } dd { (fmt::time(&s.updated_at, &ctx.now)) } }
                div { dt { "records" } dd { (count(tl.last_seq)) } }
                div { dt { "size" } dd { (bytes(s.bytes)) } }
                div { dt { "turns" } dd { (tl.state.turn) } }
                div { dt { "tool calls" } dd { (calls) } }
                div { dt { "tokens" } dd { (count(tl.tokens.total)) } }
                @if let Some(p) = &s.parent {
                    div { dt { "parent" } dd {
                        a href={ "/sessions/" (p) } { (p) }
                        @if let Some(f) = &tl.fork { " at turn " (f.at_turn) }
                    } }
                }
                @if !l.children.is_empty() {
                    div { dt { "forks" } dd.forks {
                        @for (c, turn) in &l.children {
                            a href={ "/sessions/" (c) } { (c) }
                            @if let Some(t) = turn { span.muted { " (turn " (t) ")" } }
                            " "
                        }
                    } }
                }
            }
            @if let Some((seq, why)) = &tl.replay_error {
                div.warn-box {
                    strong { "Record #" (seq) " breaks the session's rules: " }
                    (why)
                    " The records are shown as written; a resume would refuse this log (run "
                    code { "lazarus sessions verify " (ctx.id) } ")."
                }
            }
        }
    }
}

fn damage(l: &Loaded) -> Markup {
    html! {
        div #damage {
            @if l.read_error.is_some() || !l.damage.is_empty() {
                section.damage {
                    @let corrupt = l.read_error.is_some() || l.damage.iter().any(|d| !d.debris);
                    h2 { @if corrupt { "Damaged log" } @else { "Crash debris at the end of the log" } }
                    @if let Some(e) = &l.read_error {
                        p { "Reading stopped at a bad line; the " (count(l.timeline.last_seq)) " records before it are shown below." }
                        pre.error-text { (e) }
                    }
                    @if !l.damage.is_empty() {
                        table.damage-lines {
                            thead { tr { th { "file" } th { "line" } th { "byte offset" } th { "problem" } th { "" } } }
                            tbody {
                                @for d in &l.damage {
                                    tr {
                                        td { code { (d.path) } }
                                        td.num { (d.line) }
                                        td.num { (d.offset) }
                                        td { (d.problem) }
                                        td { @if d.debris { "crash debris: invisible to readers, cut (and saved beside the file) at the next open" } @else { "corruption" } }
                                    }
                                }
                            }
                        }
                    }
                    @if corrupt {
                        p {
                            code { "lazarus sessions verify " (l.summary.id) } " reports every bad line; "
                            code { "lazarus sessions repair " (l.summary.id) } " cuts the log back to the last good record and saves the removed bytes beside it."
                        }
                    }
                }
            }
        }
    }
}

fn seq_time(ctx: &Ctx, seq: u64, ts: &str) -> Markup {
    html! { span.seq title="record seq" { "#" (seq) } " " (fmt::time(ts, &ctx.now)) }
}

fn entry(ctx: &Ctx, e: &Entry) -> Markup {
    let class = match &e.body {
        Body::Input { .. } => "entry input",
        Body::Control(_) => "entry control",
        Body::Turn(_) => "entry turn",
        Body::Resume(_) => "entry receipt",
        Body::Fork(_) => "entry fork",
        Body::Stop(_) => "entry stop",
        Body::Compaction(_) => "entry compaction",
        Body::Unreadable { .. } => "entry unreadable",
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
                        div { dt { "calls not started" } dd { (r.calls_not_started) } }
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

fn card(ctx: &Ctx, e: &Entry, t: &Turn, c: &CallCard) -> Markup {
    let stage = c.stage();
    let cut_off = stage == CallStage::Started && !ctx.running;
    let (stage_class, state) = match stage {
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
                span.tool { (c.name) }
                " " code.callid title="call id" { (c.call_id) }
                @if let Some(i) = &c.intent {
                    " " span.idem { @if i.data.idempotent { "idempotent" } @else { "not idempotent" } }
                }
                " " span.call-state { (state) }
            }
            ol.steps {
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
            div.args { (arguments(&c.arguments)) }
            @if cut_off {
                div.notice.pending-doubt {
                    strong { "Cut off while running." }
                    " Its effect is unknown. At resume it is run again if it is idempotent; otherwise it is closed as in doubt and the model is told so — never silently run twice."
                }
            }
            @if let Some(o) = &c.outcome {
                @if c.in_doubt() {
                    div.notice.doubt {
                        strong { "In doubt." }
                        " This call was cut off while it ran; Lazarus did not run it again. The model received this notice:"
                        pre.notice-text { (o.data.result) }
                    }
                } @else {
                    div.result { (long_text(&o.data.result)) }
                }
            }
        }
    }
}

fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms / 1000) % 60)
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

/// Lines kept at each end of a long text.
const HEAD_LINES: usize = 12;
const TAIL_LINES: usize = 12;
/// Bytes kept at each end at most (a text without line breaks).
const END_BYTES: usize = 2_000;

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where a long text splits into a shown head, a collapsed middle and a shown tail:
/// `None` when it is short enough to show whole.
pub fn split_long(text: &str) -> Option<(usize, usize)> {
    let lines = text.split_inclusive('\n').count();
    if lines <= HEAD_LINES + TAIL_LINES + 4 && text.len() <= 2 * END_BYTES + 1_000 {
        return None;
    }
    // head: the first HEAD_LINES lines, at most END_BYTES
    let mut head = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i == HEAD_LINES || head + l.len() > END_BYTES {
            break;
        }
        head += l.len();
    }
    if head == 0 {
        head = floor_char(text, END_BYTES.min(text.len()));
    }
    // tail: the last TAIL_LINES lines (a final line break ends the last one), at most
    // END_BYTES
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut tail = text.len();
    let mut pos = body.len();
    for _ in 0..TAIL_LINES {
        let start = body[..pos].rfind('\n').map_or(0, |nl| nl + 1);
        if text.len() - start > END_BYTES {
            break;
        }
        tail = start;
        if start == 0 {
            break;
        }
        pos = start - 1;
    }
    if tail == text.len() {
        tail = floor_char(text, text.len().saturating_sub(END_BYTES));
        while !text.is_char_boundary(tail) {
            tail += 1;
        }
    }
    let tail = tail.max(head);
    (tail > head).then_some((head, tail))
}

/// A text in a `<pre>`; a long one shows its head and tail with the middle collapsed (all of
/// it readable without the script).
fn long_text(text: &str) -> Markup {
    match split_long(text) {
        None => html! { pre { (text) } },
        Some((head, tail)) => {
            let middle = &text[head..tail];
            let lines = middle.matches('\n').count();
            html! {
                div.long {
                    pre.head { (&text[..head]) }
                    details.middle {
                        summary { "… " (count(lines as u64)) " more lines (" (bytes(middle.len() as u64)) ") — show all" }
                        pre { (middle) }
                    }
                    pre.tail { (&text[tail..]) }
                }
            }
        }
    }
}

/// The message box (gateway only): the script sends it with a message id chosen when the
/// text was typed, so sending twice (a double click, a retry after an error) records it once.
fn composer(id: &SessionId) -> Markup {
    html! {
        form #composer .composer data-session=(id) {
            label for="composer-text" { "Send a message" }
            textarea #composer-text name="text" rows="3" required placeholder="Message to the agent" {}
            div.composer-row {
                button type="submit" { "Send" }
                span.muted.msgid-note { "message id " code #composer-id {} }
                span #composer-status {}
            }
            noscript { p.muted { "Sending needs JavaScript (the request carries the token in a header)." } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_keep_head_and_tail_and_lose_nothing() {
        let short = "a\nb\nc\n";
        assert_eq!(split_long(short), None);
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let (h, t) = split_long(&text).unwrap();
        assert!(text[..h].starts_with("line 0\n") && text[..h].ends_with("line 11\n"));
        assert!(text[t..].ends_with("line 499\n"), "{:?}", &text[t..]);
        assert!(text[t..].starts_with("line 488\n"), "{:?}", &text[t..]);
        // one huge line of multibyte characters: cut at char boundaries
        let wide = "é".repeat(10_000);
        let (h, t) = split_long(&wide).unwrap();
        assert!(wide.is_char_boundary(h) && wide.is_char_boundary(t) && h < t);
        assert!(h <= END_BYTES && wide.len() - t <= END_BYTES + 1);
    }
}
