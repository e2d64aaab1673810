//! The header: line 1 of every ledger file (seq 0, kind `header`).

use std::path::Path;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};

use crate::error::{Corruption, LedgerError, Problem, Result};
use crate::frame::Payload;

/// The framing version this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// Where a forked ledger came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parent {
    /// Id of the parent ledger.
    pub id: String,
    /// Last seq of the parent that the child copied.
    pub seq: u64,
}

/// The header record's data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// The application's format name, e.g. `lazarus.session`.
    pub format: String,
    /// Framing version; see [`FORMAT_VERSION`].
    pub version: u64,
    /// Ledger (session) id; equals the file stem.
    pub id: String,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// Present when this ledger is a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// Application data (opaque to the ledger), e.g. the turn a fork was taken at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// Present on a ledger created for group commit ([`crate::Durability::Grouped`]): the most
    /// bytes a writer may leave unsynced at any moment. Absent: appends are synced one by one,
    /// so a crash can damage only the last line. Recovery reads its crash window from here
    /// (see `scan`), so it is fixed when the ledger is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsynced_bytes_max: Option<u64>,
}

impl Header {
    /// A header for a new ledger created now.
    pub fn new(format: &str, id: &str) -> Self {
        Header {
            format: format.to_string(),
            version: FORMAT_VERSION,
            id: id.to_string(),
            created_at: crate::frame::format_ts(jiff::Timestamp::now()),
            parent: None,
            meta: None,
            unsynced_bytes_max: None,
        }
    }
}

/// Header data as read, before the version is known to be one this build reads.
pub(crate) struct HeaderData(serde_json::Map<String, serde_json::Value>);

impl<'de> Payload<'de> for HeaderData {
    fn deserialize_kind<D: Deserializer<'de>>(kind: &str, data: D) -> Result<Self, D::Error> {
        if kind != "header" {
            return Err(serde::de::Error::custom(format_args!(
                "line 1 must be a header record, found kind {kind:?}"
            )));
        }
        Ok(HeaderData(Deserialize::deserialize(data)?))
    }
}

impl HeaderData {
    pub(crate) fn into_header(self, path: &Path, expected_format: Option<&str>) -> Result<Header> {
        let invalid = |msg: String| {
            LedgerError::Corrupt(Box::new(Corruption::new(path, 1, 0, Problem::Invalid(msg))))
        };
        let format = self
            .0
            .get("format")
            .and_then(|v| v.as_str())
            .ok_or_else(|| invalid("header has no \"format\" string".into()))?
            .to_string();
        if let Some(expected) = expected_format
            && format != expected
        {
            return Err(LedgerError::WrongFormat {
                path: path.to_path_buf(),
                found: format,
                expected: expected.to_string(),
            });
        }
        let version = self
            .0
            .get("version")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| invalid("header has no integer \"version\"".into()))?;
        if version != FORMAT_VERSION {
            return Err(LedgerError::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let header: Header = serde_json::from_value(serde_json::Value::Object(self.0))
            .map_err(|e| invalid(format!("bad header: {e}")))?;
        Ok(header)
    }
}
