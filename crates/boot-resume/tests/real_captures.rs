//! The table of real captures: files the real programs wrote when killed at known points
//! (made by scripts/capture-real/capture.py; each program's `endings.json` records every
//! scenario's true ending and the verdict it must get). Every scenario is scanned the way
//! `lazarus boot-resume` scans (discovery included, so OpenClaw's SQLite store is read
//! through its real schema), with the default window and with a tiny first window that
//! forces the window to grow.
mod common;

use common::{copy_dir, expected_for, format_of, outcome, root, scan_dir};
use lazarus_boot_resume::Format;
use lazarus_boot_resume::scan::Report;
use lazarus_boot_resume::tail::TailOptions;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Scans every capture (with the default options, a 4 KiB first window and a tiny one) and hands each
/// scenario's reports to `check`: (program, scenario, its endings entry, first window,
/// reports). Returns the programs seen.
fn each_capture(mut check: impl FnMut(&str, &str, &Value, u64, &[Report])) -> Vec<String> {
    let mut programs = Vec::new();
    for prog in std::fs::read_dir(root()).expect("tests/fixtures/real") {
        let prog = prog.expect("entry").path();
        let name = prog
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let endings: Value = serde_json::from_slice(
            &std::fs::read(prog.join("endings.json")).expect("endings.json"),
        )
        .expect("endings.json parses");
        let fmt = format_of(&name);
        programs.push(name.clone());
        for (scenario, entry) in endings.as_object().expect("object") {
            if scenario.starts_with('_') {
                continue;
            }
            let dir = prog.join(scenario);
            if entry["verdict"] == "absent" {
                // The program left no session at all (pi before its first answer).
                let files = entry["files"].as_array().map_or(0, Vec::len);
                assert_eq!(files, 0, "{name}/{scenario}: expected no session file");
                continue;
            }
            assert!(dir.is_dir(), "{name}/{scenario}: no capture directory");
            // A copy: opening a WAL-mode SQLite store creates its -shm beside it, and the
            // fixtures stay as the capture left them.
            let copy = tempfile::tempdir().expect("tempdir");
            copy_dir(&dir, copy.path());
            for first in [0, 4096, 64] {
                let reports = scan_dir(fmt, copy.path(), first);
                check(&name, scenario, entry, first, &reports);
            }
        }
    }
    programs.sort();
    programs
}

#[test]
fn every_real_capture_gets_the_verdict_of_its_true_ending() {
    let mut failures = Vec::new();
    let mut checked = 0;
    let programs = each_capture(|name, scenario, entry, first, reports| {
        if reports.is_empty() {
            failures.push(format!("{name}/{scenario}: nothing found"));
        }
        for r in reports {
            checked += 1;
            let want = expected_for(entry, r);
            let got = outcome(r);
            if got != want {
                failures.push(format!(
                    "{name}/{scenario} [{}] (window {first}): got {got} ({}); want {want} — true ending: {}",
                    r.path.rsplit('/').next().unwrap_or(""),
                    r.reason,
                    entry["ending"].as_str().unwrap_or("?")
                ));
            }
        }
    });
    assert!(checked > 0, "no real capture was checked");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("checked {checked} reports of programs {programs:?}");
}

/// What the resume of every capture that would be resumed carries into its preset's command
/// line: the permission mode the session ran in (Claude Code), and for a cut-off call, each
/// call by its tool (with its MCP server), arguments and id, saying its effect is unknown.
/// Only Gemini CLI, which records a call once it has finished, may name none (and says so).
#[test]
fn every_resumable_capture_resumes_in_its_mode_naming_its_interrupted_calls() {
    use lazarus_boot_resume::Verdict;
    use lazarus_boot_resume::inject::{self, Preset, ResumeRequest};
    let mut failures = Vec::new();
    let (mut resumed, mut named, mut mcp) = (0, 0, 0);
    each_capture(|name, scenario, entry, first, reports| {
        for r in reports.iter().filter(|r| r.verdict.is_resumable(true)) {
            let Some(fmt) = r.format() else { continue };
            resumed += 1;
            let whose = format!("{name}/{scenario} (window {first})");
            let message = inject::resume_message(
                inject::DEFAULT_MESSAGE,
                r.verdict,
                &r.interrupted_calls,
                r.interrupted_call.as_deref(),
            );
            let req = ResumeRequest {
                format: fmt,
                session_id: r.session.clone(),
                session_key: r.session_key.clone(),
                path: r.path.clone(),
                cwd: r.cwd.clone(),
                permission_mode: r.permission_mode.clone(),
                verdict: r.verdict,
                reason: r.reason.clone(),
                idempotency_key: "k".into(),
                message: message.clone(),
            };
            let preset = Preset::for_format(fmt).expect("a preset");
            let argv = preset.template().build(&req).expect("the command builds");
            if let Some(mode) = entry["permission_mode"].as_str() {
                let at = argv.iter().position(|a| a == "--permission-mode");
                if at.and_then(|i| argv.get(i + 1)).map(String::as_str) != Some(mode) {
                    failures.push(format!("{whose}: ran in {mode}, resumed with {argv:?}"));
                }
            }
            // (OpenClaw's preset passes it inside its JSON parameters)
            let carried = |a: &String| {
                a.contains(&message)
                    || serde_json::from_str::<Value>(a).is_ok_and(|v| v["message"] == *message)
            };
            if !argv.iter().any(carried) {
                failures.push(format!("{whose}: the message is not in {argv:?}"));
            }
            if r.verdict != Verdict::InterruptedToolCall {
                continue;
            }
            if !message.contains("effect is unknown") {
                failures.push(format!(
                    "{whose}: {message:?} does not say the effect is unknown"
                ));
            }
            if r.interrupted_calls.is_empty() && name != "gemini-cli" {
                failures.push(format!("{whose}: no interrupted call named ({})", r.reason));
            }
            for c in &r.interrupted_calls {
                named += 1;
                if !message.contains(&c.describe()) {
                    failures.push(format!("{whose}: {message:?} does not name {c:?}"));
                }
                if c.mcp_server.is_some() {
                    mcp += 1;
                }
            }
            if let Some(want) = entry["interrupted_calls"].as_array() {
                let got: Vec<&str> = r
                    .interrupted_calls
                    .iter()
                    .map(|c| c.tool.as_str())
                    .collect();
                let want: Vec<&str> = want.iter().filter_map(Value::as_str).collect();
                if got != want {
                    failures.push(format!("{whose}: calls {got:?}, want {want:?}"));
                }
            }
        }
    });
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        resumed > 20 && named > 8 && mcp >= 2,
        "{resumed} resumed, {named} calls named, {mcp} MCP calls"
    );
}

/// The main transcripts (not sub-agents') of the Claude Code captures.
fn claude_transcripts() -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "subagents") {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("claude"), &mut out);
    out.sort();
    out
}

/// Claude Code: a resume runs in the permission mode of the newest line that carries one,
/// however far back. Every prefix of every real capture (what the file held at each moment
/// the program could have been killed) that boot-resume would resume must report the mode of
/// the newest line naming `permissionMode` in it, with the default first window and a tiny
/// one. The captures all ran in one mode, so each line's mode is renamed to one of its own
/// (`bypassPermissions` → `mode-at-line-K`): an older line's mode is then a wrong answer.
/// Since ToolSearch, tool_result lines carry no mode: the newest one can lie before the
/// window, and the check fails loudly unless such prefixes were among those checked.
#[test]
fn claude_code_permission_mode_comes_from_the_newest_line_however_far_back() {
    use lazarus_boot_resume::tail::classify_file;
    let mut checked = 0;
    let mut beyond_window = 0;
    let mut failures = Vec::new();
    let files = claude_transcripts();
    assert!(files.len() >= 10, "{files:?}");
    for f in &files {
        let bytes = std::fs::read(f).expect("read");
        let lines: Vec<&[u8]> = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(f.file_name().expect("name"));
        let mut newest: Option<(usize, String)> = None;
        let mut prefix = Vec::new();
        for (k, line) in lines.iter().enumerate() {
            let line = String::from_utf8(line.to_vec())
                .expect("UTF-8")
                .replace(
                    "\"permissionMode\":\"bypassPermissions\"",
                    &format!("\"permissionMode\":\"mode-at-line-{k}\""),
                )
                .into_bytes();
            let line = line.as_slice();
            prefix.extend_from_slice(line);
            prefix.push(b'\n');
            let v: Value = serde_json::from_slice(line).expect("a capture line parses");
            if let Some(m) = v["permissionMode"].as_str()
                && v["isSidechain"] != Value::Bool(true)
            {
                newest = Some((prefix.len() - line.len() - 1, m.to_string()));
            }
            std::fs::write(&path, &prefix).expect("write");
            for first in [4096u64, 64] {
                let opts = TailOptions {
                    first_window: first,
                    max_window: 8 << 20,
                    whole_file_max: 0,
                };
                let mut buf = Vec::new();
                let res = classify_file(&path, Some(Format::ClaudeCode), None, opts, &mut buf)
                    .expect("classify");
                if !res.classification.verdict.is_resumable(true) {
                    continue;
                }
                checked += 1;
                let want = newest.as_ref().map(|(_, m)| m.clone());
                if let Some((at, _)) = &newest
                    && (prefix.len() - at) as u64 > res.window
                {
                    beyond_window += 1;
                }
                if res.classification.permission_mode != want {
                    failures.push(format!(
                        "{} first {k} lines (window {first}): got {:?}, want {want:?}",
                        f.display(),
                        res.classification.permission_mode
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} wrong modes:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 50, "only {checked} resumable prefixes checked");
    assert!(
        beyond_window > 0,
        "no prefix had its newest mode before the window: the rule was never tested"
    );
    eprintln!("{checked} resumable prefixes, {beyond_window} with the mode before the window");
}
