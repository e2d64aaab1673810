//! `lazarus sessions show`: a session's records as a readable transcript — every record with
//! its time, tool calls with their states, resume receipts in full, and, for a session with a
//! damaged line, everything before the damage followed by what and where it is.

use std::io::Write;

use anyhow::Result;
use lazarus_session::{SessionId, Store, StoredRecord};
use serde_json::Value;

use crate::fmt::{ago, short_path};
use crate::term::{escape, escape_text};

/// Characters of a tool result shown (head and tail) before the middle is elided.
const RESULT_CHARS: usize = 600;

pub(crate) fn show(
    store: &dyn Store,
    id: &SessionId,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    // A session that is not there is said so (with the nearest ids), never shown as damaged.
    let summary = match store.summary(id) {
        Err(e @ lazarus_session::SessionError::NotFound { .. }) => {
            let hint = crate::fmt::did_you_mean(store, id);
            anyhow::bail!("{e}; {hint}`lazarus sessions list` shows them all");
        }
        other => other,
    };
    if json {
        if let Ok(s) = &summary
            && s.waiting > 0
        {
            eprintln!(
                "note: {} message(s) wait in the inbox of {id} (accepted, not yet recorded; `sessions show` without --json lists them)",
                s.waiting
            );
        }
        let mut after = 0;
        loop {
            let batch = store.records(id, after, 1000)?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for r in &batch {
                writeln!(out, "{}", serde_json::to_string(r)?)?;
            }
        }
        return Ok(());
    }
    // The listing's view of the session: one status rule (a session a live writer holds is
    // `running` here as in `sessions list`).
    match &summary {
        Ok(s) => {
            writeln!(
                out,
                "session {}  {}  created {} ({})",
                s.id,
                s.status,
                s.created_at,
                ago(&s.created_at)
            )?;
            if let Some(t) = &s.title {
                writeln!(out, "title: {}", escape(t))?;
            }
            if let Some(w) = &s.workspace {
                writeln!(out, "workspace: {}", escape(&short_path(w)))?;
            }
            if let Some(p) = &s.parent {
                writeln!(out, "forked from: {p}")?;
            }
            if let Some(sb) = s.meta.as_ref().and_then(|m| m.get("sandbox")) {
                writeln!(out, "shell sandbox at creation: {}", describe_sandbox(sb))?;
            }
            if let Some(w) = s.meta.as_ref().and_then(|m| m.get("world")) {
                writeln!(
                    out,
                    "world at creation (by {}):",
                    escape(w["by"].as_str().unwrap_or("?"))
                )?;
                for line in describe_world(w) {
                    writeln!(out, "  {line}")?;
                }
            }
            if let Some(h) = &s.holder {
                writeln!(out, "held by: {h}")?;
            }
        }
        Err(e) => writeln!(out, "session {id}: {e}")?,
    }
    let mut printer = Printer::default();
    let mut after = 0;
    // Batches of 1,000; after a failed batch, one record at a time up to the damage.
    let mut batch_size = 1000;
    let damage = loop {
        match store.records(id, after, batch_size) {
            Ok(batch) => {
                let Some(last) = batch.last() else { break None };
                after = last.seq;
                for r in &batch {
                    printer.record(r, out)?;
                }
            }
            Err(_) if batch_size > 1 => batch_size = 1,
            Err(e) => break Some(e),
        }
    };
    let waiting = store.inbox(id, 100).unwrap_or_default();
    if !waiting.is_empty() {
        writeln!(out, "\n{} message(s) waiting in the inbox:", waiting.len())?;
        for m in &waiting {
            let text = m.record().data_value()["text"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| m.kind().to_string());
            writeln!(
                out,
                "  > {} [{}]",
                escape_text(&text),
                escape(m.message_id())
            )?;
        }
    }
    // records that read back but that an open for writing refuses (a field or kind this
    // build does not know, a call without its intent): the status rule says `corrupt`
    if damage.is_none()
        && let Ok(s) = &summary
        && s.status == lazarus_session::Status::Corrupt
    {
        writeln!(
            out,
            "\nREFUSED: {}\n(an open for writing refuses this session; `lazarus sessions verify {id}` names the line, `lazarus sessions repair {id}` cuts from there and saves the cut bytes beside the file)",
            escape(s.error.as_deref().unwrap_or("a record does not fit"))
        )?;
        anyhow::bail!("session {id} has a record an open refuses (shown up to the end)");
    }
    if let Some(e) = damage {
        writeln!(
            out,
            "\nDAMAGED after seq {after}: {e}\n(everything above is intact; `lazarus sessions verify {id}` lists every problem, `lazarus sessions repair {id}` cuts the damage and saves the cut bytes beside the file)"
        )?;
        anyhow::bail!("session {id} is damaged after seq {after} (shown up to there)");
    }
    if let Ok(s) = &summary {
        super::show_host::now(store, s, out)?;
    }
    if let Ok(s) = summary {
        let waiting = match (s.waiting, &s.waiting_since) {
            (0, _) => String::new(),
            (n, since) => format!(
                ", {n} message(s) waiting in the inbox since {}",
                since.as_deref().map_or("-".into(), ago)
            ),
        };
        writeln!(
            out,
            "\nstatus: {}{waiting} ({} records, {} bytes, last activity {})",
            s.status,
            s.records,
            s.bytes,
            ago(&s.updated_at)
        )?;
    }
    Ok(())
}

/// A world (the header's `meta.world` or a `world` record), one facet a line.
fn describe_world(w: &Value) -> Vec<String> {
    let s = |v: &Value| escape(v.as_str().unwrap_or("-")).into_owned();
    let list = |v: &Value| {
        escape(
            &v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default(),
        )
        .into_owned()
    };
    let mut out = vec![format!("workspace: {}", s(&w["workspace"]))];
    out.push(format!("built-in tools: {}", list(&w["tools"]["builtin"])));
    for m in w["tools"]["mcp"].as_array().into_iter().flatten() {
        let what = match (m["command"].as_str(), m["url"].as_str()) {
            (Some(c), _) => std::iter::once(c.to_string())
                .chain(
                    m["args"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a.as_str().map(str::to_string)),
                )
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(u)) => u.to_string(),
            _ => "?".into(),
        };
        out.push(format!(
            "MCP {}: {} ({}{}, from {})",
            s(&m["name"]),
            escape(&what),
            if m["trusted"].as_bool() == Some(true) {
                "trusted"
            } else {
                "not trusted: an interrupted call of it is never re-run"
            },
            if m["sandbox"].as_bool() == Some(true) {
                ", sandboxed"
            } else {
                ""
            },
            s(&m["source"])
        ));
    }
    let grants = list(&w["approval"]["grants"]);
    out.push(format!(
        "approval: {}{}",
        s(&w["approval"]["mode"]),
        if grants.is_empty() {
            String::new()
        } else {
            format!(" (always: {grants})")
        }
    ));
    out.push(format!(
        "sandbox: {}, network {}, at most {} processes",
        s(&w["sandbox"]["mode"]),
        if w["sandbox"]["network"].as_bool() == Some(true) {
            "on"
        } else {
            "off"
        },
        w["sandbox"]["max_processes"]
    ));
    if let Some(p) = w.get("provider").filter(|p| p.is_object()) {
        out.push(format!(
            "model: {} ({} at {}{})",
            s(&p["model"]),
            s(&p["api"]),
            s(&p["base_url"]),
            p["context_window"]
                .as_u64()
                .map(|n| format!(", window {n} tokens"))
                .unwrap_or_default()
        ));
    }
    out
}

fn describe_sandbox(v: &Value) -> String {
    match (v["mode"].as_str(), v["detail"].as_str()) {
        (Some(mode), Some(detail)) => format!(
            "{mode}, network {} ({})",
            if v["network"].as_bool() == Some(true) {
                "on"
            } else {
                "off"
            },
            escape(detail)
        ),
        _ => escape(&v.to_string()).to_string(),
    }
}

/// Prints records one by one, remembering the date so each new day gets its own line.
#[derive(Default)]
struct Printer {
    day: String,
    /// When each call's approval was asked for (to say how long it waited).
    asked: std::collections::HashMap<String, String>,
}

impl Printer {
    fn record(&mut self, r: &StoredRecord, out: &mut impl Write) -> std::io::Result<()> {
        // ts: 2026-12-03T14:00:01.123Z
        let (day, time) = r.ts.split_once('T').unwrap_or((&r.ts, ""));
        if day != self.day {
            writeln!(out, "\n-- {day} (UTC)")?;
            self.day = day.to_string();
        }
        let time = time.trim_end_matches('Z');
        let at = format!("{time:<12} #{:<4}", r.seq);
        let d = &r.data;
        let s = |k: &str| d[k].as_str().unwrap_or_default().to_string();
        match r.kind.as_str() {
            "input" => writeln!(
                out,
                "{at} > {}  [{} from {}]",
                escape_text(&s("text")),
                escape(&s("input_id")),
                escape(&s("source"))
            ),
            "control" => writeln!(
                out,
                "{at} control: {}{}  [{}]",
                escape(&s("action")),
                d["reason"]
                    .as_str()
                    .map(|r| format!(" ({})", escape(r)))
                    .unwrap_or_default(),
                escape(&s("input_id"))
            ),
            "turn_start" => writeln!(out, "{at} turn {} starts", d["turn"]),
            "response" => self.response(&at, d, out),
            "tool_intent" => writeln!(
                out,
                "{at}   call {} {}: intent{}",
                escape(&s("call_id")),
                escape(&s("tool")),
                if d["idempotent"].as_bool() == Some(true) {
                    " (idempotent: may be re-run)"
                } else {
                    " (not idempotent: never run twice)"
                }
            ),
            "tool_start" => writeln!(
                out,
                "{at}   call {}: started{}",
                escape(&s("call_id")),
                d["process"]["pgid"]
                    .as_i64()
                    .map(|g| format!(" (process group {g})"))
                    .unwrap_or_default()
            ),
            "tool_task" => writeln!(
                out,
                "{at}   call {}: task {} on MCP server {}: {}",
                escape(&s("call_id")),
                escape(&s("task_id")),
                escape(&s("server")),
                escape(&s("status"))
            ),
            "tool_task_status" => writeln!(
                out,
                "{at}   call {}: task {}: {}",
                escape(&s("call_id")),
                escape(&s("task_id")),
                escape(&s("status"))
            ),
            "tool_outcome" => {
                let result = s("result");
                let status = s("status");
                let mark = if status == "in_doubt" {
                    "  <-- IN DOUBT"
                } else {
                    ""
                };
                writeln!(
                    out,
                    "{at}   call {}: {status}{}{}{mark}\n{}",
                    escape(&s("call_id")),
                    d["exit_code"]
                        .as_i64()
                        .map(|c| format!(", exit {c}"))
                        .unwrap_or_default(),
                    d["duration_ms"]
                        .as_u64()
                        .map(|ms| format!(", {ms} ms"))
                        .unwrap_or_default(),
                    indent(&elide(&result), "                     ")
                )
            }
            "approval_request" => {
                self.asked.insert(s("call_id"), s("requested_at"));
                writeln!(
                    out,
                    "{at}   call {} {}: WAITS FOR APPROVAL ({}: {})",
                    escape(&s("call_id")),
                    escape(&s("tool")),
                    escape(&s("mode")),
                    escape(&s("reason"))
                )
            }
            "approval" => {
                let waited = self
                    .asked
                    .get(&s("call_id"))
                    .and_then(|asked| waited(asked, &s("decided_at")))
                    .map(|w| format!(" after {w}"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{at}   call {}: {} by {} ({}){waited}{}",
                    escape(&s("call_id")),
                    if s("decision") == "allow" {
                        "allowed"
                    } else {
                        "DENIED"
                    },
                    escape(&s("by")),
                    escape(&s("scope")),
                    d["reason"]
                        .as_str()
                        .map(|r| format!(": {}", escape(r)))
                        .unwrap_or_default()
                )
            }
            "interrupted" => writeln!(
                out,
                "{at} INTERRUPTED ({}){}",
                escape(&s("reason")),
                d["turn"]
                    .as_u64()
                    .map(|t| format!(" in turn {t}"))
                    .unwrap_or_default()
            ),
            "resume" => writeln!(
                out,
                "{at} RESUMED ({}): {}",
                escape(&s("trigger")),
                receipt(d)
            ),
            "fork" => writeln!(
                out,
                "{at} forked from {} at turn {} (its seq {})",
                escape(&s("parent")),
                d["at_turn"],
                d["parent_seq"]
            ),
            "compaction" => writeln!(
                out,
                "{at} COMPACTION ({}): seqs {}..={} summarised, about {} -> {} tokens sent\n{}",
                escape(&s("trigger")),
                d["from_seq"],
                d["through_seq"],
                d["tokens_before"],
                d["tokens_after"],
                indent(&escape_text(&s("summary")), "                     ")
            ),
            "world" => {
                writeln!(
                    out,
                    "{at} WORLD {} by {}{}:",
                    if s("reason") == "changed" {
                        "CHANGED"
                    } else {
                        "RECORDED"
                    },
                    escape(&s("by")),
                    d["changed"]
                        .as_array()
                        .filter(|c| !c.is_empty())
                        .map(|c| format!(
                            " ({})",
                            escape(
                                &c.iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        ))
                        .unwrap_or_default()
                )?;
                for line in describe_world(d) {
                    writeln!(out, "                     {line}")?;
                }
                Ok(())
            }
            "needs_owner" => writeln!(
                out,
                "{at} LEFT ALONE by {}: {}\n                     resume it in its world with: {}",
                escape(&s("by")),
                escape(&s("reason")),
                escape(&s("resume_with"))
            ),
            // a Python program's records: its conversation, its graph's values decoded
            k if k.starts_with("host_") && super::show_host::record(&at, r, out)? => Ok(()),
            // a kind this view does not know (a newer build): shown as it is
            other => writeln!(out, "{at} {}: {}", escape(other), escape(&d.to_string())),
        }
    }

    fn response(&self, at: &str, d: &Value, out: &mut impl Write) -> std::io::Result<()> {
        let turn = &d["turn"];
        if let Some(f) = d.get("failure").filter(|f| !f.is_null()) {
            writeln!(
                out,
                "{at} [turn {turn}] MODEL FAILED{}: {}",
                if f["transient"].as_bool() == Some(true) {
                    " (transient)"
                } else {
                    ""
                },
                escape(f["message"].as_str().unwrap_or_default())
            )?;
        }
        for item in d["items"].as_array().into_iter().flatten() {
            match item["type"].as_str() {
                Some("text") => writeln!(
                    out,
                    "{at} [turn {turn}] {}",
                    escape_text(item["text"].as_str().unwrap_or_default())
                )?,
                Some("reasoning") | Some("provider_reasoning") => writeln!(
                    out,
                    "{at} [turn {turn}] (thinking) {}",
                    escape_text(&elide(item["text"].as_str().unwrap_or_default()))
                )?,
                Some("tool_call") => writeln!(
                    out,
                    "{at} [turn {turn}] -> {} {}  (call {})",
                    escape(item["name"].as_str().unwrap_or_default()),
                    escape(item["arguments"].as_str().unwrap_or_default()),
                    escape(item["call_id"].as_str().unwrap_or_default())
                )?,
                _ => writeln!(out, "{at} [turn {turn}] {}", escape(&item.to_string()))?,
            }
        }
        let u = &d["usage"];
        let retries = d["attempts"].as_array().map_or(0, Vec::len);
        if u.is_object() || retries > 0 {
            let mut parts = Vec::new();
            if let (Some(p), Some(c)) =
                (u["prompt_tokens"].as_u64(), u["completion_tokens"].as_u64())
            {
                parts.push(match u["cached_tokens"].as_u64() {
                    Some(k) => format!("{p} prompt ({k} cached) + {c} completion tokens"),
                    None => format!("{p} prompt + {c} completion tokens"),
                });
            }
            if let Some(m) = d["model"].as_str() {
                parts.push(escape(m).to_string());
            }
            if retries > 0 {
                parts.push(format!("{retries} failed attempt(s) before"));
            }
            if !parts.is_empty() {
                writeln!(out, "{:19}   ({})", "", parts.join(", "))?;
            }
        }
        Ok(())
    }
}

/// A resume receipt in words: every count, and where cut bytes went.
fn receipt(d: &Value) -> String {
    let n = |k: &str| d[k].as_u64().unwrap_or(0);
    let mut s = format!(
        "{} records replayed; calls: {} reused, {} re-run, {} in doubt, {} not started; {} process group(s) terminated; {} input(s) pending",
        n("records_replayed"),
        n("calls_reused"),
        n("calls_rerun"),
        n("calls_in_doubt"),
        n("calls_not_started"),
        n("processes_terminated"),
        n("inputs_pending"),
    );
    if d["mcp"].is_object() {
        let m = |k: &str| d["mcp"][k].as_u64().unwrap_or(0);
        s.push_str(&format!(
            "; MCP calls: {} reused, {} re-run, {} in doubt{}",
            m("calls_reused"),
            m("calls_rerun"),
            m("calls_in_doubt"),
            crate::run::live::task_counts(&d["mcp"])
        ));
    }
    if let Some(t) = d["open_turn"].as_u64() {
        s.push_str(&format!("; turn {t} requested again"));
    }
    for c in d["in_doubt"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "; call {} ({}) not run again: {}",
            escape(c["call_id"].as_str().unwrap_or("?")),
            escape(c["tool"].as_str().unwrap_or("?")),
            escape(c["why"].as_str().unwrap_or("?"))
        ));
    }
    match d["world_seq"].as_u64() {
        Some(0) => s.push_str("; in the world the session was made with"),
        Some(w) => s.push_str(&format!("; in the world recorded at #{w}")),
        None => {}
    }
    if n("truncated_bytes") > 0 {
        s.push_str(&format!(
            "; {} bytes of crash debris cut",
            n("truncated_bytes")
        ));
        if let Some(p) = d["truncated_saved_to"].as_str() {
            s.push_str(&format!(" (saved to {})", escape(p)));
        }
    }
    for a in d["approvals"].as_array().into_iter().flatten() {
        let t = |k: &str| a[k].as_str().unwrap_or_default();
        match a["decision"].as_str() {
            Some(decision) => s.push_str(&format!(
                "; call {} ({}) waited {} for approval: {} by {}",
                escape(t("call_id")),
                escape(t("tool")),
                a["waited_ms"]
                    .as_u64()
                    .map(seconds)
                    .unwrap_or_else(|| "?".into()),
                if decision == "allow" {
                    "allowed"
                } else {
                    "denied"
                },
                escape(t("by"))
            )),
            None => s.push_str(&format!(
                "; call {} ({}) still waits for approval",
                escape(t("call_id")),
                escape(t("tool"))
            )),
        }
    }
    if d["every_call_has_one_result"].as_bool() == Some(false) {
        s.push_str("; NOT every call has one result");
    }
    s
}

/// How long from `from` to `to` (two record times), in words.
fn waited(from: &str, to: &str) -> Option<String> {
    lazarus_ledger::clock::millis_between(from, to).map(seconds)
}

/// Milliseconds in seconds, for people.
fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// Head and tail of a long text, the middle replaced by a count.
fn elide(text: &str) -> String {
    let n = text.chars().count();
    if n <= RESULT_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(RESULT_CHARS / 2).collect();
    let tail: String = text.chars().skip(n - RESULT_CHARS / 2).collect();
    format!(
        "{head}\n… {} characters not shown (--json shows everything) …\n{tail}",
        n - RESULT_CHARS
    )
}

fn indent(text: &str, pad: &str) -> String {
    escape_text(text)
        .lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
