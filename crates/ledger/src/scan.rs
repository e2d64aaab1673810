//! Reading a ledger file line by line, validating as it goes, and deciding where a crash
//! left debris. This is the one place that knows the recovery rules:
//!
//! * bytes after the last `\n` are a torn tail: never visible, cut before the next append;
//! * a complete line that fails its checksum (or is malformed, or too long) is crash debris
//!   only when no checksum-valid line follows it, or when it contains NUL bytes (sectors lost
//!   at a power cut); debris and everything after it is cut;
//! * every other problem — a checksum-valid line with the wrong seq, a header in the wrong
//!   place, bad members, a failed checksum followed by valid lines — is corruption: reported
//!   with file, line, offset, expected and found, and never skipped.

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
    /// Why the first cut line is not part of the log.
    pub reason: Problem,
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
    pub(crate) buf: Vec<u8>,
    pub(crate) offset: u64,
    pub(crate) line_no: u64,
    max: usize,
    path: PathBuf,
}

impl<R: Read> LineSource<R> {
    pub(crate) fn new(path: &Path, r: R, offset: u64, line_no: u64, max: usize) -> Self {
        LineSource {
            inner: BufReader::with_capacity(256 * 1024, r),
            buf: Vec::with_capacity(4096),
            offset,
            line_no,
            max,
            path: path.to_path_buf(),
        }
    }

    /// Reads the next line into `buf` (without its newline).
    fn next_raw(&mut self) -> Result<(Raw, LineInfo)> {
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
            len += n as u64;
            if !too_long {
                if self.buf.len() + n > self.max {
                    too_long = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(chunk);
                }
            }
            let consumed = if found { n + 1 } else { n };
            self.inner.consume(consumed);
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
    /// Number of good lines, header included.
    pub lines: u64,
    /// Debris or torn bytes after the log, if any.
    pub cut: Option<Cut>,
}

fn corruption(path: &Path, info: LineInfo, problem: Problem) -> LedgerError {
    LedgerError::Corrupt(Box::new(Corruption {
        path: path.to_path_buf(),
        line: info.line,
        offset: info.offset,
        problem,
    }))
}

/// A validating, streaming reader over the records of one file.
pub struct Scanner<R> {
    current: LineInfo,
    src: LineSource<R>,
    path: PathBuf,
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
        let mut src = LineSource::new(path, r, 0, 0, max);
        let (raw, info) = src.next_raw()?;
        let corrupt = |problem| {
            LedgerError::Corrupt(Box::new(Corruption {
                path: path.to_path_buf(),
                line: 1,
                offset: 0,
                problem,
            }))
        };
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
        if src.buf.contains(&0) {
            return Err(LedgerError::NoHeader {
                path: path.to_path_buf(),
            });
        }
        frame::check_crc(&src.buf).map_err(corrupt)?;
        let env: Envelope<HeaderData> = frame::decode_envelope(&src.buf).map_err(|p| match p {
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
        max: usize,
        offset: u64,
        line_no: u64,
        expected_seq: u64,
    ) -> Self {
        Scanner {
            current: LineInfo {
                line: line_no,
                offset,
                len: 0,
            },
            src: LineSource::new(path, r, offset, line_no, max),
            path: path.to_path_buf(),
            expected_seq,
            good_len: offset,
            cut: None,
            done: false,
        }
    }

    fn corrupt(&self, info: LineInfo, problem: Problem) -> LedgerError {
        corruption(&self.path, info, problem)
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
        let expected = self.expected_seq;
        let env: Envelope<'s, P> = match frame::decode_envelope(&self.src.buf) {
            Ok(env) => env,
            Err(p) => {
                let problem = match p {
                    Problem::Malformed(m) => Problem::Invalid(m),
                    p => p,
                };
                return Err(corruption(&self.path, info, problem));
            }
        };
        let seq_problem = if env.kind == "header" {
            Some(Problem::MisplacedHeader { line: info.line })
        } else if env.seq > expected {
            Some(Problem::SeqGap {
                expected,
                found: env.seq,
            })
        } else if env.seq < expected {
            Some(Problem::SeqNotIncreasing {
                expected,
                found: env.seq,
            })
        } else {
            None
        };
        if let Some(problem) = seq_problem {
            return Err(corruption(&self.path, info, problem));
        }
        self.expected_seq += 1;
        self.good_len = info.offset + info.len;
        Ok(Some((info, env)))
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
        &self.src.buf
    }

    /// Decodes the line last returned again, typed by `P` (it was already checked).
    pub fn decode_current<'s, P: Payload<'s>>(
        &'s self,
    ) -> Result<Option<(LineInfo, Envelope<'s, P>)>> {
        match frame::decode_envelope(&self.src.buf) {
            Ok(env) => Ok(Some((self.current, env))),
            Err(p) => Err(corruption(&self.path, self.current, p)),
        }
    }

    /// Reads the next line whose framing (checksum) is good into the buffer.
    /// `false` at the end of the log (torn tail or debris recorded in `cut`).
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
            Raw::Torn { len } => {
                self.done = true;
                self.cut = Some(Cut {
                    offset: info.offset,
                    bytes: len,
                    line: info.line,
                    reason: Problem::TornTail { bytes: len },
                });
                return Ok(false);
            }
            Raw::TooLong { len } => Err(Problem::LineTooLong {
                len,
                max: self.src.max as u64,
            }),
            Raw::Line => {
                if self.src.buf.contains(&0) {
                    Err(Problem::NulBytes)
                } else {
                    frame::check_crc(&self.src.buf)
                }
            }
        };
        if let Err(problem) = framing {
            self.classify_invalid(info, problem)?;
            return Ok(false);
        }
        self.current = info;
        Ok(true)
    }

    /// An invalid complete line: debris if nothing valid follows (or it holds NUL bytes),
    /// corruption otherwise.
    fn classify_invalid(&mut self, first: LineInfo, problem: Problem) -> Result<()> {
        let file_end_guess;
        if problem != Problem::NulBytes {
            loop {
                let (raw, info) = self.src.next_raw()?;
                match raw {
                    Raw::Eof | Raw::Torn { .. } => {
                        file_end_guess = info.offset + info.len;
                        break;
                    }
                    Raw::TooLong { .. } => continue,
                    Raw::Line => {
                        if self.src.buf.contains(&0) {
                            // Lost sectors from here on: everything after is debris too.
                            file_end_guess = self.drain_to_end()?;
                            break;
                        }
                        if frame::check_crc(&self.src.buf).is_ok() {
                            return Err(self.corrupt(first, problem));
                        }
                    }
                }
            }
        } else {
            file_end_guess = self.drain_to_end()?;
        }
        self.done = true;
        self.cut = Some(Cut {
            offset: first.offset,
            bytes: file_end_guess - first.offset,
            line: first.line,
            reason: problem,
        });
        Ok(())
    }

    fn drain_to_end(&mut self) -> Result<u64> {
        loop {
            let (raw, info) = self.src.next_raw()?;
            if let Raw::Eof | Raw::Torn { .. } = raw {
                return Ok(info.offset + info.len);
            }
        }
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

    /// Lines read so far (good ones, header included, plus any debris).
    pub fn lines_read(&self) -> u64 {
        self.src.line_no
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
    let mut lines = 1;
    loop {
        let Some((info, env)) = scanner.next_record::<P>()? else {
            break;
        };
        let seq = env.seq;
        if let Err(problem) = on_record(info, env) {
            return Err(LedgerError::Corrupt(Box::new(Corruption {
                path: path.to_path_buf(),
                line: info.line,
                offset: info.offset,
                problem: match problem {
                    Problem::Malformed(m) => Problem::Invalid(format!("seq {seq}: {m}")),
                    p => p,
                },
            })));
        }
        lines += 1;
    }
    Ok(ScanReport {
        header,
        last_seq: scanner.next_seq() - 1,
        good_len: scanner.good_len(),
        lines,
        cut: scanner.cut().cloned(),
    })
}
