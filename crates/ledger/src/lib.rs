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
//! * **Atomic** ([`scan`]): damage a crash can have left at the end of the file (a torn
//!   line, lost sectors inside the ledger's crash window) is never visible to readers and is
//!   saved aside, cut and reported before the next append. Damage a crash cannot explain is
//!   corruption, and the file is refused. A new ledger appears whole or not at all.
//! * **Detected** ([`scan`], [`repair`]): a flipped bit, a missing, duplicated or reordered
//!   line is reported with file, line, byte offset and what was expected; nothing is skipped.
//! * **Versioned** ([`header`]): an unknown format name or version is a named error.
//! * **One writer** ([`lock`]): an exclusive `flock` that dies with its process.
//!
//! The exact line format is in [`frame`]; where files live, in [`layout`].
//!
//! ```
//! use lazarus_ledger::{Header, Options, Reader, Writer, ledger_path};
//! use serde_json::{Value, json};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! // Create: the header is line 1; the file appears whole or not at all.
//! let w = Writer::create(dir.path(), Header::new("my.app", "s1"), b"", Options::default())?;
//! // Append: returns once the line is written and fdatasynced (acknowledged).
//! let a = w.append("note", &json!({"text": "hello"}))?;
//! assert_eq!(a.seq, 1);
//! drop(w); // or kill -9: what was acknowledged is there
//!
//! // Reopen for writing: takes the lock, checks every line, cuts (and saves aside) crash
//! // debris, refuses corruption.
//! let (w, recovery) = Writer::open(dir.path(), "s1", Options::default())?;
//! assert_eq!(recovery.records, 1);
//! assert!(recovery.cut.is_none());
//! w.append("note", &json!({"text": "again"}))?;
//!
//! // Read without a lock, while the writer runs.
//! let mut r = Reader::open(&ledger_path(dir.path(), "s1"), &Options::default())?;
//! let mut texts = Vec::new();
//! while let Some((_, env)) = r.next_record::<Value>()? {
//!     texts.push(env.data["text"].as_str().unwrap_or_default().to_string());
//! }
//! assert_eq!(texts, ["hello", "again"]);
//! # Ok(())
//! # }
//! ```

pub mod clock;
pub mod durable_replace;
pub mod error;
pub mod frame;
pub mod fs;
pub mod header;
pub mod holder;
pub mod id;
pub mod layout;
pub mod lock;
pub mod parallel;
pub mod reader;
pub mod repair;
pub mod scan;
pub mod shared_sync;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod writer;

pub use error::{Corruption, LedgerError, Problem, Result};
pub use frame::{Envelope, Payload};
pub use header::{FORMAT_VERSION, Header, Parent};
pub use holder::Holder;
pub use id::validate_id;
pub use layout::{ledger_path, lock_path};
pub use lock::read_holder;
pub use reader::{HeadAndTail, Reader, Tail, read_head_and_tail, read_tail};
pub use repair::{
    Finding, RepairOutcome, VerifyReport, repair, repair_with, verify_file, verify_file_with,
};
pub use scan::{CrashWindow, Cut, LineInfo};
pub use shared_sync::SharedSync;
pub use writer::{Appended, Deferred, Durability, Options, Recovery, Writer};
