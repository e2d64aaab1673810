//! The head of the session page: title, status, the facts (workspace, model, times, sizes,
//! lineage) and the warning when a record breaks the session's rules.

use maud::{Markup, html};

use super::Ctx;
use super::read::Loaded;
use crate::fmt::{self, bytes, count, status_badge};

pub(super) fn head(ctx: &Ctx, l: &Loaded) -> Markup {
    let s = &l.summary;
    let tl = &l.timeline;
    let calls = tl.calls().count();
    // a host program's calls (the Python package) in doubt count as a native call's do
    let host_in_doubt: Vec<(&str, &lazarus_session::state::HostCall)> =
        tl.state.host.in_doubt().collect();
    let in_doubt = tl.in_doubt_calls() + host_in_doubt.len();
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
                @if s.waiting > 0 {
                    " " span.pill title="messages accepted into the inbox, not yet recorded: the next writer records them first" { (s.waiting) " waiting in the inbox" }
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
            @if let Some((seq, n)) = &tl.state.needs_owner {
                div.warn-box.needs-owner {
                    strong { "Left to its owner" } " (record #" (seq) ", by " (n.by) "): " (n.reason)
                    p { "Its work waits for a resumer that can honour its world. Resume it with "
                        code.resume-with { (n.resume_with) } }
                }
            }
            @if !host_in_doubt.is_empty() {
                div.in-doubt-box.host-in-doubt {
                    strong { "In doubt: " (host_in_doubt.len()) " call(s) of its program may have run" }
                    p.muted { "The program announced these calls and recorded no outcome: each may have run completely, partly or not at all. Check its effect before it is run again." }
                    ul {
                        @for (id, c) in &host_in_doubt {
                            li {
                                code { (c.tool) } " " span.muted { "(" (id) ", announced at #" (c.intent_seq) ")" }
                                @if let Some(a) = &c.arguments { " " code.args { (a) } }
                            }
                        }
                    }
                }
            }
            @if let Some(w) = &tl.state.world {
                details.world {
                    summary {
                        "World: what it runs with"
                        @if w.seq == 0 { " (recorded with the session)" } @else { " (recorded at #" (w.seq) ")" }
                    }
                    (super::world::facts(&w.world))
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
