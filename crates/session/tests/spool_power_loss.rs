//! The local inbox under simulated power cuts (`lazarus_ledger::sim`): the spool's delivery
//! (create a temporary file, write, fsync, rename without replacing, fsync the directory — and
//! make the spool directory, fsyncing the session directory, when it is new) and the drain
//! (append, unlink) run on the simulated disk, which is cut after every possible number of
//! operations, with unsynced bytes and directory entries lost in every way the model allows.
//!
//! After every cut: each message whose delivery was acknowledged is recorded exactly once by
//! the next writer (which drains at open), in the order of the acknowledgements; a message
//! whose delivery did not return may be there or not, but never twice; the session opens.
//! `LAZARUS_SPOOL_POWER_TRIALS` (default 2,000) sets the number of trials.

use std::path::Path;
use std::sync::Arc;

use lazarus_ledger::Options;
use lazarus_ledger::sim::{Fill, Loss, SECTOR, SECTOR_4K, SimFs};
use lazarus_session::{CreateOptions, InboxMessage, LocalStore, SessionId, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/sim/sessions";

fn trials() -> u64 {
    std::env::var("LAZARUS_SPOOL_POWER_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

fn store_on(fs: &SimFs) -> LocalStore {
    LocalStore::with_options(
        Path::new(DIR),
        Options {
            fs: Arc::new(fs.clone()),
            lock: false,
            ..Options::default()
        },
    )
}

fn random_loss(r: &mut StdRng) -> Loss {
    if r.random_bool(0.3) {
        return Loss::Prefix(r.random_range(0..400));
    }
    Loss::Sectors {
        sector: if r.random_bool(0.5) {
            SECTOR
        } else {
            SECTOR_4K
        },
        mask: r.random(),
        len_kept: if r.random_bool(0.6) {
            usize::MAX
        } else {
            r.random_range(0..400)
        },
        fill: match r.random_range(0..3) {
            0 => Fill::Zeros,
            1 => Fill::Garbage(r.random()),
            _ => Fill::Stale,
        },
    }
}

#[test]
fn an_acknowledged_delivery_survives_every_power_cut() {
    let id = SessionId::literal("s");
    let (mut cuts, mut acked_total, mut unacked_total) = (0, 0, 0);
    for trial in 0..trials() {
        let mut r = StdRng::seed_from_u64(trial);
        let fs = SimFs::new();
        let store = store_on(&fs);
        drop(
            store
                .create(CreateOptions {
                    id: Some(id.clone()),
                    meta: None,
                })
                .unwrap(),
        );
        // a writer drained some messages before: the spool directory may or may not exist
        if r.random_bool(0.5) {
            store
                .deliver(&id, &InboxMessage::input("early", "user", "early"))
                .unwrap();
            drop(store.open(&id).unwrap());
        }
        // cut somewhere in the next deliveries (or in a drain between them)
        let kept_dir_ops = if r.random_bool(0.5) {
            0
        } else {
            r.random_range(0..8)
        };
        fs.arm_power_cut_with(r.random_range(0..40), kept_dir_ops, {
            let mut r = StdRng::seed_from_u64(trial ^ 0xdead);
            move |_| random_loss(&mut r)
        });
        let mut acked = Vec::new();
        let mut attempted = Vec::new();
        for i in 0..6 {
            let m = format!("m{i}");
            attempted.push(m.clone());
            let done = if i == 3 && r.random_bool(0.5) {
                // a writer comes and drains in between
                store.open(&id).map(drop).and_then(|()| {
                    store
                        .deliver(&id, &InboxMessage::input(&m, "user", &m))
                        .map(drop)
                })
            } else {
                store
                    .deliver(&id, &InboxMessage::input(&m, "user", &m))
                    .map(drop)
            };
            match done {
                Ok(()) => acked.push(m),
                Err(_) => break,
            }
        }
        let image = match fs.after_power_cut() {
            Some(image) => {
                cuts += 1;
                image
            }
            // no cut happened: the machine loses power now
            None => fs.crash(|_| Loss::Prefix(0)),
        };
        let after = store_on(&image);
        let s = after
            .open(&id)
            .unwrap_or_else(|e| panic!("trial {trial}: the session must open after the cut: {e}"));
        let st = s.state();
        let mut seqs = Vec::new();
        for m in &acked {
            let seq = st.input_ids.get(m.as_str()).copied();
            assert!(
                seq.is_some(),
                "trial {trial}: acknowledged {m} lost by the cut (acked {acked:?})"
            );
            seqs.extend(seq);
        }
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "trial {trial}: recorded out of order: {seqs:?}"
        );
        // never twice: every input record's id is unique by the replay's own check, and the
        // count of inputs is at most what was attempted
        let recorded = attempted
            .iter()
            .filter(|m| st.input_ids.get(m.as_str()).is_some())
            .count();
        assert!(recorded >= acked.len() && recorded <= attempted.len());
        unacked_total += recorded - acked.len();
        acked_total += acked.len();
        drop(s);
        assert!(
            after.inbox(&id, 100).unwrap().is_empty(),
            "trial {trial}: the drain at open took everything"
        );
    }
    eprintln!(
        "{} trials, {cuts} power cuts mid-delivery: {acked_total} acknowledged deliveries all recorded once and in order ({unacked_total} unacknowledged ones were recorded too: allowed)",
        trials()
    );
    assert!(cuts > trials() / 2, "the cuts landed inside the deliveries");
}

/// The count limit of an inbox (the byte limit is a conformance check of every store): the
/// delivery past it is refused, changes nothing, and a drain makes room again.
#[test]
fn an_inbox_holds_at_most_its_limit_of_messages() {
    use lazarus_session::SessionError;
    use lazarus_session::inbox::INBOX_MESSAGES_MAX;
    let fs = SimFs::new();
    let store = store_on(&fs);
    let id = SessionId::literal("s");
    let held = store
        .create(CreateOptions {
            id: Some(id.clone()),
            meta: None,
        })
        .unwrap();
    for i in 0..INBOX_MESSAGES_MAX {
        store
            .deliver(&id, &InboxMessage::input(&format!("m{i}"), "user", "hi"))
            .unwrap();
    }
    let err = store
        .deliver(&id, &InboxMessage::input("one-too-many", "user", "hi"))
        .unwrap_err();
    assert!(
        matches!(err, SessionError::InboxFull { messages, .. } if messages == INBOX_MESSAGES_MAX),
        "{err}"
    );
    assert_eq!(store.waiting(&id).unwrap().messages, INBOX_MESSAGES_MAX);
    drop(held);
    let s = store.open(&id).unwrap();
    assert_eq!(
        s.state().last_seq,
        INBOX_MESSAGES_MAX,
        "every one recorded, in order"
    );
    drop(s);
    store
        .deliver(&id, &InboxMessage::input("one-too-many", "user", "hi"))
        .unwrap();
}
