//! A simulated disk for power-loss tests (feature `sim`), as hostile as real disks are.
//!
//! Per file it keeps what the process sees (the page cache) and what is durable (as of the
//! last `fdatasync`); per directory, which names are durable (as of the last directory
//! `fsync`). [`SimFs::crash`] (or an armed power cut) produces the disk as it could be found
//! after a power cut:
//!
//! * **Names.** Directory operations since the last directory sync (create, rename, remove)
//!   survive as an in-order prefix, as a journaling file system commits them: none, some or
//!   all (an unsynced directory entry *sometimes* survives).
//! * **Bytes.** Of a file's unsynced bytes, the surviving length is any prefix; within it each
//!   sector (512 B or 4 KiB) independently survives or is lost, and a lost sector reads back
//!   as zeros, as random garbage, or as stale data (what the disk held there before: bytes an
//!   earlier truncation cut away).
//! * **Durable bytes are never damaged.** A lost sector that also holds durable bytes (the
//!   last, partly filled sector before the unsynced region) keeps those bytes: the model
//!   assumes the device writes a sector atomically (old or new contents, never a mix that
//!   damages what an earlier sync made durable). The ledger relies on exactly this.
//! * **A failed fsync** ([`SimFs::fail_sync`]) returns `EIO` while the machine keeps running,
//!   as Linux does after a writeback error: the dirty pages are dropped (marked clean), reads
//!   still show the data, and a later fsync *succeeds* without ever writing those bytes —
//!   after a power cut they read back as the disk's old contents.
//! * **fsync takes time** ([`SimFs::set_sync_latency`]): a sync covers the bytes written
//!   before it began; bytes appended while it runs are not covered.

mod files;

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The classic disk sector.
pub const SECTOR: usize = 512;
/// The sector of most modern disks ("Advanced Format").
pub const SECTOR_4K: usize = 4096;

#[derive(Debug, Clone, Default)]
struct Inode {
    /// What the process sees.
    content: Vec<u8>,
    /// What is on the disk as of the last sync.
    durable: Vec<u8>,
    /// What the disk held before at offsets beyond the durable length (bytes cut away by a
    /// truncation); lost sectors may read back as these.
    stale: Vec<u8>,
    /// Ranges whose dirty pages a failed fsync dropped: later syncs never write them.
    dropped: Vec<Range<usize>>,
    /// A directory, not a file: its name is linked like a file's, and whatever is inside it
    /// is lost at a power cut if its own name is.
    dir: bool,
    /// A failed `syncfs` dropped this file's dirty pages: its next `fdatasync` says so.
    wb_error: bool,
}

impl Inode {
    /// What a sync covering `len` bytes of `content` leaves on the disk.
    fn synced_image(&self, len: usize) -> Vec<u8> {
        let mut v = self.content[..len.min(self.content.len())].to_vec();
        for r in &self.dropped {
            let end = r.end.min(v.len());
            for (off, byte) in v.iter_mut().enumerate().take(end).skip(r.start) {
                *byte = self.disk_byte_before(off);
            }
        }
        v
    }

    /// What the disk held at `off` before the unsynced writes.
    fn disk_byte_before(&self, off: usize) -> u8 {
        if off < self.durable.len() {
            self.durable[off]
        } else {
            self.stale.get(off).copied().unwrap_or(0)
        }
    }
}

/// What lost sectors read back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    Zeros,
    /// Pseudo-random bytes (newlines, braces and quotes included), from this seed.
    Garbage(u64),
    /// What the disk held there before (bytes an earlier truncation cut), else zeros.
    Stale,
}

/// How the unsynced bytes of a file fare at the crash.
#[derive(Debug, Clone, Copy)]
pub enum Loss {
    /// The first `n` unsynced bytes survive intact (n is clamped).
    Prefix(usize),
    /// The first `len_kept` unsynced bytes are on the disk (clamped; `usize::MAX`: all), but
    /// sectors of `sector` bytes fare independently: bit i of `mask` (cycling) says whether
    /// sector i of the unsynced region survives; a lost one reads back as `fill`.
    Sectors {
        sector: usize,
        mask: u64,
        len_kept: usize,
        fill: Fill,
    },
}

/// Decides how each file's unsynced bytes fare at the cut.
type LossFn = Box<dyn FnMut(&Path) -> Loss + Send>;

/// A directory operation not yet made durable by a directory sync.
#[derive(Debug, Clone)]
enum DirOp {
    Link(PathBuf, usize),
    Unlink(PathBuf),
    Rename(PathBuf, PathBuf, usize),
}

impl DirOp {
    fn dirs(&self) -> Vec<&Path> {
        match self {
            DirOp::Link(p, _) | DirOp::Unlink(p) => vec![parent(p)],
            DirOp::Rename(a, b, _) => vec![parent(a), parent(b)],
        }
    }

    fn apply(&self, names: &mut HashMap<PathBuf, usize>) {
        match self {
            DirOp::Link(p, i) => {
                names.insert(p.clone(), *i);
            }
            DirOp::Unlink(p) => {
                names.remove(p);
            }
            DirOp::Rename(a, b, i) => {
                names.remove(a);
                names.insert(b.clone(), *i);
            }
        }
    }
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("/"))
}

struct Armed {
    at: usize,
    dir_ops_kept: usize,
    loss: LossFn,
}

#[derive(Default)]
struct State {
    inodes: Vec<Inode>,
    names: HashMap<PathBuf, usize>,
    durable_names: HashMap<PathBuf, usize>,
    /// Directory operations since the last sync of their directory, in order.
    pending: Vec<DirOp>,
    /// Mutating operations performed so far.
    ops: usize,
    /// A power cut armed to happen after this many operations.
    armed: Option<Armed>,
    /// The disk as found after the power cut, once it happened.
    image: Option<Box<State>>,
    /// Fail the sync after this many more successful ones.
    failing_sync: Option<usize>,
    /// Fail the append after this many more successful ones (half its bytes written).
    failing_append: Option<usize>,
    sync_latency: Duration,
    /// The most unsynced bytes any file had after an append.
    max_unsynced: usize,
    /// `fdatasync` calls that have taken their snapshot so far.
    syncs_started: usize,
    /// Writeback errors so far (the file system's error sequence: each `syncfs` descriptor
    /// reports the ones since its last call).
    fs_errors: u64,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("files", &self.names.len())
            .finish()
    }
}

/// The simulated file system. Cheap to clone (shared state).
#[derive(Debug, Clone, Default)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

impl SimFs {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the process currently sees in `path`.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.lock();
        st.names.get(path).map(|&i| st.inodes[i].content.clone())
    }

    /// Every name the process currently sees.
    pub fn names(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.lock().names.keys().cloned().collect();
        v.sort();
        v
    }

    /// Arms a power cut right after the next `ops` mutating operations (writes, syncs,
    /// truncates, creates, renames). From then on every operation fails, as if the process had
    /// died with the machine; [`SimFs::after_power_cut`] returns the disk as found at reboot.
    /// No unsynced directory operation survives.
    pub fn arm_power_cut(&self, ops: usize, loss: impl FnMut(&Path) -> Loss + Send + 'static) {
        self.arm_power_cut_with(ops, 0, loss);
    }

    /// Like [`SimFs::arm_power_cut`], keeping the first `dir_ops_kept` unsynced directory
    /// operations (`usize::MAX`: all of them).
    pub fn arm_power_cut_with(
        &self,
        ops: usize,
        dir_ops_kept: usize,
        loss: impl FnMut(&Path) -> Loss + Send + 'static,
    ) {
        let mut st = self.lock();
        st.armed = Some(Armed {
            at: st.ops + ops,
            dir_ops_kept,
            loss: Box::new(loss),
        });
    }

    /// The disk as found after the armed power cut, if it happened.
    pub fn after_power_cut(&self) -> Option<SimFs> {
        let mut st = self.lock();
        st.image.take().map(|image| SimFs {
            state: Arc::new(Mutex::new(*image)),
        })
    }

    /// The disk after a power cut now; `loss` decides each file's unsynced bytes; no
    /// unsynced directory operation survives.
    pub fn crash(&self, loss: impl FnMut(&Path) -> Loss) -> SimFs {
        self.crash_with(0, loss)
    }

    /// The disk after a power cut now, keeping the first `dir_ops_kept` unsynced directory
    /// operations.
    pub fn crash_with(&self, dir_ops_kept: usize, mut loss: impl FnMut(&Path) -> Loss) -> SimFs {
        let st = self.lock();
        SimFs {
            state: Arc::new(Mutex::new(image_of(&st, dir_ops_kept, &mut loss))),
        }
    }

    /// Makes the sync after the next `after` successful ones fail with `EIO`, dropping the
    /// dirty pages it should have written (the machine keeps running).
    pub fn fail_sync(&self, after: usize) {
        self.lock().failing_sync = Some(after);
    }

    /// Makes the append after the next `after` successful ones fail with `ENOSPC` once half
    /// its bytes are in the file (a short write, then the error), as a full disk does.
    pub fn fail_append(&self, after: usize) {
        self.lock().failing_append = Some(after);
    }

    /// The most bytes any file had unsynced right after an append, so far.
    pub fn max_unsynced(&self) -> usize {
        self.lock().max_unsynced
    }

    /// How many `fdatasync` calls have begun (taken the snapshot of what they cover).
    pub fn syncs_started(&self) -> usize {
        self.lock().syncs_started
    }

    /// Every `fdatasync` from now on takes `d`; bytes appended meanwhile are not covered.
    pub fn set_sync_latency(&self, d: Duration) {
        self.lock().sync_latency = d;
    }
}

fn power_cut() -> io::Error {
    io::Error::other("simulated power cut")
}

/// Counts one mutating operation; fails if the power is (or just went) out.
fn tick(st: &mut State) -> io::Result<()> {
    if st.image.is_some() {
        return Err(power_cut());
    }
    st.ops += 1;
    if st.armed.as_ref().is_some_and(|a| st.ops > a.at) {
        let Some(mut armed) = st.armed.take() else {
            return Err(power_cut());
        };
        let image = image_of(st, armed.dir_ops_kept, &mut *armed.loss);
        st.image = Some(Box::new(image));
        return Err(power_cut());
    }
    Ok(())
}

fn image_of(st: &State, dir_ops_kept: usize, loss: &mut dyn FnMut(&Path) -> Loss) -> State {
    let mut names = st.durable_names.clone();
    for op in st.pending.iter().take(dir_ops_kept) {
        op.apply(&mut names);
    }
    // A name inside a directory this disk made survives only if the directory's name did.
    let made_dirs: Vec<PathBuf> = st
        .inodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.dir)
        .flat_map(|(i, _)| {
            st.names
                .iter()
                .chain(st.durable_names.iter())
                .filter(move |(_, k)| **k == i)
                .map(|(p, _)| p.clone())
        })
        .collect();
    let orphaned = |p: &Path, names: &HashMap<PathBuf, usize>| {
        p.ancestors()
            .skip(1)
            .any(|a| made_dirs.iter().any(|d| d == a) && !names.contains_key(a))
    };
    let snapshot = names.clone();
    names.retain(|p, _| !orphaned(p, &snapshot));
    let mut out = State::default();
    let mut sorted: Vec<(PathBuf, usize)> = names.into_iter().collect();
    sorted.sort();
    for (name, i) in sorted {
        let inode = &st.inodes[i];
        let survived = survive(inode, loss(&name));
        out.inodes.push(Inode {
            content: survived.clone(),
            durable: survived,
            stale: inode.stale.clone(),
            dropped: Vec::new(),
            dir: inode.dir,
            wb_error: false,
        });
        let id = out.inodes.len() - 1;
        out.names.insert(name.clone(), id);
        out.durable_names.insert(name, id);
    }
    out
}

fn survive(inode: &Inode, loss: Loss) -> Vec<u8> {
    let durable = &inode.durable;
    // Unsynced changes that are not pure appends (a truncate): the durable state stands.
    if inode.content.len() < durable.len() || inode.synced_image(durable.len()) != *durable {
        return durable.clone();
    }
    let start = durable.len();
    let (len_kept, sector, mask, fill) = match loss {
        Loss::Prefix(n) => (n, SECTOR, u64::MAX, Fill::Zeros),
        Loss::Sectors {
            sector,
            mask,
            len_kept,
            fill,
        } => (len_kept, sector.max(1), mask, fill),
    };
    let end = start + len_kept.min(inode.content.len() - start);
    // What reached the disk: the written bytes, except pages a failed fsync dropped.
    let mut v = inode.synced_image(end);
    let first_sector = start / sector;
    let last_sector = end.div_ceil(sector);
    let mut garbage = match fill {
        Fill::Garbage(seed) => seed | 1,
        _ => 0,
    };
    for (k, s) in (first_sector..last_sector).enumerate() {
        if mask & (1u64 << (k % 64)) != 0 {
            continue;
        }
        // Never below `start`: a torn sector damages nothing already durable.
        let lo = (s * sector).max(start);
        let hi = ((s + 1) * sector).min(end);
        for (off, byte) in v.iter_mut().enumerate().take(hi).skip(lo) {
            *byte = match fill {
                Fill::Zeros => 0,
                Fill::Stale => inode.disk_byte_before(off),
                Fill::Garbage(_) => {
                    garbage ^= garbage << 13;
                    garbage ^= garbage >> 7;
                    garbage ^= garbage << 17;
                    garbage_byte(garbage)
                }
            };
        }
    }
    v
}

/// Random bytes biased towards the ones that matter to a line parser.
fn garbage_byte(r: u64) -> u8 {
    match r % 16 {
        0 => b'\n',
        1 => b'{',
        2 => b'"',
        _ => (r >> 8) as u8,
    }
}

/// Polls a future to the end on this thread, parking until woken (a `Deferred` in a test
/// without an async runtime: the syncing thread's wake-up is what moves it on).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::Fs;

    fn file_with(fs: &SimFs, path: &Path, durable: &[u8], unsynced: &[u8]) {
        let f = fs.create_new(path).unwrap();
        f.append(durable).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(parent(path)).unwrap();
        f.append(unsynced).unwrap();
    }

    /// The assumption the ledger's recovery rule rests on: whatever happens to unsynced
    /// sectors, every durable byte reads back unchanged.
    #[test]
    fn a_torn_sector_damages_nothing_already_durable() {
        let p = Path::new("/d/f");
        for durable_len in [0usize, 1, 511, 512, 513, 4095, 4096, 4097, 5000] {
            let durable: Vec<u8> = (0..durable_len).map(|i| (i % 251) as u8 + 1).collect();
            let fs = SimFs::new();
            file_with(&fs, p, &durable, &[0xAB; 9000]);
            for sector in [SECTOR, SECTOR_4K] {
                for fill in [Fill::Zeros, Fill::Garbage(7), Fill::Stale] {
                    for mask in [0u64, 0x5555_5555_5555_5555, u64::MAX] {
                        let disk = fs.crash(|_| Loss::Sectors {
                            sector,
                            mask,
                            len_kept: usize::MAX,
                            fill,
                        });
                        let got = disk.contents(p).unwrap();
                        assert_eq!(&got[..durable_len], &durable[..], "{sector} {fill:?}");
                        assert_eq!(got.len(), durable_len + 9000);
                        if mask == u64::MAX {
                            assert!(got[durable_len..].iter().all(|&b| b == 0xAB));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn stale_data_is_what_a_truncation_cut() {
        let p = Path::new("/d/f");
        let fs = SimFs::new();
        file_with(&fs, p, b"old-old-old-old", b"");
        let f = fs.open_append(p).unwrap();
        f.truncate(4).unwrap();
        f.sync_data().unwrap();
        f.append(b"NEW-NEW-NEW").unwrap();
        let disk = fs.crash(|_| Loss::Sectors {
            sector: 1,
            mask: 0,
            len_kept: usize::MAX,
            fill: Fill::Stale,
        });
        assert_eq!(disk.contents(p).unwrap(), b"old-old-old-old");
    }

    #[test]
    fn unsynced_directory_operations_survive_as_a_prefix() {
        let fs = SimFs::new();
        let a = Path::new("/d/a");
        let b = Path::new("/d/b");
        let f = fs.create_new(a).unwrap();
        f.append(b"x").unwrap();
        f.sync_data().unwrap();
        fs.rename(a, b, false).unwrap();
        let none = fs.crash_with(0, |_| Loss::Prefix(0));
        assert!(none.names().is_empty());
        let created = fs.crash_with(1, |_| Loss::Prefix(0));
        assert_eq!(created.names(), [a]);
        let renamed = fs.crash_with(2, |_| Loss::Prefix(0));
        assert_eq!(renamed.names(), [b]);
        assert_eq!(renamed.contents(b).unwrap(), b"x");
        fs.sync_dir(Path::new("/d")).unwrap();
        assert_eq!(fs.crash_with(0, |_| Loss::Prefix(0)).names(), [b]);
    }

    #[test]
    fn after_a_failed_fsync_a_later_one_succeeds_but_the_dropped_bytes_never_reach_the_disk() {
        let p = Path::new("/d/f");
        let fs = SimFs::new();
        file_with(&fs, p, b"durable|", b"");
        let f = fs.open_append(p).unwrap();
        f.append(b"dropped|").unwrap();
        fs.fail_sync(0);
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(5));
        // The process still sees the bytes; a retry "succeeds".
        assert_eq!(fs.contents(p).unwrap(), b"durable|dropped|");
        f.append(b"later").unwrap();
        f.sync_data().unwrap();
        let disk = fs.crash(|_| Loss::Prefix(usize::MAX));
        assert_eq!(disk.contents(p).unwrap(), b"durable|\0\0\0\0\0\0\0\0later");
    }

    #[test]
    fn a_sync_does_not_cover_bytes_appended_while_it_runs() {
        let p = Path::new("/d/f");
        let fs = SimFs::new();
        file_with(&fs, p, b"", b"before|");
        fs.set_sync_latency(Duration::from_millis(100));
        let f = fs.open_append(p).unwrap();
        std::thread::scope(|s| {
            let started = fs.syncs_started();
            s.spawn(|| f.sync_data().unwrap());
            while fs.syncs_started() == started {
                std::thread::yield_now();
            }
            fs.open_append(p).unwrap().append(b"during").unwrap();
        });
        let disk = fs.crash(|_| Loss::Prefix(0));
        assert_eq!(disk.contents(p).unwrap(), b"before|");
    }
}
