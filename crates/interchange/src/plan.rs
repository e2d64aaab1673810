//! A conversation's events turned into native records, in the runner's order, each checked
//! against the replayed state before it is kept (so what is written is a valid session).

use std::collections::HashMap;

use lazarus_boot_resume::formats::{Answer, Event, Part};
use lazarus_session::record::{
    Compaction, Input, Interrupted, Item, OutcomeStatus, Record, Response, ToolIntent, ToolOutcome,
    ToolStart, TurnStart, Usage,
};
use lazarus_session::{IN_DOUBT_NOTICE, SessionState};

use crate::ImportError;

/// What planning found besides records.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub user_messages: usize,
    pub tool_calls: usize,
    pub tool_results: usize,
    /// Calls the source holds no result for, closed in doubt.
    pub in_doubt: usize,
    /// Results of calls the source never made (or made twice), not kept.
    pub orphan_results: usize,
    pub compactions: usize,
}

/// Records planned on top of a state.
pub struct Plan {
    pub state: SessionState,
    pub records: Vec<Record>,
    pub counts: Counts,
    /// Source call id -> native call id, for calls waiting for their result.
    open: HashMap<String, String>,
    inputs: usize,
    /// The last seq written by each event planned so far (an event may write none).
    pub ends: Vec<u64>,
}

/// A call id every provider takes: `[A-Za-z0-9_-]`, at most 64 bytes, never empty.
fn clean_id(id: &str) -> String {
    let mut s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() {
        s.push_str("call");
    }
    s
}

impl Plan {
    pub fn new(state: SessionState) -> Self {
        let inputs = state.input_ids.len();
        Plan {
            state,
            records: Vec::new(),
            counts: Counts::default(),
            open: HashMap::new(),
            inputs,
            ends: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, rec: Record) -> Result<(), ImportError> {
        self.state
            .check(&rec)
            .map_err(|e| ImportError::Invalid(format!("{} record: {e}", rec.kind())))?;
        let seq = self.state.last_seq + 1;
        self.state.apply(seq, rec.clone());
        self.records.push(rec);
        Ok(())
    }

    /// Plans one event.
    pub fn event(&mut self, e: &Event) -> Result<(), ImportError> {
        self.one(e)?;
        self.ends.push(self.state.last_seq);
        Ok(())
    }

    fn one(&mut self, e: &Event) -> Result<(), ImportError> {
        match e {
            Event::User { text, .. } => {
                self.inputs += 1;
                self.counts.user_messages += 1;
                let mut input_id = format!("import-{}", self.inputs);
                while self.state.input_ids.get(&input_id).is_some() {
                    self.inputs += 1;
                    input_id = format!("import-{}", self.inputs);
                }
                self.push(Record::Input(Input {
                    input_id,
                    source: "import".into(),
                    text: text.clone(),
                }))
            }
            Event::Answer(a) => self.answer(a),
            Event::Result {
                call_id,
                text,
                is_error,
            } => {
                let Some(native) = self.open.remove(call_id) else {
                    self.counts.orphan_results += 1;
                    return Ok(());
                };
                self.counts.tool_results += 1;
                self.push(Record::ToolOutcome(ToolOutcome {
                    call_id: native,
                    status: if *is_error {
                        OutcomeStatus::Error
                    } else {
                        OutcomeStatus::Ok
                    },
                    result: text.clone(),
                    exit_code: None,
                    duration_ms: None,
                }))
            }
            Event::Compaction { summary } => self.compaction(summary),
        }
    }

    /// Closes every call still waiting for its result as in doubt: the agent may have run it.
    pub fn close_open_calls(&mut self) -> Result<(), ImportError> {
        let mut waiting: Vec<String> = self
            .state
            .unresolved_calls()
            .map(|c| c.call_id.clone())
            .collect();
        waiting.sort_by_key(|id| self.state.calls.iter().position(|c| &c.call_id == id));
        for call_id in waiting {
            self.counts.in_doubt += 1;
            self.push(Record::ToolOutcome(ToolOutcome {
                call_id,
                status: OutcomeStatus::InDoubt,
                result: IN_DOUBT_NOTICE.to_string(),
                exit_code: None,
                duration_ms: None,
            }))?;
        }
        self.open.clear();
        Ok(())
    }

    fn answer(&mut self, a: &Answer) -> Result<(), ImportError> {
        self.close_open_calls()?;
        let turn = self.state.turn + 1;
        let inputs = self.state.pending_inputs.iter().map(|p| p.seq).collect();
        self.push(Record::TurnStart(TurnStart {
            turn,
            prev_seq: self.state.turn_seqs.last().copied(),
            inputs,
        }))?;
        let mut items = Vec::new();
        let mut calls = Vec::new();
        for p in &a.parts {
            items.push(match p {
                Part::Text(t) => Item::Text { text: t.clone() },
                Part::Reasoning(t) => Item::Reasoning { text: t.clone() },
                Part::Call {
                    id,
                    name,
                    arguments,
                } => {
                    let mut native = clean_id(id);
                    let mut n = 1;
                    while self.state.call_id_used(&native)
                        || calls
                            .iter()
                            .any(|(c, _, _, _): &(String, _, _, _)| *c == native)
                    {
                        n += 1;
                        native = format!("{}_{n}", clean_id(id));
                    }
                    calls.push((native.clone(), id.clone(), name.clone(), arguments.clone()));
                    Item::ToolCall {
                        call_id: native,
                        name: name.clone(),
                        arguments: arguments.clone(),
                    }
                }
            });
        }
        let usage = a.usage.as_ref().map(|u| Usage {
            prompt_tokens: u.input,
            completion_tokens: u.output,
            total_tokens: match (u.input, u.output) {
                (Some(i), Some(o)) => Some(i + o),
                _ => None,
            },
            cached_tokens: u.cached,
        });
        self.push(Record::Response(Response {
            turn,
            items,
            usage,
            stop_reason: a.stop_reason.clone(),
            failure: None,
            model: a.model.clone(),
            provider_extra: None,
            attempts: vec![],
        }))?;
        for (native, source_id, name, arguments) in calls {
            self.counts.tool_calls += 1;
            self.push(Record::ToolIntent(ToolIntent {
                call_id: native.clone(),
                turn,
                tool: name,
                arguments,
                idempotent: false,
                idempotency_key: format!("import:{native}"),
                rerun_basis: None,
            }))?;
            self.push(Record::ToolStart(ToolStart {
                call_id: native.clone(),
                process: None,
            }))?;
            self.open.insert(source_id, native);
        }
        Ok(())
    }

    fn compaction(&mut self, summary: &str) -> Result<(), ImportError> {
        self.close_open_calls()?;
        self.counts.compactions += 1;
        let from_seq = self
            .state
            .compaction
            .as_ref()
            .map_or(1, |c| c.through_seq + 1);
        let rec = Record::Compaction(Compaction {
            trigger: "import".into(),
            from_seq,
            through_seq: self.state.last_seq,
            summary: summary.to_string(),
            tokens_before: 0,
            tokens_after: 0,
            model: None,
            usage: None,
            attempts: vec![],
        });
        if self.state.check(&rec).is_ok() {
            return self.push(rec);
        }
        // Nothing to summarise yet (the summary opens the source), or it does not fall
        // between turns: the model gets it as a message, as the source agent sent it.
        self.inputs += 1;
        self.push(Record::Input(Input {
            input_id: format!("import-{}", self.inputs),
            source: "import".into(),
            text: summary.to_string(),
        }))
    }

    /// Ends the plan: open calls closed in doubt; a session that still owes work is marked
    /// stopped by the import, for the person who imported it to continue.
    pub fn finish(&mut self) -> Result<(), ImportError> {
        self.close_open_calls()?;
        if self.state.owes_work() {
            self.push(Record::Interrupted(Interrupted {
                reason: "import".into(),
                turn: None,
            }))?;
        }
        Ok(())
    }
}
