//! The live output of a run: records (or streamed text) on stdout, model retries as one
//! transient line on a terminal, and the receipt and sandbox in words.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use lazarus_agent::runner::RunEvent;
use serde_json::json;

use crate::term::{escape, escape_text};

/// `workspace-write (no network; Landlock ABI 7, …)` from a receipt's `sandbox`.
fn describe_sandbox_record(v: &serde_json::Value) -> String {
    let Some(mode) = v["mode"].as_str() else {
        return "not recorded".into();
    };
    let net = if v["network"].as_bool() == Some(true) {
        "network allowed"
    } else {
        "no network"
    };
    format!("{mode} ({net}; {})", v["detail"].as_str().unwrap_or("?"))
}

/// Whether stdout's last line is unfinished (streamed text without its newline yet).
static LINE_OPEN: AtomicBool = AtomicBool::new(false);

/// Ends a line streamed text left unfinished.
pub(super) fn end_open_line() {
    if LINE_OPEN.load(Ordering::Relaxed) {
        print_line("");
    }
}

/// Prints one line; a closed stdout must not stop the run (every record is durable already).
pub(super) fn print_line(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}").and_then(|_| out.flush());
    LINE_OPEN.store(false, Ordering::Relaxed);
}

fn print_raw(s: &str) {
    if s.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{s}").and_then(|_| out.flush());
    LINE_OPEN.store(!s.ends_with('\n'), Ordering::Relaxed);
}

/// Live output of a run: records or text on stdout; model retries as one transient status
/// line on a terminal's stderr (gone once the request succeeds) and one line at the end if
/// it never does — never one line per attempt.
pub(super) struct Live {
    json: bool,
    /// Retries of the current model request.
    pub(super) retries: Arc<AtomicU32>,
    /// The retry status line, while a request is being retried (terminals only).
    status: Option<indicatif::ProgressBar>,
}

impl Live {
    pub(super) fn new(json: bool) -> Self {
        Live {
            json,
            retries: Arc::new(AtomicU32::new(0)),
            status: None,
        }
    }

    pub(super) fn show(&mut self, ev: &RunEvent<'_>) {
        match ev {
            RunEvent::Retry { error, wait } => {
                let n = self.retries.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::info!(attempt = n, error, "model request failed; retrying");
                if !std::io::stderr().is_terminal() {
                    return;
                }
                let bar = self.status.get_or_insert_with(|| {
                    let b = indicatif::ProgressBar::new_spinner();
                    b.enable_steady_tick(std::time::Duration::from_millis(120));
                    b
                });
                let short: String = error.chars().take(100).collect();
                bar.set_message(format!(
                    "model request failed ({}); attempt {} in {} ms",
                    escape(&short),
                    n + 1,
                    wait.as_millis()
                ));
                return;
            }
            RunEvent::Record { kind, .. } if *kind == "turn_start" => {
                self.retries.store(0, Ordering::Relaxed);
                // one turn's text never runs into the next one's
                if !self.json && LINE_OPEN.load(Ordering::Relaxed) {
                    print_line("");
                }
            }
            _ => {}
        }
        // Anything else means the model answered (or the run moved on): the status goes.
        if let Some(bar) = self.status.take() {
            bar.finish_and_clear();
        }
        show_event(ev, self.json);
    }
}

fn show_event(ev: &RunEvent<'_>, json: bool) {
    if json {
        if let RunEvent::Record {
            seq,
            ts,
            kind,
            data,
        } = ev
        {
            print_line(&json!({"seq": seq, "ts": ts, "kind": kind, "data": data}).to_string());
        }
        return;
    }
    match ev {
        RunEvent::Text(t) => print_raw(&escape_text(t)),
        RunEvent::Reasoning(_) => {}
        RunEvent::Retry { .. } => {}
        RunEvent::ToolRunning {
            name, arguments, ..
        } => print_line(&format!("\n→ {} {}", escape(name), escape(arguments))),
        RunEvent::ToolProgress { text, .. } => print_line(&format!("  … {}", escape(text))),
        RunEvent::Record { kind, data, .. } => match *kind {
            "tool_task" => print_line(&format!(
                "  … task {} on {}: {} (polled every {} ms)",
                escape(data["task_id"].as_str().unwrap_or("?")),
                escape(data["server"].as_str().unwrap_or("?")),
                data["status"].as_str().unwrap_or("?"),
                data["poll_interval_ms"].as_u64().unwrap_or(1000)
            )),
            "tool_task_status" => print_line(&format!(
                "  … task {}: {}",
                escape(data["task_id"].as_str().unwrap_or("?")),
                data["status"].as_str().unwrap_or("?")
            )),
            "tool_outcome" => {
                let result = data["result"].as_str().unwrap_or("");
                let mut lines: Vec<&str> = result.lines().take(12).collect();
                if result.lines().count() > 12 {
                    lines.push("…");
                }
                print_line(&format!(
                    "← [{}] {}",
                    data["status"].as_str().unwrap_or("?"),
                    escape_text(&lines.join("\n  "))
                ));
            }
            "resume" => print_line(&format!(
                "resumed ({}): {} bytes of crash debris cut{}, {} records replayed, {} calls reused, {} re-run, {} in doubt, {} not started{}, {} leftover process groups terminated, {} inputs pending{}; every tool call has exactly one result: {}; sandbox: {}",
                data["trigger"].as_str().unwrap_or("?"),
                data["truncated_bytes"],
                data["truncated_saved_to"]
                    .as_str()
                    .map(|f| format!(" (saved to {f})"))
                    .unwrap_or_default(),
                data["records_replayed"],
                data["calls_reused"],
                data["calls_rerun"],
                data["calls_in_doubt"],
                data["calls_not_started"],
                mcp_counts(&data["mcp"]),
                data["processes_terminated"],
                data["inputs_pending"],
                data["open_turn"]
                    .as_u64()
                    .map(|t| format!(", turn {t} requested again"))
                    .unwrap_or_default(),
                data["every_call_has_one_result"],
                describe_sandbox_record(&data["sandbox"])
            )),
            // A failed response ends the run; its one line goes to stderr then.
            _ => {}
        },
    }
}

/// `(MCP: 1 reused, 0 re-run, 1 in doubt)` when the receipt counts MCP calls.
fn mcp_counts(m: &serde_json::Value) -> String {
    if !m.is_object() {
        return String::new();
    }
    format!(
        " (MCP: {} reused, {} re-run, {} in doubt{})",
        m["calls_reused"],
        m["calls_rerun"],
        m["calls_in_doubt"],
        task_counts(m)
    )
}

/// `; tasks: 1 reattached (1 still working)` when a resume asked for recorded tasks again.
pub(crate) fn task_counts(m: &serde_json::Value) -> String {
    let n = |k: &str| m[k].as_u64().unwrap_or(0);
    if n("tasks_reattached") == 0 {
        return String::new();
    }
    format!(
        "; tasks: {} reattached ({} finished while away, {} still working, {} lost)",
        n("tasks_reattached"),
        n("tasks_finished_while_away"),
        n("tasks_still_working"),
        n("tasks_lost")
    )
}
