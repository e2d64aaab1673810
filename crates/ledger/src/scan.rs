//! Reading a ledger file line by line, validating as it goes, and deciding where a crash
//! left debris. This is the one place that knows the recovery rule (written down for users in
//! `docs/FORMAT.md`):
//!
//! A crash can damage only bytes that were not yet synced, and the ledger bounds how many
//! those can be — its **crash window**:
//! * a ledger appended record by record (the default) syncs each line before the next is
//!   written, so only the last write, one line of at most `line_bytes_max + 1` bytes, can be
//!   damaged, and no record can follow a damaged one;
//! * a ledger created for group commit names in its header the most bytes a writer may leave
//!   unsynced (`unsynced_bytes_max`); inside that span a lost sector may sit before records
//!   that survived (none of them acknowledged).
//!
//! The first damaged line (torn, failing its checksum, malformed, too long, or holding NUL
//! bytes — none of which is by itself evidence of a crash) starts the **damage**, which runs to
//! the end of the file. It is crash debris — invisible to readers, cut (and saved aside) by the
//! next writer — only when it fits the window: at most `unsynced_bytes_max` bytes on a
//! group-commit ledger, or at most one line and followed by no checksum-valid record with a
//! later seq. Anything else is corruption: reported with file, line, offset, expected and
//! found, and never skipped or cut without `lazarus sessions repair`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Corruption, LedgerError, Problem, Result};
use crate::frame::{self, Envelope, Payload};
use crate::header::{Header, HeaderData};

/// Where a line sits in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineInfo {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Length in bytes, newline included.
    pub len: u64,
}

/// Bytes at the end of a file that are not part of the log: what and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Offset where the log ends; everything from here is cut.
    pub offset: u64,
    /// Number of bytes from `offset` to the end of the file.
    pub bytes: u64,
    /// Line number of the first cut line.
    pub line: u64,
    /// Lines (complete or torn) in the cut region.
    pub lines: u64,
    /// Why the first cut line is not part of the log.
    pub reason: Problem,
}

/// How much of a file's end a crash can have left damaged (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashWindow {
    /// Longest line, newline excluded.
    pub line_bytes_max: u64,
    /// Group-commit ledgers: the most bytes left unsynced at any moment.
    pub unsynced_bytes_max: Option<u64>,
}

impl CrashWindow {
    /// The window of a ledger with `header`, read with lines of at most `line_bytes_max`.
    pub fn of(header: &Header, line_bytes_max: usize) -> Self {
        CrashWindow {
            line_bytes_max: line_bytes_max as u64,
            unsynced_bytes_max: header.unsynced_bytes_max,
        }
    }

    /// Record-by-record appends: only the last line can be damaged.
    pub fn per_record(line_bytes_max: usize) -> Self {
        CrashWindow {
            line_bytes_max: line_bytes_max as u64,
            unsynced_bytes_max: None,
        }
    }

    /// Whether damage spanning `span` bytes to the end of the file, followed (or not) by a
    /// checksum-valid record with a later seq, can be what a crash left.
    fn is_crash_debris(&self, span: u64, later_record: bool) -> bool {
        if self.unsynced_bytes_max.is_some_and(|g| span <= g) {
            return true;
        }
        // One write of one line: nothing written after it can have survived as a record.
        span <= self.line_bytes_max + 1 && !later_record
    }
}

enum Raw {
    Line,
    TooLong { len: u64 },
    Torn { len: u64 },
    Eof,
}

/// Streams lines without ever holding more than one line (bounded by `line_bytes_max`).
pub(crate) struct LineSource<R> {
    inner: BufReader<R>,
    /// The current line when it spans two reads (else it is read where it lies).
    buf: Vec<u8>,
    /// The current line lies whole at the start of `inner`'s buffer, this long (its newline
    /// not counted): it is read there, not copied, and consumed when the next line is read.
    in_place: Option<usize>,
    pub(crate) offset: u64,
    pub(crate) line_no: u64,
    max: usize,
    path: PathBuf,
}

impl<R: Read> LineSource<R> {
    pub(crate) fn new(path: &Path, r: R, offset: u64, line_no: u64, max: usize) -> Self {
        Self::with_capacity(path, r, offset, line_no, max, 256 * 1024)
    }

    pub(crate) fn with_capacity(
        path: &Path,
        r: R,
        offset: u64,
        line_no: u64,
        max: usize,
        capacity: usize,
    ) -> Self {
        LineSource {
            inner: BufReader::with_capacity(capacity, r),
            buf: Vec::with_capacity(4096),
            in_place: None,
            offset,
            line_no,
            max,
            path: path.to_path_buf(),
        }
    }

    /// The bytes of the line last read (newline excluded).
    pub(crate) fn line(&self) -> &[u8] {
        match self.in_place {
            Some(n) => &self.inner.buffer()[..n],
            None => &self.buf,
        }
    }

    /// Reads the next line (without its newline); [`LineSource::line`] gives its bytes.
    fn next_raw(&mut self) -> Result<(Raw, LineInfo)> {
        if let Some(n) = self.in_place.take() {
            self.inner.consume(n + 1);
        }
        self.buf.clear();
        let start = self.offset;
        let mut len: u64 = 0;
        let mut too_long = false;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(LedgerError::io("read", &self.path, e)),
            };
            if avail.is_empty() {
                let info = LineInfo {
                    line: self.line_no + 1,
                    offset: start,
                    len,
                };
                return Ok(if len == 0 {
                    (Raw::Eof, info)
                } else {
                    (Raw::Torn { len }, info)
                });
            }
            let (chunk, found) = match memchr::memchr(b'\n', avail) {
                Some(i) => (&avail[..i], true),
                None => (avail, false),
            };
            let n = chunk.len();
            // a whole line already in the read buffer: read it there (saves copying the file)
            let whole_here = found && len == 0 && n <= self.max;
            len += n as u64;
            if whole_here {
                self.in_place = Some(n);
            } else if !too_long {
                if self.buf.len() + n > self.max {
                    too_long = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(chunk);
                }
            }
            if !whole_here {
                self.inner.consume(if found { n + 1 } else { n });
            }
            if found {
                len += 1;
                self.offset += len;
                self.line_no += 1;
                let info = LineInfo {
                    line: self.line_no,
                    offset: start,
                    len,
                };
                return Ok(if too_long {
                    (Raw::TooLong { len: len - 1 }, info)
                } else {
                    (Raw::Line, info)
                });
            }
        }
    }
}

/// The outcome of reading a whole file.
#[derive(Debug, Clone)]
pub struct ScanReport {
    pub header: Header,
    /// Seq of the last good record (0 when only the header exists).
    pub last_seq: u64,
    /// Bytes of good records (the log ends here).
    pub good_len: u64,
    /// Debris or torn bytes after the log, if any.
    pub cut: Option<Cut>,
}

fn corruption(path: &Path, info: LineInfo, problem: Problem) -> LedgerError {
    LedgerError::Corrupt(Box::new(Corruption::new(
        path,
        info.line,
        info.offset,
        problem,
    )))
}

/// Decodes a line whose checksum was checked, typed by `P`; a header record here is
/// misplaced (only line 1 is one).
pub(crate) fn decode_record<'a, P: Payload<'a>>(
    path: &Path,
    info: LineInfo,
    line: &'a [u8],
) -> Result<Envelope<'a, P>> {
    record_or_corruption(path, info, frame::decode_envelope(line))
}

/// What [`decode_record`] gives, for an envelope decoded elsewhere.
pub(crate) fn record_or_corruption<'a, P>(
    path: &Path,
    info: LineInfo,
    decoded: std::result::Result<Envelope<'a, P>, Problem>,
) -> Result<Envelope<'a, P>> {
    let env = decoded.map_err(|p| {
        let problem = match p {
            Problem::Malformed(m) => Problem::Invalid(m),
            p => p,
        };
        corruption(path, info, problem)
    })?;
    if env.kind == "header" {
        return Err(corruption(
            path,
            info,
            Problem::MisplacedHeader { line: info.line },
        ));
    }
    Ok(env)
}

/// Seqs run 1, 2, 3, … without a gap or a repeat.
pub(crate) fn check_seq(path: &Path, info: LineInfo, found: u64, expected: u64) -> Result<()> {
    let problem = if found > expected {
        Problem::SeqGap { expected, found }
    } else if found < expected {
        Problem::SeqNotIncreasing { expected, found }
    } else {
        return Ok(());
    };
    Err(corruption(path, info, problem))
}

/// A validating, streaming reader over the records of one file.
pub struct Scanner<R> {
    current: LineInfo,
    src: LineSource<R>,
    path: PathBuf,
    window: CrashWindow,
    expected_seq: u64,
    good_len: u64,
    cut: Option<Cut>,
    done: bool,
}

impl<R: Read> Scanner<R> {
    /// Starts at the beginning of the file; reads and checks the header.
    pub fn from_start(
        path: &Path,
        r: R,
        max: usize,
        expected_format: Option<&str>,
    ) -> Result<(Self, Header)> {
        Self::from_start_buffered(path, r, max, expected_format, 256 * 1024)
    }

    /// [`Scanner::from_start`] with a read buffer of `capacity` bytes (small when only the
    /// header is wanted, as listings do for every session).
    pub(crate) fn from_start_buffered(
        path: &Path,
        r: R,
        max: usize,
        expected_format: Option<&str>,
        capacity: usize,
    ) -> Result<(Self, Header)> {
        let mut src = LineSource::with_capacity(path, r, 0, 0, max, capacity);
        let (raw, info) = src.next_raw()?;
        let corrupt =
            |problem| LedgerError::Corrupt(Box::new(Corruption::new(path, 1, 0, problem)));
        match raw {
            Raw::Eof | Raw::Torn { .. } => {
                return Err(LedgerError::NoHeader {
                    path: path.to_path_buf(),
                });
            }
            Raw::TooLong { len } => {
                return Err(corrupt(Problem::LineTooLong {
                    len,
                    max: max as u64,
                }));
            }
            Raw::Line => {}
        }
        if src.line().contains(&0) {
            return Err(LedgerError::NoHeader {
                path: path.to_path_buf(),
            });
        }
        frame::check_crc(src.line()).map_err(corrupt)?;
        let env: Envelope<HeaderData> =
            frame::decode_envelope(src.line()).map_err(|p| match p {
                Problem::Malformed(m) => corrupt(Problem::Invalid(m)),
                p => corrupt(p),
            })?;
        if env.seq != 0 {
            return Err(corrupt(Problem::SeqGap {
                expected: 0,
                found: env.seq,
            }));
        }
        let header = env.data.into_header(path, expected_format)?;
        let scanner = Scanner {
            current: info,
            src,
            path: path.to_path_buf(),
            window: CrashWindow::of(&header, max),
            expected_seq: 1,
            good_len: info.len,
            cut: None,
            done: false,
        };
        Ok((scanner, header))
    }

    /// Starts at a known line boundary (used after seeking), expecting `expected_seq` next.
    pub(crate) fn from_position(
        path: &Path,
        r: R,
        window: CrashWindow,
        offset: u64,
        line_no: u64,
        expected_seq: u64,
    ) -> Self {
        let max = window.line_bytes_max as usize;
        Scanner {
            current: LineInfo {
                line: line_no,
                offset,
                len: 0,
            },
            src: LineSource::new(path, r, offset, line_no, max),
            path: path.to_path_buf(),
            window,
            expected_seq,
            good_len: offset,
            cut: None,
            done: false,
        }
    }

    /// The next good record, typed by `P`; `None` at the end of the log.
    ///
    /// At the end, [`Scanner::cut`] says whether debris follows the log.
    pub fn next_record<'s, P: Payload<'s>>(
        &'s mut self,
    ) -> Result<Option<(LineInfo, Envelope<'s, P>)>> {
        if !self.advance()? {
            return Ok(None);
        }
        let info = self.current;
        let env: Envelope<'s, P> = decode_record(&self.path, info, self.src.line())?;
        check_seq(&self.path, info, env.seq, self.expected_seq)?;
        self.expected_seq += 1;
        self.good_len = info.offset + info.len;
        Ok(Some((info, env)))
    }

    /// The next line whose framing (checksum) is good, as bytes, its seq taken to be the next
    /// one: the caller decodes it with [`decode_record`] and checks that with [`check_seq`]
    /// (before any later line counts). What the parallel replay hands to its workers.
    pub(crate) fn next_framed(&mut self) -> Result<Option<(LineInfo, &[u8])>> {
        if !self.advance()? {
            return Ok(None);
        }
        let info = self.current;
        self.expected_seq += 1;
        self.good_len = info.offset + info.len;
        Ok(Some((info, self.src.line())))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Like [`Scanner::next_record`], returning only the seq; the line stays available through
    /// [`Scanner::current_bytes`] and [`Scanner::decode_current`].
    pub fn next_line_seq(&mut self) -> Result<Option<u64>> {
        Ok(self
            .next_record::<serde::de::IgnoredAny>()?
            .map(|(_, env)| env.seq))
    }

    /// Where the line last returned sits.
    pub fn current_info(&self) -> LineInfo {
        self.current
    }

    /// Bytes (newline excluded) of the line last returned.
    pub fn current_bytes(&self) -> &[u8] {
        self.src.line()
    }

    /// Decodes the line last returned again, typed by `P` (it was already checked).
    pub fn decode_current<'s, P: Payload<'s>>(
        &'s self,
    ) -> Result<Option<(LineInfo, Envelope<'s, P>)>> {
        match frame::decode_envelope(self.src.line()) {
            Ok(env) => Ok(Some((self.current, env))),
            Err(p) => Err(corruption(&self.path, self.current, p)),
        }
    }

    /// Reads the next line whose framing (checksum) is good into the buffer.
    /// `false` at the end of the log (debris after it recorded in `cut`).
    fn advance(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let (raw, info) = self.src.next_raw()?;
        let framing = match raw {
            Raw::Eof => {
                self.done = true;
                return Ok(false);
            }
            Raw::Torn { len } => Err(Problem::TornTail { bytes: len }),
            Raw::TooLong { len } => Err(Problem::LineTooLong {
                len,
                max: self.src.max as u64,
            }),
            Raw::Line => line_framing(self.src.line()),
        };
        if let Err(problem) = framing {
            self.classify_damage(info, problem)?;
            return Ok(false);
        }
        self.current = info;
        Ok(true)
    }

    /// The first damaged line, at `first`: crash debris if the damage from here to the end
    /// of the file fits the crash window, corruption otherwise (see the module docs).
    fn classify_damage(&mut self, first: LineInfo, problem: Problem) -> Result<()> {
        let mut end = first.offset + first.len;
        let mut lines = 1;
        // The first checksum-valid line with a seq after the damaged one: a record written
        // after it.
        let mut later: Option<(u64, u64)> = None;
        if !matches!(problem, Problem::TornTail { .. }) {
            loop {
                let (raw, info) = self.src.next_raw()?;
                if let Raw::Eof = raw {
                    break;
                }
                lines += 1;
                end = info.offset + info.len;
                if later.is_none()
                    && let Raw::Line = raw
                    && line_framing(self.src.line()).is_ok()
                    && let Ok(env) =
                        frame::decode_envelope::<serde::de::IgnoredAny>(self.src.line())
                    && env.seq > self.expected_seq
                {
                    later = Some((info.line, env.seq));
                }
            }
        }
        let span = end - first.offset;
        if !self.window.is_crash_debris(span, later.is_some()) {
            let why = match later {
                Some((line, seq)) => format!(
                    "a valid record follows it (line {line}, seq {seq}), so it was already durable: this is damage, not crash debris"
                ),
                None => format!(
                    "{span} bytes from here to the end of the file, more than a crash can leave unsynced ({} bytes)",
                    self.window_bytes()
                ),
            };
            return Err(LedgerError::Corrupt(Box::new(
                Corruption::new(&self.path, first.line, first.offset, problem).with_context(why),
            )));
        }
        self.done = true;
        self.cut = Some(Cut {
            offset: first.offset,
            bytes: span,
            line: first.line,
            lines,
            reason: problem,
        });
        Ok(())
    }

    fn window_bytes(&self) -> u64 {
        let one_line = self.window.line_bytes_max + 1;
        self.window
            .unsynced_bytes_max
            .map_or(one_line, |g| g.max(one_line))
    }

    /// Debris after the log, known once `next_record` returned `None`.
    pub fn cut(&self) -> Option<&Cut> {
        self.cut.as_ref()
    }

    /// Seq the next record must carry.
    pub fn next_seq(&self) -> u64 {
        self.expected_seq
    }

    /// Offset where the good log ends so far.
    pub fn good_len(&self) -> u64 {
        self.good_len
    }
}

/// The framing check of one complete line: NUL bytes (what a lost sector often reads back
/// as) are named as such; otherwise the checksum decides.
fn line_framing(line: &[u8]) -> std::result::Result<(), Problem> {
    if memchr::memchr(0, line).is_some() {
        return Err(Problem::NulBytes);
    }
    frame::check_crc(line)
}

/// True when some complete line of `r` passes its checksum (header or record): the file
/// holds data, however damaged its start.
pub(crate) fn any_valid_line<R: Read>(path: &Path, r: R, max: usize) -> Result<bool> {
    let mut src = LineSource::new(path, r, 0, 0, max);
    loop {
        let (raw, _) = src.next_raw()?;
        match raw {
            Raw::Eof | Raw::Torn { .. } => return Ok(false),
            Raw::TooLong { .. } => {}
            Raw::Line => {
                if line_framing(src.line()).is_ok() {
                    return Ok(true);
                }
            }
        }
    }
}

/// Reads a whole file, validating every line, calling `on_record` for each good record.
pub(crate) fn scan_all<R: Read, P, F>(
    path: &Path,
    r: R,
    max: usize,
    expected_format: Option<&str>,
    mut on_record: F,
) -> Result<ScanReport>
where
    P: for<'a> Payload<'a>,
    F: FnMut(LineInfo, Envelope<'_, P>) -> std::result::Result<(), Problem>,
{
    let (mut scanner, header) = Scanner::from_start(path, r, max, expected_format)?;
    loop {
        let Some((info, env)) = scanner.next_record::<P>()? else {
            break;
        };
        let seq = env.seq;
        on_record(info, env).map_err(|problem| rejected(path, info, seq, problem))?;
    }
    Ok(ScanReport::at_end(header, &scanner))
}

impl ScanReport {
    pub(crate) fn at_end<R>(header: Header, scanner: &Scanner<R>) -> ScanReport {
        ScanReport {
            header,
            last_seq: scanner.expected_seq - 1,
            good_len: scanner.good_len,
            cut: scanner.cut.clone(),
        }
    }
}

/// The error for a record the caller refused (as the meaning of the log, not its framing).
pub(crate) fn rejected(path: &Path, info: LineInfo, seq: u64, problem: Problem) -> LedgerError {
    corruption(
        path,
        info,
        match problem {
            Problem::Malformed(m) => Problem::Invalid(format!("seq {seq}: {m}")),
            p => p,
        },
    )
}

#[cfg(test)]
mod line_source_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Lines read in place (whole in the read buffer) and lines copied (spanning two
        /// reads) come out byte for byte, with the same offsets, for any buffer size; too
        /// long lines and a torn tail are reported as such.
        #[test]
        fn lines_come_out_whole_whatever_the_buffer(
            lines in proptest::collection::vec(proptest::collection::vec(0u8..=255, 0..40), 0..20),
            torn in proptest::collection::vec(0u8..=255, 0..10),
            capacity in 1usize..64,
            max in 1usize..48,
        ) {
            let lines: Vec<Vec<u8>> = lines
                .into_iter()
                .map(|l| l.into_iter().filter(|&b| b != b'\n').collect())
                .collect();
            let torn: Vec<u8> = torn.into_iter().filter(|&b| b != b'\n').collect();
            let mut file = Vec::new();
            for l in &lines {
                file.extend_from_slice(l);
                file.push(b'\n');
            }
            file.extend_from_slice(&torn);
            let mut src =
                LineSource::with_capacity(Path::new("t"), &file[..], 0, 0, max, capacity);
            let mut offset = 0u64;
            for (k, l) in lines.iter().enumerate() {
                let (raw, info) = src.next_raw().unwrap();
                prop_assert_eq!((info.line, info.offset, info.len), (k as u64 + 1, offset, l.len() as u64 + 1));
                if l.len() > max {
                    let too_long = matches!(raw, Raw::TooLong { len } if len == l.len() as u64);
                    prop_assert!(too_long, "line {} is too long", k + 1);
                } else {
                    prop_assert!(matches!(raw, Raw::Line), "a line");
                    prop_assert_eq!(src.line(), &l[..]);
                }
                offset += l.len() as u64 + 1;
            }
            let (raw, info) = src.next_raw().unwrap();
            prop_assert_eq!(info.offset, offset);
            if torn.is_empty() {
                prop_assert!(matches!(raw, Raw::Eof), "the end");
            } else {
                let is_torn = matches!(raw, Raw::Torn { len } if len == torn.len() as u64);
                prop_assert!(is_torn, "a torn tail");
            }
        }
    }
}
