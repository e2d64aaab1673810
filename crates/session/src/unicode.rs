//! Characters of session text that a reader cannot see but that change what they read: the
//! Unicode format characters (general category `Cf`) — bidirectional overrides and isolates
//! (U+202A–U+202E, U+2066–U+2069) that reorder what a terminal or a page shows, zero-width
//! ones (U+200B–U+200F, U+2060–U+2064, U+FEFF) that hide text between letters, tags. Every
//! surface that shows a person what a model wrote (the terminal's escapes, the web view's
//! marks) asks here, so they agree.

/// Whether `c` is a Unicode format character (`Cf`, Unicode 16).
pub fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

#[cfg(test)]
mod tests {
    use super::is_format;

    #[test]
    fn bidi_and_zero_width_characters_are_format_characters() {
        for c in [
            '\u{202E}', '\u{2066}', '\u{2069}', '\u{200B}', '\u{200F}', '\u{FEFF}',
        ] {
            assert!(is_format(c), "{:x}", c as u32);
        }
        for c in ['a', 'é', '✓', '\n', '\u{1b}', '中'] {
            assert!(!is_format(c), "{:x}", c as u32);
        }
    }
}
