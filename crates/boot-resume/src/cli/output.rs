//! What the command prints: the table and summary line for people, one JSON object per
//! session for scripts, and progress bars on a terminal (drawn through indicatif so lines
//! printed meanwhile never garble them).
use crate::scan::Report;
use crate::verdict::{SkipWhy, Verdict};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Escapes control characters (and DEL) so ids and text from session files cannot move the
/// cursor, change colours or rewrite the terminal title.
pub fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn print_json(out: &mut dyn Write, reports: &[Report]) -> std::io::Result<()> {
    for r in reports {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

pub(super) fn print_table(
    out: &mut dyn Write,
    reports: &[Report],
    all: bool,
) -> std::io::Result<()> {
    let shown: Vec<&Report> = reports
        .iter()
        .filter(|r| {
            all || !(r.verdict == Verdict::Finished
                || r.verdict == Verdict::Skipped(SkipWhy::OutsideWindow))
        })
        .collect();
    if shown.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{:<30} {:<12} {:<12} {:<38} REASON",
        "VERDICT", "ACTION", "FORMAT", "SESSION"
    )?;
    for r in shown {
        let mut reason = r.reason.clone();
        if r.torn && !reason.contains("torn") {
            reason.push_str(" [torn]");
        }
        if let Some(d) = &r.action_detail {
            reason.push_str(&format!(" -> {d}"));
        }
        let sess = r.session_key.clone().unwrap_or_else(|| r.session.clone());
        writeln!(
            out,
            "{:<30} {:<12} {:<12} {:<38} {}",
            r.verdict.to_string(),
            r.action.as_str(),
            r.format,
            escape_controls(&sess),
            escape_controls(&reason)
        )?;
    }
    Ok(())
}

pub(super) fn summary(reports: &[Report], took: Duration, dry: bool) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    let mut acts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reports {
        let k = match r.verdict {
            Verdict::Skipped(w) => format!("skipped/{}", w.as_str()),
            v => v.as_str().to_string(),
        };
        *by.entry(k).or_default() += 1;
        *acts.entry(r.action.as_str()).or_default() += 1;
    }
    let v: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let a: Vec<String> = acts
        .iter()
        .filter(|(k, _)| **k != "none")
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    format!(
        "{} sessions scanned in {} ms{}; {}; verdicts: {}",
        reports.len(),
        took.as_millis(),
        if dry { " (dry run)" } else { "" },
        if a.is_empty() {
            "nothing to resume".to_string()
        } else {
            a.join(", ")
        },
        v.join(", ")
    )
}

/// A progress bar on stderr when it is a terminal and there is enough work to show.
pub(super) fn progress(len: usize, min: usize, what: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || len < min {
        return None;
    }
    let pb = indicatif::ProgressBar::new(len as u64);
    let style = indicatif::ProgressStyle::with_template(&format!(
        "{{spinner}} {what} {{pos}}/{{len}} [{{bar:30}}] {{rate}} {{msg}}"
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    // indicatif's {per_sec} prints `5,644.9258/s`; a whole number is what people read.
    .with_key(
        "rate",
        |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0}/s", s.per_sec());
        },
    );
    pb.set_style(style);
    Some(pb)
}

/// Prints a line to stderr without garbling the progress bar, if one is drawn.
pub(super) fn note(pb: Option<&indicatif::ProgressBar>, line: &str) {
    match pb {
        Some(pb) => pb.println(line),
        None => eprintln!("{line}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            escape_controls("a\u{1b}]0;pwned\u{7}b\nc\u{7f}"),
            "a\\u{1b}]0;pwned\\u{7}b\\nc\\u{7f}"
        );
        assert_eq!(escape_controls("plain – ünïcode"), "plain – ünïcode");
    }
}
