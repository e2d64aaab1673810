//! A simulated disk for power-loss tests (feature `sim`).
//!
//! It keeps, per file, what the process sees and what is durable (as of the last
//! `fdatasync`), and, per directory, which names are durable (as of the last directory
//! `fsync`). [`SimFs::crash`] produces the disk as it could be found after a power cut:
//! a file whose name was never made durable is gone; otherwise its durable bytes survive and,
//! of the unsynced bytes after them, either any prefix survives, or each 512-byte sector
//! independently survives or reads back as zeros.

use std::collections::HashMap;
use std::io::{self, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::fs::{Fs, LedgerFile};

/// Size of a disk sector.
pub const SECTOR: usize = 512;

#[derive(Debug, Clone, Default)]
struct Inode {
    content: Vec<u8>,
    durable: Vec<u8>,
}

/// Decides how each file's unsynced bytes fare at the cut.
type LossFn = Box<dyn FnMut(&Path) -> Loss + Send>;

#[derive(Default)]
struct State {
    inodes: Vec<Inode>,
    names: HashMap<PathBuf, usize>,
    durable_names: HashMap<PathBuf, usize>,
    /// Mutating operations performed so far.
    ops: usize,
    /// A power cut armed to happen after this many operations.
    armed: Option<(usize, LossFn)>,
    /// The disk as found after the power cut, once it happened.
    image: Option<Box<State>>,
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

/// How the unsynced bytes of a file fare at the crash.
#[derive(Debug, Clone, Copy)]
pub enum Loss {
    /// The first `n` unsynced bytes survive (n is clamped).
    Prefix(usize),
    /// Sectors fare independently: bit i of the mask (cycling) says whether sector i of the
    /// unsynced region survives; lost ones read back as zeros. `keep_len` says whether the
    /// file length itself reached the disk.
    Sectors { mask: u64, keep_len: bool },
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

    /// Arms a power cut right after the next `ops` mutating operations (writes, syncs,
    /// truncates, creates). From then on every operation fails, as if the process had died
    /// with the machine; [`SimFs::after_power_cut`] returns the disk as found at reboot.
    pub fn arm_power_cut(&self, ops: usize, loss: impl FnMut(&Path) -> Loss + Send + 'static) {
        let mut st = self.lock();
        st.armed = Some((st.ops + ops, Box::new(loss)));
    }

    /// The disk as found after the armed power cut, if it happened.
    pub fn after_power_cut(&self) -> Option<SimFs> {
        let mut st = self.lock();
        st.image.take().map(|image| SimFs {
            state: Arc::new(Mutex::new(*image)),
        })
    }

    /// The disk after a power cut now; `loss` decides each file's unsynced bytes.
    pub fn crash(&self, mut loss: impl FnMut(&Path) -> Loss) -> SimFs {
        let st = self.lock();
        SimFs {
            state: Arc::new(Mutex::new(image_of(&st, &mut loss))),
        }
    }
}

/// Counts one mutating operation; fails if the power is (or just went) out.
fn tick(st: &mut State) -> io::Result<()> {
    if st.image.is_some() {
        return Err(io::Error::other("simulated power cut"));
    }
    st.ops += 1;
    if let Some((at, _)) = &st.armed
        && st.ops > *at
    {
        let (_, mut loss) = st.armed.take().expect("armed");
        let image = image_of(st, &mut *loss);
        st.image = Some(Box::new(image));
        return Err(io::Error::other("simulated power cut"));
    }
    Ok(())
}

fn image_of(st: &State, loss: &mut dyn FnMut(&Path) -> Loss) -> State {
    {
        let mut out = State::default();
        for (name, &i) in &st.durable_names {
            let inode = &st.inodes[i];
            let survived = survive(inode, loss(name));
            out.inodes.push(Inode {
                content: survived.clone(),
                durable: survived,
            });
            let id = out.inodes.len() - 1;
            out.names.insert(name.clone(), id);
            out.durable_names.insert(name.clone(), id);
        }
        out
    }
}

fn survive(inode: &Inode, loss: Loss) -> Vec<u8> {
    let durable = &inode.durable;
    // Unsynced changes that are not pure appends (a truncate): the durable state stands.
    if !inode.content.starts_with(durable) {
        return durable.clone();
    }
    let extra = &inode.content[durable.len()..];
    match loss {
        Loss::Prefix(n) => {
            let mut v = durable.clone();
            v.extend_from_slice(&extra[..n.min(extra.len())]);
            v
        }
        Loss::Sectors { mask, keep_len } => {
            if !keep_len {
                return durable.clone();
            }
            let mut v = inode.content.clone();
            let start = durable.len();
            let first_sector = start / SECTOR;
            let last_sector = v.len().div_ceil(SECTOR);
            for (k, sector) in (first_sector..last_sector).enumerate() {
                if mask & (1u64 << (k % 64)) == 0 {
                    let lo = (sector * SECTOR).max(start);
                    let hi = ((sector + 1) * SECTOR).min(v.len());
                    v[lo..hi].fill(0);
                }
            }
            v
        }
    }
}

struct SimFile {
    fs: SimFs,
    inode: usize,
}

impl LedgerFile for SimFile {
    fn append(&self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.fs.lock();
        tick(&mut st)?;
        st.inodes[self.inode].content.extend_from_slice(buf);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        let mut st = self.fs.lock();
        tick(&mut st)?;
        let inode = &mut st.inodes[self.inode];
        inode.durable = inode.content.clone();
        Ok(())
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        tick(&mut st)?;
        let inode = &mut st.inodes[self.inode];
        inode.content.truncate(len as usize);
        Ok(())
    }
}

impl Fs for SimFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>> {
        let mut st = self.lock();
        tick(&mut st)?;
        if st.names.contains_key(path) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        st.inodes.push(Inode::default());
        let id = st.inodes.len() - 1;
        st.names.insert(path.to_path_buf(), id);
        Ok(Box::new(SimFile {
            fs: self.clone(),
            inode: id,
        }))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>> {
        let st = self.lock();
        let &id = st.names.get(path).ok_or(io::ErrorKind::NotFound)?;
        Ok(Box::new(SimFile {
            fs: self.clone(),
            inode: id,
        }))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let st = self.lock();
        let &id = st.names.get(path).ok_or(io::ErrorKind::NotFound)?;
        Ok(Box::new(Cursor::new(st.inodes[id].content.clone())))
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.lock();
        tick(&mut st)?;
        let entries: Vec<(PathBuf, usize)> = st
            .names
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        st.durable_names.retain(|p, _| p.parent() != Some(dir));
        st.durable_names.extend(entries);
        Ok(())
    }
    fn write_new_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.lock();
        tick(&mut st)?;
        if st.names.contains_key(path) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        st.inodes.push(Inode {
            content: bytes.to_vec(),
            durable: bytes.to_vec(),
        });
        let id = st.inodes.len() - 1;
        st.names.insert(path.to_path_buf(), id);
        st.durable_names.insert(path.to_path_buf(), id);
        Ok(())
    }
}
