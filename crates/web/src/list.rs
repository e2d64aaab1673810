//! The sessions page: every session, newest activity first, in pages; filter by status,
//! search by id, title and workspace (and, on request, the text of every record).

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use lazarus_session::{SessionId, SessionSummary, Status, Store};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use crate::fmt::{self, STATUSES, bytes, count, status_badge, status_label};
use crate::page::{self, Kind};
use crate::{Web, WebState};

#[derive(Debug, Default, Clone, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub q: Option<String>,
    /// Also search the text of every record (`1`).
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub page: Option<usize>,
}

/// What a text search covered.
#[derive(Debug, Default, Clone, Copy)]
pub struct TextScan {
    pub sessions: usize,
    pub bytes: u64,
    /// A limit stopped it before every session was read.
    pub cut_short: bool,
}

/// One page of the sessions list.
pub struct ListPage {
    pub rows: Vec<SessionSummary>,
    /// Sessions matching the search and the status filter.
    pub matching: usize,
    /// Sessions in the store.
    pub total: usize,
    /// Per status, sessions matching the search.
    pub counts: Vec<(Status, usize)>,
    pub page: usize,
    pub pages: usize,
    /// Sessions per page.
    pub per: usize,
    pub status: Option<Status>,
    pub q: String,
    pub text: bool,
    pub scan: Option<TextScan>,
    pub notice: Option<String>,
}

fn contains_ci(hay: &str, needle_lower: &str) -> bool {
    if hay.is_ascii() && needle_lower.is_ascii() {
        hay.as_bytes()
            .windows(needle_lower.len().max(1))
            .any(|w| w.eq_ignore_ascii_case(needle_lower.as_bytes()))
            || needle_lower.is_empty()
    } else {
        hay.to_lowercase().contains(needle_lower)
    }
}

fn cheap_match(s: &SessionSummary, needle: &str) -> bool {
    contains_ci(s.id.as_str(), needle)
        || s.title.as_deref().is_some_and(|t| contains_ci(t, needle))
        || s.workspace
            .as_deref()
            .is_some_and(|w| contains_ci(w, needle))
        || s.parent.as_deref().is_some_and(|p| contains_ci(p, needle))
}

fn value_contains(v: &Value, needle: &str, seen: &mut u64) -> bool {
    match v {
        Value::String(s) => {
            *seen += s.len() as u64;
            contains_ci(s, needle)
        }
        Value::Array(a) => a.iter().any(|x| value_contains(x, needle, seen)),
        Value::Object(o) => o.values().any(|x| value_contains(x, needle, seen)),
        _ => false,
    }
}

/// Whether any string in the records of `id` contains `needle` (lower case); reads until
/// found. Adds the bytes of text read to `seen`.
fn text_match(store: &dyn Store, id: &SessionId, needle: &str, seen: &mut u64) -> bool {
    let mut after = 0;
    loop {
        let Ok(batch) = store.records(id, after, 500) else {
            return false;
        };
        for r in &batch {
            after = r.seq;
            if value_contains(&r.data, needle, seen) {
                return true;
            }
        }
        if batch.len() < 500 {
            return false;
        }
    }
}

/// Filters, searches, sorts and pages `list` (blocking when `text` search reads records).
pub fn select(web: &Web, list: &[SessionSummary], q: &ListQuery) -> ListPage {
    let limits = &web.cfg.limits;
    let mut notice = None;
    let mut needle = q.q.clone().unwrap_or_default().trim().to_string();
    if needle.len() > limits.query_bytes {
        let mut cut = limits.query_bytes;
        while !needle.is_char_boundary(cut) {
            cut -= 1;
        }
        needle.truncate(cut);
        notice = Some(format!(
            "The search was cut to its first {} bytes.",
            limits.query_bytes
        ));
    }
    let needle_lower = needle.to_lowercase();
    let text = q.text.as_deref().is_some_and(|t| t == "1" || t == "on") && !needle.is_empty();
    let status = match q.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(word) => match fmt::parse_status(word) {
            Some(s) => Some(s),
            None => {
                notice = Some(format!(
                    "There is no status {word:?}; showing every status (known: {}).",
                    STATUSES.map(|s| s.to_string()).join(", ")
                ));
                None
            }
        },
    };
    // newest activity first (RFC 3339 UTC times in one format sort as text)
    let mut order: Vec<&SessionSummary> = list.iter().collect();
    order.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
    let mut scan = text.then(TextScan::default);
    let searched: Vec<&SessionSummary> = if needle.is_empty() {
        order
    } else {
        order
            .into_iter()
            .filter(|s| {
                if cheap_match(s, &needle_lower) {
                    return true;
                }
                let Some(sc) = scan.as_mut() else {
                    return false;
                };
                if sc.sessions >= limits.text_search_sessions
                    || sc.bytes >= limits.text_search_bytes
                {
                    sc.cut_short = true;
                    return false;
                }
                sc.sessions += 1;
                text_match(&*web.cfg.store, &s.id, &needle_lower, &mut sc.bytes)
            })
            .collect()
    };
    let counts: Vec<(Status, usize)> = STATUSES
        .iter()
        .map(|st| (*st, searched.iter().filter(|s| s.status == *st).count()))
        .collect();
    let matching: Vec<&SessionSummary> = match status {
        Some(st) => searched.into_iter().filter(|s| s.status == st).collect(),
        None => searched,
    };
    let per = limits.page_size.max(1);
    let pages = matching.len().div_ceil(per).max(1);
    let page = q.page.unwrap_or(1).clamp(1, pages);
    let rows = matching
        .iter()
        .skip((page - 1) * per)
        .take(per)
        .map(|s| (*s).clone())
        .collect();
    ListPage {
        rows,
        matching: matching.len(),
        total: list.len(),
        counts,
        page,
        pages,
        per,
        status,
        q: needle,
        text,
        scan,
        notice,
    }
}

pub async fn page(
    State(web): State<WebState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => {
            return page::error(&web, StatusCode::BAD_REQUEST, "Bad query", &e.body_text());
        }
    };
    let w = web.clone();
    let r = tokio::task::spawn_blocking(move || -> lazarus_session::Result<ListPage> {
        let list: Arc<Vec<SessionSummary>> = w.list_fresh()?;
        Ok(select(&w, &list, &q))
    })
    .await;
    let p = match r {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            return page::error(
                &web,
                StatusCode::INTERNAL_SERVER_ERROR,
                "The sessions cannot be listed",
                &e.to_string(),
            );
        }
        Err(e) => {
            return page::error(
                &web,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal error",
                &e.to_string(),
            );
        }
    };
    page::layout(&web, "Sessions", Kind::List, render(&p)).into_response()
}

fn href(q: &str, text: bool, status: Option<Status>, page: usize) -> String {
    let mut params: Vec<(&str, String)> = Vec::new();
    if !q.is_empty() {
        params.push(("q", q.to_string()));
    }
    if text {
        params.push(("text", "1".into()));
    }
    if let Some(s) = status {
        params.push(("status", s.to_string()));
    }
    if page > 1 {
        params.push(("page", page.to_string()));
    }
    if params.is_empty() {
        return "/".into();
    }
    format!(
        "/?{}",
        serde_urlencoded::to_string(&params).unwrap_or_default()
    )
}

pub fn render(p: &ListPage) -> Markup {
    let now = Timestamp::now();
    let per_status_total: usize = p.counts.iter().map(|(_, n)| n).sum();
    let first = if p.matching == 0 {
        0
    } else {
        (p.page - 1) * p.per + 1
    };
    html! {
        section.list {
            h1 { "Sessions" }
            form.filters method="get" action="/" {
                input type="search" name="q" value=(p.q) placeholder="id, title or workspace" aria-label="search";
                label.check { input type="checkbox" name="text" value="1" checked[p.text]; " also search the text of every record" }
                @if let Some(s) = p.status { input type="hidden" name="status" value=(s); }
                button type="submit" { "Search" }
                @if !p.q.is_empty() { " " a href=(href("", false, p.status, 1)) { "clear" } }
            }
            nav.chips aria-label="filter by status" {
                a class=@if p.status.is_none() { "chip on" } @else { "chip" } href=(href(&p.q, p.text, None, 1)) {
                    "every status " span.n { (count(per_status_total as u64)) }
                }
                @for (st, n) in &p.counts {
                    @if *n > 0 || p.status == Some(*st) {
                        a class={ "chip st-" (st) @if p.status == Some(*st) { " on" } } href=(href(&p.q, p.text, Some(*st), 1)) data-status=(st) {
                            (status_label(*st)) " " span.n { (count(*n as u64)) }
                        }
                    }
                }
            }
            @if let Some(n) = &p.notice { p.warn { (n) } }
            @if let Some(sc) = &p.scan {
                p.muted {
                    "Text searched in " (count(sc.sessions as u64)) " sessions (" (bytes(sc.bytes)) ")"
                    @if sc.cut_short { "; a limit stopped the search before every session was read — narrow it down" }
                    "."
                }
            }
            p.summary #list-summary {
                @if p.matching == 0 {
                    @if p.total == 0 { "No sessions yet." } @else { "No session matches." }
                } @else {
                    "Showing " (count(first as u64)) "–" (count((first + p.rows.len() - 1) as u64))
                    " of " (count(p.matching as u64))
                    @if p.matching != p.total { " matching (" (count(p.total as u64)) " in all)" }
                    " · newest activity first"
                }
            }
            @if !p.rows.is_empty() {
                table.sessions #sessions {
                    thead { tr {
                        th { "session" } th { "status" } th { "workspace" } th { "model" }
                        th { "created" } th { "last activity" } th.num { "records" } th.num { "size" } th { "parent" }
                    } }
                    tbody {
                        @for s in &p.rows { (row(s, &now)) }
                    }
                }
            }
            @if p.pages > 1 {
                nav.pager {
                    @if p.page > 1 { a rel="prev" href=(href(&p.q, p.text, p.status, p.page - 1)) { "← newer" } }
                    span { "page " (p.page) " of " (p.pages) }
                    @if p.page < p.pages { a rel="next" href=(href(&p.q, p.text, p.status, p.page + 1)) { "older →" } }
                }
            }
        }
    }
}

fn row(s: &SessionSummary, now: &Timestamp) -> Markup {
    let model = s
        .meta
        .as_ref()
        .and_then(|m| m["model"].as_str())
        .map(str::to_string);
    html! {
        tr data-id=(s.id) data-status=(s.status) {
            td.title-cell {
                a.title href={ "/sessions/" (s.id) } {
                    @match (&s.title, &s.error) {
                        (Some(t), _) => { (t) }
                        (None, Some(_)) => span.muted { "(unreadable)" },
                        (None, None) => span.muted { "(no input yet)" },
                    }
                }
                div.id { code { (s.id) } }
                @if let Some(e) = &s.error { div.warn.small { (e) } }
            }
            td {
                (status_badge(s.status))
                @if s.waiting > 0 {
                    " " span.pill title="messages accepted into the inbox, not yet recorded: the next writer records them first" { "+" (s.waiting) " waiting" }
                }
            }
            td.ws {
                @match &s.workspace {
                    Some(w) => code title=(w) { (short_path(w)) },
                    None => span.muted { "—" },
                }
            }
            td { @match &model { Some(m) => code { (m) }, None => span.muted { "—" } } }
            td { (fmt::time(&s.created_at, now)) }
            td { (fmt::time(&s.updated_at, now)) }
            td.num { (count(s.records)) }
            td.num { (bytes(s.bytes)) }
            td { @match &s.parent { Some(p) => a href={ "/sessions/" (p) } { code { (p) } }, None => span.muted { "—" } } }
        }
    }
}

/// The last two components of a path (the whole path is on hover).
pub(crate) fn short_path(p: &str) -> String {
    let parts: Vec<&str> = p.trim_end_matches('/').rsplit('/').take(2).collect();
    if parts.len() < 2 || p.matches('/').count() <= 2 {
        return p.to_string();
    }
    format!("…/{}/{}", parts[1], parts[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_insensitive_search() {
        assert!(contains_ci("Fix the Tests", "the tests"));
        assert!(contains_ci("Ärger im Büro", "büro"));
        assert!(!contains_ci("abc", "abd"));
        assert!(contains_ci("abc", ""));
    }

    #[test]
    fn short_paths() {
        assert_eq!(short_path("/home/dana/src/app"), "…/src/app");
        assert_eq!(short_path("/srv/app"), "/srv/app");
        assert_eq!(short_path("app"), "app");
    }

    #[test]
    fn links_keep_the_filters_and_encode_the_search() {
        assert_eq!(href("", false, None, 1), "/");
        assert_eq!(
            href("a b&c", true, Some(Status::InDoubt), 3),
            "/?q=a+b%26c&text=1&status=in_doubt&page=3"
        );
    }
}
