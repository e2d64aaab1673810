//! The connect gate: every `connect` of a confined command is a seccomp user notification
//! answered by the call's init, which makes the connection itself, on the command's own
//! socket, from inside the same sandbox (same Landlock domain, network namespace and mount
//! namespace: TCP and abstract sockets are judged exactly as the kernel would judge the
//! command).
//!
//! For a Unix socket given by path, the path is resolved once, in the command's working
//! directory, to a pinned `O_PATH` descriptor; the socket it names is allowed only if its real
//! path lies beneath an allowed directory (the workspace, the call's private directory, the
//! operator's `--sandbox-allow-unix-socket` paths); the connection is then made to that very
//! inode (`/proc/self/fd/N`), so a path swapped in between cannot redirect it. Anything else
//! gets `EACCES`, as a file the user may not write would.
//!
//! Deciding never trusts what the command can still change: the address is copied out of
//! its memory once, the socket is the command's own open file (`pidfd_getfd`), and the
//! notification is checked to be still pending after both. Each notification is answered in
//! a child of the init (the connection may block), which counts against the call's process
//! bound.

use std::io;

use super::raw::itoa;

/// What the gate allows: real paths (no trailing `/`) beneath which Unix sockets may be
/// connected to.
#[derive(Debug, Clone, Default)]
pub(crate) struct GatePlan {
    pub(crate) allowed: Vec<Vec<u8>>,
}

impl GatePlan {
    fn allows(&self, real: &[u8]) -> bool {
        self.allowed.iter().any(|a| {
            real == a.as_slice()
                || (real.len() > a.len() && real.starts_with(a) && real[a.len()] == b'/')
                || a.as_slice() == b"/"
        })
    }
}

fn errno() -> libc::c_int {
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Sends descriptor `fd` over the Unix socket `sock` (raw calls).
pub(crate) fn send_fd(sock: libc::c_int, fd: libc::c_int) -> io::Result<()> {
    // SAFETY: a message with one SCM_RIGHTS control record, built on the stack.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cbuf = [0u64; 4]; // CMSG_SPACE(sizeof(int)) = 24 bytes, aligned
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd);
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives one descriptor sent with [`send_fd`].
pub(crate) fn recv_fd(sock: libc::c_int) -> Option<libc::c_int> {
    // SAFETY: as in `send_fd`.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cbuf = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        loop {
            let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n != 1 {
                return None;
            }
            break;
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return None;
        }
        Some(std::ptr::read_unaligned(
            libc::CMSG_DATA(c).cast::<libc::c_int>(),
        ))
    }
}

fn respond(listener: libc::c_int, id: u64, error: libc::c_int) {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: if error == 0 { 0 } else { -error },
        flags: 0,
    };
    // SAFETY: a valid response struct.
    unsafe {
        libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
    }
}

fn still_pending(listener: libc::c_int, id: u64) -> bool {
    let mut id = id;
    // SAFETY: a valid u64.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) == 0 }
}

/// Receives one notification and answers it in a child process (the init goes on at once).
pub(crate) fn serve(listener: libc::c_int, plan: &GatePlan) {
    // SAFETY: the kernel fills a zeroed notification; fork in a single-threaded process.
    unsafe {
        let mut n: libc::seccomp_notif = std::mem::zeroed();
        if libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) != 0 {
            return;
        }
        let helper = libc::fork();
        if helper == 0 {
            let error = decide(listener, &n, plan);
            respond(listener, n.id, error);
            libc::_exit(0);
        }
        if helper < 0 {
            respond(listener, n.id, libc::EAGAIN);
        }
    }
}

/// `prefix` followed by the decimal `n` and `suffix`, NUL-terminated, into `buf`.
fn proc_path<'a>(buf: &'a mut [u8; 64], prefix: &[u8], n: u64, suffix: &[u8]) -> &'a [u8] {
    let mut digits = [0u8; 20];
    let d = itoa(n, &mut digits);
    let len = prefix.len() + d.len() + suffix.len();
    buf[..prefix.len()].copy_from_slice(prefix);
    buf[prefix.len()..prefix.len() + d.len()].copy_from_slice(d);
    buf[prefix.len() + d.len()..len].copy_from_slice(suffix);
    buf[len] = 0;
    &buf[..=len]
}

/// Makes the connection the notification asks for, if allowed; returns 0 or an errno.
fn decide(listener: libc::c_int, n: &libc::seccomp_notif, plan: &GatePlan) -> libc::c_int {
    const SOCKADDR_MAX: usize = 128; // sizeof(struct sockaddr_storage)
    let target_fd = n.data.args[0] as libc::c_int;
    let len = (n.data.args[2] & 0xffff_ffff) as usize;
    if len > SOCKADDR_MAX {
        return libc::EINVAL;
    }
    let mut addr = [0u8; SOCKADDR_MAX + 1];
    // SAFETY: raw system calls on buffers of this stack frame.
    unsafe {
        if len > 0 {
            let local = libc::iovec {
                iov_base: addr.as_mut_ptr().cast(),
                iov_len: len,
            };
            let remote = libc::iovec {
                iov_base: n.data.args[1] as *mut libc::c_void,
                iov_len: len,
            };
            if libc::process_vm_readv(n.pid as libc::pid_t, &local, 1, &remote, 1, 0)
                != len as isize
            {
                return libc::EFAULT;
            }
        }
        if !still_pending(listener, n.id) {
            return libc::ESRCH;
        }
        let pidfd = libc::syscall(libc::SYS_pidfd_open, n.pid as libc::pid_t, 0u32) as libc::c_int;
        if pidfd < 0 {
            return libc::ESRCH;
        }
        let sock = libc::syscall(libc::SYS_pidfd_getfd, pidfd, target_fd, 0u32) as libc::c_int;
        if sock < 0 {
            return errno();
        }
        if !still_pending(listener, n.id) {
            return libc::ESRCH;
        }
        let family = u16::from_ne_bytes([addr[0], addr[1]]);
        let pathname = family == libc::AF_UNIX as u16 && len > 2 && addr[2] != 0;
        let r = if pathname {
            match pin_allowed(n.pid, &addr[2..len], plan) {
                Err(e) => return e,
                Ok(pin) => {
                    let mut sa: libc::sockaddr_un = std::mem::zeroed();
                    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
                    let mut buf = [0u8; 64];
                    let p = proc_path(&mut buf, b"/proc/self/fd/", pin as u64, b"");
                    for (i, b) in p.iter().enumerate() {
                        sa.sun_path[i] = *b as libc::c_char;
                    }
                    let sa_len = std::mem::size_of::<libc::sa_family_t>() + p.len();
                    libc::connect(
                        sock,
                        (&sa as *const libc::sockaddr_un).cast(),
                        sa_len as u32,
                    )
                }
            }
        } else {
            libc::connect(sock, addr.as_ptr().cast(), len as u32)
        };
        if r == 0 { 0 } else { errno() }
    }
}

/// Resolves the socket path `raw` (bytes of `sun_path`) as process `pid` would, pins it, and
/// returns the pinned descriptor if its real path is allowed.
fn pin_allowed(pid: u32, raw: &[u8], plan: &GatePlan) -> Result<libc::c_int, libc::c_int> {
    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    let mut path = [0u8; 128];
    if end >= path.len() {
        return Err(libc::ENAMETOOLONG);
    }
    path[..end].copy_from_slice(&raw[..end]);
    // SAFETY: NUL-terminated buffers on this stack frame.
    unsafe {
        let dir = if path[0] == b'/' {
            libc::AT_FDCWD
        } else {
            let mut buf = [0u8; 64];
            let cwd = proc_path(&mut buf, b"/proc/", pid as u64, b"/cwd");
            let fd = libc::open(
                cwd.as_ptr().cast(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return Err(libc::ESRCH);
            }
            fd
        };
        let pin = libc::openat(dir, path.as_ptr().cast(), libc::O_PATH | libc::O_CLOEXEC);
        if pin < 0 {
            return Err(errno());
        }
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(pin, &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err(libc::ECONNREFUSED);
        }
        let mut buf = [0u8; 64];
        let link = proc_path(&mut buf, b"/proc/self/fd/", pin as u64, b"");
        let mut real = [0u8; 4096];
        let got = libc::readlink(link.as_ptr().cast(), real.as_mut_ptr().cast(), real.len());
        if got <= 0 || got as usize >= real.len() {
            return Err(libc::EACCES);
        }
        if !plan.allows(&real[..got as usize]) {
            return Err(libc::EACCES);
        }
        Ok(pin)
    }
}
