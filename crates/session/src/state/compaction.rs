//! Compaction bookkeeping: the compaction in force, where a compaction cuts the context,
//! what it drops from the state, and the context the model is sent after it.

use super::call::is_in_doubt;
use super::{ContextEntry, SessionState};

/// The compaction in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionState {
    /// Seq of the `compaction` record.
    pub seq: u64,
    pub through_seq: u64,
    /// The last turn it summarises: the kept tail is the context of later turns.
    pub through_turn: u64,
    /// Index in `context` where the kept tail starts.
    pub kept_from: usize,
    pub summary: String,
}

impl SessionState {
    /// Where a compaction through `through_seq` cuts the context: (the last turn it
    /// summarises, the index in `context` where the kept tail starts). `through_seq` must end
    /// a turn: the record right before a `turn_start`, or the last record.
    pub fn compaction_cut(&self, through_seq: u64) -> Option<(u64, usize)> {
        if through_seq == self.last_seq {
            return Some((self.turn, self.context.len()));
        }
        // turn_seqs ascend (each turn_start follows the previous one)
        let next = self.turn_seqs.binary_search(&(through_seq + 1)).ok()?;
        Some((next as u64, self.turn_context_starts[next]))
    }

    /// The seq a compaction that summarises turns up to `through_turn` ends at (the record
    /// before turn `through_turn + 1` starts, or the last record).
    pub fn turn_end_seq(&self, through_turn: u64) -> u64 {
        match self.turn_seqs.get(through_turn as usize) {
            Some(&next) => next - 1,
            None => self.last_seq,
        }
    }

    /// Drops what a compaction summarised: the `context` entries before `kept_from` and the
    /// calls of turns up to `through_turn` (except any a kept tool result still names).
    /// Nothing reads them again — requests start at the summary, the next compaction
    /// summarises from `kept_from` on, and a resume only looks at calls after the last
    /// complete turn — so a replay holds the live context, not the whole transcript. The
    /// records stay in the ledger, where `show`, the web view and forks read them; the ids
    /// stay in `input_ids` and `call_index`, so a repeated id is still refused.
    pub(super) fn forget_summarised(&mut self, kept_from: usize, through_turn: u64) {
        self.context.forget_before(kept_from);
        let mut cut = self.calls.start()
            + self
                .calls
                .iter()
                .position(|c| c.turn > through_turn)
                .unwrap_or(self.calls.iter().len());
        for e in &self.context {
            if let ContextEntry::ToolResult { call, .. } = e {
                cut = cut.min(*call);
            }
        }
        self.summarised_in_doubt += self
            .calls
            .iter()
            .take(cut.saturating_sub(self.calls.start()))
            .filter(|c| is_in_doubt(c))
            .count();
        self.calls.forget_before(cut);
    }

    /// The context the model is sent: the summary of the compaction in force (if any) and
    /// the entries after it.
    pub fn live_context(&self) -> (Option<&str>, &[ContextEntry]) {
        match &self.compaction {
            Some(c) => (Some(&c.summary), self.context.since(c.kept_from)),
            None => (None, self.context.since(0)),
        }
    }

    /// A `compact` control input is waiting: compact before the next turn (it owes no work by
    /// itself; a turn start or a compaction answers it).
    pub fn compact_requested(&self) -> bool {
        self.pending_control
            .as_ref()
            .is_some_and(|c| c.action == COMPACT_ACTION)
    }
}

/// The `action` of a control input that asks for a compaction.
pub const COMPACT_ACTION: &str = "compact";
