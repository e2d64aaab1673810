//! The `Store` conformance suite: every backend runs exactly these checks.
//!
//! A backend's test calls [`run_all`] with a function that makes a fresh, empty store.
//! Each check panics with a message naming the check when the contract is broken.
//!
//! The checks are grouped by the guarantee they prove, one module each:
//! * `creation`: a session is created once, and a hostile id never names one;
//! * `inputs`: exactly-once inputs (G6), also when delivered through the inbox;
//! * `interleavings`: the inbox rule (nothing acknowledged lost, doubled, overtaken or
//!   stranded) over random interleavings of writers, senders, deaths and deliveries;
//! * `one_writer`: one writer at a time, readers without the lock (G5);
//! * `replay`: a record that does not fit is refused unwritten, and replay rebuilds the live
//!   state (turns, calls by state);
//! * `fork`: a fork keeps its parent untouched and the prefix it copied;
//! * `listing`: listing, summaries and reading records after a seq;
//! * `lossless`: provider fields and whole sessions (export, import) round trip byte for byte;
//! * `rename`: a title is set and cleared without writing the log;
//! * `owes_work`: the shared histories for the "does this session owe work" rule.
//!
//! This module holds the entry points ([`run_all`], [`checks`]) and the helpers the checks
//! share.

use serde_json::json;

use crate::SessionId;
use crate::record::{
    Item, OutcomeStatus, Record, Response, ToolIntent, ToolOutcome, ToolStart, TurnStart,
};
use crate::store::{CreateOptions, Store};

mod creation;
mod fork;
mod inputs;
mod interleavings;
mod listing;
mod lossless;
mod one_writer;
mod owes_work;
mod rename;
mod replay;

use creation::{create_is_exclusive, hostile_ids_are_refused};
use fork::fork_keeps_parent_and_prefix;
use inputs::{
    a_full_inbox_refuses_and_changes_nothing,
    an_inbox_message_that_does_not_fit_stays_and_is_named,
    inbox_delivers_once_while_a_writer_holds_the_session,
    inbox_message_recorded_before_a_crash_is_only_consumed,
    inbox_waiting_is_shown_and_drained_by_the_next_writer, inputs_are_recorded_once,
};
use interleavings::inbox_rule_holds_over_interleavings;
use listing::listing_and_records_after;
use lossless::{export_import_is_lossless, provider_fields_round_trip};
use one_writer::one_writer_at_a_time;
pub use owes_work::owes_work_histories;
use rename::rename_sets_and_clears_the_title;
use replay::{calls_by_state, full_turn_replays_into_state, invalid_records_are_refused_unwritten};

/// Makes a fresh, empty store for one check.
pub type Factory<'a> = &'a dyn Fn() -> Box<dyn Store>;

pub type Check = (&'static str, fn(Factory));

/// Every check, by name.
pub fn checks() -> Vec<Check> {
    vec![
        ("create_is_exclusive", create_is_exclusive),
        ("hostile_ids_are_refused", hostile_ids_are_refused),
        ("inputs_are_recorded_once", inputs_are_recorded_once),
        ("one_writer_at_a_time", one_writer_at_a_time),
        (
            "invalid_records_are_refused_unwritten",
            invalid_records_are_refused_unwritten,
        ),
        ("full_turn_replays_into_state", full_turn_replays_into_state),
        ("calls_by_state", calls_by_state),
        ("fork_keeps_parent_and_prefix", fork_keeps_parent_and_prefix),
        ("listing_and_records_after", listing_and_records_after),
        ("provider_fields_round_trip", provider_fields_round_trip),
        ("export_import_is_lossless", export_import_is_lossless),
        (
            "inbox_delivers_once_while_a_writer_holds_the_session",
            inbox_delivers_once_while_a_writer_holds_the_session,
        ),
        (
            "inbox_message_recorded_before_a_crash_is_only_consumed",
            inbox_message_recorded_before_a_crash_is_only_consumed,
        ),
        (
            "inbox_waiting_is_shown_and_drained_by_the_next_writer",
            inbox_waiting_is_shown_and_drained_by_the_next_writer,
        ),
        (
            "a_full_inbox_refuses_and_changes_nothing",
            a_full_inbox_refuses_and_changes_nothing,
        ),
        (
            "an_inbox_message_that_does_not_fit_stays_and_is_named",
            an_inbox_message_that_does_not_fit_stays_and_is_named,
        ),
        (
            "inbox_rule_holds_over_interleavings",
            inbox_rule_holds_over_interleavings,
        ),
        (
            "rename_sets_and_clears_the_title",
            rename_sets_and_clears_the_title,
        ),
    ]
}

/// Runs every check against stores made by `factory`.
pub fn run_all(factory: Factory) {
    for (name, check) in checks() {
        eprintln!("conformance: {name}");
        check(factory);
    }
}

fn create(store: &dyn Store, id: &str) -> crate::Session {
    store
        .create(CreateOptions {
            id: Some(SessionId::parse(id).expect("a valid id")),
            meta: Some(json!({"workspace": "/w"})),
        })
        .unwrap_or_else(|e| panic!("create {id}: {e}"))
}

/// input → turn 1 (tool call) → intent → start → outcome → turn 2 (text).
fn run_one_tool_turn(s: &mut crate::Session) {
    let inp = s.append_input("m1", "user", "list files").unwrap();
    let t1 = s
        .append(Record::TurnStart(TurnStart {
            turn: 1,
            prev_seq: None,
            inputs: vec![inp.seq],
        }))
        .unwrap();
    s.append(Record::Response(Response {
        turn: 1,
        items: vec![
            Item::Text {
                text: "Let me look.".into(),
            },
            Item::ToolCall {
                call_id: "c1".into(),
                name: "list_dir".into(),
                arguments: r#"{"path":"."}"#.into(),
            },
        ],
        usage: None,
        stop_reason: Some("tool_calls".into()),
        failure: None,
        model: Some("m".into()),
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
    s.append(Record::ToolIntent(ToolIntent {
        call_id: "c1".into(),
        turn: 1,
        tool: "list_dir".into(),
        arguments: r#"{"path":"."}"#.into(),
        idempotent: true,
        idempotency_key: "s1:c1".into(),
        rerun_basis: None,
    }))
    .unwrap();
    s.append(Record::ToolStart(ToolStart {
        call_id: "c1".into(),
        process: None,
    }))
    .unwrap();
    s.append(Record::ToolOutcome(ToolOutcome {
        call_id: "c1".into(),
        status: OutcomeStatus::Ok,
        result: "a.txt\nb.txt".into(),
        exit_code: None,
        duration_ms: Some(1),
    }))
    .unwrap();
    s.append(Record::TurnStart(TurnStart {
        turn: 2,
        prev_seq: Some(t1.seq),
        inputs: vec![],
    }))
    .unwrap();
    s.append(Record::Response(Response {
        turn: 2,
        items: vec![Item::Text {
            text: "Two files.".into(),
        }],
        usage: None,
        stop_reason: Some("stop".into()),
        failure: None,
        model: None,
        provider_extra: None,
        attempts: vec![],
    }))
    .unwrap();
}
