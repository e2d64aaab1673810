//! What the tests over the real captures share: where they are, the outcome names of
//! `endings.json`, scanning a directory as `lazarus boot-resume` does, copying a capture.
#![allow(dead_code)]
use lazarus_boot_resume::Format;
use lazarus_boot_resume::discover::{self, Source, SourceFormat};
use lazarus_boot_resume::scan::{self, Report, ScanOptions};
use lazarus_boot_resume::tail::TailOptions;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
}

pub fn format_of(program: &str) -> Format {
    match program {
        "claude" => Format::ClaudeCode,
        "openclaw" => Format::Openclaw,
        "codex" => Format::Codex,
        "pi" => Format::Pi,
        "gemini-cli" => Format::GeminiCli,
        "opencode" => Format::Opencode,
        other => panic!("unknown program directory {other}"),
    }
}

/// "verdict" or "skipped/why" or "failed/transient" — how the table names outcomes.
pub fn outcome(r: &Report) -> String {
    match (r.verdict.as_str(), r.why, r.transient) {
        ("skipped", Some(w), _) => format!("skipped/{}", w.as_str()),
        ("failed", _, Some(t)) => format!("failed/{}", if t { "transient" } else { "permanent" }),
        (v, _, _) => v.to_string(),
    }
}

/// What boot-resume must answer: the true ending, or `expect` where the files cannot tell
/// the true ending (`expect_why` says why; Gemini CLI leaves the same bytes after a
/// transient and a permanent failure, and boot-resume never guesses transient).
pub fn expected(entry: &Value) -> String {
    if let Some(e) = entry["expect"].as_str() {
        assert!(
            entry["expect_why"].is_string(),
            "an `expect` that differs from the true ending needs its `expect_why`"
        );
        return e.to_string();
    }
    let v = entry["verdict"].as_str().unwrap_or("?");
    match v {
        "skipped" => format!("skipped/{}", entry["why"].as_str().unwrap_or("?")),
        "failed" => format!(
            "failed/{}",
            if entry["transient"].as_bool() == Some(true) {
                "transient"
            } else {
                "permanent"
            }
        ),
        v => v.to_string(),
    }
}

/// The expected outcome of one report of a scenario: sub-agent transcripts are skipped,
/// `sessions` names per-session expectations (OpenClaw stores several in one database).
pub fn expected_for(entry: &Value, r: &Report) -> String {
    if r.path.contains("/subagents/") {
        return "skipped/subagent".into();
    }
    if let Some(map) = entry["sessions"].as_object() {
        for key in [r.session_key.as_deref(), Some(r.session.as_str())]
            .into_iter()
            .flatten()
        {
            if let Some(e) = map.get(key) {
                return expected(e);
            }
        }
    }
    expected(entry)
}

pub fn scan_dir(format: Format, dir: &Path, first_window: u64) -> Vec<Report> {
    let (cands, problems) = discover::candidates(
        &[Source {
            format: SourceFormat::Known(format),
            path: dir.to_path_buf(),
        }],
        true,
    );
    assert!(problems.is_empty(), "{}: {problems:?}", dir.display());
    // 0: the default options (a small file read whole); else windows from `first_window`
    let tail = match first_window {
        0 => TailOptions::default(),
        first_window => TailOptions {
            first_window,
            max_window: 8 << 20,
            whole_file_max: 0,
        },
    };
    let opts = ScanOptions {
        window: None,
        tail,
        threads: 1,
        ..Default::default()
    };
    scan::scan(&cands, &opts, None)
}

pub fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&e.path(), &target);
        } else if let Some(raw) = name
            .strip_suffix(".zst")
            .filter(|n| n.ends_with(".db") || n.ends_with(".db-wal"))
        {
            // OpenCode's database and its WAL, stored compressed.
            let bytes =
                zstd::decode_all(std::fs::File::open(e.path()).expect("open")).expect("zstd");
            std::fs::write(to.join(raw), bytes).expect("write");
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}
