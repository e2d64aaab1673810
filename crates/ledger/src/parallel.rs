//! Replay on more than one core.
//!
//! Parsing JSON is what a replay spends its time on (the checksum runs at gigabytes a
//! second), and lines parse independently. So one thread frames lines and checks their
//! checksums ([`Scanner::next_framed`]) into batches, worker threads decode the batches into
//! typed records ([`FastDecoder`]: simd-json, held to serde_json's answers), and the calling
//! thread takes the batches back in file order, checks the seqs and hands each record on. What the caller sees is exactly what the one-thread loop gives: the same
//! records in the same order, and the same first error (an error in a later batch is never
//! reported before an earlier line's). `tests/parallel_replay.rs` holds the two to that.
//!
//! Memory stays bounded: a batch is at most [`BATCH_BYTES_MAX`] bytes, and each worker holds
//! at most two batches waiting on each side.

use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use crate::error::{LedgerError, Problem, Result};
use crate::frame::{FastDecoder, Payload};
use crate::scan::{LineInfo, ScanReport, Scanner, check_seq, record_or_corruption, rejected};

/// Files smaller than this replay on the calling thread (threads cost more than they save).
pub const PARALLEL_MIN_BYTES: u64 = 4 * 1024 * 1024;
/// The most bytes of lines handed to a worker at once.
const BATCH_BYTES_MAX: usize = 1024 * 1024;
/// The fewest (unless the file ends first).
const BATCH_BYTES_MIN: usize = 4 * 1024;
/// Batches waiting per worker, on the way in and on the way out.
const QUEUED_PER_WORKER: usize = 2;

/// How many decoding threads a replay of `size` bytes uses: none below
/// [`PARALLEL_MIN_BYTES`] or on one core, else one per core up to four (measured on 2 cores:
/// one worker beside the framing thread is slower than none, two are the fastest; a third
/// gains nothing). `forced` (from [`crate::Options::replay_workers`]) wins.
pub fn workers_for(size: u64, forced: Option<usize>) -> usize {
    if let Some(n) = forced {
        return n;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if size < PARALLEL_MIN_BYTES || cores < 2 {
        return 0;
    }
    cores.min(4)
}

/// Lines framed and checksum-checked, not yet decoded.
struct Batch {
    bytes: Vec<u8>,
    lines: Vec<(LineInfo, Range<usize>)>,
    /// Set on the last batch: how the scan ended (debris after the log is in the scanner).
    end: Option<Result<()>>,
}

/// A batch decoded: its records up to the first line that failed, and that failure.
struct Decoded<P> {
    records: Vec<(LineInfo, u64, P)>,
    error: Option<LedgerError>,
    end: Option<Result<()>>,
}

/// Calls `on_record` for every record the scanner has left, in order, decoding on `workers`
/// threads (0: on this one). Stops at the first error, of the log or of `on_record`. The
/// scanner is left at the end of the log, so its cut, next seq and good length are as after
/// the one-thread loop.
pub(crate) fn for_each_record<R, P, F>(
    scanner: &mut Scanner<R>,
    workers: usize,
    size_hint: u64,
    mut on_record: F,
) -> Result<()>
where
    R: Read + Send,
    P: for<'a> Payload<'a> + Send + 'static,
    F: FnMut(LineInfo, u64, P) -> Result<()>,
{
    if workers == 0 {
        while let Some((info, env)) = scanner.next_record::<P>()? {
            on_record(info, env.seq, env.data)?;
        }
        return Ok(());
    }
    let path = scanner.path().to_path_buf();
    let mut expected = scanner.next_seq();
    let batch_bytes = (size_hint / (workers as u64 * 16))
        .clamp(BATCH_BYTES_MIN as u64, BATCH_BYTES_MAX as u64) as usize;
    std::thread::scope(|s| {
        let mut to_workers = Vec::with_capacity(workers);
        let mut from_workers: Vec<Receiver<Decoded<P>>> = Vec::with_capacity(workers);
        // Emptied batches come back to be filled again: fresh megabyte buffers would cost a
        // page fault per page, every time.
        let (recycle, recycled) = std::sync::mpsc::channel::<Batch>();
        for _ in 0..workers {
            let (to_worker, inbox) = sync_channel::<Batch>(QUEUED_PER_WORKER);
            let (outbox, from_worker) = sync_channel::<Decoded<P>>(QUEUED_PER_WORKER);
            let path = &path;
            let recycle = recycle.clone();
            s.spawn(move || {
                let mut decoder = FastDecoder::default();
                for mut batch in inbox {
                    let decoded = decode_batch(path, &mut batch, &mut decoder);
                    let _ = recycle.send(batch);
                    if outbox.send(decoded).is_err() {
                        return;
                    }
                }
            });
            to_workers.push(to_worker);
            from_workers.push(from_worker);
        }
        // One thread frames lines (the cheap part: checksums run at gigabytes a second) and
        // hands batches to the workers in turn; their results come back in the same turn, so
        // in file order, to this thread, which checks seqs and runs `on_record`. (This thread
        // framing too was measured slower: it is the critical path.)
        let mut framing = Framing {
            scanner,
            batch_bytes,
            recycled,
            done: false,
        };
        s.spawn(move || {
            for to_worker in to_workers.iter().cycle() {
                if framing.send(to_worker).is_err() || framing.done {
                    return;
                }
            }
        });
        for turn in 0.. {
            let decoded = from_workers[turn % workers]
                .recv()
                .map_err(|_| worker_gone(&path))?;
            for (info, seq, data) in decoded.records {
                check_seq(&path, info, seq, expected)?;
                expected += 1;
                on_record(info, seq, data)?;
            }
            if let Some(e) = decoded.error {
                return Err(e);
            }
            if let Some(end) = decoded.end {
                return end;
            }
        }
        Err(worker_gone(&path))
    })
    // Returning drops the channels: each worker's next receive or send fails and it stops;
    // the scope then joins them.
}

fn worker_gone(path: &Path) -> LedgerError {
    LedgerError::Io {
        op: "replay",
        path: path.to_path_buf(),
        source: std::io::Error::other("a thread decoding the records ended early"),
    }
}

/// The framing side: lines whose checksums are good, in batches of about `batch_bytes`.
struct Framing<'s, R> {
    scanner: &'s mut Scanner<R>,
    batch_bytes: usize,
    recycled: Receiver<Batch>,
    /// The batch that ends the log (or fails) was sent.
    done: bool,
}

impl<R: Read> Framing<'_, R> {
    /// Fills the next batch and sends it to `to`.
    fn send(&mut self, to: &SyncSender<Batch>) -> Result<()> {
        let mut batch = match self.recycled.try_recv() {
            Ok(mut b) => {
                b.bytes.clear();
                b.lines.clear();
                b
            }
            Err(_) => Batch {
                bytes: Vec::with_capacity(self.batch_bytes + self.batch_bytes / 4),
                lines: Vec::with_capacity(self.batch_bytes / 256),
                end: None,
            },
        };
        batch.end = loop {
            match self.scanner.next_framed() {
                Ok(Some((info, line))) => {
                    let start = batch.bytes.len();
                    batch.bytes.extend_from_slice(line);
                    batch.lines.push((info, start..batch.bytes.len()));
                    if batch.bytes.len() >= self.batch_bytes {
                        break None;
                    }
                }
                Ok(None) => break Some(Ok(())),
                Err(e) => break Some(Err(e)),
            }
        };
        self.done = batch.end.is_some();
        to.send(batch).map_err(|_| worker_gone(self.scanner.path()))
    }
}

fn decode_batch<P: for<'a> Payload<'a>>(
    path: &Path,
    batch: &mut Batch,
    decoder: &mut FastDecoder,
) -> Decoded<P> {
    let mut records = Vec::with_capacity(batch.lines.len());
    let mut error = None;
    for (info, range) in batch.lines.drain(..) {
        let decoded = if std::env::var_os("XXSERDE").is_some() {
            crate::frame::decode_envelope::<P>(&batch.bytes[range])
        } else {
            decoder.decode::<P>(&batch.bytes[range])
        };
        match record_or_corruption(path, info, decoded) {
            Ok(env) => records.push((info, env.seq, env.data)),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    Decoded {
        records,
        error,
        end: batch.end.take(),
    }
}

/// [`crate::scan::scan_all`] with the records decoded on `workers` threads (see [`crate::parallel`]),
/// handed over as seq and typed data.
pub(crate) fn scan_all_parallel<R: Read + Send, P, F>(
    path: &Path,
    r: R,
    max: usize,
    expected_format: Option<&str>,
    workers: usize,
    size_hint: u64,
    mut on_record: F,
) -> Result<ScanReport>
where
    P: for<'a> Payload<'a> + Send + 'static,
    F: FnMut(LineInfo, u64, P) -> std::result::Result<(), Problem>,
{
    let (mut scanner, header) = Scanner::from_start(path, r, max, expected_format)?;
    for_each_record(&mut scanner, workers, size_hint, |info, seq, data| {
        on_record(info, seq, data).map_err(|problem| rejected(path, info, seq, problem))
    })?;
    Ok(ScanReport::at_end(header, &scanner))
}
