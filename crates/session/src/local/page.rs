//! A local listing as compact rows — a session's status, where its line is (a record of the
//! status cache, read in place, or a line read from its ledger now) and what the directory
//! read said is beside it — filtered and ordered on those, with a full row built only for the
//! rows handed out.

use std::borrow::Cow;

use super::LocalStore;
use super::status_cache::{Entry, StatusCache};
use crate::inbox::Waiting;
use crate::list::{ListCounts, ListQuery, order_key, sort_window};
use crate::state::Status;
use crate::store::{MetaView, SessionSummary, SummaryView};

/// The directory's session ids, in one buffer (10⁵ of them: no allocation each).
#[derive(Debug, Default)]
pub(super) struct Names {
    text: String,
    ends: Vec<u32>,
}

impl Names {
    pub(super) fn push(&mut self, id: &str) {
        self.text.push_str(id);
        self.ends
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text
            .get(start..self.ends[i] as usize)
            .unwrap_or_default()
    }
}

/// What the directory read says is beside a session's ledger.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Live {
    /// It may have an inbox spool.
    pub spool: bool,
    /// A title file may exist.
    pub title_file: bool,
    /// A writer may hold it: its lock file exists and, where the kernel's list of held
    /// locks could be read, is on it. Only then is the lock itself asked.
    pub may_be_held: bool,
}

/// Where a row's line is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Src {
    /// A record of the status cache's file (with its line), read in place.
    Cached(u32),
    /// A summary built now (the ledger read: it changed, or a writer holds it).
    Owned(u32),
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Row {
    /// Its number in [`Names`].
    pub name: u32,
    pub src: Src,
    pub status: Status,
    pub live: Live,
}

/// What one listing thread made of its share of the directory.
#[derive(Default)]
pub(super) struct Part {
    pub rows: Vec<Row>,
    pub owned: Vec<SessionSummary>,
    /// New answers for the cache.
    pub fresh: Vec<Entry>,
    /// Sessions of this share the cache's file holds.
    pub found: usize,
    /// The listing ran out of descriptors (why): it fails, never calls a session corrupt.
    pub short: Option<String>,
}

/// A directory's listing: every session as a compact row.
pub(super) struct Listing<'s> {
    pub store: &'s LocalStore,
    pub names: Names,
    /// The cache as it was read: [`Src::Cached`] rows point into it.
    pub cache: StatusCache,
    pub rows: Vec<Row>,
    pub owned: Vec<SessionSummary>,
}

impl Listing<'_> {
    fn id(&self, r: &Row) -> &str {
        self.names.get(r.name as usize)
    }

    /// `created_at` and `updated_at` of a row.
    fn times(&self, r: &Row) -> (&str, &str) {
        match r.src {
            Src::Owned(k) => {
                let s = &self.owned[k as usize];
                (&s.created_at, &s.updated_at)
            }
            Src::Cached(k) => self.cache.times(k).unwrap_or(("", "")),
        }
    }

    /// The workspace a row's session recorded.
    fn workspace(&self, r: &Row) -> Option<&str> {
        match r.src {
            Src::Owned(k) => self.owned[k as usize].workspace.as_deref(),
            Src::Cached(k) => self.cache.record(k)?.line?.workspace,
        }
    }

    /// The title a row shows: the title file's, else the first input's.
    fn title(&self, r: &Row) -> Option<Cow<'_, str>> {
        match r.src {
            Src::Owned(k) => self.owned[k as usize].title.as_deref().map(Cow::Borrowed),
            Src::Cached(k) => r
                .live
                .title_file
                .then(|| self.store.read_title(self.id(r)))
                .flatten()
                .map(Cow::Owned)
                .or_else(|| {
                    let e = self.cache.record(k)?;
                    e.line?.first_input.map(Cow::Borrowed)
                }),
        }
    }

    /// Filters, orders and hands out `q`'s page.
    pub(super) fn visit(
        &self,
        q: &ListQuery,
        visit: &mut dyn FnMut(&SummaryView<'_>),
    ) -> ListCounts {
        let mut keyed: Vec<((u128, u128), u32)> = Vec::with_capacity(self.rows.len());
        for (i, r) in self.rows.iter().enumerate() {
            // the workspace only for a filter that looks at it
            let workspace = if q.workspace.is_some() || q.search.is_some() {
                self.workspace(r)
            } else {
                None
            };
            if q.matches(r.status, self.id(r), workspace, || self.title(r)) {
                let (created_at, updated_at) = self.times(r);
                keyed.push((order_key(q.order, created_at, updated_at), i as u32));
            }
        }
        let range = q.window(keyed.len());
        sort_window(&mut keyed, &range, |i| self.id(&self.rows[i as usize]));
        for &(_, i) in &keyed[range] {
            let r = &self.rows[i as usize];
            match r.src {
                Src::Owned(k) => visit(&self.owned[k as usize].view()),
                Src::Cached(k) => visit(&self.view_cached(r, k)),
            }
        }
        ListCounts {
            total: self.rows.len(),
            matched: keyed.len(),
        }
    }

    /// The full row of a session whose line is cache record `k`: its title file and inbox
    /// looked at now.
    fn view_cached(&self, r: &Row, k: u32) -> SummaryView<'_> {
        let id = self.id(r);
        let e = self.cache.record(k);
        let line = e.as_ref().and_then(|e| e.line);
        let waiting = if r.live.spool {
            self.store.waiting_in(id).unwrap_or_else(|e| {
                tracing::warn!(session = %id, error = %e, "cannot read the inbox");
                Waiting::default()
            })
        } else {
            Waiting::default()
        };
        let title = r
            .live
            .title_file
            .then(|| self.store.read_title(id))
            .flatten()
            .map(Cow::Owned)
            .or_else(|| line.and_then(|l| l.first_input).map(Cow::Borrowed));
        SummaryView {
            id,
            title,
            status: r.status,
            created_at: e.as_ref().map_or("", |e| e.created_at),
            updated_at: line.map_or("", |l| l.updated_at),
            records: e.as_ref().map_or(0, |e| e.last_seq),
            bytes: e.as_ref().map_or(0, |e| e.size),
            parent: line.and_then(|l| l.parent),
            workspace: line.and_then(|l| l.workspace),
            last_kind: line.map_or("", |l| l.last_kind),
            error: e.as_ref().and_then(|e| e.error),
            meta: line
                .and_then(|l| l.meta)
                .and_then(|m| serde_json::from_str(m).ok())
                .map(MetaView::Raw),
            waiting: waiting.messages,
            waiting_since: waiting.oldest.map(Cow::Owned),
            holder: None,
        }
    }
}
