//! Pure classifiers: tail bytes (plus metadata) in, [`Classification`] out.
//!
//! One module per format. Every classifier tolerates unknown record types, unparsable lines
//! in the middle, a torn last line and arbitrary bytes, and never panics.
pub use crate::format::{Format, detect};
use crate::lines::{self, TailLines};
use crate::verdict::{Classification, SessionMeta};
use serde::Deserialize;
use std::cell::OnceCell;

pub mod claude_code;
pub mod codex;
pub mod gemini_cli;
pub mod lazarus;
pub mod opencode;
pub mod pi;

impl Format {
    /// Classifies a tail window of this format.
    pub fn classify(self, tail: &[u8], meta: &SessionMeta) -> Classification {
        match self {
            Format::Lazarus => lazarus::classify(tail, meta),
            Format::Openclaw => pi::classify_openclaw(tail, meta),
            Format::Pi => pi::classify(tail, meta),
            Format::ClaudeCode => claude_code::classify(tail, meta),
            Format::Codex => codex::classify(tail, meta),
            Format::GeminiCli => gemini_cli::classify(tail, meta),
            Format::Opencode => opencode::classify(tail, meta),
        }
    }
}

/// Lines of a window parsed lazily into `T`, with a torn last line removed.
pub(crate) struct Parsed<'a, T> {
    pub lines: Vec<&'a [u8]>,
    /// Parsed lazily, boxed: most lines of a window are never looked at, and a record type
    /// can be hundreds of bytes, so the cells must stay small.
    cells: Vec<OnceCell<Option<Box<T>>>>,
    /// The last line was torn (no newline, or the last complete line does not parse).
    pub torn: bool,
    /// The torn bytes, for sniffing.
    pub torn_bytes: Option<&'a [u8]>,
}

impl<'a, T: Deserialize<'a>> Parsed<'a, T> {
    pub fn new(tail: &'a [u8], at_start: bool) -> Self {
        let TailLines {
            mut lines,
            fragment,
            ..
        } = lines::split(tail, at_start);
        let mut cells: Vec<OnceCell<Option<Box<T>>>> =
            (0..lines.len()).map(|_| OnceCell::new()).collect();
        let mut torn = false;
        let mut torn_bytes = None;
        if let Some(f) = fragment {
            torn = true;
            torn_bytes = Some(f);
        } else if let Some(last) = lines.last().copied() {
            let parsed = serde_json::from_slice::<T>(last).ok().map(Box::new);
            if parsed.is_none() {
                torn = true;
                torn_bytes = Some(last);
                lines.pop();
                cells.pop();
            } else if let Some(cell) = cells.last() {
                let _ = cell.set(parsed);
            }
        }
        Parsed {
            lines,
            cells,
            torn,
            torn_bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// The parsed record at `i`, or `None` if it does not parse.
    pub fn get(&self, i: usize) -> Option<&T> {
        let cell = self.cells.get(i)?;
        cell.get_or_init(|| {
            serde_json::from_slice::<T>(self.lines[i])
                .ok()
                .map(Box::new)
        })
        .as_deref()
    }

    /// Whether the torn bytes contain `needle`.
    pub fn torn_contains(&self, needle: &[u8]) -> bool {
        self.torn_bytes.is_some_and(|b| lines::contains(b, needle))
    }
}

/// The "need a larger window" result.
pub(crate) fn need_more(torn: bool) -> Classification {
    let mut c = Classification::new(
        crate::verdict::Verdict::Skipped(crate::verdict::SkipWhy::Unreadable),
        "the deciding record lies before the tail window",
    );
    c.need_more = true;
    c.torn = torn;
    c
}

/// For a format known only by the version of the program that wrote it (Claude Code,
/// Codex): whether `version`'s major number is above the newest major this build reads. A
/// newer minor or patch is read (those programs change records additively within a major);
/// a newer major is reported `unknown_format`, never guessed.
pub(crate) fn newer_major(version: &str, known_major: u64) -> bool {
    version
        .trim()
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok())
        .is_some_and(|m| m > known_major)
}

/// An `unknown_format` verdict on `out`, keeping the ids already read.
pub(crate) fn unknown_format(
    out: &mut Classification,
    what: &str,
    version: &str,
    known: &str,
) -> Classification {
    let u = Classification::unknown_format(what, version, known);
    out.verdict = u.verdict;
    out.reason = u.reason;
    out.seen_version = u.seen_version;
    out.clone()
}

/// Strips `.jsonl` and returns the stem of a file name.
pub(crate) fn stem(file_name: &str) -> &str {
    file_name.strip_suffix(".jsonl").unwrap_or(file_name)
}

/// Shortens a text for reasons.
pub(crate) fn clip(s: &str, n: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= n {
        s.replace('\n', " ")
    } else {
        let mut out: String = s.chars().take(n).collect::<String>().replace('\n', " ");
        out.push('…');
        out
    }
}
