//! The fork tree: the lineage of a session as a tree, from its root ancestor down to every
//! descendant, each node linked, each child with the turn it was forked at.

use std::collections::HashMap;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use lazarus_session::{SessionError, SessionId, SessionSummary};
use maud::{Markup, html};

use crate::fmt::{self, status_badge};
use crate::page::{self, Kind};
use crate::session::fork_point_of;
use crate::{Web, WebState};

/// One node of the tree.
pub struct Node {
    pub summary: SessionSummary,
    /// The parent's turn this session was forked at (`None` for the root, or unknown).
    pub at_turn: Option<u64>,
    pub children: Vec<Node>,
}

/// The tree around `id` (blocking): its root ancestor and every descendant, at most
/// `Limits::tree_nodes` nodes. Returns the tree and whether it was cut.
pub fn load(web: &Web, id: &SessionId) -> Result<(Node, bool), SessionError> {
    let store = &*web.cfg.store;
    let lineage = store.lineage(id)?;
    let root = lineage.last().cloned().unwrap_or_else(|| id.clone());
    let list = web.list_fresh()?;
    let by_id: HashMap<&str, &SessionSummary> = list.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut children: HashMap<&str, Vec<&SessionSummary>> = HashMap::new();
    for s in list.iter() {
        if let Some(p) = &s.parent {
            children.entry(p.as_str()).or_default().push(s);
        }
    }
    for v in children.values_mut() {
        v.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    }
    let mut budget = web.cfg.limits.tree_nodes.max(1);
    let mut cut = false;
    let root_summary = match by_id.get(root.as_str()) {
        Some(s) => (*s).clone(),
        None => store.summary(&root)?,
    };
    fn build(
        web: &Web,
        s: SessionSummary,
        at_turn: Option<u64>,
        children: &HashMap<&str, Vec<&SessionSummary>>,
        budget: &mut usize,
        cut: &mut bool,
        depth: usize,
    ) -> Node {
        *budget = budget.saturating_sub(1);
        let mut node = Node {
            at_turn,
            children: Vec::new(),
            summary: s,
        };
        // a parent link that loops (a damaged store) ends at the depth limit
        if depth > 256 {
            *cut = true;
            return node;
        }
        if let Some(kids) = children.get(node.summary.id.as_str()) {
            for k in kids {
                if *budget == 0 {
                    *cut = true;
                    break;
                }
                let turn = fork_point_of(&*web.cfg.store, &k.id);
                node.children.push(build(
                    web,
                    (*k).clone(),
                    turn,
                    children,
                    budget,
                    cut,
                    depth + 1,
                ));
            }
        }
        node
    }
    let tree = build(web, root_summary, None, &children, &mut budget, &mut cut, 0);
    Ok((tree, cut))
}

pub async fn page(
    State(web): State<WebState>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let id = match id
        .map_err(|e| e.body_text())
        .and_then(|Path(raw)| SessionId::parse(&raw).map_err(|e| e.to_string()))
    {
        Ok(id) => id,
        Err(e) => return page::error(&web, StatusCode::BAD_REQUEST, "Not a session id", &e),
    };
    let w = web.clone();
    let idc = id.clone();
    let r = tokio::task::spawn_blocking(move || load(&w, &idc)).await;
    let (tree, cut) = match r {
        Ok(Ok(t)) => t,
        Ok(Err(e @ SessionError::NotFound { .. })) => {
            return page::error(
                &web,
                StatusCode::NOT_FOUND,
                "No such session",
                &e.to_string(),
            );
        }
        Ok(Err(e)) => {
            return page::error(
                &web,
                StatusCode::INTERNAL_SERVER_ERROR,
                "The fork tree cannot be read",
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
    let now = Timestamp::now();
    let main = html! {
        section.tree-page {
            h1 { "Fork tree" }
            p.muted { "Every session descended from " a href={ "/sessions/" (tree.summary.id) } { code { (tree.summary.id) } } ", with the turn each was forked at." }
            @if cut { p.warn { "The tree is larger than " (web.cfg.limits.tree_nodes) " sessions; only the first are drawn." } }
            ul.tree #tree { (node(&tree, &id, &now)) }
            p { a href={ "/sessions/" (id) } { "Back to the session" } }
        }
    };
    page::layout(&web, "Fork tree", Kind::Tree, main).into_response()
}

fn node(n: &Node, current: &SessionId, now: &Timestamp) -> Markup {
    let s = &n.summary;
    html! {
        li.node data-id=(s.id) {
            div class=@if &s.id == current { "node-box current" } @else { "node-box" } {
                @if let Some(t) = n.at_turn { span.fork-turn { "↳ forked at turn " (t) } " " }
                a href={ "/sessions/" (s.id) } {
                    @match &s.title { Some(t) => { (t) }, None => { code { (s.id) } } }
                }
                " " (status_badge(s.status))
                " " span.muted { code { (s.id) } " · " (fmt::time(&s.updated_at, now)) }
            }
            @if !n.children.is_empty() {
                ul { @for c in &n.children { (node(c, current, now)) } }
            }
        }
    }
}
