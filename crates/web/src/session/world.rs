//! A session's world on its page: the workspace, tools and MCP servers (with their trust),
//! approval and sandbox policy and the model it runs with, in the head and on every `world`
//! record of the timeline.

use lazarus_session::record::World;
use maud::{Markup, html};

/// The facts of one world, as a definition list.
pub(super) fn facts(w: &World) -> Markup {
    html! {
        dl.world {
            div { dt { "workspace" } dd { @match &w.workspace { Some(p) => code { (p) }, None => span.muted { "none" } } } }
            div { dt { "built-in tools" } dd { @if w.tools.builtin.is_empty() { span.muted { "none" } } @else { (w.tools.builtin.join(", ")) } } }
            @for s in &w.tools.mcp {
                div.wide {
                    dt { "MCP " (s.name) }
                    dd {
                        code { (s.describe()) }
                        " · " @if s.trusted { "trusted" } @else { span title="its annotations are never acted on: an interrupted call of it is never re-run" { "not trusted" } }
                        @if s.sandbox { " · sandboxed" }
                        " · from " code { (s.source) }
                        @if !s.env.is_empty() { " · env " (s.env.join(", ")) }
                        " · " span.muted title=(s.fingerprint) { (s.fingerprint.get(..19).unwrap_or(&s.fingerprint)) "…" }
                    }
                }
            }
            div { dt { "approval" } dd { code { (w.approval.mode) } @if !w.approval.grants.is_empty() { " · always: " (w.approval.grants.join(", ")) } } }
            div { dt { "sandbox" } dd {
                code { (w.sandbox.mode) }
                @if w.sandbox.network { ", network on" } @else { ", no network" }
                ", ≤ " (w.sandbox.max_processes) " processes"
                @for s in &w.sandbox.allow_unix_sockets { ", socket " code { (s) } }
            } }
            div.wide { dt { "model" } dd { @match &w.provider {
                Some(p) => {
                    code { (p.model) } " · " (p.api) " at " code { (p.base_url) }
                    @if let Some(n) = p.context_window { " · window " (n) " tokens" }
                }
                None => span.muted { "its own program's" },
            } } }
        }
    }
}
