//! One session a Python program holds (its writer, until `close`) or reads (a snapshot): the
//! history of an Agents SDK session and the graph of a LangGraph thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lazarus_session::record::{
    HostCallIntent, HostCallOutcome, HostChannelValue, HostCheckpoint, HostCheckpointRef,
    HostClear, HostForget, HostItem, HostItems, HostPendingWrites, HostPop, HostWrite, HostWrites,
    Record,
};
use lazarus_session::state::SessionState;
use lazarus_session::{Session, SessionError, SessionId, Store};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::{LazarusError, py_err};

pub(crate) enum Inner {
    /// The writer, held until `close`.
    Held(Box<Session>),
    /// A read-only copy of the state (`NativeStore.load`).
    Snapshot(Box<SessionState>),
    Closed,
}

/// One session: held (its writer taken until `close`), or a read-only snapshot.
#[pyclass(module = "lazarus._native")]
pub(crate) struct NativeSession {
    pub(crate) id: String,
    /// The host's name for it (a thread id): the id, unless that name is not a valid id.
    pub(crate) name: String,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) inner: Mutex<Inner>,
    /// It has a title in listings (known from the open; set once by `title_if_untitled`).
    pub(crate) titled: AtomicBool,
}

type Blob = (String, String);

fn blob(b: &lazarus_session::record::HostBlob) -> Blob {
    (b.type_tag.clone(), b.b64.clone())
}

impl NativeSession {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .lock()
            .map_err(|_| LazarusError::new_err("session lock poisoned"))
    }

    fn closed(&self) -> PyErr {
        LazarusError::new_err(format!("session {} is closed", self.id))
    }

    /// Runs `f` with the writer.
    fn with<R>(&self, f: impl FnOnce(&mut Session) -> Result<R, SessionError>) -> PyResult<R> {
        match &mut *self.lock()? {
            Inner::Held(s) => f(s).map_err(py_err),
            Inner::Snapshot(_) => Err(LazarusError::new_err(format!(
                "session {} was loaded read-only: open it to write",
                self.id
            ))),
            Inner::Closed => Err(self.closed()),
        }
    }

    /// Runs `f` on the state (the writer's, or the snapshot).
    fn read<R>(&self, f: impl FnOnce(&SessionState) -> R) -> PyResult<R> {
        match &*self.lock()? {
            Inner::Held(s) => Ok(f(s.state())),
            Inner::Snapshot(st) => Ok(f(st)),
            Inner::Closed => Err(self.closed()),
        }
    }
}

fn parse_record<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

#[pymethods]
impl NativeSession {
    #[getter]
    fn session_id(&self) -> String {
        self.id.clone()
    }

    /// The host's name for it (`NativeStore.open`'s `name`).
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// What opening for writing found: `(truncated_bytes, saved_to, previous_holder)`, the
    /// crash debris cut from the end (never acknowledged), where it was saved, and the writer
    /// that died holding the session. `None` for a read-only session.
    #[allow(clippy::type_complexity)]
    fn open_report(&self) -> PyResult<Option<(u64, Option<String>, Option<String>)>> {
        Ok(match &*self.lock()? {
            Inner::Held(s) => {
                let r = s.open_report();
                Some((
                    r.truncated_bytes,
                    r.truncated_saved_to.clone(),
                    r.previous_holder.as_ref().map(|h| h.to_string()),
                ))
            }
            _ => None,
        })
    }

    /// Whether listings show a title for it (then `title_if_untitled` does nothing).
    #[getter]
    fn titled(&self) -> bool {
        self.titled.load(Ordering::Relaxed)
    }

    /// Gives the session the title listings show, unless it has one (a person's `sessions
    /// rename`, even one made since the open, stands). Returns whether it was set.
    fn title_if_untitled(&self, py: Python<'_>, title: &str) -> PyResult<bool> {
        let title = lazarus_session::title_of(title);
        if self.titled() || title.is_empty() {
            return Ok(false);
        }
        let id = SessionId::parse(&self.id).map_err(py_err)?;
        let set = py.detach(|| {
            if self.store.summary(&id).map_err(py_err)?.title.is_some() {
                return Ok(false);
            }
            self.store.rename(&id, Some(&title)).map_err(py_err)?;
            Ok::<_, PyErr>(true)
        })?;
        self.titled.store(true, Ordering::Relaxed);
        Ok(set)
    }

    /// The items of the history now, oldest first, as JSON texts (the newest `limit`).
    #[pyo3(signature = (limit=None))]
    fn items(&self, limit: Option<usize>) -> PyResult<Vec<String>> {
        self.read(|st| {
            let items = &st.host.items;
            let from = limit.map_or(0, |n| items.len().saturating_sub(n));
            items[from..].iter().map(|(_, v)| v.to_string()).collect()
        })
    }

    /// Appends items (JSON object texts), durable before this returns: one record for them
    /// all (`host_items`; one item alone: `host_item`), several only when they are too large
    /// for one line.
    fn add_items(&self, py: Python<'_>, items: Vec<String>) -> PyResult<()> {
        let parsed: Vec<serde_json::Value> = items
            .iter()
            .map(|t| parse_record("an item", t))
            .collect::<PyResult<_>>()?;
        let sizes: Vec<usize> = items.iter().map(String::len).collect();
        py.detach(|| {
            self.with(|s| {
                for batch in batches(parsed, &sizes) {
                    let mut batch = batch;
                    let rec = if batch.len() == 1 {
                        Record::from(HostItem {
                            item: batch.remove(0),
                        })
                    } else {
                        Record::from(HostItems { items: batch })
                    };
                    s.append(rec)?;
                }
                Ok(())
            })
        })
    }

    /// Takes the newest item out of the history (a record says so) and returns it.
    fn pop_item(&self, py: Python<'_>) -> PyResult<Option<String>> {
        py.detach(|| {
            self.with(|s| {
                let Some((seq, item)) = s.state().host.items.last().cloned() else {
                    return Ok(None);
                };
                s.append(Record::from(HostPop { seq }))?;
                Ok(Some(item.to_string()))
            })
        })
    }

    /// Empties the history and the graph (a record says so; nothing is deleted).
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            self.with(|s| {
                let through_seq = s.state().last_seq;
                s.append(Record::from(HostClear { through_seq }))?;
                Ok(())
            })
        })
    }

    /// Records that a tool call is about to run (before it runs).
    #[pyo3(signature = (call_id, tool, arguments=None))]
    fn call_intent(
        &self,
        py: Python<'_>,
        call_id: String,
        tool: String,
        arguments: Option<String>,
    ) -> PyResult<()> {
        py.detach(|| {
            self.with(|s| {
                s.append(Record::from(HostCallIntent {
                    call_id,
                    tool,
                    arguments,
                }))?;
                Ok(())
            })
        })
    }

    /// Records how a tool call ended.
    fn call_outcome(&self, py: Python<'_>, call_id: String, result: String) -> PyResult<()> {
        py.detach(|| {
            self.with(|s| {
                s.append(Record::from(HostCallOutcome { call_id, result }))?;
                Ok(())
            })
        })
    }

    /// The calls announced without an outcome: `(call_id, tool, arguments)`.
    fn in_doubt(&self) -> PyResult<Vec<(String, String, Option<String>)>> {
        self.read(|st| {
            st.host
                .in_doubt()
                .map(|(id, c)| (id.to_string(), c.tool.clone(), c.arguments.clone()))
                .collect()
        })
    }

    /// Records a graph checkpoint: `record` is a `host_checkpoint` record's JSON text.
    fn put_checkpoint(&self, py: Python<'_>, record: &str) -> PyResult<()> {
        let rec: HostCheckpoint = parse_record("a host_checkpoint record", record)?;
        py.detach(|| {
            self.with(|s| {
                s.append(Record::from(rec))?;
                Ok(())
            })
        })
    }

    /// Records a task's writes (`record`: a `host_writes` record's JSON text), as LangGraph's
    /// savers do: in the order they come, whether or not their checkpoint is recorded yet
    /// (`host_pending_writes`); a write whose (task, index) is recorded already is left out,
    /// unless its index is negative (a special channel's, which the newest replaces); nothing
    /// is appended when nothing is left. Returns how many writes were recorded.
    fn put_writes(&self, py: Python<'_>, record: &str) -> PyResult<usize> {
        let mut rec: HostWrites = parse_record("a host_writes record", record)?;
        py.detach(|| {
            self.with(|s| {
                let key = (rec.ns.clone(), rec.checkpoint_id.clone());
                if let Some(known) = s.state().host.graph.writes.get(&key) {
                    let task = &rec.task_id;
                    rec.writes
                        .retain(|w| w.idx < 0 || !known.contains_key(&(task.clone(), w.idx)));
                }
                let n = rec.writes.len();
                if n > 0 {
                    s.append(Record::from(HostPendingWrites(rec)))?;
                }
                Ok(n)
            })
        })
    }

    /// Makes checkpoints of this thread leave it, with their writes (`checkpoints`:
    /// (namespace, id) pairs it holds; `why`: said in the record). One `host_forget` record;
    /// nothing when the list is empty. Returns how many were named.
    fn forget(
        &self,
        py: Python<'_>,
        checkpoints: Vec<(String, String)>,
        why: String,
    ) -> PyResult<usize> {
        py.detach(|| {
            self.with(|s| {
                let held = &s.state().host.graph.checkpoints;
                let checkpoints: Vec<HostCheckpointRef> = checkpoints
                    .into_iter()
                    .filter(|k| held.contains_key(k))
                    .map(|(ns, checkpoint_id)| HostCheckpointRef { ns, checkpoint_id })
                    .collect();
                let n = checkpoints.len();
                if n > 0 {
                    s.append(Record::from(HostForget { checkpoints, why }))?;
                }
                Ok(n)
            })
        })
    }

    /// Writes this thread's graph as it is now into `target` (held): every checkpoint, oldest
    /// first, with the channel values recorded up to it, then every task's writes
    /// (LangGraph's `copy_thread`). Returns how many records were written.
    fn copy_graph_to(&self, py: Python<'_>, target: &NativeSession) -> PyResult<usize> {
        let records = self.read(graph_records)?;
        py.detach(|| {
            target.with(|t| {
                let n = records.len();
                for r in records {
                    t.append(r)?;
                }
                Ok(n)
            })
        })
    }

    /// The checkpoints of namespace `ns` (of every namespace when `None`), newest id first:
    /// `host_checkpoint` JSON texts without their channel values.
    #[pyo3(signature = (ns=None))]
    fn checkpoints(&self, ns: Option<&str>) -> PyResult<Vec<String>> {
        self.read(|st| {
            let mut all: Vec<&HostCheckpoint> = st
                .host
                .graph
                .checkpoints
                .iter()
                .filter(|((n, _), _)| ns.is_none_or(|want| n == want))
                .map(|(_, (_, c))| c)
                .collect();
            all.sort_by(|a, b| b.checkpoint_id.cmp(&a.checkpoint_id));
            all.iter()
                .filter_map(|c| serde_json::to_string(c).ok())
                .collect()
        })
    }

    /// One checkpoint of `ns` (the one with the greatest id when `checkpoint_id` is `None`),
    /// as in `checkpoints`; `None` when there is none.
    #[pyo3(signature = (ns, checkpoint_id=None))]
    fn checkpoint(&self, ns: &str, checkpoint_id: Option<&str>) -> PyResult<Option<String>> {
        self.read(|st| {
            let cps = &st.host.graph.checkpoints;
            let found = match checkpoint_id {
                Some(id) => cps.get(&(ns.to_string(), id.to_string())),
                None => cps
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .last()
                    .map(|(_, c)| c),
            };
            found.and_then(|(_, c)| serde_json::to_string(c).ok())
        })
    }

    /// The values of the channels at the versions given, `(channel, type, b64)`; a channel
    /// with no value at that version is left out.
    fn channel_values(
        &self,
        ns: &str,
        versions: Vec<(String, String)>,
    ) -> PyResult<Vec<(String, String, String)>> {
        self.read(|st| {
            let values = &st.host.graph.values;
            versions
                .into_iter()
                .filter_map(|(channel, version)| {
                    let (_, b) = values.get(&(ns.to_string(), channel.clone(), version))?;
                    let (t, d) = blob(b);
                    Some((channel, t, d))
                })
                .collect()
        })
    }

    /// The writes against checkpoint `checkpoint_id` of `ns`, by task and index:
    /// `(task_id, channel, type, b64, task_path, idx)`.
    #[allow(clippy::type_complexity)]
    fn writes(
        &self,
        ns: &str,
        checkpoint_id: &str,
    ) -> PyResult<Vec<(String, String, String, String, String, i64)>> {
        self.read(|st| {
            let key = (ns.to_string(), checkpoint_id.to_string());
            st.host
                .graph
                .writes
                .get(&key)
                .map_or_else(Vec::new, |by_task| {
                    by_task
                        .iter()
                        .map(|((task, idx), w)| {
                            let (t, d) = blob(&w.value);
                            (
                                task.clone(),
                                w.channel.clone(),
                                t,
                                d,
                                w.task_path.clone(),
                                *idx,
                            )
                        })
                        .collect()
                })
        })
    }

    /// Lets go of the writer (what was delivered to the inbox meanwhile is recorded first).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = std::mem::replace(&mut *self.lock()?, Inner::Closed);
        if let Inner::Held(s) = taken {
            py.detach(|| lazarus_session::handoff::close(&*self.store, *s).map_err(py_err))?;
        }
        Ok(())
    }
}

/// The most item bytes one `host_items` record takes: well under a line's limit (16 MiB), so
/// a batch never fails for its size when its items one by one would not.
const BATCH_BYTES_MAX: usize = 4 << 20;

/// `items` in order, as few records as hold them: together while they fit in
/// [`BATCH_BYTES_MAX`], an item larger than that alone.
fn batches(items: Vec<serde_json::Value>, sizes: &[usize]) -> Vec<Vec<serde_json::Value>> {
    let mut out: Vec<Vec<serde_json::Value>> = Vec::new();
    let mut bytes = 0;
    for (item, size) in items.into_iter().zip(sizes) {
        match out.last_mut() {
            Some(last) if bytes + size <= BATCH_BYTES_MAX => {
                last.push(item);
                bytes += size;
            }
            _ => {
                out.push(vec![item]);
                bytes = *size;
            }
        }
    }
    out
}

/// The records that rebuild `st`'s graph as it is now: each checkpoint in the order it was
/// recorded, carrying the channel values of its namespace recorded up to it that no earlier
/// one carried (the last one of a namespace carries the rest: values a forgotten checkpoint
/// recorded may still be named by those that remain), then the writes, each task's at once.
fn graph_records(st: &SessionState) -> Vec<Record> {
    use std::collections::BTreeMap;
    let g = &st.host.graph;
    let mut cps: Vec<(u64, HostCheckpoint)> = g
        .checkpoints
        .values()
        .map(|(seq, c)| {
            let mut c = c.clone();
            c.channels.clear();
            (*seq, c)
        })
        .collect();
    cps.sort_by_key(|(seq, _)| *seq);
    let mut by_ns: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, (_, c)) in cps.iter().enumerate() {
        by_ns.entry(c.ns.clone()).or_default().push(i);
    }
    for ((ns, channel, version), (vseq, value)) in &g.values {
        let Some(idxs) = by_ns.get(ns) else { continue };
        let at = idxs
            .iter()
            .copied()
            .find(|&i| cps[i].0 >= *vseq)
            .or_else(|| idxs.last().copied());
        if let Some(i) = at {
            cps[i].1.channels.push(HostChannelValue {
                channel: channel.clone(),
                version: version.clone(),
                value: value.clone(),
            });
        }
    }
    let mut out: Vec<Record> = cps.into_iter().map(|(_, c)| Record::from(c)).collect();
    for ((ns, checkpoint_id), by_task) in &g.writes {
        let mut by: std::collections::BTreeMap<(&str, &str), Vec<HostWrite>> = Default::default();
        for ((task, idx), w) in by_task {
            by.entry((task.as_str(), w.task_path.as_str()))
                .or_default()
                .push(HostWrite {
                    idx: *idx,
                    channel: w.channel.clone(),
                    value: w.value.clone(),
                });
        }
        for ((task, path), writes) in by {
            out.push(Record::from(HostPendingWrites(HostWrites {
                ns: ns.clone(),
                checkpoint_id: checkpoint_id.clone(),
                task_id: task.to_string(),
                task_path: path.to_string(),
                writes,
            })));
        }
    }
    out
}
