//! What is gathered before the decision walk: who created the session (the owner line; an
//! SDK program's sessions are skipped), the session facts from the newest lines (version,
//! permission mode, whether it is a sub-agent transcript), and the background agents
//! launched in the window that never reported back.

use super::record::{Content, Line, NOTIFICATION, content, is_idle_bookkeeping, user_info};
use crate::classify::{Parsed, stem};
use crate::verdict::{Classification, InterruptedCall, SessionMeta};
use std::collections::HashSet;

/// The line that tells who created the session: the separately read owner line (the first
/// line of the file naming an `entrypoint`), else the oldest such line in the window when
/// the window starts at the beginning of the file.
pub(super) fn owner_line<'a>(p: &Parsed<'a, Line<'a>>, meta: &SessionMeta) -> Option<String> {
    if let Some(h) = meta.header
        && let Ok(l) = serde_json::from_slice::<Line>(h)
        && let Some(e) = l.entrypoint
    {
        return Some(e);
    }
    if meta.at_start {
        return (0..p.len()).find_map(|i| p.get(i).and_then(|l| l.entrypoint.clone()));
    }
    None
}

/// Session facts from the newest lines that carry them.
pub(super) struct Facts {
    pub(super) version: Option<String>,
    pub(super) permission_mode: Option<String>,
    /// Every conversation line seen is a sidechain (a sub-agent transcript).
    pub(super) sidechain_only: bool,
}

pub(super) fn gather_facts<'a>(
    p: &Parsed<'a, Line<'a>>,
    meta: &SessionMeta,
    out: &mut Classification,
) -> Facts {
    let mut f = Facts {
        version: None,
        permission_mode: None,
        sidechain_only: true,
    };
    let mut any = false;
    // The facts but the mode are known (and a few conversation lines were seen, enough to
    // tell a sidechain-only file): from there only lines that can carry the mode are parsed.
    let mut known = false;
    for i in (0..p.len()).rev() {
        if known {
            if f.permission_mode.is_some() {
                break;
            }
            if !crate::lines::contains(p.lines[i], b"\"permissionMode\"") {
                continue;
            }
        }
        // (the newest line's uuid is the fingerprint's: read it whatever the line is)
        if out.last_record_id.is_some() && is_idle_bookkeeping(p.lines[i]) {
            continue;
        }
        let Some(l) = p.get(i) else { continue };
        // The newest line that carries the mode, whatever its type and however far back:
        // since ToolSearch, tool_result lines carry none, and a turn may hold many of them
        // (beyond the window the caller looks, `tail::permission_mode_before`, for a session
        // that is to be resumed).
        if f.permission_mode.is_none() && !l.is_sidechain {
            f.permission_mode = l.permission_mode.clone();
        }
        if known {
            continue;
        }
        if out.last_record_id.is_none() {
            out.last_record_id = l.uuid.clone();
        }
        if out.session_id.is_none() {
            out.session_id = l.session_id.clone();
        }
        if out.cwd.is_none() {
            out.cwd = l.cwd.clone();
        }
        if f.version.is_none() {
            f.version = l.version.clone();
        }
        if l.ty == "user" || l.ty == "assistant" {
            any = true;
            f.sidechain_only &= l.is_sidechain || l.agent_id.is_some();
        }
        known = any
            && out.session_id.is_some()
            && out.cwd.is_some()
            && f.version.is_some()
            && i + 4 < p.len();
    }
    f.sidechain_only &= any;
    if out.session_id.is_none() {
        let s = stem(meta.file_name);
        if !s.is_empty() {
            out.session_id = Some(s.to_string());
        }
    }
    f
}

/// Background agents launched in the window that never reported back: their launching
/// calls, as recorded (the `Agent` tool_use with its input, when it lies in the window).
pub(super) fn outstanding_background_agents<'a>(p: &Parsed<'a, Line<'a>>) -> Vec<InterruptedCall> {
    let mut launched: Vec<String> = Vec::new();
    let mut reported: HashSet<String> = HashSet::new();
    for i in 0..p.len() {
        // Cheap byte checks first: most lines are neither.
        let raw = p.lines[i];
        let launch = crate::lines::contains(raw, b"\"async_launched\"");
        let notify = crate::lines::contains(raw, NOTIFICATION.as_bytes());
        if !launch && !notify {
            continue;
        }
        let Some(l) = p.get(i) else { continue };
        if l.ty != "user" || l.is_sidechain {
            continue;
        }
        let u = user_info(l.message.as_ref());
        if launch
            && l.tool_use_result
                .is_some_and(|r| r.get().contains("\"async_launched\""))
        {
            launched.extend(u.results.iter().cloned());
        }
        if notify {
            let mut rest = u.text.as_str();
            while let Some(s) = rest.find("<tool-use-id>") {
                let after = &rest[s + "<tool-use-id>".len()..];
                let Some(e) = after.find("</tool-use-id>") else {
                    break;
                };
                reported.insert(after[..e].trim().to_string());
                rest = &after[e..];
            }
        }
    }
    launched.retain(|id| !reported.contains(id));
    launched.iter().map(|id| launch_call(p, id)).collect()
}

/// The `tool_use` that launched background agent `id`, as recorded; its id alone when the
/// assistant line lies before the window.
fn launch_call<'a>(p: &Parsed<'a, Line<'a>>, id: &str) -> InterruptedCall {
    let needle = format!("\"{id}\"");
    for i in (0..p.len()).rev() {
        if !crate::lines::contains(p.lines[i], needle.as_bytes())
            || !crate::lines::contains(p.lines[i], b"\"tool_use\"")
        {
            continue;
        }
        let Some(l) = p.get(i) else { continue };
        if l.ty != "assistant" {
            continue;
        }
        if let Some(Content::Blocks(bs)) = content(l.message.as_ref().and_then(|m| m.content)) {
            for b in bs {
                if b.ty == "tool_use" && b.id.as_deref() == Some(id) {
                    return InterruptedCall::new(
                        b.name.as_deref().unwrap_or("Agent"),
                        b.input.as_ref(),
                        Some(id),
                    );
                }
            }
        }
    }
    InterruptedCall::new("Agent", None, Some(id))
}
