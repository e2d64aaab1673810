//! Opening files safely: every file boot-resume reads or writes (session logs, OpenClaw
//! databases, its state, lock and decision log) must be a regular file reached without
//! following a final symlink, and opening it must never block. A FIFO or a symlink to
//! `/dev/zero` named like a session log is refused, not read.
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// Opens `path` for reading: `O_NOFOLLOW | O_NONBLOCK`, then requires a regular file (the
/// ledger's file layer, shared by everything Lazarus opens).
pub fn open_regular(path: &Path) -> io::Result<File> {
    lazarus_ledger::fs::open_regular(path, false, false).map_err(|e| name(path, e))
}

/// Puts the path into the error, so a refused file is named.
fn name(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
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
    lazarus_ledger::fs::open_private(path, append).map_err(|e| name(path, e))
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

/// Writes `bytes` to `path` atomically and durably (0600 when new), through the one atomic
/// file replacement Lazarus has ([`lazarus_ledger::durable_replace`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    private_dir(dir)?;
    let opts = lazarus_ledger::durable_replace::ReplaceOptions {
        refuse_symlinks: true,
        ..Default::default()
    };
    lazarus_ledger::durable_replace::replace_file(path, bytes, &opts).map_err(|e| name(path, e))
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
