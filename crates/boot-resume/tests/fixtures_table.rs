//! Table test: every fixture, every format, against session-formats.md §6 (and our own
//! fixtures for pi, Claude Code and Lazarus). Each case runs through the pure classifier on
//! the whole file, through the tail reader with the default window, through the tail reader
//! with a tiny first window (forcing window growth), and through format auto-detection.
use lazarus_boot_resume::tail::{TailOptions, classify_file};
use lazarus_boot_resume::{Format, SessionMeta, SkipWhy, Verdict};
use std::path::PathBuf;

use Verdict::*;

fn cases() -> Vec<(&'static str, Format, Verdict, bool)> {
    let oc = Format::Openclaw;
    let pi = Format::Pi;
    let cc = Format::ClaudeCode;
    let cx = Format::Codex;
    let lz = Format::Lazarus;
    vec![
        // session-formats.md §6
        ("openclaw/finished", oc, Finished, false),
        ("pi/finished", pi, Finished, false),
        (
            "openclaw/interrupted-tool-call",
            oc,
            InterruptedToolCall,
            false,
        ),
        ("pi/interrupted-tool-call", pi, InterruptedToolCall, false),
        (
            "openclaw/interrupted-after-tool-result",
            oc,
            InterruptedAfterToolResult,
            false,
        ),
        ("openclaw/last-user-message", oc, PendingInput, false),
        ("openclaw/torn-last-line", oc, InterruptedToolCall, true),
        ("pi/torn-last-line", pi, InterruptedToolCall, true),
        (
            "openclaw/aborted-restart-artifact",
            oc,
            InterruptedAfterToolResult,
            false,
        ),
        (
            "openclaw/error-final",
            oc,
            Failed { transient: false },
            false,
        ),
        ("openclaw/compaction-tail-finished", oc, Finished, false),
        ("openclaw/yield-waiting", oc, WaitingExternal, false),
        ("openclaw/branched-leaf-user", oc, PendingInput, false),
        ("claude-code/finished", cc, Finished, false),
        (
            "claude-code/interrupted-tool-call",
            cc,
            InterruptedToolCall,
            false,
        ),
        (
            "claude-code/interrupted-after-tool-result",
            cc,
            InterruptedAfterToolResult,
            false,
        ),
        ("claude-code/last-user-message", cc, PendingInput, false),
        ("claude-code/torn-last-line", cc, InterruptedToolCall, true),
        ("claude-code/user-interrupted", cc, UserStopped, false),
        (
            "claude-code/api-error",
            cc,
            Failed { transient: true },
            false,
        ),
        ("codex/finished", cx, Finished, false),
        (
            "codex/interrupted-tool-call",
            cx,
            InterruptedToolCall,
            false,
        ),
        (
            "codex/interrupted-after-tool-result",
            cx,
            InterruptedAfterToolResult,
            false,
        ),
        ("codex/last-user-message", cx, PendingInput, false),
        ("codex/torn-last-line", cx, InterruptedToolCall, true),
        ("codex/user-aborted", cx, UserStopped, false),
        (
            "codex/subagent-interrupted",
            cx,
            Skipped(SkipWhy::Subagent),
            false,
        ),
        // more pi
        (
            "pi/interrupted-after-tool-result",
            pi,
            InterruptedAfterToolResult,
            false,
        ),
        ("pi/last-user-message", pi, PendingInput, false),
        ("pi/user-stopped", pi, UserStopped, false),
        ("pi/failed-transient", pi, Failed { transient: true }, false),
        ("pi/parallel-partial", pi, InterruptedToolCall, false),
        ("pi/heartbeat", pi, Skipped(SkipWhy::Heartbeat), false),
        (
            "pi/trivial-input",
            pi,
            Skipped(SkipWhy::TrivialInput),
            false,
        ),
        ("pi/header-only", pi, Skipped(SkipWhy::Empty), false),
        ("pi/linear-v1", pi, InterruptedToolCall, false),
        ("pi/leaf-pointer", pi, Finished, false),
        // more Claude Code
        (
            "claude-code/interrupted-stream",
            cc,
            InterruptedStream,
            false,
        ),
        (
            "claude-code/parallel-partial",
            cc,
            InterruptedToolCall,
            false,
        ),
        (
            "claude-code/sdk-owned",
            cc,
            Skipped(SkipWhy::SdkOwned),
            false,
        ),
        (
            "claude-code/task-subagent-running",
            cc,
            InterruptedToolCall,
            false,
        ),
        ("claude-code/old-version-no-stop", cc, Finished, false),
        // more Codex
        ("codex/interrupted-stream", cx, InterruptedStream, false),
        // Lazarus ledger
        ("lazarus/finished", lz, Finished, false),
        ("lazarus/pending-input", lz, PendingInput, false),
        ("lazarus/control-resume", lz, PendingInput, false),
        ("lazarus/interrupted-stream", lz, InterruptedStream, false),
        (
            "lazarus/interrupted-tool-call",
            lz,
            InterruptedToolCall,
            false,
        ),
        ("lazarus/tool-intent", lz, InterruptedToolCall, false),
        (
            "lazarus/interrupted-after-tool-result",
            lz,
            InterruptedAfterToolResult,
            false,
        ),
        (
            "lazarus/failed-transient",
            lz,
            Failed { transient: true },
            false,
        ),
        ("lazarus/failed", lz, Failed { transient: false }, false),
        ("lazarus/user-stopped", lz, UserStopped, false),
        (
            "lazarus/restart-interrupted-tool-call",
            lz,
            InterruptedToolCall,
            false,
        ),
        ("lazarus/header-only", lz, Skipped(SkipWhy::Empty), false),
        ("lazarus/torn-last-line", lz, InterruptedToolCall, true),
    ]
}

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.jsonl"))
}

#[test]
fn every_fixture_has_its_verdict() {
    let mut failures = Vec::new();
    for (name, fmt, want, torn) in cases() {
        let p = path(name);
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let file_name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let meta = SessionMeta {
            at_start: true,
            file_name,
            ..Default::default()
        };
        let c = fmt.classify(&bytes, &meta);
        if c.verdict != want || c.torn != torn {
            failures.push(format!(
                "{name} (pure): got {} torn={} ({}); want {want} torn={torn}",
                c.verdict, c.torn, c.reason
            ));
        }
        let mut buf = Vec::new();
        for (label, opts, f) in [
            ("tail", TailOptions::default(), Some(fmt)),
            (
                "tiny window",
                TailOptions {
                    first_window: 64,
                    max_window: 8 << 20,
                    whole_file_max: 0,
                },
                Some(fmt),
            ),
            ("auto", TailOptions::default(), None),
        ] {
            match classify_file(&p, f, None, opts, &mut buf) {
                Ok(r) => {
                    let c = r.classification;
                    let fmt_ok = f.is_some()
                        || r.format == fmt
                        || (fmt == Format::Openclaw && r.format == Format::Pi);
                    if c.verdict != want || c.torn != torn || !fmt_ok {
                        failures.push(format!(
                            "{name} ({label}): got {} {} torn={} ({}); want {} {want} torn={torn}",
                            r.format.as_str(),
                            c.verdict,
                            c.torn,
                            c.reason,
                            fmt.as_str()
                        ));
                    }
                }
                Err(e) => failures.push(format!("{name} ({label}): error {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_fixture_file_is_in_the_table() {
    let listed: Vec<String> = cases().iter().map(|c| c.0.to_string()).collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for d in std::fs::read_dir(&root).expect("fixtures dir") {
        let d = d.expect("entry").path();
        if d.file_name().is_some_and(|n| n == "real") {
            continue; // real captures have their own table (tests/real_captures.rs)
        }
        for f in std::fs::read_dir(&d).expect("format dir") {
            let f = f.expect("entry").path();
            let name = format!(
                "{}/{}",
                d.file_name().and_then(|n| n.to_str()).unwrap_or(""),
                f.file_stem().and_then(|n| n.to_str()).unwrap_or("")
            );
            assert!(
                listed.contains(&name),
                "fixture {name} has no expected verdict in the table"
            );
        }
    }
}

#[test]
fn ids_and_cwd_are_extracted() {
    let mut buf = Vec::new();
    let r = classify_file(
        &path("codex/interrupted-tool-call"),
        Some(Format::Codex),
        None,
        TailOptions::default(),
        &mut buf,
    )
    .expect("classify");
    assert_eq!(
        r.classification.session_id.as_deref(),
        Some("019a5c31-0a7e-7f15-b2c8-4d6e9f1a3b57")
    );
    assert_eq!(
        r.classification.cwd.as_deref(),
        Some("/home/dana/src/inventory-api")
    );
    let r = classify_file(
        &path("claude-code/interrupted-tool-call"),
        Some(Format::ClaudeCode),
        None,
        TailOptions::default(),
        &mut buf,
    )
    .expect("classify");
    assert_eq!(
        r.classification.session_id.as_deref(),
        Some("7d1f3c2a-5b8e-4a90-9c61-2e4f8a0b3d57")
    );
    assert_eq!(r.classification.last_record_id.as_deref(), Some("u-04"));
    let r = classify_file(
        &path("lazarus/tool-intent"),
        Some(Format::Lazarus),
        None,
        TailOptions::default(),
        &mut buf,
    )
    .expect("classify");
    assert_eq!(
        r.classification.session_id.as_deref(),
        Some("0199a3c2-7e10-7d3a-9b42-1e6c0d8f2a71")
    );
    assert_eq!(r.classification.last_record_id.as_deref(), Some("4"));
    let r = classify_file(
        &path("openclaw/interrupted-tool-call"),
        Some(Format::Openclaw),
        None,
        TailOptions::default(),
        &mut buf,
    )
    .expect("classify");
    assert_eq!(
        r.classification.session_id.as_deref(),
        Some("0b9d6a2c-13f4-4e8a-8c55-7d2e90a4b6f3")
    );
    assert_eq!(r.classification.last_record_id.as_deref(), Some("3a7c9c27"));
}
