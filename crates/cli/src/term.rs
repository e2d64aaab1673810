//! Text bound for a terminal. Session text, titles, workspaces and error messages come from
//! files, models and users; printed raw, an escape sequence in them would drive the terminal
//! (move the cursor, rewrite earlier lines, set the window title). Everything untrusted is
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

fn escape_keeping<'a>(s: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !s.chars().any(|c| c.is_control() && !keep.contains(&c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !c.is_control() || keep.contains(&c) {
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
    }
}
