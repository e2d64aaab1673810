//! A session's records as a timeline: the view model of the session page, built from the
//! records one at a time (pure: no I/O). Inputs, control events, turns (the request, the
//! model's response and the cards of its tool calls, each gathering intent → start →
//! outcome), resume receipts, fork points and stops become [`Entry`]s in seq order.
//!
//! The same records are replayed into a [`SessionState`] by the session crate's own rules
//! ([`SessionState::check`] / [`SessionState::apply`]), so the status and the fork points the
//! page shows are the ones a resume would see; a record that breaks those rules is still shown,
//! and the replay error is reported instead of a blank page.
//!
//! Each entry knows the last seq that changed it (`touched`): the live page asks for "every
//! entry touched after seq N" and replaces entries by their id, so a record is never shown
//! twice and a card fills in as its call progresses.

use std::collections::HashMap;

use lazarus_ledger::{FORMAT_VERSION, Header, Parent, Payload};
use lazarus_session::record::{
    Approval, ApprovalRequest, Compaction, Control, ForkPoint, Input, Interrupted, Record,
    Response, ResumeReceipt, ToolIntent, ToolOutcome, ToolStart, ToolTask, ToolTaskStatus,
};
use lazarus_session::{FORMAT, SessionState, SessionSummary, Status, StoredRecord};
use serde_json::Value;

/// One thing on the timeline.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its element id on the page: `r<seq>` for a single record, `t<turn>` for a turn.
    pub key: String,
    /// The seq of its first record.
    pub seq: u64,
    pub ts: String,
    /// The last seq that changed it.
    pub touched: u64,
    pub body: Body,
}

#[derive(Debug, Clone)]
pub enum Body {
    Input {
        input: Input,
        /// The turn that gave it to the model (`None`: pending).
        answered_in: Option<u64>,
    },
    Control(Control),
    Turn(Box<Turn>),
    Resume(Box<ResumeReceipt>),
    Fork(ForkPoint),
    /// Where an imported session came from.
    Import(Box<lazarus_session::record::Import>),
    Stop(Interrupted),
    /// What is sent to the model from here on starts with this summary; the history above
    /// stays in the ledger and on the page.
    Compaction(Box<Compaction>),
    /// A record a host framework wrote (the Python package's sessions): its kind and data as
    /// they are.
    Host {
        kind: String,
        data: Value,
    },
    /// What the session runs with from here on (changed, or recorded for the first time).
    World(Box<lazarus_session::record::World>),
    /// A resumer could not honour the session's world and left it alone.
    NeedsOwner(lazarus_session::record::NeedsOwner),
    /// A record this build cannot read (a newer kind or field), or one that fits nowhere.
    Unreadable {
        kind: String,
        data: Value,
        why: String,
    },
}

/// A model request and what came of it.
#[derive(Debug, Clone)]
pub struct Turn {
    pub turn: u64,
    /// Seqs of the inputs this turn gave the model.
    pub inputs: Vec<u64>,
    pub response: Option<Stamped<Response>>,
    pub calls: Vec<CallCard>,
    /// Whether the turn is complete (a response, every call with an outcome): a fork point.
    pub complete: bool,
}

/// A record's data with where and when it was written.
#[derive(Debug, Clone)]
pub struct Stamped<T> {
    pub seq: u64,
    pub ts: String,
    pub data: T,
}

/// One tool call: what the model asked, then each durable step.
#[derive(Debug, Clone)]
pub struct CallCard {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    pub intent: Option<Stamped<ToolIntent>>,
    pub start: Option<Stamped<ToolStart>>,
    pub outcome: Option<Stamped<ToolOutcome>>,
    /// The approval asked for before the call could start, if any.
    pub approval_request: Option<Stamped<ApprovalRequest>>,
    /// The decision on it, if any.
    pub approval: Option<Stamped<Approval>>,
    /// Why a resume did not run it again (the receipt's words), when it closed it in doubt.
    pub in_doubt_why: Option<String>,
    /// The task it became on its MCP server, and the latest status recorded for it.
    pub task: Option<Stamped<ToolTask>>,
    pub task_status: Option<Stamped<ToolTaskStatus>>,
}

/// Where a call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStage {
    /// The model asked; nothing of the call was recorded yet.
    Asked,
    /// Intent recorded, not started: safe to run (resume runs it).
    Intended,
    /// Started, no outcome: running now, or cut off with its effect unknown.
    Started,
    /// Finished with an outcome.
    Done,
}

impl CallCard {
    pub fn stage(&self) -> CallStage {
        match (&self.intent, &self.start, &self.outcome) {
            (_, _, Some(_)) => CallStage::Done,
            (_, Some(_), None) => CallStage::Started,
            (Some(_), None, None) => CallStage::Intended,
            (None, None, None) => CallStage::Asked,
        }
    }

    /// Asked for a person's approval, and no decision recorded (nor an outcome).
    pub fn awaits_decision(&self) -> bool {
        self.approval_request.is_some() && self.approval.is_none() && self.outcome.is_none()
    }

    /// Closed as in doubt: the model was told its effect is unknown.
    pub fn in_doubt(&self) -> bool {
        self.outcome
            .as_ref()
            .is_some_and(|o| o.data.status == lazarus_session::record::OutcomeStatus::InDoubt)
    }
}

/// Token counts added over every response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// The timeline and the replayed state.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub entries: Vec<Entry>,
    /// The state replayed from the records, as far as they were valid.
    pub state: SessionState,
    /// The first record that broke the session's rules (seq, why); later records are shown
    /// but not replayed.
    pub replay_error: Option<(u64, String)>,
    pub last_seq: u64,
    /// The model named by the last response that named one.
    pub model: Option<String>,
    pub tokens: Tokens,
    pub receipts: usize,
    pub fork: Option<ForkPoint>,
}

impl Timeline {
    /// The status a full replay gives (`corrupt` when the records break the rules).
    pub fn status(&self) -> Status {
        if self.replay_error.is_some() {
            Status::Corrupt
        } else {
            self.state.status()
        }
    }

    /// Calls closed as in doubt.
    pub fn in_doubt_calls(&self) -> usize {
        self.calls().filter(|c| c.in_doubt()).count()
    }

    pub fn calls(&self) -> impl Iterator<Item = &CallCard> {
        self.entries.iter().flat_map(|e| match &e.body {
            Body::Turn(t) => t.calls.as_slice(),
            _ => &[],
        })
    }

    /// The entries a page showing records from `from_seq` on draws: those changed at or after
    /// it.
    pub fn visible_from(&self, from_seq: u64) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.touched >= from_seq)
    }
}

/// The header a session's replay starts from, rebuilt from its listing line (the fields
/// replay consults: id, lineage, metadata).
pub fn header_of(summary: &SessionSummary) -> Header {
    Header {
        format: FORMAT.to_string(),
        version: FORMAT_VERSION,
        id: summary.id.to_string(),
        created_at: summary.created_at.clone(),
        parent: summary.parent.as_ref().map(|p| Parent {
            id: p.clone(),
            seq: 0,
        }),
        meta: summary.meta.clone(),
        unsynced_bytes_max: None,
    }
}

/// Builds a [`Timeline`] from records pushed in seq order.
#[derive(Debug)]
pub struct Builder {
    tl: Timeline,
    turns: HashMap<u64, usize>,
    calls: HashMap<String, (usize, usize)>,
    inputs: HashMap<u64, usize>,
}

impl Builder {
    pub fn new(header: Header) -> Self {
        Builder {
            tl: Timeline {
                entries: Vec::new(),
                state: SessionState::new(header),
                replay_error: None,
                last_seq: 0,
                model: None,
                tokens: Tokens::default(),
                receipts: 0,
                fork: None,
            },
            turns: HashMap::new(),
            calls: HashMap::new(),
            inputs: HashMap::new(),
        }
    }

    pub fn finish(mut self) -> Timeline {
        for e in &mut self.tl.entries {
            if let Body::Turn(t) = &mut e.body {
                t.complete = self.tl.replay_error.is_none()
                    && self.tl.state.fork_boundary(t.turn).is_ok()
                    && t.response.is_some();
            }
        }
        self.tl
    }

    fn push_entry(&mut self, key: String, seq: u64, ts: &str, body: Body) -> usize {
        self.tl.entries.push(Entry {
            key,
            seq,
            ts: ts.to_string(),
            touched: seq,
            body,
        });
        self.tl.entries.len() - 1
    }

    fn touch(&mut self, idx: usize, seq: u64) {
        let e = &mut self.tl.entries[idx];
        e.touched = e.touched.max(seq);
    }

    fn unreadable(&mut self, r: &StoredRecord, why: String) {
        self.push_entry(
            format!("r{}", r.seq),
            r.seq,
            &r.ts,
            Body::Unreadable {
                kind: r.kind.clone(),
                data: r.data.clone(),
                why,
            },
        );
    }

    /// The entry of turn `turn`, created when a record names a turn never started (a
    /// damaged or invalid log: shown all the same).
    fn turn_entry(&mut self, turn: u64, seq: u64, ts: &str) -> usize {
        if let Some(&i) = self.turns.get(&turn) {
            return i;
        }
        let i = self.push_entry(
            format!("t{turn}"),
            seq,
            ts,
            Body::Turn(Box::new(Turn {
                turn,
                inputs: Vec::new(),
                response: None,
                calls: Vec::new(),
                complete: false,
            })),
        );
        self.turns.insert(turn, i);
        i
    }

    fn turn_mut(&mut self, idx: usize) -> &mut Turn {
        match &mut self.tl.entries[idx].body {
            Body::Turn(t) => t,
            _ => unreachable!("turn index points at a turn entry"),
        }
    }

    /// Adds the next record.
    pub fn push(&mut self, r: StoredRecord) {
        self.tl.last_seq = self.tl.last_seq.max(r.seq);
        let rec = match Record::deserialize_kind(&r.kind, r.data.clone()) {
            Ok(rec) => rec,
            Err(e) => {
                let why = format!("this build cannot read it: {e}");
                if self.tl.replay_error.is_none() {
                    self.tl.replay_error = Some((r.seq, why.clone()));
                }
                self.unreadable(&r, why);
                return;
            }
        };
        if self.tl.replay_error.is_none() {
            match self.tl.state.check(&rec) {
                Ok(()) => self.tl.state.apply(r.seq, rec.clone()),
                Err(e) => self.tl.replay_error = Some((r.seq, e.to_string())),
            }
        }
        let (seq, ts) = (r.seq, r.ts.as_str());
        match rec {
            Record::Input(input) => {
                let i = self.push_entry(
                    format!("r{seq}"),
                    seq,
                    ts,
                    Body::Input {
                        input,
                        answered_in: None,
                    },
                );
                self.inputs.insert(seq, i);
            }
            Record::Control(c) => {
                self.push_entry(format!("r{seq}"), seq, ts, Body::Control(c));
            }
            Record::TurnStart(t) => {
                let key = if self.turns.contains_key(&t.turn) {
                    format!("t{}-{seq}", t.turn)
                } else {
                    format!("t{}", t.turn)
                };
                let i = self.push_entry(
                    key,
                    seq,
                    ts,
                    Body::Turn(Box::new(Turn {
                        turn: t.turn,
                        inputs: t.inputs.clone(),
                        response: None,
                        calls: Vec::new(),
                        complete: false,
                    })),
                );
                self.turns.insert(t.turn, i);
                for input_seq in &t.inputs {
                    if let Some(&k) = self.inputs.get(input_seq) {
                        if let Body::Input { answered_in, .. } = &mut self.tl.entries[k].body {
                            *answered_in = Some(t.turn);
                        }
                        self.touch(k, seq);
                    }
                }
            }
            Record::Response(resp) => {
                let i = self.turn_entry(resp.turn, seq, ts);
                if let Some(m) = &resp.model {
                    self.tl.model = Some(m.clone());
                }
                if let Some(u) = &resp.usage {
                    let t = &mut self.tl.tokens;
                    t.prompt += u.prompt_tokens.unwrap_or(0);
                    t.completion += u.completion_tokens.unwrap_or(0);
                    t.total += u
                        .total_tokens
                        .unwrap_or(u.prompt_tokens.unwrap_or(0) + u.completion_tokens.unwrap_or(0));
                }
                let cards: Vec<CallCard> = resp
                    .tool_calls()
                    .map(|(call_id, name, arguments)| CallCard {
                        call_id: call_id.to_string(),
                        name: name.to_string(),
                        arguments: arguments.to_string(),
                        intent: None,
                        start: None,
                        outcome: None,
                        approval_request: None,
                        approval: None,
                        in_doubt_why: None,
                        task: None,
                        task_status: None,
                    })
                    .collect();
                let turn = self.turn_mut(i);
                let base = turn.calls.len();
                for (k, c) in cards.iter().enumerate() {
                    self.calls.entry(c.call_id.clone()).or_insert((i, base + k));
                }
                let turn = self.turn_mut(i);
                turn.calls.extend(cards);
                turn.response = Some(Stamped {
                    seq,
                    ts: ts.to_string(),
                    data: resp,
                });
                self.touch(i, seq);
            }
            Record::ToolIntent(d) => self.call_step(&r, d.call_id.clone(), Step::Intent(d)),
            Record::ToolStart(d) => self.call_step(&r, d.call_id.clone(), Step::Start(d)),
            Record::ToolOutcome(d) => self.call_step(&r, d.call_id.clone(), Step::Outcome(d)),
            Record::ApprovalRequest(d) => self.call_step(&r, d.call_id.clone(), Step::Request(d)),
            Record::Approval(d) => self.call_step(&r, d.call_id.clone(), Step::Decision(d)),
            Record::ToolTask(d) => self.call_step(&r, d.call_id.clone(), Step::Task(d)),
            Record::ToolTaskStatus(d) => self.call_step(&r, d.call_id.clone(), Step::Status(d)),
            Record::Fork(f) => {
                self.tl.fork = Some(f.clone());
                self.push_entry(format!("r{seq}"), seq, ts, Body::Fork(f));
            }
            Record::Resume(receipt) => {
                self.tl.receipts += 1;
                for d in &receipt.in_doubt {
                    if let Some(&(entry, card)) = self.calls.get(&d.call_id) {
                        self.turn_mut(entry).calls[card].in_doubt_why = Some(d.why.clone());
                    }
                }
                self.push_entry(format!("r{seq}"), seq, ts, Body::Resume(Box::new(receipt)));
            }
            Record::Interrupted(stop) => {
                self.push_entry(format!("r{seq}"), seq, ts, Body::Stop(stop));
            }
            Record::Compaction(c) => {
                self.push_entry(format!("r{seq}"), seq, ts, Body::Compaction(Box::new(c)));
            }
            Record::Import(i) => {
                self.push_entry(format!("r{seq}"), seq, ts, Body::Import(Box::new(i)));
            }
            Record::Host(_) => {
                self.push_entry(
                    format!("r{seq}"),
                    seq,
                    ts,
                    Body::Host {
                        kind: r.kind.clone(),
                        data: r.data.clone(),
                    },
                );
            }
            Record::World(w) => {
                self.push_entry(format!("r{seq}"), seq, ts, Body::World(w));
            }
            Record::NeedsOwner(n) => {
                self.push_entry(format!("r{seq}"), seq, ts, Body::NeedsOwner(n));
            }
            Record::Header => self.unreadable(&r, "a header record after line 1".into()),
        }
    }

    fn call_step(&mut self, r: &StoredRecord, call_id: String, step: Step) {
        let Some(&(entry, card)) = self.calls.get(&call_id) else {
            self.unreadable(
                r,
                format!("a step of tool call {call_id:?}, which no response asked for"),
            );
            return;
        };
        let stamp = |seq: u64, ts: &str| (seq, ts.to_string());
        let (seq, ts) = stamp(r.seq, &r.ts);
        let c = &mut self.turn_mut(entry).calls[card];
        match step {
            Step::Intent(d) => c.intent = Some(Stamped { seq, ts, data: d }),
            Step::Start(d) => c.start = Some(Stamped { seq, ts, data: d }),
            Step::Outcome(d) => c.outcome = Some(Stamped { seq, ts, data: d }),
            Step::Request(d) => c.approval_request = Some(Stamped { seq, ts, data: d }),
            Step::Decision(d) => c.approval = Some(Stamped { seq, ts, data: d }),
            Step::Task(d) => c.task = Some(Stamped { seq, ts, data: d }),
            Step::Status(d) => c.task_status = Some(Stamped { seq, ts, data: d }),
        }
        self.touch(entry, seq);
    }
}

enum Step {
    Intent(ToolIntent),
    Start(ToolStart),
    Outcome(ToolOutcome),
    Request(ApprovalRequest),
    Decision(Approval),
    Task(ToolTask),
    Status(ToolTaskStatus),
}

/// Builds the timeline of `records` (seq order) for the session `summary` describes.
pub fn build(
    summary: &SessionSummary,
    records: impl IntoIterator<Item = StoredRecord>,
) -> Timeline {
    let mut b = Builder::new(header_of(summary));
    for r in records {
        b.push(r);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(seq: u64, kind: &str, data: Value) -> StoredRecord {
        StoredRecord {
            seq,
            ts: format!("2026-12-03T10:00:{:02}.000Z", seq % 60),
            kind: kind.into(),
            data,
        }
    }

    fn summary(parent: Option<&str>) -> SessionSummary {
        let mut s = SessionSummary::corrupt("s1".parse().unwrap(), String::new());
        s.status = Status::Idle;
        s.error = None;
        s.created_at = "2026-12-03T10:00:00.000Z".into();
        s.parent = parent.map(str::to_string);
        s
    }

    /// A session killed inside a shell call, then resumed: the call closed as in doubt.
    fn killed_and_resumed() -> Vec<StoredRecord> {
        vec![
            rec(
                1,
                "input",
                json!({"input_id":"m1","source":"user","text":"run it"}),
            ),
            rec(
                2,
                "turn_start",
                json!({"turn":1,"prev_seq":null,"inputs":[1]}),
            ),
            rec(
                3,
                "response",
                json!({"turn":1,"items":[{"type":"tool_call","call_id":"c1","name":"shell","arguments":"{\"command\":\"sleep 30\"}"}],"usage":{"prompt_tokens":10,"completion_tokens":5},"model":"m-1"}),
            ),
            rec(
                4,
                "tool_intent",
                json!({"call_id":"c1","turn":1,"tool":"shell","arguments":"{\"command\":\"sleep 30\"}","idempotent":false,"idempotency_key":"k"}),
            ),
            rec(
                5,
                "tool_start",
                json!({"call_id":"c1","process":{"pgid":42,"start_time_ticks":7}}),
            ),
            rec(
                6,
                "resume",
                json!({"trigger":"run","truncated_bytes":0,"records_replayed":5,"calls_reused":0,"calls_rerun":0,"calls_in_doubt":1,"calls_not_started":0,"processes_terminated":1,"inputs_pending":0,"every_call_has_one_result":true}),
            ),
            rec(
                7,
                "tool_outcome",
                json!({"call_id":"c1","status":"in_doubt","result":"interrupted: effect unknown"}),
            ),
            rec(8, "turn_start", json!({"turn":2,"prev_seq":2,"inputs":[]})),
            rec(
                9,
                "response",
                json!({"turn":2,"items":[{"type":"text","text":"ok"}],"usage":{"total_tokens":20}}),
            ),
        ]
    }

    #[test]
    fn a_call_gathers_its_steps_and_the_replay_agrees() {
        let records = killed_and_resumed();
        // before the resume: the call started, no outcome; the replay says in doubt
        let tl = build(&summary(None), records[..5].iter().cloned());
        assert_eq!(tl.status(), Status::InDoubt);
        let cards: Vec<_> = tl.calls().collect();
        assert_eq!(cards.len(), 1);
        assert_eq!(cards[0].stage(), CallStage::Started);
        assert!(!cards[0].in_doubt());

        let tl = build(&summary(None), records);
        assert_eq!(tl.status(), Status::Idle);
        assert!(tl.replay_error.is_none());
        let keys: Vec<&str> = tl.entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["r1", "t1", "r6", "t2"]);
        let card = tl.calls().next().unwrap();
        assert_eq!(card.stage(), CallStage::Done);
        assert!(card.in_doubt());
        assert_eq!(tl.in_doubt_calls(), 1);
        assert_eq!(tl.receipts, 1);
        assert_eq!(tl.model.as_deref(), Some("m-1"));
        assert_eq!(
            tl.tokens,
            Tokens {
                prompt: 10,
                completion: 5,
                total: 35
            }
        );
        // turn 1's entry was last changed by the outcome (seq 7), the input by turn 1's start
        assert_eq!(tl.entries[1].touched, 7);
        assert_eq!(tl.entries[0].touched, 2);
        assert!(matches!(
            tl.entries[0].body,
            Body::Input {
                answered_in: Some(1),
                ..
            }
        ));
        // the entries changed after seq 6: turn 1 (outcome 7) and turn 2
        let after: Vec<&str> = tl.visible_from(7).map(|e| e.key.as_str()).collect();
        assert_eq!(after, ["t1", "t2"]);
        // both turns complete: fork points
        for e in &tl.entries {
            if let Body::Turn(t) = &e.body {
                assert!(t.complete, "turn {}", t.turn);
            }
        }
    }

    #[test]
    fn records_that_break_the_rules_are_shown_and_named() {
        let mut records = killed_and_resumed();
        // an outcome for a call nobody asked for, and a kind from a newer version
        records.truncate(3);
        records.push(rec(
            4,
            "tool_outcome",
            json!({"call_id":"ghost","status":"ok","result":"x"}),
        ));
        records.push(rec(5, "telepathy", json!({"x":1})));
        let tl = build(&summary(None), records);
        assert_eq!(tl.status(), Status::Corrupt);
        let (seq, why) = tl.replay_error.clone().unwrap();
        assert_eq!(seq, 4, "{why}");
        let unreadable: Vec<u64> = tl
            .entries
            .iter()
            .filter(|e| matches!(e.body, Body::Unreadable { .. }))
            .map(|e| e.seq)
            .collect();
        assert_eq!(unreadable, [4, 5]);
    }

    #[test]
    fn a_fork_point_is_an_entry_at_its_turn() {
        let mut records = killed_and_resumed();
        records.push(rec(
            10,
            "fork",
            json!({"parent":"p","parent_seq":9,"at_turn":2}),
        ));
        let tl = build(&summary(Some("p")), records);
        assert!(tl.replay_error.is_none(), "{:?}", tl.replay_error);
        assert_eq!(tl.fork.as_ref().map(|f| f.at_turn), Some(2));
        assert!(matches!(tl.entries.last().unwrap().body, Body::Fork(_)));
        // without a parent in the header, a fork record breaks the rules
        let tl = build(
            &summary(None),
            killed_and_resumed().into_iter().chain([rec(
                10,
                "fork",
                json!({"parent":"p","parent_seq":9,"at_turn":2}),
            )]),
        );
        assert_eq!(tl.status(), Status::Corrupt);
    }
}
