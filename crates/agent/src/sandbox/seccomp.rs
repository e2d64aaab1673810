//! The call's seccomp filters, compiled once per process with `seccompiler` (rust-vmm).
//!
//! - [`REFUSED`]: system calls a build or a test never needs, answered `EPERM`: attaching to
//!   other processes (`ptrace` `PTRACE_ATTACH`/`PTRACE_SEIZE`, `process_vm_*`,
//!   `pidfd_getfd`), `bpf`, `perf_event_open`, `userfaultfd`, keys, mounts, clock and time
//!   setting, host and domain names, kernel modules, `kexec`, `reboot`, swap, the kernel log
//!   (`syslog`), file handles (`open_by_handle_at`), `acct`, `quotactl`, I/O ports; `mknod`
//!   of character and block devices; Unix *datagram* sockets (`socket`/`socketpair` of
//!   `AF_UNIX` with `SOCK_DGRAM` or `SOCK_RAW`: a datagram can be sent to any socket path,
//!   which the connect gate below could not see); `ioctl` `TIOCSTI` and `TIOCLINUX` (typing
//!   into a terminal, pasting its selection as input).
//! - `io_uring_*` answered `ENOSYS` (programs fall back to plain system calls): io_uring's
//!   operations are not seen by seccomp.
//! - A third, hand-written filter hands every `connect` to the sandbox's init (a seccomp user
//!   notification, see [`super::gate`]) and refuses the x32 system-call numbers; `seccompiler`
//!   has no user-notification action. Any other architecture's calls kill the process.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// The filters a call installs, in order.
#[derive(Debug)]
pub(crate) struct Filters {
    pub(crate) refused: BpfProgram,
    pub(crate) nosys: BpfProgram,
    pub(crate) notify: BpfProgram,
}

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// System calls refused outright (any arguments).
pub const REFUSED: &[(&str, libc::c_long)] = &[
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("settimeofday", libc::SYS_settimeofday),
    ("adjtimex", libc::SYS_adjtimex),
    ("sethostname", libc::SYS_sethostname),
    ("setdomainname", libc::SYS_setdomainname),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("syslog", libc::SYS_syslog),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("vhangup", libc::SYS_vhangup),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl),
];

/// System calls answered `ENOSYS`.
pub const NOT_IMPLEMENTED: &[(&str, libc::c_long)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
];

/// `ioctl` requests refused, whatever the descriptor: they make a terminal read input
/// nobody typed. (`libc::Ioctl` is `c_ulong` on glibc and `c_int` on musl.)
#[allow(clippy::unnecessary_cast)]
pub const TTY_IOCTLS: &[(&str, u64)] = &[
    ("TIOCSTI", libc::TIOCSTI as u64),
    ("TIOCLINUX", libc::TIOCLINUX as u64),
];

const PTRACE_ATTACH: u64 = 16;
const PTRACE_SEIZE: u64 = 0x4206;

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conds).map_err(|e| e.to_string())
}

/// Rules of the `EPERM` filter that look at arguments.
fn argument_rules() -> Result<Vec<(libc::c_long, Vec<SeccompRule>)>, String> {
    let fmt = libc::S_IFMT as u64;
    let mut out = Vec::new();
    out.push((
        libc::SYS_ptrace,
        vec![
            rule(vec![cond(0, SeccompCmpOp::Eq, PTRACE_ATTACH)?])?,
            rule(vec![cond(0, SeccompCmpOp::Eq, PTRACE_SEIZE)?])?,
        ],
    ));
    // mode is argument 1 of mknod, 2 of mknodat
    let device_rules = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        Ok(vec![
            rule(vec![cond(
                arg,
                SeccompCmpOp::MaskedEq(fmt),
                libc::S_IFCHR as u64,
            )?])?,
            rule(vec![cond(
                arg,
                SeccompCmpOp::MaskedEq(fmt),
                libc::S_IFBLK as u64,
            )?])?,
        ])
    };
    #[cfg(target_arch = "x86_64")]
    out.push((libc::SYS_mknod, device_rules(1)?));
    out.push((libc::SYS_mknodat, device_rules(2)?));
    // Unix datagram sockets: type (argument 1, less SOCK_NONBLOCK/SOCK_CLOEXEC) DGRAM or RAW
    let dgram = || -> Result<Vec<SeccompRule>, String> {
        let mut rules = Vec::new();
        for ty in [libc::SOCK_DGRAM, libc::SOCK_RAW] {
            rules.push(rule(vec![
                cond(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?,
                cond(1, SeccompCmpOp::MaskedEq(0xf), ty as u64)?,
            ])?);
        }
        Ok(rules)
    };
    out.push((libc::SYS_socket, dgram()?));
    out.push((libc::SYS_socketpair, dgram()?));
    // a terminal's input queue (TIOCSTI: type into it) and the Linux console's selection
    // (TIOCLINUX: paste it back as input). The kernel reads the request as an `unsigned
    // int`, so the low 32 bits are compared (`Dword`): high bits set cannot slip past.
    out.push((
        libc::SYS_ioctl,
        TTY_IOCTLS
            .iter()
            .map(|(_, req)| rule(vec![cond(1, SeccompCmpOp::Eq, *req)?]))
            .collect::<Result<_, _>>()?,
    ));
    Ok(out)
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        ARCH,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

const fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// `connect` → user notification; x32 numbers → `EPERM`; another architecture → kill.
fn notify_program() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET_K: u16 = 0x06;
    const X32_BIT: u32 = 0x4000_0000;
    vec![
        stmt(LD_W_ABS, 4), // arch
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, 0), // nr
        jump(JSET_K, X32_BIT, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        jump(JEQ_K, libc::SYS_connect as u32, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Compiles the three filters.
pub(crate) fn build() -> Result<Filters, String> {
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, nr) in REFUSED {
        refused.insert(*nr, Vec::new());
    }
    for (nr, rules) in argument_rules()? {
        refused.insert(nr, rules);
    }
    let nosys: BTreeMap<i64, Vec<SeccompRule>> = NOT_IMPLEMENTED
        .iter()
        .map(|(_, nr)| (*nr, Vec::new()))
        .collect();
    Ok(Filters {
        refused: compile(refused, libc::EPERM).map_err(|e| format!("seccomp filter: {e}"))?,
        nosys: compile(nosys, libc::ENOSYS).map_err(|e| format!("seccomp filter: {e}"))?,
        notify: notify_program(),
    })
}

/// Installs `prog` on the calling thread (raw system call: safe between fork and exec).
/// Returns the new descriptor with `SECCOMP_FILTER_FLAG_NEW_LISTENER`, else 0.
///
/// # Safety
/// Async-signal-safe; `prog` must be a valid program.
pub(crate) unsafe fn install(prog: &[sock_filter], flags: libc::c_ulong) -> std::io::Result<i32> {
    #[repr(C)]
    struct SockFprog {
        len: libc::c_ushort,
        filter: *const sock_filter,
    }
    let fprog = SockFprog {
        len: prog.len() as libc::c_ushort,
        filter: prog.as_ptr(),
    };
    // SAFETY: the kernel copies the program; `fprog` outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const SockFprog,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

/// Whether this kernel's seccomp notification structures are the ones compiled in (the
/// ioctl numbers encode their sizes).
pub(crate) fn notif_sizes_match() -> Result<(), String> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: the kernel fills the struct.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        )
    };
    if r != 0 {
        return Err(format!(
            "this kernel has no seccomp user notification (Linux 5.0+): {}",
            std::io::Error::last_os_error()
        ));
    }
    let want = (
        std::mem::size_of::<libc::seccomp_notif>(),
        std::mem::size_of::<libc::seccomp_notif_resp>(),
    );
    let got = (
        sizes.seccomp_notif as usize,
        sizes.seccomp_notif_resp as usize,
    );
    if want != got {
        return Err(format!(
            "this kernel's seccomp notification structures ({got:?} bytes) differ from the ones compiled in ({want:?})"
        ));
    }
    Ok(())
}
