//! Opening files safely: every file boot-resume reads or writes (session logs, OpenClaw
//! databases, its state, lock and decision log) must be a regular file reached without
//! following a final symlink, and opening it must never block. A FIFO or a symlink to
//! `/dev/zero` named like a session log is refused, not read.
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

fn no_follow_nonblock() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32
}

/// The error for a path that exists but is not a regular file.
pub fn not_regular(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is not a regular file", path.display()),
    )
}

/// Turns the ELOOP of `O_NOFOLLOW` on a symlink into a clear message.
fn explain(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link; boot-resume opens only regular files (point it at the target instead)",
                path.display()
            ),
        )
    } else {
        e
    }
}

/// Opens `path` for reading: `O_NOFOLLOW | O_NONBLOCK`, then requires a regular file.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_md(path).map(|(f, _)| f)
}

/// [`open_regular`], also returning the metadata it checked (one `fstat`).
pub fn open_regular_md(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(no_follow_nonblock())
        .open(path)
        .map_err(|e| explain(path, e))?;
    let md = f.metadata()?;
    if !md.is_file() {
        return Err(not_regular(path));
    }
    Ok((f, md))
}

/// Reads a whole small file opened with [`open_regular`], refusing files over `max` bytes.
pub fn read_small(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = open_regular(path)?;
    let len = f.metadata()?.len();
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is {len} bytes, more than the {max} bytes allowed for it",
                path.display()
            ),
        ));
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(max + 1).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Creates (or opens) a private file for writing: mode 0600 when created, `O_NOFOLLOW |
/// O_NONBLOCK`, regular file required. `append` opens in append mode, else no truncation.
pub fn open_private(path: &Path, append: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.create(true)
        .mode(0o600)
        .custom_flags(no_follow_nonblock());
    if append {
        o.append(true);
    } else {
        o.write(true).truncate(false);
    }
    let f = o.open(path).map_err(|e| explain(path, e))?;
    if !f.metadata()?.is_file() {
        return Err(not_regular(path));
    }
    Ok(f)
}

/// Creates `dir` and missing parents with mode 0700 (existing directories are left as
/// they are).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Writes `bytes` to `path` atomically: a 0600 temporary file in the same directory,
/// fsync, rename over `path`, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    private_dir(dir)?;
    if let Ok(m) = std::fs::symlink_metadata(path)
        && !m.file_type().is_file()
    {
        return Err(not_regular(path));
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".boot-resume.")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_symlinks_are_refused_without_blocking() {
        let d = tempfile::tempdir().expect("tempdir");
        let fifo = d.path().join("s.jsonl");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let e = open_regular(&fifo).expect_err("fifo");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let link = d.path().join("z.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        let e = open_regular(&link).expect_err("symlink");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = open_private(&link, true).expect_err("symlink write");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let e = read_small(&link, 10).expect_err("symlink read");
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }

    #[test]
    fn private_files_and_dirs_have_private_modes() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tempdir");
        let sub = d.path().join("a/b");
        private_dir(&sub).expect("dir");
        let mode = |p: &Path| std::fs::metadata(p).expect("md").permissions().mode() & 0o777;
        assert_eq!(mode(&sub), 0o700);
        assert_eq!(mode(&d.path().join("a")), 0o700);
        let f = sub.join("log");
        open_private(&f, true).expect("open");
        assert_eq!(mode(&f), 0o600);
        let s = sub.join("state.json");
        write_atomic(&s, b"{}").expect("write");
        assert_eq!(mode(&s), 0o600);
        assert_eq!(std::fs::read(&s).expect("read"), b"{}");
    }
}
