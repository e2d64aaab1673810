//! "Does this session owe work?" and "what is its status?" have one rule each, the replay's
//! ([`SessionState::owes_work`], [`SessionState::status`]). Two readers answer them without
//! a replay and are checked against it on every prefix of the shared histories (forks,
//! receipts, stops, compactions, inputs recorded mid-turn):
//!
//! * the tail rule of readers that see only the end of a file (boot-resume),
//!   [`owes_work_from_records`]: over any window of the last records it never says "no" where
//!   the replay says "yes", and says "I cannot tell" only when the window misses the start;
//! * the listing ([`Store::list`] / [`Store::summary`] of the local store): its status is the
//!   replay's, always.

use lazarus_ledger::{Header, Parent};
use lazarus_session::conformance::owes_work_histories;
use lazarus_session::record::{FORMAT, Record};
use lazarus_session::state::owes_work_from_records;
use lazarus_session::{CreateOptions, LocalStore, SessionId, SessionState, Store};

/// The header a history starts from: a fork names its parent.
fn header_for(records: &[Record]) -> Header {
    let mut h = Header::new(FORMAT, "s");
    if records.iter().any(|r| matches!(r, Record::Fork(_))) {
        h.parent = Some(Parent {
            id: "p".into(),
            seq: 1,
        });
    }
    h
}

#[test]
fn the_tail_rule_never_misses_work_the_replay_sees() {
    let mut prefixes = 0;
    let mut owed = 0;
    let mut unsure = 0;
    for (name, records) in owes_work_histories() {
        let header = header_for(&records);
        let header_data = serde_json::to_value(&header).unwrap();
        let mut st = SessionState::new(header);
        assert!(!st.owes_work(), "{name}: a new session owes nothing");
        let mut seen: Vec<(&'static str, serde_json::Value)> = vec![("header", header_data)];
        for (i, rec) in records.into_iter().enumerate() {
            st.check(&rec)
                .unwrap_or_else(|e| panic!("{name}: record {}: {e}", i + 1));
            seen.push((rec.kind(), rec.data_value()));
            st.apply(i as u64 + 1, rec);
            let full = st.owes_work();
            prefixes += 1;
            owed += usize::from(full);
            let kind = seen.last().map(|(k, _)| *k).unwrap_or_default();
            // every window of the last records: never "no" where the replay says "yes"
            for start in 0..seen.len() {
                let window: Vec<(&str, &serde_json::Value)> =
                    seen[start..].iter().map(|(k, d)| (*k, d)).collect();
                match owes_work_from_records(&window) {
                    Some(says) => assert!(
                        says || !full,
                        "{name}: after record {} ({kind}), a window from record {start} says no work; the replay owes work",
                        i + 1
                    ),
                    None => {
                        assert!(start > 0, "{name}: the whole log must settle it");
                        unsure += 1;
                    }
                }
            }
            // the whole log, as a reader that reaches the header sees it: exact
            let whole: Vec<(&str, &serde_json::Value)> =
                seen.iter().map(|(k, d)| (*k, d)).collect();
            assert_eq!(
                owes_work_from_records(&whole),
                Some(full),
                "{name}: after record {} ({kind})",
                i + 1
            );
        }
    }
    assert!(owed > 0 && owed < prefixes, "the table has both answers");
    assert!(unsure > 0, "some windows are too short to tell");
}

/// Writes `records` into a local session one at a time; after each, the listing's status
/// (no writer holds it) must be the replay's.
#[test]
fn the_listing_says_what_the_replay_says_on_every_prefix() {
    for (name, records) in owes_work_histories() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let header = header_for(&records);
        let id = SessionId::literal("s");
        if let Some(parent) = &header.parent {
            // a fork's file: the parent's prefix, then the fork record (as `fork` writes it)
            let mut p = store
                .create(CreateOptions {
                    id: Some(SessionId::literal("p")),
                    meta: None,
                })
                .unwrap();
            let Record::Input(first) = &records[0] else {
                panic!("{name}: a fork history starts with the parent's input")
            };
            p.append_input(&first.input_id, &first.source, &first.text)
                .unwrap();
            drop(p);
            store
                .fork(&SessionId::literal("p"), 0, Some(&id))
                .unwrap_or_else(|e| panic!("{name}: fork: {e}"));
            assert_eq!(parent.seq, 1);
        } else {
            drop(
                store
                    .create(CreateOptions {
                        id: Some(id.clone()),
                        meta: None,
                    })
                    .unwrap(),
            );
        }
        let already = store.load(&id).unwrap().last_seq as usize;
        // the state as created (a fork: its prefix and the fork record) is listed right too
        assert_eq!(
            store.summary(&id).unwrap().status,
            store.load(&id).unwrap().status(),
            "{name}: as created"
        );
        for (i, rec) in records.into_iter().enumerate().skip(already) {
            let mut s = store.open(&id).unwrap();
            s.append(rec)
                .unwrap_or_else(|e| panic!("{name}: record {}: {e}", i + 1));
            drop(s);
            let replayed = store.load(&id).unwrap().status();
            let listed = store.summary(&id).unwrap().status;
            assert_eq!(listed, replayed, "{name}: after record {}", i + 1);
            let in_list = store
                .list()
                .unwrap()
                .into_iter()
                .find(|s| s.id == id)
                .unwrap()
                .status;
            assert_eq!(in_list, replayed, "{name}: listed after record {}", i + 1);
        }
    }
}
