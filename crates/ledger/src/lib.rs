//! # lazarus-ledger
//!
//! A crash-safe, append-only JSON Lines ledger: one file per ledger, one JSON object per line,
//! each line carrying a gap-free `seq` and a CRC-32C of itself. It knows nothing of agents.
//!
//! ```text
//! {"seq":0,"ts":"…","kind":"header","data":{"format":"…","version":1,"id":"s1",…},"crc":"…"}
//! {"seq":1,"ts":"…","kind":"input","data":{…},"crc":"…"}
//! ```
//!
//! The guarantees, and where they live:
//! * **Durable** ([`writer`]): a record is acknowledged only after its whole line, newline
//!   included, is written in one `write` on an `O_APPEND` handle and `fdatasync`ed; a new
//!   file's directory is fsynced too. A failed fsync poisons the writer (never retried).
//! * **Atomic** ([`scan`]): bytes after the last newline, or a final line that fails its
//!   checksum, are never visible to readers and are cut (and reported) before the next append.
//! * **Detected** ([`scan`], [`repair`]): a flipped bit, a missing, duplicated or reordered
//!   line is reported with file, line, byte offset and what was expected; nothing is skipped.
//! * **Versioned** ([`header`]): an unknown format name or version is a named error.
//! * **One writer** ([`lock`]): an exclusive `flock` that dies with its process.
//!
//! The exact line format is in [`frame`].

pub mod durable_replace;
pub mod error;
pub mod frame;
pub mod fs;
pub mod header;
pub mod id;
pub mod lock;
pub mod reader;
pub mod repair;
pub mod scan;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod writer;

pub use error::{Corruption, LedgerError, Problem, Result};
pub use frame::{Envelope, Payload};
pub use header::{FORMAT_VERSION, Header, Parent};
pub use id::validate_id;
pub use lock::{Holder, read_holder};
pub use reader::{Reader, Tail, read_tail};
pub use repair::{Finding, RepairOutcome, VerifyReport, repair, verify_file};
pub use scan::{Cut, LineInfo};
pub use writer::{Appended, Durability, Options, Recovery, Writer, ledger_path, lock_path};
