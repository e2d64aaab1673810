//! # lazarus-session
//!
//! Agent sessions on top of the ledger: the record kinds ([`record`]), replay into the
//! resume state with validation of meaning ([`state`]), the [`Store`] trait with the live
//! [`Session`] handle ([`store`]), and the embedded local-file store ([`local`]).
//!
//! It knows what a turn, an input and a tool call are, but nothing of models, HTTP or how
//! tools run: that is the agent crate's business.
//!
//! ```
//! use lazarus_session::record::{Item, Record, Response, TurnStart};
//! use lazarus_session::{CreateOptions, LocalStore, SessionId, Status, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = LocalStore::open(dir.path())?;
//! // An id is checked once, where it enters; inside it is a SessionId.
//! let id: SessionId = "demo".parse()?;
//! let mut s = store.create(CreateOptions { id: Some(id.clone()), meta: None })?;
//!
//! // An input is recorded once per id, whoever delivers it how often (G6).
//! let first = s.append_input("m1", "user", "say hi")?;
//! assert!(s.append_input("m1", "user", "say hi")?.duplicate);
//! assert!(s.state().owes_work()); // an input not yet answered
//!
//! // Every record is checked against the replayed state before it is written.
//! s.append(Record::TurnStart(TurnStart { turn: 1, prev_seq: None, inputs: vec![first.seq] }))?;
//! s.append(Record::Response(Response {
//!     turn: 1,
//!     items: vec![Item::Text { text: "hi".into() }],
//!     usage: None,
//!     stop_reason: Some("stop".into()),
//!     failure: None,
//!     model: None,
//!     provider_extra: None,
//!     attempts: vec![],
//! }))?;
//! drop(s);
//!
//! // Replay without writing: the state a resume starts from.
//! let st = store.load(&id)?;
//! assert_eq!(st.status(), Status::Idle);
//! assert!(!st.owes_work());
//! # Ok(())
//! # }
//! ```

pub mod approval;
pub mod error;
pub mod handoff;
pub mod host_blob;
pub mod host_view;
pub mod id;
pub mod ids;
pub mod inbox;
pub mod list;
pub mod local;
pub mod record;
mod spool;
pub mod state;
pub mod store;
pub mod unicode;
pub mod window;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use id::SessionId;
pub use inbox::{Delivery, Drained, InboxMessage, Waiting};
pub use list::{ListCounts, ListOrder, ListQuery};
pub use local::LocalStore;
pub use record::{FORMAT, Record};
/// The text a call closed "in doubt" returns to the model: after a crash (the runner's resume)
/// and for a call an imported log holds no result for.
pub const IN_DOUBT_NOTICE: &str = "This tool call was interrupted before its result was recorded (the process was stopped or the machine went down). Its effect is unknown: it may have run completely, partly, or not at all. Check the current state before retrying it.";

pub use state::{Call, CallState, ContextEntry, LastResponse, ReplayError, SessionState, Status};
pub use store::{
    CreateOptions, HolderView, InputAck, MailWake, OpenReport, Result, Session, SessionError,
    SessionSummary, SharedStore, Store, Stored, StoredRecord, SummaryView, TITLE_CHARS_MAX,
    checked_title, title_of,
};
