//! The session page: the head (status, workspace, model, times, sizes, lineage), the damage
//! report when the log has bad lines, and the timeline; and the fragment the live page asks
//! for when records arrive (the entries changed after a seq, by id).
//!
//! This module holds the two handlers and what every part of the page shares (`Ctx`,
//! `seq_time`); reading a session is in `read`, its parts are rendered by `header`, `report`,
//! `entries` (with `cards` for tool calls and `text` for long texts) and `composer`.

mod cards;
mod composer;
mod entries;
mod header;
mod host;
mod read;
mod report;
mod text;
mod world;

use std::collections::HashMap;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use lazarus_session::{SessionError, SessionId};
use maud::{Markup, html};
use serde::Deserialize;

use crate::fmt::{self, count};
use crate::page::{self, Kind};
use crate::{Mode, Web, WebState};
use composer::composer;
use entries::entry;
use header::head;
use read::{Loaded, load};
use report::damage;

pub(crate) use read::fork_point_of;

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
            (host::overview(&l))
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
            (host::overview(&l))
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

fn seq_time(ctx: &Ctx, seq: u64, ts: &str) -> Markup {
    html! { span.seq title="record seq" { "#" (seq) } " " (fmt::time(ts, &ctx.now)) }
}
