//! Session ids, checked once where they enter (a CLI argument, an HTTP path, an imported
//! file's header) and trusted everywhere after: a [`SessionId`] is always a safe file stem and
//! database key.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::SessionError;

/// A checked session id: 1–128 bytes of `[A-Za-z0-9._-]`, not starting with `.` or `-` (the
/// rule is [`lazarus_ledger::validate_id`]'s). Build one with [`SessionId::parse`] (or
/// `str::parse`), [`SessionId::new_v7`], or [`SessionId::literal`] for ids written in source.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// Checks `id`; the error names it and says what is wrong.
    pub fn parse(id: &str) -> Result<Self, SessionError> {
        lazarus_ledger::validate_id(id)?;
        Ok(SessionId(id.to_string()))
    }

    /// A fresh id: a UUID v7 (time-ordered).
    pub fn new_v7() -> Self {
        SessionId(uuid::Uuid::now_v7().to_string())
    }

    /// An id written in the source (a constant, a test).
    ///
    /// # Panics
    /// If `id` is not a valid id: a bug in the source, not bad input.
    pub fn literal(id: &'static str) -> Self {
        match Self::parse(id) {
            Ok(id) => id,
            Err(e) => panic!("invalid session id literal: {e}"),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::ops::Deref for SessionId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for SessionId {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_ref()
    }
}

impl std::borrow::Borrow<str> for SessionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl std::str::FromStr for SessionId {
    type Err = SessionError;
    fn from_str(s: &str) -> Result<Self, SessionError> {
        Self::parse(s)
    }
}

impl PartialEq<str> for SessionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for SessionId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<SessionId> for str {
    fn eq(&self, other: &SessionId) -> bool {
        self == other.0
    }
}

impl PartialEq<SessionId> for &str {
    fn eq(&self, other: &SessionId) -> bool {
        *self == other.0
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SessionId::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_once_refused_with_a_reason() {
        assert_eq!(SessionId::parse("fix-tests").unwrap(), "fix-tests");
        for bad in ["", "../x", "a/b", ".hidden", "-x", "a b", &"x".repeat(129)] {
            let e = SessionId::parse(bad).unwrap_err().to_string();
            assert!(e.contains("invalid session id"), "{bad:?}: {e}");
        }
        assert!(serde_json::from_str::<SessionId>("\"../etc\"").is_err());
        assert_eq!(
            serde_json::to_string(&SessionId::literal("s1")).unwrap(),
            "\"s1\""
        );
        assert_eq!(SessionId::new_v7().len(), 36);
    }
}
