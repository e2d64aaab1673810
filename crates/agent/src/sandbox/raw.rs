//! Raw helpers for the code that runs between fork and exec (no allocation).

/// Writes all of `data` to `fd` (raw calls; errors ignored: it is a diagnostic).
pub(crate) fn write_all(fd: libc::c_int, mut data: &[u8]) {
    while !data.is_empty() {
        // SAFETY: a valid buffer.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n <= 0 {
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            return;
        }
        data = &data[n as usize..];
    }
}

/// Decimal digits of `n` into `buf`; returns the used tail.
pub(crate) fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

fn errno() -> libc::c_int {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}
