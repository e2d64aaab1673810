//! Small formatting helpers: relative times with the exact time beside, sizes, statuses.

use jiff::Timestamp;
use lazarus_session::Status;
use maud::{Markup, html};

/// "3 min ago" for `ts` (RFC 3339) seen at `now`; future times (a skewed clock) say "just now".
pub fn ago(ts: &Timestamp, now: &Timestamp) -> String {
    let secs = now.as_second() - ts.as_second();
    match secs {
        ..10 => "just now".into(),
        10..60 => format!("{secs} s ago"),
        60..3_600 => format!("{} min ago", secs / 60),
        3_600..172_800 => format!("{} h ago", secs / 3_600),
        172_800..5_184_000 => format!("{} days ago", secs / 86_400),
        _ => ts.strftime("%Y-%m-%d").to_string(),
    }
}

/// The exact time, for a tooltip: `2026-12-03 10:04:12.517 UTC`.
pub fn exact(ts: &Timestamp) -> String {
    ts.strftime("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
}

/// A `<time>` element: relative text, exact time on hover; the script keeps the text current.
/// An unparseable or empty time shows as "—" with the raw text on hover.
pub fn time(raw: &str, now: &Timestamp) -> Markup {
    match raw.parse::<Timestamp>() {
        Ok(ts) => html! {
            time datetime=(raw) title=(exact(&ts)) { (ago(&ts, now)) }
        },
        Err(_) => html! { span.muted title=(raw) { "—" } },
    }
}

/// `4.2 KB`, `13 MB` (powers of 1000, like `ls -h --si`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if v < 10.0 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        format!("{v:.0} {}", UNITS[u])
    }
}

/// `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Every status, in the order the filter shows them.
pub const STATUSES: [Status; 11] = [
    Status::AwaitingApproval,
    Status::NeedsOwner,
    Status::Running,
    Status::Pending,
    Status::Interrupted,
    Status::InDoubt,
    Status::Stopped,
    Status::Failed,
    Status::Corrupt,
    Status::Idle,
    Status::New,
];

/// The words a person reads for a status.
pub fn status_label(s: Status) -> &'static str {
    match s {
        Status::New => "new",
        Status::Idle => "idle",
        Status::Pending => "pending",
        Status::Running => "running",
        Status::Interrupted => "interrupted",
        Status::InDoubt => "in doubt",
        Status::Stopped => "stopped",
        Status::Failed => "failed",
        Status::Corrupt => "corrupt",
        Status::AwaitingApproval => "awaiting approval",
        Status::NeedsOwner => "needs owner",
    }
}

/// What a status means, for a tooltip (docs/json.md).
pub fn status_help(s: Status) -> &'static str {
    match s {
        Status::New => "header only: nothing recorded yet",
        Status::Idle => "the last turn finished; nothing owed",
        Status::Pending => "inputs recorded, not yet answered",
        Status::Running => "a writer is working on it now",
        Status::Interrupted => "cut off mid-turn; resume continues it",
        Status::InDoubt => {
            "interrupted while a tool call was running: its effect is unknown until resume re-runs it (idempotent) or closes it as in doubt"
        }
        Status::Stopped => "stopped on request with work left; resumable",
        Status::Failed => "the last model request failed after retries",
        Status::Corrupt => "cannot be read as a session; see why on its page",
        Status::AwaitingApproval => {
            "a tool call waits for a person to allow or deny it; nothing happens until then"
        }
        Status::NeedsOwner => {
            "work is owed, and the resumer that tried could not honour the session's world (workspace, MCP servers, policy); its page says why and which command resumes it"
        }
    }
}

pub fn status_badge(s: Status) -> Markup {
    html! {
        span class={ "status st-" (s) } title=(status_help(s)) data-status=(s) { (status_label(s)) }
    }
}

/// A status from its JSON word.
pub fn parse_status(word: &str) -> Option<Status> {
    STATUSES.into_iter().find(|s| s.to_string() == word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times() {
        let now: Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let at = |s: &str| ago(&s.parse().unwrap(), &now);
        assert_eq!(at("2026-12-03T10:00:05Z"), "just now");
        assert_eq!(at("2026-12-03T09:59:55Z"), "just now");
        assert_eq!(at("2026-12-03T09:59:30Z"), "30 s ago");
        assert_eq!(at("2026-12-03T09:57:00Z"), "3 min ago");
        assert_eq!(at("2026-12-03T07:00:00Z"), "3 h ago");
        assert_eq!(at("2026-11-30T10:00:00Z"), "3 days ago");
        assert_eq!(at("2025-01-02T10:00:00Z"), "2025-01-02");
        assert_eq!(
            exact(&"2026-12-03T10:04:12.517Z".parse().unwrap()),
            "2026-12-03 10:04:12.517 UTC"
        );
    }

    #[test]
    fn sizes_and_counts() {
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(4210), "4.2 KB");
        assert_eq!(bytes(13_400_000), "13 MB");
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(100), "100");
    }

    #[test]
    fn every_status_has_a_word_and_parses_back() {
        for s in STATUSES {
            assert_eq!(parse_status(&s.to_string()), Some(s));
            assert!(!status_label(s).is_empty());
        }
        assert_eq!(parse_status("nope"), None);
    }
}
