//! Reading a source line by line within [`Limits`]: memory is bounded by the line limit,
//! never by the file. Only regular files are opened (a FIFO or a device is refused before it
//! could block or run forever); every byte read is hashed (SHA-256), so the provenance of an
//! import covers exactly what was read.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Limits, ReadError};

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
    buf: Vec<u8>,
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
            if self.done {
                return Ok(None);
            }
            self.buf.clear();
            let offset = self.read;
            let terminated = self.fill_line(offset)?;
            self.number += 1;
            if self.buf.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            self.check_line(offset, terminated)?;
            return Ok(Some(Line {
                bytes: &self.buf,
                number: self.number,
                offset,
                terminated,
            }));
        }
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

    fn check_line(&self, offset: u64, terminated: bool) -> Result<(), ReadError> {
        let line = self.number;
        let binary = |what| ReadError::Binary {
            path: self.path.clone(),
            line,
            offset,
            what,
        };
        if memchr::memchr(0, &self.buf).is_some() {
            return Err(binary("it holds NUL bytes"));
        }
        if let Err(e) = std::str::from_utf8(&self.buf) {
            // a last line cut inside a character is a torn write, not binary data
            if terminated || e.error_len().is_some() {
                return Err(binary("invalid UTF-8"));
            }
        }
        if depth_exceeds(&self.buf, self.limits.depth) {
            return Err(ReadError::TooDeep {
                path: self.path.clone(),
                line,
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
