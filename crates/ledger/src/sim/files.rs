//! The file and directory operations as the writer, the store and the spool see them, on
//! the simulated disk: each one counts towards an armed power cut, and directory operations
//! wait in `pending` until their directory is synced.

use std::io::{self, Cursor, Read};
use std::path::Path;

use super::{DirOp, Inode, SimFs, State, parent, power_cut, tick};
use crate::fs::{Fs, LedgerFile};

struct SimFile {
    fs: SimFs,
    inode: usize,
}

impl LedgerFile for SimFile {
    fn append(&self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.fs.lock();
        tick(&mut st)?;
        let failing = match st.failing_append {
            Some(0) => {
                st.failing_append = None;
                true
            }
            Some(n) => {
                st.failing_append = Some(n - 1);
                false
            }
            None => false,
        };
        let inode = &mut st.inodes[self.inode];
        if failing {
            inode.content.extend_from_slice(&buf[..buf.len() / 2]);
            return Err(io::Error::from_raw_os_error(
                rustix::io::Errno::NOSPC.raw_os_error(),
            ));
        }
        inode.content.extend_from_slice(buf);
        let unsynced = inode.content.len().saturating_sub(inode.durable.len());
        st.max_unsynced = st.max_unsynced.max(unsynced);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let (covered, latency) = {
            let mut st = self.fs.lock();
            tick(&mut st)?;
            // A writeback error a `syncfs` met on this file is reported here, once (the
            // file's own error state, as Linux's errseq keeps it per file).
            if std::mem::take(&mut st.inodes[self.inode].wb_error) {
                return Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::IO.raw_os_error(),
                ));
            }
            if let Some(n) = st.failing_sync {
                if n == 0 {
                    st.failing_sync = None;
                    st.fs_errors += 1;
                    let inode = &mut st.inodes[self.inode];
                    let (from, to) = (inode.durable.len(), inode.content.len());
                    if to > from {
                        inode.dropped.push(from..to);
                    }
                    return Err(io::Error::from_raw_os_error(
                        rustix::io::Errno::IO.raw_os_error(),
                    ));
                }
                st.failing_sync = Some(n - 1);
            }
            st.syncs_started += 1;
            (st.inodes[self.inode].content.len(), st.sync_latency)
        };
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let mut st = self.fs.lock();
        if st.image.is_some() {
            return Err(power_cut());
        }
        let inode = &mut st.inodes[self.inode];
        let image = inode.synced_image(covered);
        // Bytes appended while the sync ran stay unsynced (durable keeps only the covered
        // prefix); a truncation meanwhile shortened what there is to cover.
        inode.durable = image;
        Ok(())
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        let mut st = self.fs.lock();
        tick(&mut st)?;
        let inode = &mut st.inodes[self.inode];
        let len = usize::try_from(len).map_err(io::Error::other)?;
        // The disk still holds what was cut, as stale data for whoever reuses the blocks.
        if inode.durable.len() > len {
            if inode.stale.len() < inode.durable.len() {
                inode.stale.resize(inode.durable.len(), 0);
            }
            let cut = inode.durable[len..].to_vec();
            inode.stale[len..len + cut.len()].copy_from_slice(&cut);
        }
        inode.content.truncate(len);
        for r in &mut inode.dropped {
            r.end = r.end.min(len);
        }
        inode.dropped.retain(|r| r.start < r.end);
        Ok(())
    }
}

impl SimFs {
    fn link_new(&self, st: &mut State, path: &Path, inode: Inode) -> io::Result<usize> {
        if st.names.contains_key(path) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        st.inodes.push(inode);
        let id = st.inodes.len() - 1;
        st.names.insert(path.to_path_buf(), id);
        st.pending.push(DirOp::Link(path.to_path_buf(), id));
        Ok(id)
    }
}

fn sync_dir_locked(st: &mut State, dir: &Path) {
    let mut kept = Vec::new();
    for op in std::mem::take(&mut st.pending) {
        if op.dirs().contains(&dir) {
            op.apply(&mut st.durable_names);
        } else {
            kept.push(op);
        }
    }
    st.pending = kept;
}

impl Fs for SimFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn LedgerFile>> {
        let mut st = self.lock();
        tick(&mut st)?;
        let id = self.link_new(&mut st, path, Inode::default())?;
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
    fn read_at(&self, path: &Path, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let st = self.lock();
        let &id = st.names.get(path).ok_or(io::ErrorKind::NotFound)?;
        let c = &st.inodes[id].content;
        let from = usize::try_from(offset).unwrap_or(usize::MAX).min(c.len());
        let to = from
            .saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
            .min(c.len());
        Ok(c[from..to].to_vec())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.lock();
        tick(&mut st)?;
        sync_dir_locked(&mut st, dir);
        Ok(())
    }
    fn write_new_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.lock();
        tick(&mut st)?;
        self.link_new(
            &mut st,
            path,
            Inode {
                content: bytes.to_vec(),
                durable: bytes.to_vec(),
                ..Inode::default()
            },
        )?;
        sync_dir_locked(&mut st, parent(path));
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path, replace: bool) -> io::Result<()> {
        let mut st = self.lock();
        tick(&mut st)?;
        let &id = st.names.get(from).ok_or(io::ErrorKind::NotFound)?;
        if !replace && st.names.contains_key(to) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        st.names.remove(from);
        st.names.insert(to.to_path_buf(), id);
        st.pending
            .push(DirOp::Rename(from.to_path_buf(), to.to_path_buf(), id));
        Ok(())
    }
    fn save_range(&self, from: &Path, offset: u64, to: &Path) -> io::Result<u64> {
        let bytes = self.read_at(from, offset, u64::MAX)?;
        self.write_new_durable(to, &bytes)?;
        Ok(bytes.len() as u64)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        tick(&mut st)?;
        st.names.remove(path).ok_or(io::ErrorKind::NotFound)?;
        st.pending.push(DirOp::Unlink(path.to_path_buf()));
        Ok(())
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        if let Some(&i) = st.names.get(path) {
            return Err(if st.inodes[i].dir {
                io::ErrorKind::AlreadyExists.into()
            } else {
                io::Error::new(io::ErrorKind::InvalidInput, "not a directory")
            });
        }
        tick(&mut st)?;
        self.link_new(
            &mut st,
            path,
            Inode {
                dir: true,
                ..Inode::default()
            },
        )?;
        Ok(())
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let st = self.lock();
        if !st.names.get(path).is_some_and(|&i| st.inodes[i].dir) {
            return Err(io::ErrorKind::NotFound.into());
        }
        Ok(st
            .names
            .keys()
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect())
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        if !st.names.get(path).is_some_and(|&i| st.inodes[i].dir) {
            return Err(io::ErrorKind::NotFound.into());
        }
        if st.names.keys().any(|p| p.parent() == Some(path)) {
            return Err(io::ErrorKind::DirectoryNotEmpty.into());
        }
        tick(&mut st)?;
        st.names.remove(path);
        st.pending.push(DirOp::Unlink(path.to_path_buf()));
        Ok(())
    }
    fn file_len(&self, path: &Path) -> io::Result<u64> {
        let st = self.lock();
        let &id = st.names.get(path).ok_or(io::ErrorKind::NotFound)?;
        Ok(st.inodes[id].content.len() as u64)
    }
    fn lock_dir(&self, _path: &Path) -> io::Result<Option<std::fs::File>> {
        Ok(None)
    }
    /// Every file's bytes written before the call become durable, and every directory
    /// operation; a failing one (armed by [`SimFs::fail_sync`]) drops every file's dirty
    /// pages and leaves each such file an error its next `fdatasync` reports.
    fn open_syncer(&self, _dir: &Path) -> io::Result<Box<dyn crate::fs::FsSyncer>> {
        let seen = self.lock().fs_errors;
        Ok(Box::new(SimSyncer {
            fs: self.clone(),
            seen: std::sync::Mutex::new(seen),
        }))
    }
    fn sync_fs_unsupported(&self) -> Option<String> {
        None
    }
}

/// A descriptor `syncfs` is called on: like Linux's per-descriptor error cursor, it reports
/// every writeback error on the file system since its last call (its own or another's), once.
struct SimSyncer {
    fs: SimFs,
    seen: std::sync::Mutex<u64>,
}

impl crate::fs::FsSyncer for SimSyncer {
    fn sync(&self) -> io::Result<()> {
        let r = self.fs.sync_fs_once();
        let errors = self.fs.lock().fs_errors;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if errors != *seen {
            *seen = errors;
            return Err(io::Error::from_raw_os_error(
                rustix::io::Errno::IO.raw_os_error(),
            ));
        }
        r
    }
}

impl SimFs {
    fn sync_fs_once(&self) -> io::Result<()> {
        let (covered, latency) = {
            let mut st = self.lock();
            tick(&mut st)?;
            if let Some(n) = st.failing_sync {
                if n == 0 {
                    st.failing_sync = None;
                    st.fs_errors += 1;
                    for inode in st.inodes.iter_mut().filter(|i| !i.dir) {
                        let (from, to) = (inode.durable.len(), inode.content.len());
                        if to > from {
                            inode.dropped.push(from..to);
                            inode.wb_error = true;
                        }
                    }
                    return Err(io::Error::from_raw_os_error(
                        rustix::io::Errno::IO.raw_os_error(),
                    ));
                }
                st.failing_sync = Some(n - 1);
            }
            st.syncs_started += 1;
            let covered: Vec<usize> = st.inodes.iter().map(|i| i.content.len()).collect();
            let dirs: Vec<std::path::PathBuf> = st
                .pending
                .iter()
                .flat_map(|op| op.dirs().into_iter().map(Path::to_path_buf))
                .collect();
            for d in dirs {
                sync_dir_locked(&mut st, &d);
            }
            (covered, st.sync_latency)
        };
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let mut st = self.lock();
        if st.image.is_some() {
            return Err(power_cut());
        }
        for (inode, len) in st.inodes.iter_mut().zip(covered) {
            // A sync that began earlier and ends later than another never takes back what the
            // other made durable (unless a truncation since cut below it).
            let overtaken = len < inode.durable.len() && inode.content.len() >= inode.durable.len();
            if !inode.dir && !overtaken {
                inode.durable = inode.synced_image(len);
            }
        }
        Ok(())
    }
}
