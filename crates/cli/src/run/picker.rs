//! `lazarus resume`: pick a session on a terminal (type to filter), show its last turns,
//! then continue it as `run --session ID` would.

use std::io::IsTerminal;

use anyhow::{Result, bail};
use lazarus_session::{SessionId, Store};

use super::{EXIT_INTERRUPTED, RunArgs, check_arguments, run_checked};
use crate::Usage;
use crate::term::escape;

/// `lazarus resume`: pick the session on a terminal (arrow keys, type to filter), show its
/// last turns, then resume it as `run --session ID` would.
pub fn resume(mut args: RunArgs) -> Result<i32> {
    if args.session.is_none() && !args.continue_ {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return Err(Usage(
                "lazarus resume picks a session on a terminal; elsewhere give --session ID (or -c for this workspace's newest)".into(),
            )
            .into());
        }
        args.store.check()?;
        let store = args.store.open()?;
        match pick(&*store)? {
            Some(chosen) => {
                preview(&*store, &chosen.id);
                if let Some(recorded) = &chosen.workspace
                    && args.workspace.is_none()
                    && std::env::current_dir()
                        .ok()
                        .and_then(|d| d.canonicalize().ok())
                        .is_none_or(|d| d.to_string_lossy() != recorded.as_str())
                {
                    let has_world = chosen
                        .meta
                        .as_ref()
                        .is_some_and(|m| m.get("world").is_some());
                    if has_world {
                        eprintln!(
                            "note: {} runs in its own workspace, {} (its world), not the current directory",
                            chosen.id,
                            escape(recorded)
                        );
                    } else {
                        eprintln!(
                            "note: {} was created in {} and recorded no world; it runs in the current directory, which it records as its world (give --workspace to choose)",
                            chosen.id,
                            escape(recorded)
                        );
                    }
                }
                args.session = Some(chosen.id);
            }
            None => {
                eprintln!("nothing chosen; nothing resumed");
                return Ok(EXIT_INTERRUPTED);
            }
        }
    }
    let checked = check_arguments(&args)?;
    run_checked(args, checked)
}

/// One line of the picker: title, status, workspace, age, id.
struct Choice(lazarus_session::SessionSummary);

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::fmt::{ago, fit, short_path};
        let s = &self.0;
        let title = s.title.as_deref().unwrap_or("(no input yet)");
        let ws = s.workspace.as_deref().map(short_path).unwrap_or_default();
        write!(
            f,
            "{:<40}  {:<11}  {:<24}  {:<12}  {}",
            fit(&escape(title), 40, false),
            s.status.to_string(),
            fit(&escape(&ws), 24, true),
            ago(&s.updated_at),
            s.id
        )
    }
}

fn pick(store: &dyn Store) -> Result<Option<lazarus_session::SessionSummary>> {
    let mut list: Vec<_> = store
        .list()?
        .into_iter()
        .filter(|s| s.status != lazarus_session::Status::Corrupt)
        .collect();
    if list.is_empty() {
        bail!(
            "no sessions in {} to resume; start one with lazarus run -p PROMPT",
            store.location()
        );
    }
    list.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
    let choices: Vec<Choice> = list.into_iter().map(Choice).collect();
    let answer = inquire::Select::new("Resume which session?", choices)
        .with_page_size(12)
        .with_help_message("↑↓ move · type to filter · Enter resumes · Esc cancels")
        // typed text filters on the whole title, id and workspace (the row shows them cut)
        .with_scorer(&|typed, choice, _, _| {
            let typed = typed.to_lowercase();
            let s = &choice.0;
            let hit = [
                Some(s.id.as_str()),
                s.title.as_deref(),
                s.workspace.as_deref(),
            ]
            .into_iter()
            .flatten()
            .any(|field| field.to_lowercase().contains(&typed));
            hit.then_some(0)
        })
        .prompt();
    match answer {
        Ok(c) => Ok(Some(c.0)),
        Err(
            inquire::InquireError::OperationCanceled | inquire::InquireError::OperationInterrupted,
        ) => Ok(None),
        Err(e) => Err(anyhow::Error::from(e).context("the session picker")),
    }
}

/// The chosen session's last turns, so the user sees where it stands before it continues.
fn preview(store: &dyn Store, id: &SessionId) {
    let Ok(st) = store.load(id) else { return };
    let mut lines: Vec<String> = st
        .pending_inputs
        .iter()
        .rev()
        .map(|p| format!("> {} (pending)", p.text))
        .map(|l| {
            escape(
                &l.lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(100)
                    .collect::<String>(),
            )
            .into_owned()
        })
        .collect();
    // what the model is sent (a compaction's summarised text is not kept in the state)
    for entry in st.live_context().1.iter().rev() {
        if lines.len() >= 4 {
            break;
        }
        let line = match entry {
            lazarus_session::ContextEntry::User { text, .. } => format!("> {}", text),
            lazarus_session::ContextEntry::Assistant { items, .. } => items
                .iter()
                .find_map(|i| match i {
                    lazarus_session::record::Item::Text { text } => Some(text.clone()),
                    lazarus_session::record::Item::ToolCall { name, .. } => {
                        Some(format!("→ {name}"))
                    }
                    _ => None,
                })
                .unwrap_or_default(),
            lazarus_session::ContextEntry::ToolResult { .. } => continue,
        };
        if line.is_empty() {
            continue;
        }
        let one: String = line
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(100)
            .collect();
        lines.push(escape(&one).into_owned());
        if lines.len() == 4 {
            break;
        }
    }
    eprintln!("last turns of {id}:");
    for l in lines.iter().rev() {
        eprintln!("  {l}");
    }
}
