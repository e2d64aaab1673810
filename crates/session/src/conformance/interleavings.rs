//! The inbox rule over interleavings: three "processes" take turns at becoming the writer,
//! recording their own inputs and messages sent to them (`Session::append_message`, how a
//! gateway records an HTTP input or approval), letting go (cleanly or by dying), handing
//! messages over
//! ([`crate::handoff::hand_over`]) and delivering straight to the inbox, in random orders
//! (a fixed seed per sequence, so a failure names a sequence that replays).
//!
//! Checked after every step and at the end: a message acknowledged is never lost (recorded
//! or waiting); never recorded twice; recorded in the order it was acknowledged (steps run
//! one after the other, so each acknowledgement comes before the next step starts); and never
//! left waiting when nobody holds the session unless the last writer died (a writer that lets
//! go looks at its inbox first).

use std::collections::HashMap;

use super::{Factory, create};
use crate::SessionId;
use crate::handoff::{close, hand_over};
use crate::inbox::InboxMessage;
use crate::store::{Session, SessionError, Store};

/// Steps per sequence.
const STEPS: usize = 30;

/// Sequences run per store: `LAZARUS_INTERLEAVINGS` (default 8; every step fsyncs).
fn sequences() -> u64 {
    std::env::var("LAZARUS_INTERLEAVINGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}
const PROCESSES: usize = 3;

/// A small deterministic generator (xorshift), so a failing sequence replays by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What the sequence has done so far.
struct World<'a> {
    store: &'a dyn Store,
    id: SessionId,
    held: Vec<Option<Session>>,
    /// Acknowledged message ids, in the order they were acknowledged.
    acked: Vec<String>,
    /// The last writer died without letting go (its inbox may hold stranded messages until
    /// the next writer opens the session).
    died: bool,
    next: u64,
    log: Vec<String>,
}

impl World<'_> {
    fn message(&mut self) -> String {
        self.next += 1;
        format!("m{}", self.next)
    }

    fn step(&mut self, rng: &mut Rng) {
        let p = rng.next(PROCESSES as u64) as usize;
        match rng.next(7) {
            // become the writer (opening drains the inbox)
            0 if self.held[p].is_none() => match self.store.open(&self.id) {
                Ok(s) => {
                    self.log.push(format!("p{p} opens"));
                    self.held[p] = Some(s);
                    self.died = false;
                }
                Err(SessionError::Locked { .. }) => self.log.push(format!("p{p} finds it held")),
                Err(e) => panic!("open: {e}"),
            },
            // an input of the writer's own
            1 if self.held[p].is_some() => {
                let m = self.message();
                if let Some(s) = self.held[p].as_mut() {
                    s.append_input(&m, "user", &m).expect("append");
                }
                self.log.push(format!("p{p} records {m}"));
                self.acked.push(m);
            }
            // lets go cleanly
            2 if self.held[p].is_some() => {
                if let Some(s) = self.held[p].take() {
                    close(self.store, s).expect("close");
                }
                self.log.push(format!("p{p} lets go"));
            }
            // dies holding it
            3 if self.held[p].is_some() => {
                drop(self.held[p].take());
                self.died = true;
                self.log.push(format!("p{p} dies"));
            }
            // a message delivered straight to the inbox (a gateway's 202)
            4 if self.held.iter().any(Option::is_some) => {
                let m = self.message();
                let d = self
                    .store
                    .deliver(&self.id, &InboxMessage::input(&m, "user", &m))
                    .expect("deliver");
                assert!(!d.duplicate);
                self.log.push(format!("{m} delivered to the inbox"));
                self.acked.push(m);
            }
            // the writer records a message it was sent as its own (a gateway recording an
            // HTTP input or approval for a session it holds): after what waits in the inbox
            5 if self.held[p].is_some() => {
                let m = self.message();
                if let Some(s) = self.held[p].as_mut() {
                    s.append_message(&InboxMessage::input(&m, "api", &m))
                        .expect("append_message");
                }
                self.log.push(format!("p{p} records {m} it was sent"));
                self.acked.push(m);
            }
            // a sender hands a message over (records it, or queues it for a live writer)
            _ => {
                let m = self.message();
                let handed = hand_over(
                    self.store,
                    &self.id,
                    &InboxMessage::input(&m, "user", &m),
                    &mut |_, _| {},
                )
                .expect("hand over");
                self.log.push(format!("{m} handed over: {handed:?}"));
                self.acked.push(m);
            }
        }
    }

    /// Every acknowledged message is recorded once or waiting, and the recorded ones are in
    /// the order of their acknowledgements.
    fn check(&self, name: &str, seed: u64) {
        let st = self.store.load(&self.id).expect("load");
        let waiting: Vec<String> = self
            .store
            .inbox(&self.id, 10_000)
            .expect("inbox")
            .iter()
            .map(|m| m.message_id().to_string())
            .collect();
        let mut seqs: HashMap<&str, u64> = HashMap::new();
        for m in &self.acked {
            let seq = st.input_ids.get(m).copied();
            assert!(
                seq.is_some() || waiting.contains(m),
                "{name} (seed {seed}): acknowledged {m} is neither recorded nor waiting\n{}",
                self.log.join("\n")
            );
            if let Some(seq) = seq {
                seqs.insert(m, seq);
            }
        }
        let order: Vec<u64> = self
            .acked
            .iter()
            .filter_map(|m| seqs.get(m.as_str()).copied())
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "{name} (seed {seed}): recorded out of the order acknowledged: {order:?}\n{}",
            self.log.join("\n")
        );
        if self.held.iter().all(Option::is_none) && !self.died {
            assert!(
                waiting.is_empty(),
                "{name} (seed {seed}): {waiting:?} left waiting with nobody holding the session, and no writer died\n{}",
                self.log.join("\n")
            );
        }
    }
}

pub(super) fn inbox_rule_holds_over_interleavings(f: Factory) {
    let name = "inbox_rule_holds_over_interleavings";
    for seed in 1..=sequences() {
        let store = f();
        drop(create(&*store, "s1"));
        let mut world = World {
            store: &*store,
            id: SessionId::literal("s1"),
            held: (0..PROCESSES).map(|_| None).collect(),
            acked: Vec::new(),
            died: false,
            next: 0,
            log: Vec::new(),
        };
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        for _ in 0..STEPS {
            world.step(&mut rng);
            world.check(name, seed);
        }
        // whoever comes next records everything that waits, in order
        for s in &mut world.held {
            drop(s.take());
        }
        drop(world.store.open(&world.id).expect("a last writer"));
        world.check(name, seed);
        let waiting = world.store.inbox(&world.id, 10).expect("inbox");
        assert!(
            waiting.is_empty(),
            "{name} (seed {seed}): left waiting after the last writer: {waiting:?}"
        );
        let st = world.store.load(&world.id).expect("load");
        let recorded = world
            .acked
            .iter()
            .filter(|m| st.input_ids.get(m.as_str()).is_some())
            .count();
        assert_eq!(
            recorded,
            world.acked.len(),
            "{name} (seed {seed}): all recorded"
        );
    }
}
