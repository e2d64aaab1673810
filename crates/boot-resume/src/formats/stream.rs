//! Reading a source line by line within [`Limits`]: memory is bounded by the line limit,
//! never by the file. Only regular files are opened (a FIFO or a device is refused before it
//! could block or run forever); every byte read is hashed (SHA-256), so the provenance of an
//! import covers exactly what was read. Damaged bytes are read by the rule the scan reads
//! them by ([`crate::damage`]): a byte order mark read through, NUL debris cut (it ends the
//! line before it), invalid UTF-8 replaced; [`Lines::damage`] says what was.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Limits, ReadError};
use crate::damage::Damage;

/// One line of a source (without its `\n`).
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub bytes: &'a [u8],
    /// 1-based line number.
    pub number: u64,
    /// Byte offset of the line's start.
    pub offset: u64,
    /// False for a last line with no `\n` (a write may have been cut short).
    pub terminated: bool,
}

/// The lines of one file, streamed.
pub struct Lines {
    path: PathBuf,
    reader: BufReader<File>,
    limits: Limits,
    /// The raw line read last.
    buf: Vec<u8>,
    /// It as the damage rule reads it, and the pieces of it not handed out yet (start, end),
    /// last first.
    fixed: Vec<u8>,
    pieces: Vec<(usize, usize)>,
    /// The raw line's number, offset and whether it ended with `\n`.
    current: (u64, u64, bool),
    damage: Damage,
    hasher: Sha256,
    read: u64,
    number: u64,
    done: bool,
}

/// Refuses anything but a regular file, without opening it (opening a FIFO with no writer
/// blocks).
pub fn check_regular(path: &Path) -> Result<std::fs::Metadata, ReadError> {
    let meta = std::fs::metadata(path).map_err(|e| ReadError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    let kind = if ft.is_file() {
        return Ok(meta);
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(ReadError::NotRegular {
        path: path.to_path_buf(),
        kind,
    })
}

impl Lines {
    /// Opens `path` (a regular file; refused otherwise, before it is opened).
    pub fn open(path: &Path, limits: &Limits) -> Result<Self, ReadError> {
        let meta = check_regular(path)?;
        if meta.len() > limits.file_bytes {
            return Err(ReadError::FileTooLarge {
                path: path.to_path_buf(),
                limit: limits.file_bytes,
            });
        }
        let io = |e| ReadError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        // O_NONBLOCK: if the path was swapped for a FIFO since the check, the open cannot
        // hang; the type is checked again on the handle.
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .map_err(io)?;
        if !file.metadata().map_err(io)?.file_type().is_file() {
            return Err(ReadError::NotRegular {
                path: path.to_path_buf(),
                kind: "replaced by something else while opening",
            });
        }
        Ok(Lines {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(64 << 10, file),
            limits: *limits,
            buf: Vec::new(),
            fixed: Vec::new(),
            pieces: Vec::new(),
            current: (0, 0, true),
            damage: Damage::default(),
            hasher: Sha256::new(),
            read: 0,
            number: 0,
            done: false,
        })
    }

    /// The path being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next non-blank line, or `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, ReadError> {
        loop {
            if let Some((a, b)) = self.pieces.pop() {
                let (number, offset, terminated) = self.current;
                return Ok(Some(Line {
                    bytes: &self.fixed[a..b],
                    number,
                    offset,
                    // only the last piece of a last line without `\n` may be a torn write
                    // at the end; a piece cut short by debris before more data is damage in
                    // the middle
                    terminated: terminated || !self.pieces.is_empty(),
                }));
            }
            if self.done {
                return Ok(None);
            }
            self.buf.clear();
            let offset = self.read;
            let terminated = self.fill_line(offset)?;
            self.number += 1;
            self.current = (self.number, offset, terminated);
            self.split_pieces(offset == 0, terminated);
            for &(a, b) in &self.pieces {
                self.check_line(&self.fixed[a..b], offset)?;
            }
        }
    }

    /// What the damage rule cut or replaced so far.
    pub fn damage(&self) -> Damage {
        self.damage
    }

    /// The raw line in `buf` as the damage rule reads it, split into its non-blank pieces
    /// (more than one when NUL debris cut it).
    fn split_pieces(&mut self, at_start: bool, terminated: bool) {
        // a last line cut inside a character is a torn write, not an invalid sequence
        let torn_char =
            !terminated && std::str::from_utf8(&self.buf).is_err_and(|e| e.error_len().is_none());
        let (fixed, mut d) = crate::damage::repair(&self.buf, at_start);
        if torn_char {
            d.invalid_utf8 = d.invalid_utf8.saturating_sub(1);
        }
        self.damage.add(d);
        self.fixed.clear();
        self.fixed.extend_from_slice(&fixed);
        self.pieces.clear();
        let mut start = 0;
        let n = self.fixed.len();
        for end in memchr::memchr_iter(b'\n', &self.fixed).chain(std::iter::once(n)) {
            let piece = &self.fixed[start..end];
            if !piece.iter().all(|b| b.is_ascii_whitespace()) {
                self.pieces.push((start, end));
            }
            start = end + 1;
        }
        self.pieces.reverse();
    }

    /// Reads one line into `buf`; true when it ended with `\n`.
    fn fill_line(&mut self, offset: u64) -> Result<bool, ReadError> {
        loop {
            let avail = match self.reader.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(ReadError::Io {
                        path: self.path.clone(),
                        source: e,
                    });
                }
            };
            if avail.is_empty() {
                self.done = true;
                return Ok(false);
            }
            let (take, found) = match memchr::memchr(b'\n', avail) {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            let body = if found { take - 1 } else { take };
            if self.buf.len() + body > self.limits.line_bytes {
                return Err(ReadError::LineTooLong {
                    path: self.path.clone(),
                    line: self.number + 1,
                    offset,
                    limit: self.limits.line_bytes,
                });
            }
            self.buf.extend_from_slice(&avail[..body]);
            self.hasher.update(&avail[..take]);
            self.read += take as u64;
            self.reader.consume(take);
            if self.read > self.limits.file_bytes {
                return Err(ReadError::FileTooLarge {
                    path: self.path.clone(),
                    limit: self.limits.file_bytes,
                });
            }
            if found {
                return Ok(true);
            }
        }
    }

    fn check_line(&self, line_bytes: &[u8], offset: u64) -> Result<(), ReadError> {
        if depth_exceeds(line_bytes, self.limits.depth) {
            return Err(ReadError::TooDeep {
                path: self.path.clone(),
                line: self.number,
                offset,
                limit: self.limits.depth,
            });
        }
        Ok(())
    }

    /// Bytes read and their SHA-256 (lowercase hex).
    pub fn digest(&self) -> (u64, String) {
        (self.read, hex(&self.hasher.clone().finalize()))
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Whether JSON text nests arrays and objects deeper than `limit` (strings skipped).
pub fn depth_exceeds(text: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for &b in text {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_only_outside_strings() {
        assert!(!depth_exceeds(br#"{"a":"[[[[[[["}"#, 2));
        assert!(depth_exceeds(b"[[[]]]", 2));
        assert!(!depth_exceeds(br#"{"a":"\"[[[["}"#, 1));
    }
}
