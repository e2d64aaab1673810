//! Session ids, checked once where they enter (a CLI argument, an HTTP path, an imported
//! file's header) and trusted everywhere after: a [`SessionId`] is always a safe file stem and
//! database key.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::SessionError;

/// What begins the id of a session whose host program's name for it is not a valid id
/// ([`SessionId::for_host_name`]).
pub const HOST_NAME_PREFIX: &str = "h.";

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

    /// The session id for a name a host program gives a session (a LangGraph thread id, an
    /// Agents SDK session id): any string. A valid id is its own, unless it begins with
    /// [`HOST_NAME_PREFIX`]; any other name maps to `h.<readable part>.<32 hex digits of its
    /// SHA-256>`, so two names never share an id (the prefix keeps the two forms apart). The
    /// second value says whether it was mapped: then the name itself must be kept beside the
    /// session (the package records it as the header's `meta.host_id`).
    pub fn for_host_name(name: &str) -> (Self, bool) {
        if !name.starts_with(HOST_NAME_PREFIX)
            && let Ok(id) = Self::parse(name)
        {
            return (id, false);
        }
        use sha2::Digest;
        let digest = sha2::Sha256::digest(name.as_bytes());
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let mut readable = String::new();
        for c in name.chars() {
            if readable.len() >= 64 {
                break;
            }
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                readable.push(c);
            } else if !readable.ends_with('_') {
                readable.push('_');
            }
        }
        let id = format!("{HOST_NAME_PREFIX}{readable}.{hex}");
        (SessionId(id), true)
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
    fn any_host_name_maps_to_a_valid_id_and_two_names_never_share_one() {
        let names = [
            "user:42/chat",
            "t-1",
            "h.t-1",
            "",
            ".hidden",
            "-x",
            "ünïcode thread ☃",
            &"x".repeat(500),
            "a/b",
            "a_b",
            "a:b",
        ];
        let mut seen = std::collections::BTreeMap::new();
        for name in names {
            let (id, mapped) = SessionId::for_host_name(name);
            SessionId::parse(&id).expect("a valid id");
            assert_eq!(mapped, id.as_str() != name, "{name:?} -> {id}");
            if let Some(other) = seen.insert(id.clone(), name) {
                panic!("{name:?} and {other:?} share {id}");
            }
        }
        assert_eq!(
            SessionId::for_host_name("t-1"),
            (SessionId::literal("t-1"), false)
        );
        let (id, _) = SessionId::for_host_name("user:42/chat");
        assert!(id.starts_with("h.user_42_chat."), "{id}");
        // a valid name in the mapped form is mapped too, never taken as the other's id
        let (again, mapped) = SessionId::for_host_name(id.as_str());
        assert!(mapped && again != id, "{again}");
    }

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
