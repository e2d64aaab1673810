//! Compaction: when the next request would pass the threshold, the turns before the kept
//! tail are summarised by the model and a `compaction` record puts the summary in their
//! place in every later request. Nothing leaves the ledger.
//!
//! Record order (crash safety): the summarising request is made first, with nothing
//! written; its answer becomes one `compaction` record; then the next `turn_start`. A crash
//! before the record leaves the state as it was, so resume compacts again; after it, the
//! compaction is in force.

use lazarus_session::record::{Compaction, Item, Record, Usage as RecUsage};
use lazarus_session::{ContextEntry, SessionState};

use super::transcript::record_attempts;
use super::{Observer, RunError, Runner, SharedSession, append, lock};
use crate::model::{Message, ModelRequest};
use crate::provider::{CancellationToken, CompletionFailure, ProviderError};

/// When to compact. Tokens are estimates (request bytes / 4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// Compact when the next request's estimate passes this many tokens.
    pub compact_at: Option<u64>,
    /// The model's context window: never send a request estimated above it; compact at
    /// 80% of it unless `compact_at` says otherwise.
    pub context_window: Option<u64>,
    /// Complete turns kept verbatim after the summary (fewer when they do not fit).
    pub keep_turns: u64,
}

impl CompactionPolicy {
    /// The estimate above which the runner compacts, if compaction is on.
    pub fn threshold(&self) -> Option<u64> {
        self.compact_at
            .or(self.context_window.map(|w| w.saturating_mul(4) / 5))
    }
}

/// The instruction of the summarising request.
pub const SUMMARY_PROMPT: &str = "You compact an agent's conversation so it can continue in a smaller context. Write a concise summary of the conversation below: the user's goals and instructions, what was done (files read or changed, commands run and their results), decisions and facts established, and what remains to do. Keep names, paths, numbers and errors exact. Answer with the summary only.";

/// How a compaction went.
pub(super) enum Compacted {
    /// A `compaction` record was written.
    Done,
    /// Nothing to summarise (no complete turn since the last compaction).
    Nothing,
    /// The summarising request failed (nothing was written).
    Failed(CompletionFailure),
}

impl Runner {
    /// Compacts the context of a session that owes no work now (`sessions compact`): true
    /// when a `compaction` record was written, false when there was nothing to summarise.
    pub async fn compact_now(
        &self,
        session: &SharedSession,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<bool, RunError> {
        if lock(session).state().owes_work() {
            return Err(RunError::Internal(
                "the session owes work; run it first (it compacts by itself with --context-window or --compact-at)".into(),
            ));
        }
        // a summary is a model request of the session's: in its world only
        self.enter_world(session, observer)?;
        match self.compact(session, "manual", cancel, observer).await? {
            Compacted::Done => Ok(true),
            Compacted::Nothing => Ok(false),
            Compacted::Failed(f) => Err(RunError::Provider(f.error)),
        }
    }

    /// The request the next turn would make (pending inputs included).
    pub(super) fn next_request(&self, st: &SessionState) -> ModelRequest {
        let mut messages = self.messages(st);
        messages.extend(
            st.pending_inputs
                .iter()
                .map(|p| Message::user(p.text.clone())),
        );
        self.model_request(messages, true)
    }

    pub(super) fn model_request(&self, messages: Vec<Message>, tools: bool) -> ModelRequest {
        ModelRequest {
            model: self.cfg.model.clone(),
            messages,
            tools: if tools {
                self.offered_specs()
            } else {
                Vec::new()
            },
            max_tokens: self.cfg.max_tokens,
            temperature: self.cfg.temperature,
            stream: self.cfg.stream,
        }
    }

    /// The estimated tokens of the next turn's request.
    pub fn next_request_tokens(&self, st: &SessionState) -> u64 {
        self.client.estimate_tokens(&self.next_request(st))
    }

    /// Summarises the turns before the kept tail and records the compaction. `trigger` is
    /// `auto` (work is owed) or `manual` (none is).
    pub(super) async fn compact(
        &self,
        session: &SharedSession,
        trigger: &str,
        cancel: &CancellationToken,
        observer: &mut Observer<'_>,
    ) -> Result<Compacted, RunError> {
        let st = lock(session).state().clone();
        let tokens_before = self.next_request_tokens(&st);
        let (prev_turn, prev_kept, from_seq, prev_summary) = match &st.compaction {
            Some(c) => (
                c.through_turn,
                c.kept_from,
                c.through_seq + 1,
                Some(c.summary.clone()),
            ),
            None => (0, 0, 1, None),
        };
        if st.turn <= prev_turn {
            return Ok(Compacted::Nothing);
        }
        let target = self.cfg.compaction.threshold().unwrap_or(u64::MAX);
        // Keep as many whole turns as fit (at most keep_turns), with room for the summary.
        let reserve = u64::from(self.cfg.max_tokens.unwrap_or(1024));
        let mut through_turn = st.turn;
        for keep in (1..=self.cfg.compaction.keep_turns.min(st.turn - prev_turn - 1)).rev() {
            let t = st.turn - keep;
            let mut probe = st.clone();
            probe.compaction = Some(lazarus_session::state::CompactionState {
                seq: 0,
                through_seq: st.turn_end_seq(t),
                through_turn: t,
                kept_from: st.turn_context_starts[t as usize],
                summary: String::new(),
            });
            if self.next_request_tokens(&probe) + reserve <= target {
                through_turn = t;
                break;
            }
        }
        let through_seq = st.turn_end_seq(through_turn);
        let kept_from = st
            .turn_context_starts
            .get(through_turn as usize)
            .copied()
            .unwrap_or(st.context.len());
        // The text to summarise: the previous summary, then the newly replaced entries; cut
        // from the front so the summarising request itself fits.
        let mut text = String::new();
        if let Some(s) = &prev_summary {
            text.push_str("Summary of the conversation before:\n");
            text.push_str(s);
            text.push_str("\n\nThe conversation since:\n");
        }
        for entry in &st.context[prev_kept.min(kept_from)..kept_from] {
            render(&st, entry, &mut text);
        }
        let window = self.cfg.compaction.context_window.unwrap_or(target);
        let room_chars = usize::try_from(
            window
                .min(target)
                .saturating_sub(reserve + 512)
                .saturating_mul(4),
        )
        .unwrap_or(usize::MAX);
        if text.len() > room_chars {
            let mut cut = text.len() - room_chars;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text = format!("[earlier part left out]\n{}", &text[cut..]);
        }
        let req = self.model_request(
            vec![Message::system(SUMMARY_PROMPT), Message::user(text)],
            false,
        );
        let completion = match self.client.complete(&req, cancel, &mut |_| {}).await {
            Ok(c) => c,
            Err(f) => return Ok(Compacted::Failed(f)),
        };
        let summary = completion.response.text();
        if summary.trim().is_empty() {
            return Ok(Compacted::Failed(CompletionFailure {
                error: ProviderError::InvalidResponse {
                    detail: "the summarising request answered without text".into(),
                },
                attempts: completion.attempts,
            }));
        }
        let mut after = st.clone();
        after.compaction = Some(lazarus_session::state::CompactionState {
            seq: 0,
            through_seq,
            through_turn,
            kept_from,
            summary: summary.clone(),
        });
        let tokens_after = self.next_request_tokens(&after);
        let failed: Vec<_> = completion
            .attempts
            .iter()
            .filter(|a| a.error.is_some())
            .cloned()
            .collect();
        append(
            session,
            Record::Compaction(Compaction {
                trigger: trigger.to_string(),
                from_seq,
                through_seq,
                summary,
                tokens_before,
                tokens_after,
                model: completion.response.model.clone(),
                usage: completion.response.usage.as_ref().map(|u| RecUsage {
                    prompt_tokens: u.prompt_tokens,
                    completion_tokens: u.completion_tokens,
                    total_tokens: u.total_tokens,
                    cached_tokens: u.cached_tokens,
                }),
                attempts: record_attempts(&failed),
            }),
            observer,
        )?;
        Ok(Compacted::Done)
    }
}

/// One context entry as text for the summariser.
fn render(st: &SessionState, entry: &ContextEntry, out: &mut String) {
    match entry {
        ContextEntry::User { text, .. } => {
            out.push_str("User: ");
            out.push_str(text);
            out.push('\n');
        }
        ContextEntry::Assistant { items, .. } => {
            for i in items {
                match i {
                    Item::Text { text } => {
                        out.push_str("Assistant: ");
                        out.push_str(text);
                        out.push('\n');
                    }
                    Item::ToolCall {
                        name, arguments, ..
                    } => {
                        out.push_str(&format!("Assistant called {name} {arguments}\n"));
                    }
                    Item::Reasoning { .. } | Item::ProviderReasoning { .. } => {}
                }
            }
        }
        ContextEntry::ToolResult { call, .. } => {
            let c = &st.calls[*call];
            out.push_str(&format!(
                "Result of {}: {}\n",
                c.name,
                st.tool_result_text(&c.call_id)
            ));
        }
    }
}
