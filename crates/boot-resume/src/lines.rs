//! Splitting a tail window into complete lines, and text heuristics shared by classifiers.

/// The complete lines of a tail window, oldest first, and the torn fragment if any.
#[derive(Debug, Clone, Default)]
pub struct TailLines<'a> {
    /// Complete, non-blank lines (without their `\n`), oldest first.
    pub lines: Vec<&'a [u8]>,
    /// Bytes after the last `\n` (a write cut short), if non-blank.
    pub fragment: Option<&'a [u8]>,
    /// The window began mid-line and that partial first line was dropped.
    pub dropped_partial_first: bool,
}

/// Splits `window` into lines. When `at_start` is false the window begins somewhere inside
/// the file, so everything up to the first `\n` is a partial line and is dropped.
pub fn split(window: &[u8], at_start: bool) -> TailLines<'_> {
    let mut out = TailLines::default();
    let mut body = window;
    if !at_start {
        match memchr::memchr(b'\n', body) {
            Some(i) => {
                body = &body[i + 1..];
                out.dropped_partial_first = true;
            }
            None => {
                // The whole window is the middle of one line.
                out.dropped_partial_first = true;
                return out;
            }
        }
    }
    let complete_end = match memchr::memrchr(b'\n', body) {
        Some(i) => {
            let rest = &body[i + 1..];
            if !is_blank(rest) {
                out.fragment = Some(rest);
            }
            i + 1
        }
        None => {
            if !is_blank(body) {
                out.fragment = Some(body);
            }
            0
        }
    };
    // memchr finds the newlines (a byte-at-a-time split was the scan's hottest loop).
    let complete = &body[..complete_end];
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', complete) {
        let line = &complete[start..nl];
        if !is_blank(line) {
            out.lines.push(line);
        }
        start = nl + 1;
    }
    out
}

/// True if the slice is empty or only ASCII whitespace.
pub fn is_blank(s: &[u8]) -> bool {
    s.iter().all(|b| b.is_ascii_whitespace())
}

/// Whether `hay` contains `needle` (byte substring).
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// Whether an error text looks transient (rate limit, overload, 5xx, network trouble).
/// Status codes count only as whole numbers: "215029 tokens" is not a 502.
pub fn is_transient_error(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    if is_context_overflow(&t) {
        return false;
    }
    const CODES: &[&str] = &["408", "429", "500", "502", "503", "504", "529"];
    const NEEDLES: &[&str] = &[
        "rate limit",
        "rate_limit",
        "ratelimit",
        "too many requests",
        "overloaded",
        "internal server error",
        "bad gateway",
        "service unavailable",
        "gateway timeout",
        "fetch failed",
        "terminated",
        "connection reset",
        "econnreset",
        "econnrefused",
        "etimedout",
        "socket hang up",
        "network error",
        "timed out",
        "timeout",
        "temporarily unavailable",
    ];
    let whole_number = |code: &str| {
        t.match_indices(code).any(|(i, _)| {
            let before = t[..i].chars().next_back();
            let after = t[i + code.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_digit())
                && !after.is_some_and(|c| c.is_ascii_digit())
        })
    };
    CODES.iter().any(|c| whole_number(c)) || NEEDLES.iter().any(|n| t.contains(n))
}

/// Whether an error text says the context window overflowed.
pub fn is_context_overflow(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "context window",
        "prompt is too long",
        "too many tokens",
        "maximum context",
        "context overflow",
        "input is too long",
        "prompt too long",
        "tokens > ",
        "exceeds the context",
    ]
    .iter()
    .any(|n| t.contains(n))
}

/// What kind of user text this is, for filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserText {
    /// Real input that wants an answer.
    Real,
    /// A trivial acknowledgement or greeting.
    Trivial,
    /// A heartbeat prompt.
    Heartbeat,
    /// An isolated cron run prompt.
    Cron,
}

/// Classifies a user message text.
pub fn user_text_kind(text: &str) -> UserText {
    let t = text.trim();
    if t.contains("HEARTBEAT_OK") || (t.contains("HEARTBEAT.md") && t.len() < 600) {
        return UserText::Heartbeat;
    }
    if t.starts_with("[cron:") {
        return UserText::Cron;
    }
    let norm: String = t
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect::<String>()
        .trim()
        .to_lowercase();
    const TRIVIAL: &[&str] = &[
        "",
        "ok",
        "okay",
        "k",
        "kk",
        "thanks",
        "thank you",
        "thx",
        "ty",
        "cool",
        "nice",
        "great",
        "hi",
        "hello",
        "hey",
        "ping",
        "test",
        "yo",
        "👍",
        "good",
        "got it",
        "noted",
    ];
    if TRIVIAL.contains(&norm.as_str()) {
        UserText::Trivial
    } else {
        UserText::Real
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_drops_partial_first_and_torn_last() {
        let t = split(b"tial\n{\"a\":1}\n{\"b\":2}\n{\"c\"", false);
        assert_eq!(t.lines, vec![&b"{\"a\":1}"[..], &b"{\"b\":2}"[..]]);
        assert_eq!(t.fragment, Some(&b"{\"c\""[..]));
        assert!(t.dropped_partial_first);
    }

    #[test]
    fn split_at_start_keeps_first() {
        let t = split(b"{\"a\":1}\n\n{\"b\":2}\n", true);
        assert_eq!(t.lines.len(), 2);
        assert_eq!(t.fragment, None);
    }

    #[test]
    fn split_single_partial_line() {
        let t = split(b"abcdef", false);
        assert!(t.lines.is_empty());
        assert!(t.fragment.is_none());
        let t = split(b"abcdef", true);
        assert_eq!(t.fragment, Some(&b"abcdef"[..]));
    }

    #[test]
    fn transient_and_trivial() {
        assert!(is_transient_error("529 overloaded_error"));
        assert!(is_transient_error("TypeError: fetch failed"));
        assert!(!is_transient_error(
            "400 invalid_request_error: tool_use ids must be unique"
        ));
        // Claude Code 2.1's overflow text holds "215029": not a 502.
        assert!(!is_transient_error(
            "Prompt is too long · the request is ~215029 tokens (limit 200000)"
        ));
        assert!(!is_transient_error("request 15029 failed validation"));
        assert!(is_transient_error("HTTP 502 from upstream"));
        assert_eq!(user_text_kind("ok!"), UserText::Trivial);
        assert_eq!(user_text_kind("Thanks."), UserText::Trivial);
        assert_eq!(user_text_kind("Prune old snapshots"), UserText::Real);
        assert_eq!(
            user_text_kind(
                "Read HEARTBEAT.md if it exists. If nothing needs attention, reply HEARTBEAT_OK."
            ),
            UserText::Heartbeat
        );
        assert_eq!(user_text_kind("[cron:abc nightly] run"), UserText::Cron);
    }
}
