//! [`Window`]: a `Vec` whose front can be dropped while every index keeps its meaning.
//!
//! The resume state indexes its context and its calls by position (a tool result names its
//! call, a turn names where its context starts, a compaction where the kept tail starts).
//! A compaction drops what it summarised; indices stay absolute — counted from the first
//! item ever pushed — so nothing that points into the window has to be rewritten.

use std::ops::{Index, IndexMut, Range};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window<T> {
    /// Absolute index of `items[0]`: how many items were dropped from the front.
    start: usize,
    items: Vec<T>,
}

impl<T> Default for Window<T> {
    fn default() -> Self {
        Window {
            start: 0,
            items: Vec::new(),
        }
    }
}

impl<T> Window<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The absolute end: how many items were ever pushed.
    pub fn len(&self) -> usize {
        self.start + self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Absolute index of the first item still held.
    pub fn start(&self) -> usize {
        self.start
    }

    pub fn push(&mut self, item: T) {
        self.items.push(item);
    }

    /// The item at absolute index `i`, if it is still held.
    pub fn get(&self, i: usize) -> Option<&T> {
        i.checked_sub(self.start).and_then(|k| self.items.get(k))
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        i.checked_sub(self.start)
            .and_then(|k| self.items.get_mut(k))
    }

    /// The first item still held.
    pub fn first(&self) -> Option<&T> {
        self.items.first()
    }

    /// The last item pushed, if it is still held.
    pub fn last(&self) -> Option<&T> {
        self.items.last()
    }

    /// The items still held, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// The held items from absolute index `i` on (all held items if `i` was dropped).
    pub fn since(&self, i: usize) -> &[T] {
        &self.items[i.saturating_sub(self.start).min(self.items.len())..]
    }

    /// Drops every item before absolute index `i`. The capacity is kept (the next items
    /// reuse it) unless it is far above what is held.
    pub fn forget_before(&mut self, i: usize) {
        let k = i.saturating_sub(self.start).min(self.items.len());
        self.items.drain(..k);
        self.start += k;
        if self.items.capacity() > 64 && self.items.capacity() > 4 * self.items.len() {
            self.items.shrink_to(2 * self.items.len());
        }
    }
}

impl<T> Index<usize> for Window<T> {
    type Output = T;
    /// Panics when `i` was dropped or never pushed: indices come from the state itself.
    fn index(&self, i: usize) -> &T {
        match self.get(i) {
            Some(v) => v,
            None => panic!(
                "index {i} outside the window {}..{}",
                self.start,
                self.len()
            ),
        }
    }
}

impl<T> IndexMut<usize> for Window<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        let (start, len) = (self.start, self.len());
        match self.get_mut(i) {
            Some(v) => v,
            None => panic!("index {i} outside the window {start}..{len}"),
        }
    }
}

impl<T> Index<Range<usize>> for Window<T> {
    type Output = [T];
    fn index(&self, r: Range<usize>) -> &[T] {
        assert!(
            r.start >= self.start,
            "range {r:?} starts before the window {}..{}",
            self.start,
            self.len()
        );
        &self.items[r.start - self.start..r.end - self.start]
    }
}

impl<'a, T> IntoIterator for &'a Window<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_stay_absolute_after_the_front_is_dropped() {
        let mut w = Window::new();
        for v in 0..10 {
            w.push(v * 10);
        }
        w.forget_before(4);
        assert_eq!((w.start(), w.len()), (4, 10));
        assert_eq!(w[4], 40);
        assert_eq!(w.get(3), None);
        assert_eq!(&w[5..7], &[50, 60]);
        assert_eq!(w.since(8), &[80, 90]);
        assert_eq!(
            w.since(0).len(),
            6,
            "a dropped start means all that is held"
        );
        w.push(100);
        assert_eq!(w[10], 100);
        w.forget_before(2);
        assert_eq!(w.start(), 4, "dropping less than is gone changes nothing");
        w.forget_before(99);
        assert_eq!((w.start(), w.len(), w.last()), (11, 11, None));
    }
}
