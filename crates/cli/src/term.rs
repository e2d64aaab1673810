//! Text bound for a terminal. Session text, titles, workspaces and error messages come from
//! files, models and users; printed raw, an escape sequence in them would drive the terminal
//! (move the cursor, rewrite earlier lines, set the window title, write the clipboard), and a
//! bidirectional control would reorder what the person reads. Everything untrusted is
//! shown through [`escape`] or [`escape_text`].

use std::borrow::Cow;

/// One line of untrusted text: every control character (newline and tab included) shown as
/// an escape (`\x1b`, `\n`, `\u{9b}`), so the text stays on one line and inert.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_keeping(s, &[])
}

/// Multi-line untrusted text (a transcript): newlines and tabs kept, every other control
/// character shown as an escape.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape_keeping(s, &['\n', '\t'])
}

/// Whether `c` is shown as an escape: a control character (`Cc`), or a format character
/// (`Cf`: bidirectional overrides and isolates that reorder the line, zero-width characters
/// that hide text), which a person could not see.
fn hidden(c: char) -> bool {
    c.is_control() || lazarus_session::unicode::is_format(c)
}

fn escape_keeping<'a>(s: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !s.chars().any(|c| hidden(c) && !keep.contains(&c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !hidden(c) || keep.contains(&c) {
            out.push(c);
        } else {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
                c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
        }
    }
    Cow::Owned(out)
}

/// A call's arguments for a person deciding on it: one `key: value` per argument, the
/// argument the tool executes first (`lazarus_session::approval::arguments_shown`), every
/// value whole and escaped (a value's own lines continue under it, indented), each line
/// starting with `indent`.
pub fn arguments_block(tool: &str, arguments: &str, indent: &str) -> String {
    let mut out = String::new();
    for (key, value) in lazarus_session::approval::arguments_shown(tool, arguments) {
        out.push_str(indent);
        out.push_str(&escape(&key));
        out.push(':');
        let value = escape_text(&value);
        let mut lines = value.split('\n');
        if let Some(first) = lines.next() {
            out.push(' ');
            out.push_str(first);
        }
        for line in lines {
            out.push('\n');
            out.push_str(indent);
            out.push_str("  | ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// `s` quoted for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A `postgres://` URL without its password (for a command printed or recorded).
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(u, _)| u);
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert!(matches!(escape("plain id-1.x"), Cow::Borrowed(_)));
        assert_eq!(escape("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape("a\nb\tc\r"), "a\\nb\\tc\\r");
        assert_eq!(escape("csi\u{9b}31m"), "csi\\u{9b}31m");
        assert_eq!(escape_text("line 1\n\tline 2\x07"), "line 1\n\tline 2\\x07");
        assert_eq!(escape("héllo ✓"), "héllo ✓");
        // bidirectional controls and zero-width characters: shown, not obeyed
        assert_eq!(
            escape("rm \u{202E}fdp.txt\u{2066}x\u{2069}\u{200B}"),
            "rm \\u{202e}fdp.txt\\u{2066}x\\u{2069}\\u{200b}"
        );
        assert_eq!(escape_text("a\u{202E}b\n"), "a\\u{202e}b\n");
    }

    #[test]
    fn arguments_show_the_executed_one_first_whole_and_inert() {
        let b = arguments_block(
            "shell",
            r#"{"command_preview":"ls -la","command":"rm -r x\n\u001b]52;c;aGk=\u0007 y"}"#,
            "  ",
        );
        assert_eq!(
            b,
            "  command: rm -r x\n    | \\x1b]52;c;aGk=\\x07 y\n  command_preview: ls -la\n"
        );
    }
}
