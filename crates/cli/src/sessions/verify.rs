//! `sessions verify` (every line checked; by file for local sessions, by replay for a
//! database) and `sessions repair` (cut back to the last good record, saving the rest).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Result;
use lazarus_ledger::Problem;
use lazarus_session::{LocalStore, SessionId, Store, Waiting};
use serde_json::json;

use crate::term::escape;

pub(super) fn repair(
    local: &LocalStore,
    id: &SessionId,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let r = local.repair(id)?;
    if json {
        writeln!(
            out,
            "{}",
            json!({
                "id": id,
                "kept_bytes": r.kept_bytes,
                "removed_bytes": r.removed.as_ref().map(|c| c.bytes),
                "first_bad_line": r.removed.as_ref().map(|c| c.line),
                "reason": r.removed.as_ref().map(|c| c.reason.to_string()),
                "saved_to": r.saved_to,
            })
        )?;
    } else if let (Some(cut), Some(saved)) = (&r.removed, &r.saved_to) {
        writeln!(
            out,
            "repaired {id}: removed {} bytes from line {} (offset {}; {}), kept {} bytes; removed bytes saved to {}",
            cut.bytes,
            cut.line,
            cut.offset,
            cut.reason,
            r.kept_bytes,
            saved.display()
        )?;
    } else {
        writeln!(out, "{id} is clean; nothing to repair")?;
    }
    Ok(())
}

/// Progress of a command over many sessions: a bar on a terminal's stderr (never mixed into
/// the lines written meanwhile: they are printed with the bar suspended), and the summary
/// line at the end.
struct Progress {
    bar: indicatif::ProgressBar,
    checked: usize,
    clean: usize,
    problems: usize,
}

impl Progress {
    fn new(len: usize) -> Self {
        let bar = if std::io::stderr().is_terminal() && len > 1 {
            let b = indicatif::ProgressBar::new(len as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{wide_bar} {pos}/{len} sessions checked, {eta} left",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        } else {
            indicatif::ProgressBar::hidden()
        };
        Progress {
            bar,
            checked: 0,
            clean: 0,
            problems: 0,
        }
    }

    /// Records one session's result and prints its lines (bar suspended meanwhile).
    fn report(
        &mut self,
        problems: usize,
        out: &mut impl Write,
        lines: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        self.checked += 1;
        self.problems += problems;
        if problems == 0 {
            self.clean += 1;
        }
        self.bar.suspend(|| lines(out))?;
        self.bar.inc(1);
        Ok(())
    }

    /// The summary (on stdout with text, on stderr with --json so the stream stays one
    /// object per line); the exit code.
    fn finish(self, all: bool, json: bool, out: &mut impl Write) -> Result<i32> {
        self.bar.finish_and_clear();
        if all {
            let line = format!(
                "checked {} sessions: {} clean, {} with problems ({} problems in all)",
                self.checked,
                self.clean,
                self.checked - self.clean,
                self.problems
            );
            if json {
                eprintln!("{line}");
            } else {
                writeln!(out, "{line}")?;
            }
        }
        Ok(if self.problems == 0 { 0 } else { 1 })
    }
}

fn usage_id_or_all() -> anyhow::Error {
    crate::Usage("give a session ID, or --all for every session".into()).into()
}

/// Verify for stores without files: replaying checks framing, CRC, seqs and meaning.
pub(super) fn verify_by_replay(
    store: &dyn Store,
    id: Option<SessionId>,
    all: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let ids: Vec<SessionId> = match (id, all) {
        (Some(id), _) => vec![id],
        (None, true) => store.list()?.into_iter().map(|s| s.id).collect(),
        (None, false) => return Err(usage_id_or_all()),
    };
    let mut progress = Progress::new(ids.len());
    for id in ids {
        let waiting = store.waiting(&id).unwrap_or_default();
        match store.load(&id) {
            Ok(st) => progress.report(0, out, |out| {
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": id, "clean": true, "records": st.last_seq, "waiting": waiting, "error": null})
                    )
                } else {
                    writeln!(out, "{id}: ok ({} records){}", st.last_seq, waiting_note(&waiting))
                }
            })?,
            Err(e) => progress.report(1, out, |out| {
                if json {
                    writeln!(
                        out,
                        "{}",
                        json!({"id": id, "clean": false, "error": e.to_string()})
                    )
                } else {
                    writeln!(out, "{id}: {}", escape(&e.to_string()))
                }
            })?,
        }
    }
    progress.finish(all, json, out)
}

pub(super) fn verify(
    store: &LocalStore,
    id: Option<SessionId>,
    all: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<i32> {
    let paths: Vec<PathBuf> = match (id, all) {
        (Some(id), _) => vec![store.path_of(&id)],
        (None, true) => {
            let mut v: Vec<PathBuf> = std::fs::read_dir(store.dir())?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            v.sort();
            v
        }
        (None, false) => return Err(usage_id_or_all()),
    };
    let mut progress = Progress::new(paths.len());
    for path in &paths {
        // The id the file is named for (`null` for a name no session could have).
        let id = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|stem| SessionId::parse(stem).ok());
        let shown = escape(&path.display().to_string()).into_owned();
        let waiting = id
            .as_ref()
            .and_then(|id| store.waiting(id).ok())
            .unwrap_or_default();
        let report = match store.verify_path(path) {
            Ok(r) => r,
            Err(e) => {
                progress.report(1, out, |out| {
                    if json {
                        writeln!(
                            out,
                            "{}",
                            json!({"id": id, "path": path, "clean": false, "error": e.to_string()})
                        )
                    } else {
                        writeln!(out, "{shown}: {}", escape(&e.to_string()))
                    }
                })?;
                continue;
            }
        };
        progress.report(report.problems.len(), out, |out| {
            if json {
                let list: Vec<_> = report
                    .problems
                    .iter()
                    .map(|f| {
                        json!({
                            "line": f.line, "offset": f.offset, "problem": f.problem.to_string(),
                            "recoverable": f.recoverable,
                        })
                    })
                    .collect();
                return writeln!(
                    out,
                    "{}",
                    json!({"id": id, "path": path, "clean": report.is_clean(), "records": report.records, "bytes": report.size, "problems": list, "waiting": waiting, "error": null})
                );
            }
            if report.is_clean() {
                return writeln!(
                    out,
                    "{shown}: ok ({} records, {} bytes){}",
                    report.records,
                    report.size,
                    waiting_note(&waiting)
                );
            }
            if waiting.messages > 0 || waiting.set_aside > 0 {
                writeln!(out, "{shown}:{}", waiting_note(&waiting))?;
            }
            for f in &report.problems {
                let hint = match (&f.problem, f.recoverable) {
                    (Problem::Newer(_), _) => {
                        "a newer Lazarus (or the `lazarus` Python package) wrote it: upgrade `lazarus` to read this session (`repair` refuses to cut it)"
                    }
                    (Problem::TornTail { .. }, _) | (_, true) => {
                        "crash debris: cut automatically at the next open, or by `lazarus sessions repair`"
                    }
                    _ => {
                        "corruption: `lazarus sessions repair` cuts back to the last good record (saving the rest)"
                    }
                };
                writeln!(
                    out,
                    "{shown}: line {} (byte offset {}): {} — {hint}",
                    f.line, f.offset, f.problem
                )?;
            }
            Ok(())
        })?;
    }
    progress.finish(all, json, out)
}

/// "; 3 messages waiting in the inbox (oldest 2 min ago) …": what was accepted and not yet
/// recorded, named (it is not a problem: the next writer records it).
fn waiting_note(w: &Waiting) -> String {
    let mut note = String::new();
    if w.messages > 0 {
        note.push_str(&format!(
            "; {} message(s) waiting in its inbox (the oldest delivered {}): accepted, not yet recorded — the next writer (`lazarus run --session`, a gateway, `sessions send`) records them first",
            w.messages,
            w.oldest.as_deref().map_or("-".into(), crate::fmt::ago)
        ));
    }
    if w.set_aside > 0 {
        note.push_str(&format!(
            "; {} inbox file(s) failed their check and were set aside as .bad (kept, not delivered)",
            w.set_aside
        ));
    }
    note
}
