//! Long texts on the session page: where one splits into a shown head, a collapsed middle
//! and a shown tail, and its markup.

use maud::{Markup, html};

use crate::fmt::{bytes, count};

/// Lines kept at each end of a long text.
const HEAD_LINES: usize = 12;
const TAIL_LINES: usize = 12;
/// Bytes kept at each end at most (a text without line breaks).
const END_BYTES: usize = 2_000;

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where a long text splits into a shown head, a collapsed middle and a shown tail:
/// `None` when it is short enough to show whole.
pub fn split_long(text: &str) -> Option<(usize, usize)> {
    let lines = text.split_inclusive('\n').count();
    if lines <= HEAD_LINES + TAIL_LINES + 4 && text.len() <= 2 * END_BYTES + 1_000 {
        return None;
    }
    // head: the first HEAD_LINES lines, at most END_BYTES
    let mut head = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i == HEAD_LINES || head + l.len() > END_BYTES {
            break;
        }
        head += l.len();
    }
    if head == 0 {
        head = floor_char(text, END_BYTES.min(text.len()));
    }
    // tail: the last TAIL_LINES lines (a final line break ends the last one), at most
    // END_BYTES
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut tail = text.len();
    let mut pos = body.len();
    for _ in 0..TAIL_LINES {
        let start = body[..pos].rfind('\n').map_or(0, |nl| nl + 1);
        if text.len() - start > END_BYTES {
            break;
        }
        tail = start;
        if start == 0 {
            break;
        }
        pos = start - 1;
    }
    if tail == text.len() {
        tail = floor_char(text, text.len().saturating_sub(END_BYTES));
        while !text.is_char_boundary(tail) {
            tail += 1;
        }
    }
    let tail = tail.max(head);
    (tail > head).then_some((head, tail))
}

/// A text in a `<pre>`; a long one shows its head and tail with the middle collapsed (all of
/// it readable without the script).
pub(super) fn long_text(text: &str) -> Markup {
    match split_long(text) {
        None => html! { pre { (text) } },
        Some((head, tail)) => {
            let middle = &text[head..tail];
            let lines = middle.matches('\n').count();
            html! {
                div.long {
                    pre.head { (&text[..head]) }
                    details.middle {
                        summary { "… " (count(lines as u64)) " more lines (" (bytes(middle.len() as u64)) ") — show all" }
                        pre { (middle) }
                    }
                    pre.tail { (&text[tail..]) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_texts_keep_head_and_tail_and_lose_nothing() {
        let short = "a\nb\nc\n";
        assert_eq!(split_long(short), None);
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let (h, t) = split_long(&text).unwrap();
        assert!(text[..h].starts_with("line 0\n") && text[..h].ends_with("line 11\n"));
        assert!(text[t..].ends_with("line 499\n"), "{:?}", &text[t..]);
        assert!(text[t..].starts_with("line 488\n"), "{:?}", &text[t..]);
        // one huge line of multibyte characters: cut at char boundaries
        let wide = "é".repeat(10_000);
        let (h, t) = split_long(&wide).unwrap();
        assert!(wide.is_char_boundary(h) && wide.is_char_boundary(t) && h < t);
        assert!(h <= END_BYTES && wide.len() - t <= END_BYTES + 1);
    }
}
