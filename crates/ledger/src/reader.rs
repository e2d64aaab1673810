//! Readers: streaming and validating, never the whole file in memory, no lock needed.
//! A reader sees only complete, checksum-valid lines; a torn tail being written right now by
//! the writer is simply not there yet.

use std::fs::File;

use crate::fs::{open_regular, open_regular_meta};
use std::io::{Read, Seek, SeekFrom};

use std::path::{Path, PathBuf};

use crate::error::{LedgerError, Problem, Result};
use crate::frame::{self, Envelope, Payload};
use crate::header::Header;
use crate::scan::{CrashWindow, Cut, LineInfo, Scanner, rejected};
use crate::writer::{Options, open_read};

/// Reads the records of one ledger in order, checking each.
pub struct Reader {
    scanner: Scanner<Box<dyn Read + Send>>,
    header: Header,
    after: u64,
    /// The file's size when opened, and the decoding threads [`Reader::for_each_record`]
    /// uses for it.
    size: u64,
    workers: usize,
}

impl Reader {
    /// Opens `path` at its first record.
    pub fn open(path: &Path, opts: &Options) -> Result<Reader> {
        let r = open_read(opts, path)?;
        let (scanner, header) =
            Scanner::from_start(path, r, opts.line_bytes_max, opts.format.as_deref())?;
        let size = opts.fs.file_len(path).unwrap_or(0);
        Ok(Reader {
            scanner,
            header,
            after: 0,
            size,
            workers: crate::parallel::workers_for(size, opts.replay_workers),
        })
    }

    /// Opens `path` positioned at the first record with seq > `after`. Seeks by bisection
    /// over byte offsets (seqs grow with offsets), so it does not read what it skips.
    pub fn open_after(path: &Path, opts: &Options, after: u64) -> Result<Reader> {
        let mut reader = Reader::open(path, opts)?;
        if after == 0 {
            return Ok(reader);
        }
        let header_end = reader.scanner.good_len();
        let size = std::fs::symlink_metadata(path)
            .map_err(|e| LedgerError::io("stat", path, e))?
            .len();
        let (start, seq) = bisect(path, opts, header_end, size, after)?;
        if start > header_end {
            let mut f =
                open_regular(path, false, false).map_err(|e| LedgerError::open_failed(path, e))?;
            f.seek(SeekFrom::Start(start))
                .map_err(|e| LedgerError::io("seek", path, e))?;
            let window = CrashWindow::of(&reader.header, opts.line_bytes_max);
            reader.scanner = Scanner::from_position(path, Box::new(f), window, start, seq, seq);
        }
        reader.after = after;
        Ok(reader)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next record with seq > the start point, typed by `P`; `None` at the end.
    pub fn next_record<'s, P: Payload<'s>>(
        &'s mut self,
    ) -> Result<Option<(LineInfo, Envelope<'s, P>)>> {
        if self.after > 0 {
            loop {
                match self.scanner.next_line_seq()? {
                    None => return Ok(None),
                    Some(seq) if seq <= self.after => continue,
                    Some(_) => {
                        self.after = 0;
                        return self.scanner.decode_current::<P>();
                    }
                }
            }
        }
        self.scanner.next_record::<P>()
    }

    /// Calls `on_record` with the seq and typed data of every record from the start point
    /// on, in order, and stops at the first error (of the log, or `on_record`'s refusal,
    /// reported at its line). A big ledger's records are decoded on more than one core
    /// ([`crate::parallel`]); what `on_record` sees is the same as from
    /// [`Reader::next_record`] in a loop.
    pub fn for_each_record<P, F>(&mut self, mut on_record: F) -> Result<()>
    where
        P: for<'a> Payload<'a> + Send + 'static,
        F: FnMut(LineInfo, u64, P) -> std::result::Result<(), Problem>,
    {
        let path = self.scanner.path().to_path_buf();
        let after = std::mem::take(&mut self.after);
        crate::parallel::for_each_record(
            &mut self.scanner,
            self.workers,
            self.size,
            |info, seq, data| {
                if seq <= after {
                    return Ok(());
                }
                on_record(info, seq, data).map_err(|problem| rejected(&path, info, seq, problem))
            },
        )
    }

    /// The next record as its raw line bytes (newline excluded) and seq.
    pub fn next_line(&mut self) -> Result<Option<(LineInfo, u64, &[u8])>> {
        loop {
            match self.scanner.next_line_seq()? {
                None => return Ok(None),
                Some(seq) if seq <= self.after => continue,
                Some(seq) => {
                    let info = self.scanner.current_info();
                    return Ok(Some((info, seq, self.scanner.current_bytes())));
                }
            }
        }
    }

    /// Debris after the log, once the end was reached.
    pub fn cut(&self) -> Option<&Cut> {
        self.scanner.cut()
    }
}

/// Finds a line start at or before the first record with seq > `after`, and its seq.
fn bisect(
    path: &Path,
    opts: &Options,
    header_end: u64,
    size: u64,
    after: u64,
) -> Result<(u64, u64)> {
    const WINDOW: u64 = 64 * 1024;
    let mut lo = header_end;
    let mut lo_seq = 1;
    let mut hi = size;
    let mut f = open_regular(path, false, false).map_err(|e| LedgerError::open_failed(path, e))?;
    while hi.saturating_sub(lo) > WINDOW {
        let mid = lo + (hi - lo) / 2;
        match line_at_or_after(&mut f, mid, opts.line_bytes_max) {
            Some((start, seq)) if seq <= after && start < hi && start > lo => {
                lo = start;
                lo_seq = seq;
            }
            _ => hi = mid,
        }
    }
    Ok((lo, lo_seq))
}

/// The first line starting at or after `pos`: its offset and seq, if it is a good line.
fn line_at_or_after(f: &mut File, pos: u64, max: usize) -> Option<(u64, u64)> {
    f.seek(SeekFrom::Start(pos.checked_sub(1)?)).ok()?;
    let mut r = std::io::BufReader::with_capacity(64 * 1024, f.take(2 * max as u64 + 2));
    let mut skipped = Vec::new();
    std::io::BufRead::read_until(&mut r, b'\n', &mut skipped).ok()?;
    let start = pos - 1 + skipped.len() as u64;
    let mut line = Vec::new();
    std::io::BufRead::read_until(&mut r, b'\n', &mut line).ok()?;
    if line.pop() != Some(b'\n') {
        return None;
    }
    let env: Envelope<serde::de::IgnoredAny> = frame::decode_line(&line).ok()?;
    Some((start, env.seq))
}

/// The last good record of a file, read from its end only.
#[derive(Debug, Clone)]
pub struct Tail {
    pub path: PathBuf,
    pub size: u64,
    /// Seq of the last good record (0: header only).
    pub last_seq: u64,
    pub last_kind: String,
    pub last_ts: String,
    pub last_data: serde_json::Value,
    /// Bytes after the last good line (torn or debris), not part of the log.
    pub trailing_bytes: u64,
}

/// Reads only the end of `path` (growing the window as needed, never past one line limit)
/// and returns its last checksum-valid record. Does not validate the whole file.
pub fn read_tail(path: &Path, opts: &Options) -> Result<Tail> {
    let (f, meta) =
        open_regular_meta(path, false, false).map_err(|e| LedgerError::open_failed(path, e))?;
    let size = meta.len();
    tail_of(&f, path, opts, size, None)
}

/// The first window the tail reader reads; a file this small is read whole, once.
const TAIL_WINDOW_FIRST: u64 = 16 * 1024;

/// What a listing reads of a ledger: [`read_head_and_tail`].
#[derive(Debug, Clone)]
pub struct HeadAndTail {
    pub header: Header,
    /// The record right after the header (seq 1) as kind and data, when it lies within the
    /// first read and passes its checksum.
    pub first: Option<(String, serde_json::Value)>,
    pub tail: Tail,
}

/// The header (line 1, checked), the first record and the last good record of `path`,
/// through one open and (for a file of up to 16 KiB) one read: what a listing needs of each
/// session, without reading the middle.
pub fn read_head_and_tail(path: &Path, opts: &Options) -> Result<HeadAndTail> {
    let (f, meta) =
        open_regular_meta(path, false, false).map_err(|e| LedgerError::open_failed(path, e))?;
    let size = meta.len();
    let first_read = pread(&f, path, 0, size.min(TAIL_WINDOW_FIRST))?;
    let whole = first_read.len() as u64 == size;
    let header_fits = memchr::memchr(b'\n', &first_read).is_some();
    let (header, first) = if header_fits {
        let (mut sc, header) = Scanner::from_start_buffered(
            path,
            &first_read[..],
            opts.line_bytes_max,
            opts.format.as_deref(),
            first_read.len().max(1),
        )?;
        // The first record, if it is whole within what was read (never an error here: the
        // listing is about the header and the tail).
        let first = match sc.next_record::<serde_json::Value>() {
            Ok(Some((_, env))) if env.seq == 1 => Some((env.kind.to_string(), env.data)),
            _ => None,
        };
        (header, first)
    } else {
        // A header longer than the first read (or none at all): read it as a stream.
        let (_, header) = Scanner::from_start_buffered(
            path,
            (&f).take(opts.line_bytes_max as u64 + 1),
            opts.line_bytes_max,
            opts.format.as_deref(),
            64 * 1024,
        )?;
        (header, None)
    };
    let tail = tail_of(&f, path, opts, size, whole.then_some(first_read))?;
    Ok(HeadAndTail {
        header,
        first,
        tail,
    })
}

fn pread(f: &File, path: &Path, offset: u64, len: u64) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len as usize];
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(LedgerError::io("read", path, e)),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

/// The last checksum-valid record of a file of `size` bytes, read backwards in growing
/// windows; `whole` is the whole file when it was read already.
fn tail_of(
    f: &File,
    path: &Path,
    opts: &Options,
    size: u64,
    whole: Option<Vec<u8>>,
) -> Result<Tail> {
    let mut window = TAIL_WINDOW_FIRST;
    let cap = opts.line_bytes_max as u64 * 2 + 2;
    let mut prefetched = whole;
    loop {
        let w = window.min(size);
        let start = size - w;
        let buf = match prefetched.take() {
            Some(b) => b,
            None => pread(f, path, start, w)?,
        };
        let start = size - buf.len() as u64;
        // Walk complete lines from the end.
        let mut end = match memchr::memrchr(b'\n', &buf) {
            Some(i) => i,
            None if start == 0 => {
                return Err(LedgerError::NoHeader {
                    path: path.to_path_buf(),
                });
            }
            None => {
                if window >= cap {
                    return Err(damaged_tail(path, start, w, opts));
                }
                window *= 4;
                continue;
            }
        };
        loop {
            let line_start = match memchr::memrchr(b'\n', &buf[..end]) {
                Some(i) => i + 1,
                None if start == 0 => 0,
                None => break, // line begins before the window
            };
            let line = &buf[line_start..end];
            if let Ok(env) = frame::decode_line::<serde_json::Value>(line) {
                return Ok(Tail {
                    path: path.to_path_buf(),
                    size,
                    last_seq: env.seq,
                    last_kind: env.kind.to_string(),
                    last_ts: env.ts.to_string(),
                    last_data: env.data,
                    trailing_bytes: size - (start + end as u64 + 1),
                });
            }
            if line_start == 0 {
                return Err(LedgerError::NoHeader {
                    path: path.to_path_buf(),
                });
            }
            end = line_start - 1;
        }
        if start == 0 {
            return Err(LedgerError::NoHeader {
                path: path.to_path_buf(),
            });
        }
        if window >= cap {
            return Err(damaged_tail(path, start, w, opts));
        }
        window *= 4;
    }
}

/// More than two line limits at the end of the file without a valid record: no crash leaves
/// that much, so the end of the file is damaged (the header may be fine).
fn damaged_tail(path: &Path, start: u64, w: u64, opts: &Options) -> LedgerError {
    LedgerError::Corrupt(Box::new(
        crate::error::Corruption::new(
            path,
            0,
            start,
            crate::error::Problem::LineTooLong {
                len: w,
                max: opts.line_bytes_max as u64,
            },
        )
        .with_context(
            "no valid record in the last bytes of the file; run `lazarus sessions verify`",
        ),
    ))
}
