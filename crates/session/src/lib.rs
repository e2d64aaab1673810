//! # lazarus-session
//!
//! Agent sessions on top of the ledger: the record kinds ([`record`]), replay into the
//! resume state with validation of meaning ([`state`]), the [`Store`] trait with the live
//! [`Session`] handle ([`store`]), and the embedded local-file store ([`local`]).
//!
//! It knows what a turn, an input and a tool call are, but nothing of models, HTTP or how
//! tools run: that is the agent crate's business.

pub mod local;
pub mod record;
pub mod state;
pub mod store;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use local::LocalStore;
pub use record::{FORMAT, Record};
pub use state::{Call, CallState, ContextEntry, LastResponse, ReplayError, SessionState, Status};
pub use store::{
    CreateOptions, InputAck, OpenReport, Result, Session, SessionError, SessionSummary,
    SharedStore, Store, Stored, StoredRecord,
};
