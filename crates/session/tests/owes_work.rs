//! "Does this session owe work?" has one rule, [`SessionState::owes_work`], and one tail-only
//! twin for listings and boot-resume, [`owes_work_from_tail`]. On every prefix of the shared
//! histories: the twin never says "no" where the replay says "yes", and agrees exactly
//! wherever the last record settles it.

use lazarus_ledger::Header;
use lazarus_session::SessionState;
use lazarus_session::conformance::owes_work_histories;
use lazarus_session::record::FORMAT;
use lazarus_session::state::{owes_work_from_tail, status_from_tail};

#[test]
fn the_tail_rule_never_misses_work_the_replay_sees() {
    let mut prefixes = 0;
    let mut owed = 0;
    for (name, records) in owes_work_histories() {
        let mut st = SessionState::new(Header::new(FORMAT, "s"));
        assert!(!st.owes_work(), "{name}: a new session owes nothing");
        for (i, rec) in records.into_iter().enumerate() {
            st.check(&rec)
                .unwrap_or_else(|e| panic!("{name}: record {}: {e}", i + 1));
            let (kind, data) = (rec.kind(), rec.data_value());
            st.apply(i as u64 + 1, rec);
            let full = st.owes_work();
            let tail = owes_work_from_tail(kind, &data);
            prefixes += 1;
            owed += usize::from(full);
            assert!(
                tail || !full,
                "{name}: after record {} ({kind}) the replay owes work, the tail rule says no",
                i + 1
            );
            // The listing's status says the same (a fork point aside: listed idle).
            if kind != "fork" {
                assert_eq!(
                    status_from_tail(kind, &data).owes_work(),
                    tail,
                    "{name}: status of a tail ending in {kind}"
                );
            }
            // Only a receipt, a stop or a fork point leave the tail unsure.
            if !matches!(kind, "resume" | "interrupted" | "fork") {
                assert_eq!(tail, full, "{name}: after record {} ({kind})", i + 1);
            }
        }
        assert!(
            !st.owes_work() || name.starts_with("stopped"),
            "{name} ends settled"
        );
    }
    assert!(owed > 0 && owed < prefixes, "the table has both answers");
}
