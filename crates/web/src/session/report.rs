//! The damage report of the session page: why reading stopped, and every bad line `verify`
//! found (corruption or crash debris), with the commands that report and repair it.

use maud::{Markup, html};

use super::read::Loaded;
use crate::fmt::count;

pub(super) fn damage(l: &Loaded) -> Markup {
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
