//! One rule for damaged bytes, in import and in the scan alike (boot-resume's `damage`):
//! files the real programs wrote (Claude Code, Codex, pi, Gemini CLI; `scripts/capture-real/`),
//! damaged the way users report them — a byte order mark, CRLF line ends, a tail of NULs
//! after the last record (a power cut), zeros between two records, one invalid UTF-8 byte in
//! a record, a torn last line. A session the scan reads, import reads: every damaged twin
//! imports (nothing refused as "binary"), reports what was cut, keeps every record the
//! damage did not touch, and gets the verdict of its clean original.

use std::path::{Path, PathBuf};

use lazarus_boot_resume::formats::{self, ReadOptions};
use lazarus_boot_resume::tail::{TailOptions, classify_file};
use lazarus_boot_resume::{Format, Verdict};
use lazarus_session::LocalStore;

fn capture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures/real")
        .join(rel)
}

/// The real captures damaged here, one per format that is a file of lines.
fn sources() -> Vec<(Format, PathBuf)> {
    vec![
        (
            Format::ClaudeCode,
            capture(
                "claude/killed-in-mcp-tool/home/.claude/projects/-home-dev-capture-work/6205513d-8889-4e0d-85c9-406b28bf241e.jsonl",
            ),
        ),
        (
            Format::Codex,
            capture(
                "codex/killed-in-mcp-tool/home/.codex/sessions/2026/12/07/rollout-2026-12-07T09-36-26-01a24fdc-9832-7342-a586-47f4ff22adf4.jsonl",
            ),
        ),
        (
            Format::Pi,
            capture(
                "pi/killed-in-tool/home/.pi/agent/sessions/--home-dev-capture-work--/2026-12-03T09-07-54-638Z_01a23b29-088e-75b9-8c3e-e417a4798166.jsonl",
            ),
        ),
        (
            Format::GeminiCli,
            capture(
                "gemini-cli/killed-in-tool/home/.gemini/tmp/work/chats/session-2026-12-05T07-23-1bf2a0f3.jsonl",
            ),
        ),
    ]
}

/// Where a line ends, `n` lines before the end (0: the last line's `\n`).
fn line_end_before_last(bytes: &[u8], n: usize) -> usize {
    let ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    ends[ends.len().saturating_sub(1 + n)]
}

/// A byte inside the text of a string value of a line in the middle: a letter between
/// letters, far from any quote or escape.
fn middle_letter(bytes: &[u8]) -> usize {
    let from = bytes.len() / 3;
    (from..bytes.len() - 2)
        .find(|&i| bytes[i - 1..=i + 1].iter().all(u8::is_ascii_lowercase))
        .expect("a letter")
}

/// (name, damaged bytes, whether every record stays whole)
fn damaged(bytes: &[u8]) -> Vec<(&'static str, Vec<u8>, bool)> {
    let mut out = Vec::new();
    out.push(("bom", [b"\xEF\xBB\xBF".as_slice(), bytes].concat(), true));
    let crlf: Vec<u8> = bytes
        .split(|b| *b == b'\n')
        .collect::<Vec<_>>()
        .join(b"\r\n".as_slice());
    out.push(("crlf", crlf, true));
    out.push(("nul-tail", [bytes, &[0u8; 8192]].concat(), true));
    // zeros a crash left between records, the program appending after them: before each
    // of the last 8 records (the deciding ones among them)
    let mut glued = Vec::new();
    let mut from = 0;
    for n in (1..=8).rev() {
        let at = line_end_before_last(bytes, n);
        glued.extend_from_slice(&bytes[from..at]);
        glued.extend_from_slice(&[0u8; 4096]);
        from = at;
    }
    glued.extend_from_slice(&bytes[from..]);
    out.push(("nul-between-records", glued, true));
    // one invalid byte in a record's text: the record is kept, the byte replaced
    let mut bad = bytes.to_vec();
    bad[middle_letter(bytes)] = 0xFF;
    out.push(("invalid-utf8", bad, true));
    // a torn last line: the write of the last record cut short
    let last = line_end_before_last(bytes, 1);
    let torn = last + (bytes.len() - last) / 2;
    out.push(("torn-last-line", bytes[..torn].to_vec(), false));
    out
}

fn verdict(format: Format, path: &Path) -> (Verdict, String) {
    let mut buf = Vec::new();
    let r = classify_file(path, Some(format), None, TailOptions::default(), &mut buf)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (r.classification.verdict, r.classification.reason)
}

#[test]
fn damaged_real_files_are_read_by_one_rule_in_import_and_in_the_scan() {
    let mut checked = 0;
    for (format, src) in sources() {
        let bytes = std::fs::read(&src).expect("capture");
        let dir = tempfile::tempdir().expect("tempdir");
        let name = src.file_name().expect("name");
        let clean = formats::read(format, &src, &ReadOptions::default()).expect("clean read");
        let clean_counts = clean.counts();
        let (clean_verdict, _) = verdict(format, &src);
        for (kind, damaged, whole) in damaged(&bytes) {
            let what = format!("{}/{kind}", format.as_str());
            let sub = dir.path().join(kind);
            std::fs::create_dir_all(&sub).expect("mkdir");
            let path = sub.join(name);
            std::fs::write(&path, &damaged).expect("write");

            // import reads it
            let conv = formats::read(format, &path, &ReadOptions::default())
                .unwrap_or_else(|e| panic!("{what}: import refused it: {e}"));
            let store = LocalStore::open(&sub.join("sessions")).expect("store");
            let imported = lazarus_interchange::import(&store, &conv, None)
                .unwrap_or_else(|e| panic!("{what}: import failed: {e}"));
            if whole {
                assert_eq!(conv.counts(), clean_counts, "{what}: records lost");
            }
            let dropped = |needle: &str| imported.dropped.iter().any(|d| d.what.contains(needle));
            match kind {
                "nul-tail" | "nul-between-records" => {
                    assert!(dropped("NUL bytes"), "{what}: {:?}", imported.dropped)
                }
                "invalid-utf8" => {
                    assert!(dropped("invalid UTF-8"), "{what}: {:?}", imported.dropped)
                }
                "torn-last-line" => assert!(imported.torn_at.is_some(), "{what}"),
                _ => assert!(
                    !dropped("NUL") && !dropped("UTF-8") && imported.torn_at.is_none(),
                    "{what}: {:?}",
                    imported.dropped
                ),
            }

            // the scan reads it, to the verdict of the clean file
            let (v, reason) = verdict(format, &path);
            if whole {
                assert_eq!(v, clean_verdict, "{what}: {reason}");
            } else {
                assert!(
                    !matches!(v, Verdict::Skipped(_) | Verdict::UnknownFormat),
                    "{what}: {v} ({reason})"
                );
            }
            if matches!(kind, "nul-tail" | "nul-between-records" | "invalid-utf8")
                && !reason.contains("read through damage")
            {
                // the damage is reported when the window holds it
                assert!(
                    kind == "invalid-utf8",
                    "{what}: the reason does not say what was cut: {reason}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
}
