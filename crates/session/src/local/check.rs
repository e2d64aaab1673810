//! `verify` and `repair` of local sessions with the checks an open for writing applies: the
//! ledger's (framing, CRC, seq, crash window) and the session's (each record decoded as a
//! known kind with known fields, and checked against the replayed state). What `open`
//! refuses, `verify` names — file, line, byte offset, why — and `repair` cuts away (saving
//! the removed bytes beside the file first).

use std::path::Path;

use lazarus_ledger::{Problem, Reader, RepairOutcome, VerifyReport};

use super::LocalStore;
use crate::id::SessionId;
use crate::record::Record;
use crate::state::SessionState;
use crate::store::{Result, SessionError};

/// The record check of an open for writing, as a ledger scan callback.
fn replay_check(
    mut state: SessionState,
) -> impl FnMut(
    lazarus_ledger::LineInfo,
    lazarus_ledger::frame::Envelope<'_, Record>,
) -> std::result::Result<(), Problem> {
    move |_, env| {
        state.check(&env.data).map_err(|e| {
            Problem::Invalid(format!(
                "seq {}: {e}; an open for writing refuses it",
                env.seq
            ))
        })?;
        state.apply(env.seq, env.data);
        Ok(())
    }
}

impl LocalStore {
    /// The header of the ledger at `path`, if it can be read (else the plain checks report
    /// why not).
    fn header_at(&self, path: &Path) -> Option<lazarus_ledger::Header> {
        Reader::open(path, &self.opts)
            .ok()
            .map(|r| r.header().clone())
    }

    /// Checks every line of the ledger at `path` as an open for writing would, changing
    /// nothing and taking no lock.
    pub fn verify_path(&self, path: &Path) -> Result<VerifyReport> {
        match self.header_at(path) {
            Some(h) => Ok(lazarus_ledger::verify_file_with::<Record, _>(
                path,
                &self.opts,
                replay_check(SessionState::new(h)),
            )?),
            None => Ok(lazarus_ledger::verify_file(path, &self.opts)?),
        }
    }

    /// Cuts session `id` back to its last record an open for writing accepts, saving the
    /// removed bytes beside it first. Takes the writer lock (refused while a writer runs).
    pub fn repair(&self, id: &SessionId) -> Result<RepairOutcome> {
        let path = self.path_of(id);
        let out = match self.header_at(&path) {
            Some(h) => lazarus_ledger::repair_with::<Record, _>(
                &self.dir,
                id,
                &self.opts,
                replay_check(SessionState::new(h)),
            ),
            None => lazarus_ledger::repair(&self.dir, id, &self.opts),
        };
        out.map_err(|e| match e {
            lazarus_ledger::LedgerError::NotFound { .. } => self.not_found(id),
            e => SessionError::from(e),
        })
    }
}
