//! Session ids: the only part of a path a caller controls, so they are checked strictly.

use crate::error::{LedgerError, Result};

/// Longest accepted id, in bytes.
pub const ID_BYTES_MAX: usize = 128;

/// Checks that `id` is safe to use as a file stem: 1–128 bytes of `[A-Za-z0-9._-]`, not
/// starting with `.` or `-`. No separators, no `..`, no hidden files, no option look-alikes.
pub fn validate_id(id: &str) -> Result<()> {
    let fail = |reason| {
        Err(LedgerError::InvalidId {
            id: id.chars().take(200).collect(),
            reason,
        })
    };
    if id.is_empty() {
        return fail("empty");
    }
    if id.len() > ID_BYTES_MAX {
        return fail("longer than 128 bytes");
    }
    if id.starts_with('.') || id.starts_with('-') {
        return fail("must not start with '.' or '-'");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return fail("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate_id;

    #[test]
    fn accepts_plain_ids() {
        for id in ["a", "main", "2026-12-02T10-00-00_x", "s.1", "A_b-C"] {
            assert!(validate_id(id).is_ok(), "{id}");
        }
    }

    #[test]
    fn refuses_traversal_and_separators() {
        for id in [
            "",
            "..",
            ".",
            "../x",
            "a/b",
            "a\\b",
            ".hidden",
            "-rf",
            "a b",
            "a\0b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(validate_id(id).is_err(), "{id:?}");
        }
    }
}
