//! `lazarus sessions show` for the sessions a Python program writes: an Agents SDK history as a
//! conversation, a LangGraph thread's checkpoints and writes with their values as JSON, and
//! at the end the thread as it is now (each step: its node, its channels, its pending writes
//! and interrupts) or the calls in doubt. Values are decoded with the allowlist the package
//! loads by (`lazarus_session::host_blob`): what lies outside is shown labelled, as it is.

use std::io::Write;

use lazarus_session::host_blob::Allowlist;
use lazarus_session::host_view::{self, ConvItem, GraphStep};
use lazarus_session::record::{HostBlob, HostWrites};
use lazarus_session::state::SessionState;
use lazarus_session::{Store, StoredRecord};
use serde_json::Value;

use crate::term::{escape, escape_text};

/// Characters of one value shown before the rest is elided (`--json` shows everything).
const VALUE_CHARS: usize = 400;

/// Padding under a record's time and seq.
const PAD: &str = "                     ";

/// Prints one host record; `false` for a kind this view does not know.
pub(super) fn record(at: &str, r: &StoredRecord, out: &mut impl Write) -> std::io::Result<bool> {
    let d = &r.data;
    let allow = Allowlist::strict();
    match r.kind.as_str() {
        "host_item" => item(at, &d["item"], out)?,
        "host_items" => {
            let items = d["items"].as_array().map(Vec::as_slice).unwrap_or_default();
            for (i, v) in items.iter().enumerate() {
                item(if i == 0 { at } else { PAD }, v, out)?;
            }
        }
        "host_pop" => writeln!(
            out,
            "{at} popped the newest item (recorded at #{})",
            d["seq"]
        )?,
        "host_clear" => writeln!(
            out,
            "{at} CLEARED: what was recorded through #{} left the history (the ledger keeps it)",
            d["through_seq"]
        )?,
        "host_call_intent" => writeln!(
            out,
            "{at} CALL {} {} announced  [{}]",
            escape(d["tool"].as_str().unwrap_or("?")),
            escape(&elide(d["arguments"].as_str().unwrap_or(""))),
            escape(d["call_id"].as_str().unwrap_or("?"))
        )?,
        "host_call_outcome" => writeln!(
            out,
            "{at} CALL [{}] ended: {}",
            escape(d["call_id"].as_str().unwrap_or("?")),
            escape_text(&elide(d["result"].as_str().unwrap_or("")))
        )?,
        "host_checkpoint" => {
            let meta = blob_value(&d["metadata"], &allow);
            writeln!(
                out,
                "{at} checkpoint {}{} step {} ({}){}",
                escape(d["checkpoint_id"].as_str().unwrap_or("?")),
                ns(d),
                meta["step"],
                escape(meta["source"].as_str().unwrap_or("?")),
                d["parent_id"]
                    .as_str()
                    .map(|p| format!(" after {}", escape(p)))
                    .unwrap_or_default()
            )?;
            for c in d["channels"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let channel = c["channel"].as_str().unwrap_or("?");
                if channel.starts_with("branch:to:") || c["value"]["type"] == "empty" {
                    continue;
                }
                let v = blob_value(&c["value"], &allow);
                writeln!(out, "{PAD}  {} = {}", escape(channel), json(&v))?;
            }
        }
        "host_writes" | "host_pending_writes" => {
            let Ok(w) = serde_json::from_value::<HostWrites>(d.clone()) else {
                return Ok(false);
            };
            writeln!(
                out,
                "{at} writes of {} against checkpoint {}{}",
                escape(&host_view::node_of(&w.task_path, &w.task_id)),
                escape(&w.checkpoint_id),
                ns(d)
            )?;
            for one in &w.writes {
                let v = host_view::value(&one.value, &allow);
                if one.channel == host_view::INTERRUPT {
                    writeln!(out, "{PAD}  INTERRUPT: {}", json(&v))?;
                } else if !one.channel.starts_with("branch:to:") {
                    writeln!(out, "{PAD}  {} = {}", escape(&one.channel), json(&v))?;
                }
            }
        }
        "host_forget" => {
            let n = d["checkpoints"].as_array().map_or(0, Vec::len);
            writeln!(
                out,
                "{at} FORGOT {n} checkpoint(s) and their writes ({}; the ledger keeps them)",
                escape(d["why"].as_str().unwrap_or("-"))
            )?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn ns(d: &Value) -> String {
    match d["ns"].as_str() {
        Some("") | None => String::new(),
        Some(ns) => format!(" in subgraph {}", escape(ns)),
    }
}

fn blob_value(b: &Value, allow: &Allowlist) -> Value {
    match serde_json::from_value::<HostBlob>(b.clone()) {
        Ok(b) => host_view::value(&b, allow),
        Err(_) => b.clone(),
    }
}

fn item(at: &str, v: &Value, out: &mut impl Write) -> std::io::Result<()> {
    match host_view::conv_item(v) {
        ConvItem::User(t) => writeln!(out, "{at} > {}", escape_text(&elide(&t))),
        ConvItem::Assistant(t) => writeln!(out, "{at} < {}", escape_text(&elide(&t))),
        ConvItem::System(t) => writeln!(out, "{at} system: {}", escape_text(&elide(&t))),
        ConvItem::Reasoning(t) => writeln!(out, "{at} (reasoning) {}", escape_text(&elide(&t))),
        ConvItem::Call {
            call_id,
            name,
            arguments,
        } => writeln!(
            out,
            "{at} call {} {}  [{}]",
            escape(&name),
            escape(&elide(&arguments)),
            escape(&call_id)
        ),
        ConvItem::Output { call_id, output } => writeln!(
            out,
            "{at} = {}  [{}]",
            escape_text(&elide(&output)),
            escape(&call_id)
        ),
        ConvItem::Other(v) => writeln!(out, "{at} item {}", json(&v)),
    }
}

/// Compact JSON, escaped for the terminal, elided when long.
fn json(v: &Value) -> String {
    escape(&elide(&v.to_string())).into_owned()
}

fn elide(text: &str) -> String {
    let n = text.chars().count();
    if n <= VALUE_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(VALUE_CHARS).collect();
    format!(
        "{head}… ({} more characters; --json shows everything)",
        n - VALUE_CHARS
    )
}

/// After the records: what a host session is now. A LangGraph thread: each checkpoint with
/// the node that made it, every channel's value, its writes and interrupts. An Agents SDK
/// session: how many items its history holds, and each call its program announced without
/// an outcome.
pub(super) fn now(
    store: &dyn Store,
    s: &lazarus_session::SessionSummary,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let Some(host) = s.meta.as_ref().and_then(|m| m["host"].as_str()) else {
        return Ok(());
    };
    let st: SessionState = store.load(&s.id)?;
    let name = s
        .meta
        .as_ref()
        .and_then(|m| m["host_id"].as_str())
        .unwrap_or(&s.id);
    if host == host_view::LANGGRAPH {
        let steps = host_view::graph_steps(&st.host.graph, &Allowlist::strict());
        writeln!(
            out,
            "\nthread {} now: {} checkpoint(s)",
            escape(name),
            steps.len()
        )?;
        let parents: std::collections::HashSet<(&str, &str)> = steps
            .iter()
            .filter_map(|s| Some((s.ns.as_str(), s.parent_id.as_deref()?)))
            .collect();
        for step in &steps {
            let newest = !parents.contains(&(step.ns.as_str(), step.checkpoint_id.as_str()));
            graph_step(step, newest, out)?;
        }
    } else {
        writeln!(out, "\nhistory now: {} item(s)", st.host.items.len())?;
    }
    for (id, c) in st.host.in_doubt() {
        writeln!(
            out,
            "IN DOUBT: {} {}  [{}, announced at #{}] may have run: its program recorded no outcome; check its effect before running it again",
            escape(&c.tool),
            escape(c.arguments.as_deref().unwrap_or("")),
            escape(id),
            c.intent_seq
        )?;
    }
    Ok(())
}

/// One checkpoint; `newest`: no checkpoint follows it, so its writes are still pending.
fn graph_step(step: &GraphStep, newest: bool, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "  step {} ({}){}{}  checkpoint {} #{}",
        step.step.map_or("?".into(), |s| s.to_string()),
        escape(step.source.as_deref().unwrap_or("?")),
        if step.ns.is_empty() {
            String::new()
        } else {
            format!(" in subgraph {}", escape(&step.ns))
        },
        if step.ran.is_empty() {
            String::new()
        } else {
            format!(" after {}", escape(&step.ran.join(", ")))
        },
        escape(&step.checkpoint_id),
        step.seq
    )?;
    for (channel, v) in &step.values {
        writeln!(out, "      {} = {}", escape(channel), json(v))?;
    }
    for w in step
        .writes
        .iter()
        .filter(|w| w.channel != host_view::INTERRUPT)
    {
        if !w.channel.starts_with("branch:to:") {
            writeln!(
                out,
                "      {} of {}: {} = {}",
                if newest { "pending write" } else { "write" },
                escape(&w.node),
                escape(&w.channel),
                json(&w.value)
            )?;
        }
    }
    for i in &step.interrupts {
        writeln!(out, "      INTERRUPTED: {}", json(i))?;
    }
    Ok(())
}
