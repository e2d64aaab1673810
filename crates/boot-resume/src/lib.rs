//! `lazarus boot-resume`: find agent sessions that a restart or a system wake cut off,
//! and inject a resume event so they carry on.
//!
//! The library is layered so each part can be used and tested on its own:
//! - [`format`]: the formats, and telling them apart by their bytes;
//! - [`classify`]: pure classifiers over tail bytes, one module per format;
//! - [`tail`]: reading only the end of a file, growing the window only when needed;
//! - [`discover`]: where each agent keeps its sessions, and `--source FORMAT:PATH`;
//! - [`scan`]: parallel scanning and filtering into [`scan::Report`]s;
//! - [`inject`], [`state`]: resume injection, state file, lock and decision log;
//! - [`systemd`], [`watch`]: triggers (drop-in, wake units, wake detection);
//! - [`cli`]: the `lazarus boot-resume` command.
pub mod classify;
pub mod cli;
pub mod damage;
pub mod discover;
pub mod format;
pub mod formats;
pub mod fsutil;
pub mod inject;
pub mod lines;
pub mod live;
pub mod scan;
pub mod sqlite;
pub mod state;
pub mod systemd;
pub mod tail;
pub mod verdict;
pub mod watch;

pub use format::Format;
pub use verdict::{Classification, IndexFacts, InterruptedCall, SessionMeta, SkipWhy, Verdict};
