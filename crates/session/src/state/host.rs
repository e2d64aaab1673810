//! A host framework's history (the `lazarus` Python package's sessions): the items it keeps,
//! which ones left the history (popped, cleared; never deleted from the ledger), and the tool
//! calls its hooks announced, with or without an outcome; and a host's graph checkpoints
//! (LangGraph), with the channel values and task writes that go with them.

use std::collections::BTreeMap;

use crate::record::{Host, HostBlob, HostCheckpoint, HostPendingWrites};

use super::{ReplayError, SessionState};

/// What a host's records built.
#[derive(Debug, Clone, Default)]
pub struct HostState {
    /// The items in the history now, oldest first, with the seq that recorded each (the items
    /// of one `host_items` record share its seq).
    pub items: Vec<(u64, serde_json::Value)>,
    /// Every call the host's hooks announced, by its call id.
    pub calls: BTreeMap<String, HostCall>,
    /// The graph checkpoints (LangGraph), their channel values and their writes.
    pub graph: HostGraph,
}

/// A namespace and a checkpoint id in it.
pub type CheckpointKey = (String, String);

/// What the `host_checkpoint` and `host_writes` records built: LangGraph's three tables,
/// each entry with the seq that recorded it (a `host_clear` drops what it covers).
#[derive(Debug, Clone, Default)]
pub struct HostGraph {
    /// Every checkpoint by (namespace, checkpoint id), its channel values moved to `values`.
    pub checkpoints: BTreeMap<CheckpointKey, (u64, HostCheckpoint)>,
    /// Channel values by (namespace, channel, version).
    pub values: BTreeMap<(String, String, String), (u64, HostBlob)>,
    /// The writes against a checkpoint, by (task id, index): one each, the newest put.
    pub writes: BTreeMap<CheckpointKey, BTreeMap<(String, i64), HostWriteAt>>,
}

/// One task write as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostWriteAt {
    pub seq: u64,
    pub task_path: String,
    pub channel: String,
    pub value: HostBlob,
}

/// One announced call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCall {
    pub intent_seq: u64,
    pub tool: String,
    pub arguments: Option<String>,
    /// The result its hooks reported; `None`: it may have run, nothing says how it ended.
    pub result: Option<String>,
}

impl HostState {
    /// Calls announced without an outcome: after a crash, they may have run.
    pub fn in_doubt(&self) -> impl Iterator<Item = (&str, &HostCall)> {
        self.calls
            .iter()
            .filter(|(_, c)| c.result.is_none())
            .map(|(id, c)| (id.as_str(), c))
    }
}

impl SessionState {
    /// The host rules of [`SessionState::check`].
    pub(super) fn check_host(&self, rec: &Host) -> Result<(), ReplayError> {
        let h = &self.host;
        match rec {
            Host::Item(i) if !i.item.is_object() => Err(ReplayError::HostItemNotObject),
            Host::Items(i) if i.items.is_empty() || !i.items.iter().all(|v| v.is_object()) => {
                Err(ReplayError::HostItemNotObject)
            }
            Host::Pop(p) => match h.items.last() {
                Some(&(seq, _)) if seq == p.seq => Ok(()),
                newest => Err(ReplayError::HostPopNotNewest {
                    seq: p.seq,
                    newest: newest.map(|&(s, _)| s),
                }),
            },
            Host::Clear(c) if c.through_seq > self.last_seq => {
                Err(ReplayError::HostClearBeyondLog {
                    through_seq: c.through_seq,
                    last_seq: self.last_seq,
                })
            }
            Host::CallIntent(i) if h.calls.contains_key(&i.call_id) => {
                Err(ReplayError::HostCallTwice {
                    call_id: i.call_id.clone(),
                })
            }
            Host::CallOutcome(o) => match h.calls.get(&o.call_id) {
                None => Err(ReplayError::HostOutcomeWithoutIntent {
                    call_id: o.call_id.clone(),
                }),
                Some(c) if c.result.is_some() => Err(ReplayError::CallFinishedTwice {
                    call_id: o.call_id.clone(),
                }),
                Some(_) => Ok(()),
            },
            Host::Writes(w)
                if !h
                    .graph
                    .checkpoints
                    .contains_key(&(w.ns.clone(), w.checkpoint_id.clone())) =>
            {
                Err(ReplayError::HostWritesWithoutCheckpoint {
                    ns: w.ns.clone(),
                    checkpoint_id: w.checkpoint_id.clone(),
                })
            }
            Host::Forget(f) => match f.checkpoints.iter().find(|c| {
                !h.graph
                    .checkpoints
                    .contains_key(&(c.ns.clone(), c.checkpoint_id.clone()))
            }) {
                Some(c) => Err(ReplayError::HostForgetUnknown {
                    ns: c.ns.clone(),
                    checkpoint_id: c.checkpoint_id.clone(),
                }),
                None => Ok(()),
            },
            // revision 6: a task's writes in the order they came, before, after or without
            // their checkpoint (LangGraph's own savers key them the same way)
            _ => Ok(()),
        }
    }

    /// The host part of [`SessionState::apply`].
    pub(super) fn apply_host(&mut self, seq: u64, rec: Host) {
        let h = &mut self.host;
        match rec {
            Host::Item(i) => h.items.push((seq, i.item)),
            Host::Items(i) => h.items.extend(i.items.into_iter().map(|v| (seq, v))),
            Host::Pop(_) => {
                h.items.pop();
            }
            Host::Clear(c) => {
                let after = |s: u64| s > c.through_seq;
                h.items.retain(|&(s, _)| after(s));
                let g = &mut h.graph;
                g.checkpoints.retain(|_, (s, _)| after(*s));
                g.values.retain(|_, (s, _)| after(*s));
                g.writes.retain(|_, by_task| {
                    by_task.retain(|_, w| after(w.seq));
                    !by_task.is_empty()
                });
            }
            Host::Checkpoint(mut c) => {
                let g = &mut h.graph;
                for v in std::mem::take(&mut c.channels) {
                    g.values
                        .insert((c.ns.clone(), v.channel, v.version), (seq, v.value));
                }
                g.checkpoints
                    .insert((c.ns.clone(), c.checkpoint_id.clone()), (seq, c));
            }
            Host::Writes(w) | Host::PendingWrites(HostPendingWrites(w)) => {
                let by_task = h.graph.writes.entry((w.ns, w.checkpoint_id)).or_default();
                for one in w.writes {
                    by_task.insert(
                        (w.task_id.clone(), one.idx),
                        HostWriteAt {
                            seq,
                            task_path: w.task_path.clone(),
                            channel: one.channel,
                            value: one.value,
                        },
                    );
                }
            }
            Host::Forget(f) => {
                let g = &mut h.graph;
                for c in f.checkpoints {
                    let key = (c.ns, c.checkpoint_id);
                    g.checkpoints.remove(&key);
                    g.writes.remove(&key);
                }
            }
            Host::CallIntent(i) => {
                h.calls.insert(
                    i.call_id,
                    HostCall {
                        intent_seq: seq,
                        tool: i.tool,
                        arguments: i.arguments,
                        result: None,
                    },
                );
            }
            Host::CallOutcome(o) => {
                if let Some(c) = h.calls.get_mut(&o.call_id) {
                    c.result = Some(o.result);
                }
            }
        }
    }
}
