//! Listings that build only what is shown: a [`ListQuery`] (filters, order, a page) answered
//! by [`crate::Store::list_rows`], which hands each row of the page to the caller as a
//! borrowed [`crate::SummaryView`]. A store filters and sorts on what it keeps compactly (status,
//! times, id, workspace) and materialises a row — title file, inbox, `meta` — only for the
//! rows it hands out: building ten owned strings for each of 10⁵ sessions, shown or not, was
//! most of a listing's time.

use std::borrow::Cow;

use crate::state::Status;

/// In which order a listing hands out its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListOrder {
    /// Oldest session first (by `created_at`, then id): [`crate::Store::list`]'s order.
    #[default]
    Created,
    /// Newest activity first (by `updated_at`, then id); unreadable sessions (no time) last.
    Activity,
}

/// Which sessions a listing shows, in which order, and which page of them.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only these statuses (empty: all).
    pub statuses: Vec<Status>,
    /// Only sessions whose recorded workspace is exactly this.
    pub workspace: Option<String>,
    /// Only sessions whose id, title or workspace contains this (case-insensitive).
    pub search: Option<String>,
    pub order: ListOrder,
    /// Rows of the order skipped before the first one handed out.
    pub offset: usize,
    /// At most this many rows handed out (`None`: all).
    pub limit: Option<usize>,
}

/// How many sessions a listing saw: the store's, and those its filters kept (the page is a
/// window of these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListCounts {
    pub total: usize,
    pub matched: usize,
}

impl ListQuery {
    /// Whether a session passes the filters; `title` is asked only when a search needs it.
    pub fn matches<'t>(
        &self,
        status: Status,
        id: &str,
        workspace: Option<&str>,
        title: impl FnOnce() -> Option<Cow<'t, str>>,
    ) -> bool {
        if !self.statuses.is_empty() && !self.statuses.contains(&status) {
            return false;
        }
        if self.workspace.is_some() && self.workspace.as_deref() != workspace {
            return false;
        }
        let Some(needle) = &self.search else {
            return true;
        };
        let needle = needle.to_lowercase();
        id.to_lowercase().contains(&needle)
            || title().is_some_and(|t| t.to_lowercase().contains(&needle))
            || workspace.is_some_and(|w| w.to_lowercase().contains(&needle))
    }

    /// The window of `matched` rows this query hands out.
    pub fn window(&self, matched: usize) -> std::ops::Range<usize> {
        let start = self.offset.min(matched);
        let end = match self.limit {
            Some(n) => start.saturating_add(n).min(matched),
            None => matched,
        };
        start..end
    }
}

/// The sort key of a row in `order`: compared as a whole, then by id. Two `u128`s hold the
/// timestamp's first 32 bytes big-endian, so comparing them is comparing the text (RFC 3339
/// UTC with fixed precision sorts as text), without following a pointer.
pub fn order_key(order: ListOrder, created_at: &str, updated_at: &str) -> (u128, u128) {
    let (ts, flip) = match order {
        ListOrder::Created => (created_at, false),
        ListOrder::Activity => (updated_at, true),
    };
    let k = time_sort_key(ts);
    let hi = u128::from_be_bytes(k[..16].try_into().unwrap_or([0; 16]));
    let lo = u128::from_be_bytes(k[16..].try_into().unwrap_or([0; 16]));
    if flip { (!hi, !lo) } else { (hi, lo) }
}

/// Sorts `rows` (keys with a row number) by key then id, putting in order only what the
/// window `range` needs (a page of the newest 50 out of 10⁵ is a selection, not a sort).
pub fn sort_window<'a>(
    rows: &mut [((u128, u128), u32)],
    range: &std::ops::Range<usize>,
    id_of: impl Fn(u32) -> &'a str,
) {
    let cmp = |a: &((u128, u128), u32), b: &((u128, u128), u32)| {
        a.0.cmp(&b.0).then_with(|| id_of(a.1).cmp(id_of(b.1)))
    };
    if range.is_empty() {
        return;
    }
    if range.end < rows.len() {
        rows.select_nth_unstable_by(range.end, cmp);
    }
    let head = &mut rows[..range.end];
    if range.start > 0 {
        head.select_nth_unstable_by(range.start, cmp);
    }
    head[range.start..].sort_unstable_by(cmp);
}

/// A timestamp as a sort key held inline: RFC 3339 UTC with fixed precision sorts as text,
/// and comparing arrays in place is several times faster than following every string's
/// pointer (a 10⁵-session listing spent a tenth of its time sorting).
pub fn time_sort_key(ts: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    let n = ts.len().min(32);
    key[..n].copy_from_slice(&ts.as_bytes()[..n]);
    key
}
