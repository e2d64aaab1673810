//! One rule for damaged bytes, shared by the scan (each tail window, each header line) and the
//! readers behind `sessions import` (each line they stream): read what is good, report what
//! was cut. A session the scan would resume can therefore be imported, and the other way
//! round.
//!
//! - A UTF-8 byte order mark at the start of a file is read through (an editor or a Windows
//!   tool may have written one; no agent writes one).
//! - A run of NUL bytes is crash debris: zeros where a write never landed (an extent a power
//!   cut left unwritten, a page that was never flushed) or a hole. It is cut out and ends the
//!   line before it: what precedes it on that line is a torn write, what follows it up to the
//!   next newline was written after the damage and is read as a line of its own. A tail of
//!   NULs after the last record is cut. A hole the scan collapsed to one NUL is cut the same
//!   way as the zeros it stands for.
//! - An invalid UTF-8 sequence is replaced by U+FFFD, and the record around it is kept.
//! - Whatever still does not parse (a torn line, a NUL in the middle of a record's text) is
//!   skipped and counted by the reader, as before.
use std::borrow::Cow;

/// The UTF-8 byte order mark.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What the rule cut or replaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Damage {
    /// A byte order mark was read through.
    pub bom: bool,
    /// Runs of NUL bytes cut.
    pub nul_runs: u64,
    /// NUL bytes cut, in all (a collapsed hole counts as one).
    pub nul_bytes: u64,
    /// Invalid UTF-8 sequences replaced.
    pub invalid_utf8: u64,
}

impl Damage {
    /// Whether anything was cut or replaced (a byte order mark is neither).
    pub fn any(&self) -> bool {
        self.nul_runs > 0 || self.invalid_utf8 > 0
    }

    /// Adds another count.
    pub fn add(&mut self, o: Damage) {
        self.bom |= o.bom;
        self.nul_runs += o.nul_runs;
        self.nul_bytes += o.nul_bytes;
        self.invalid_utf8 += o.invalid_utf8;
    }

    /// What was cut or replaced, for a reason or a report; `None` when nothing was. Counts
    /// runs, not bytes, so a hole the scan collapsed reads as the zeros it stands for.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.nul_runs > 0 {
            let s = if self.nul_runs == 1 { "" } else { "s" };
            parts.push(format!(
                "{} run{s} of NUL bytes cut (crash debris)",
                self.nul_runs
            ));
        }
        if self.invalid_utf8 > 0 {
            let s = if self.invalid_utf8 == 1 { "" } else { "s" };
            parts.push(format!(
                "{} invalid UTF-8 sequence{s} replaced",
                self.invalid_utf8
            ));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// `bytes` without a leading byte order mark, and whether it had one.
pub fn strip_bom(bytes: &[u8]) -> (&[u8], bool) {
    match bytes.strip_prefix(BOM) {
        Some(rest) => (rest, true),
        None => (bytes, false),
    }
}

/// Bytes as the rule reads them: a leading byte order mark dropped when `at_start` (they
/// begin the file), every run of NUL bytes replaced by one newline, invalid UTF-8 replaced.
/// Borrowed when there is nothing to repair (the common case costs a scan for NUL and a
/// UTF-8 check).
pub fn repair(bytes: &[u8], at_start: bool) -> (Cow<'_, [u8]>, Damage) {
    let mut d = Damage::default();
    let body = if at_start {
        let (b, bom) = strip_bom(bytes);
        d.bom = bom;
        b
    } else {
        bytes
    };
    let has_nul = memchr::memchr(0, body).is_some();
    // (SIMD: this check runs on every window the scan reads)
    let valid = simdutf8::basic::from_utf8(body).is_ok();
    if !has_nul && valid {
        return (Cow::Borrowed(body), d);
    }
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    if has_nul {
        let mut rest = body;
        while let Some(i) = memchr::memchr(0, rest) {
            out.extend_from_slice(&rest[..i]);
            let run = rest[i..].iter().take_while(|b| **b == 0).count();
            d.nul_runs += 1;
            d.nul_bytes += run as u64;
            out.push(b'\n');
            rest = &rest[i + run..];
        }
        out.extend_from_slice(rest);
    } else {
        out.extend_from_slice(body);
    }
    if !valid || simdutf8::basic::from_utf8(&out).is_err() {
        let (fixed, n) = replace_invalid_utf8(&out);
        d.invalid_utf8 = n;
        out = fixed;
    }
    (Cow::Owned(out), d)
}

/// `bytes` with each invalid UTF-8 sequence replaced by U+FFFD, and how many there were. A
/// sequence cut off by the end of `bytes` counts too (the caller decides whether the end
/// is a torn write).
pub fn replace_invalid_utf8(bytes: &[u8]) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(bytes.len() + 8);
    let mut n = 0;
    for chunk in bytes.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        if !chunk.invalid().is_empty() {
            n += 1;
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
    }
    (out, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_bytes_are_borrowed() {
        let (b, d) = repair(b"{\"a\":1}\n", true);
        assert!(matches!(b, Cow::Borrowed(_)));
        assert_eq!(d, Damage::default());
    }

    #[test]
    fn bom_nul_runs_and_invalid_bytes() {
        let (b, d) = repair(
            b"\xEF\xBB\xBF{\"a\":1}\n\0\0\0{\"b\":2}\n{\"c\":\"\xFF\"}\n\0\0",
            true,
        );
        assert_eq!(
            &*b,
            "{\"a\":1}\n\n{\"b\":2}\n{\"c\":\"\u{FFFD}\"}\n\n".as_bytes()
        );
        assert_eq!(
            d,
            Damage {
                bom: true,
                nul_runs: 2,
                nul_bytes: 5,
                invalid_utf8: 1
            }
        );
        assert_eq!(
            d.describe().as_deref(),
            Some("2 runs of NUL bytes cut (crash debris), 1 invalid UTF-8 sequence replaced")
        );
        // a BOM is only read through at the start of a file
        let (b, d) = repair(b"\xEF\xBB\xBF{}", false);
        assert_eq!(d.invalid_utf8, 0);
        assert_eq!(&*b, b"\xEF\xBB\xBF{}");
    }

    #[test]
    fn one_nul_reads_as_the_zeros_it_stands_for() {
        let (one, a) = repair(b"x\0y", false);
        let zeros = [b"x".as_slice(), &[0; 4096], b"y"].concat();
        let (many, b) = repair(&zeros, false);
        assert_eq!(one, many);
        assert_eq!(a.describe(), b.describe());
    }
}
