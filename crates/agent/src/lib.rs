//! Building blocks of the Lazarus agent runner.
//!
//! - [`model`]: provider-neutral types (messages, tool specs, requests, responses).
//! - [`provider`]: an OpenAI-compatible chat-completions client (SSE streaming, retries,
//!   limits, cancellation, text tool-call recognition).
//! - [`tools`]: the five workspace tools (`shell`, `read_file`, `write_file`, `edit_file`,
//!   `list_dir`) behind a [`tools::Tool`] trait whose [`tools::ToolHooks::started`] hook lets
//!   the runner durably record "started" before any side effect happens.
//! - [`sandbox`]: how `shell` commands are confined against a hostile model, also as root
//!   (Landlock, namespaces with a fresh `/proc`, capabilities dropped, seccomp with a gate for
//!   Unix sockets, a process bound, a minimal environment, and an init that takes everything
//!   a call started down with it).
//! - [`process`]: process-group helpers used to find and terminate a shell call's leftover
//!   process group after a crash.
//!
//! - [`runner`]: the turn loop, which drives a session through its `Session` handle (from
//!   `lazarus-session`) in the order of durable steps.
//!
//! The crate knows sessions only through that handle: nothing of session files, their layout
//! or the ledger's recovery rule. From the ledger it uses only the file layer the tools need
//! (regular-file opens and `durable_replace`).

pub mod failpoint;
pub mod model;
pub mod process;
pub mod provider;
pub mod runner;
pub mod sandbox;
pub mod tools;
