//! The attacks, in the order the hostile model runs them.

use super::*;

/// Every attack against `f`; `max_processes` is the bound the run was given.
pub fn attacks(f: &Fixture, max_processes: u32) -> Vec<Attack> {
    let py = &f.python;
    let out = f.outside.display();
    let other_pid = f.other.id();
    let sock = f.unix_path.display();
    let dgram = f.dgram_path.display();
    let abs = &f.abstract_name;
    let port = f.tcp.local_addr().unwrap().port();
    let sessions = f.sessions.display();
    let state = f.state.display();
    let shm = f.shm_id;
    let marker = &f.marker;
    let connect = |target: &str| {
        format!(
            "{py} -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect({target}); print(\"ATTACK-OK connected\")'"
        )
    };
    vec![
        attack(
            "read /proc/*/environ and cmdline",
            "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null".into(),
            no_canary,
        ),
        attack(
            "see the host's processes",
            format!("n=$(ls -d /proc/[0-9]* | wc -l); echo processes=$n; [ $n -gt 20 ] && echo ATTACK-OK saw $n; [ -e /proc/{other_pid}/cmdline ] && grep -q canary /proc/{other_pid}/cmdline && echo ATTACK-OK other process"),
            ok_marker,
        ),
        attack(
            "open the init's memory (/proc/1/mem)",
            format!("{py} -c \"open('/proc/1/mem','rb'); print('ATTACK-OK')\""),
            ok_marker,
        ),
        attack(
            "keep capabilities",
            "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; grep NoNewPrivs /proc/self/status".into(),
            |_, out| {
                let bad: Vec<&str> = out
                    .lines()
                    .filter(|l| l.starts_with("Cap") && !l.ends_with("0000000000000000"))
                    .collect();
                if !bad.is_empty() {
                    return Err(format!("capabilities left: {bad:?}"));
                }
                if !out.lines().any(|l| l.starts_with("NoNewPrivs:") && l.ends_with('1')) {
                    return Err(format!("no_new_privs not set: {out}"));
                }
                Ok(())
            },
        ),
        attack(
            "share the host's namespaces",
            "for n in pid mnt uts ipc cgroup net; do echo \"ns $n $(readlink /proc/self/ns/$n)\"; done".into(),
            |_, out| {
                let shared: Vec<String> = ["pid", "mnt", "uts", "ipc", "cgroup", "net"]
                    .iter()
                    .filter(|n| out.contains(&format!("ns {n} {}", host_ns(n))))
                    .map(|n| n.to_string())
                    .collect();
                if !out.contains("ns pid ") {
                    return Err(format!("no namespace listing: {out}"));
                }
                if shared.is_empty() { Ok(()) } else { Err(format!("shared with the host: {shared:?}")) }
            },
        ),
        attack(
            "set the clock (clock_settime)",
            format!("{py} -c 'import time; time.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME)); print(\"ATTACK-OK\")'"),
            ok_marker,
        ),
        attack(
            "set the host name",
            "hostname lazarus-pwned && echo ATTACK-OK".into(),
            |f, out| {
                let now = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
                if now.trim() != f.host_hostname {
                    let _ = std::fs::write("/proc/sys/kernel/hostname", &f.host_hostname);
                    return Err("the host's name changed".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "remove a host shared-memory segment (ipcrm)",
            format!("ipcs -m | grep -w {shm} && echo ATTACK-OK visible; ipcrm -m {shm} && echo ATTACK-OK removed"),
            |f, out| {
                if !shm_exists(f.shm_id) {
                    return Err("the host's segment is gone".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "read the kernel log (dmesg)",
            "dmesg -S 2>/dev/null | head -1 | grep -q . && echo ATTACK-OK syslog; timeout 2 head -c 64 /dev/kmsg 2>/dev/null | grep -q . && echo ATTACK-OK kmsg; true".into(),
            ok_marker,
        ),
        attack(
            "make device nodes (mknod)",
            "mknod ./devmem c 1 1 && echo ATTACK-OK char; mknod ./disk b 254 0 && echo ATTACK-OK block; true".into(),
            |f, out| {
                use std::os::unix::fs::FileTypeExt;
                for n in ["devmem", "disk"] {
                    if let Ok(m) = std::fs::symlink_metadata(f.ws.join(n))
                        && (m.file_type().is_char_device() || m.file_type().is_block_device())
                    {
                        return Err(format!("{n} is a device node"));
                    }
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "read a raw disk",
            "for d in /dev/vda /dev/sda /dev/nvme0n1 /dev/xvda /dev/mmcblk0; do [ -b $d ] && head -c 4096 $d 2>/dev/null | wc -c | grep -qx 4096 && echo ATTACK-OK $d; done; true".into(),
            ok_marker,
        ),
        attack(
            "write a kernel setting (/proc/sys)",
            "echo 1 > /proc/sys/vm/drop_caches && echo ATTACK-OK".into(),
            ok_marker,
        ),
        attack(
            "refused system calls (keys, perf, ptrace, bpf, userfaultfd, io_uring)",
            format!("{py} -c '{}'", SYSCALLS.replace('\'', "\"")),
            ok_marker,
        ),
        attack(
            "read credentials (~/.ssh)",
            "cat ~/.ssh/id_ed25519".into(),
            no_canary,
        ),
        attack(
            "read credentials through symbolic links (~/.kube, ~/.pgpass)",
            "cat ~/.kube/config; cat ~/.pgpass; cat ~/.kube/../pgpass".into(),
            no_canary,
        ),
        attack(
            "read the system's password hashes and SSH host keys",
            "cat /etc/shadow /etc/gshadow /etc/ssh/ssh_host_*_key 2>&1; grep -c . /etc/shadow && echo ATTACK-OK".into(),
            |f, out| {
                if out.contains("root:") || out.contains("PRIVATE KEY") {
                    return Err("read them".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "read another session's ledger",
            format!("grep -r canary {sessions}; cat {sessions}/*"),
            no_canary,
        ),
        attack(
            "read the gateway token",
            format!("cat {state}/lazarus/gateway.token"),
            no_canary,
        ),
        attack(
            "credentials in the environment",
            "env".into(),
            no_canary,
        ),
        attack(
            "connect to a Unix socket outside the workspace",
            connect(&format!("\"{sock}\"")),
            |f, out| {
                if wait_until(|| f.unix.accept().is_ok()) {
                    return Err("the listener accepted".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "connect to it through a symbolic link in the workspace",
            format!("ln -sf {sock} ./inside.sock && {}", connect("\"./inside.sock\"")),
            |f, out| {
                if wait_until(|| f.unix.accept().is_ok()) {
                    return Err("the listener accepted".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "send a datagram to a Unix socket outside",
            format!("{py} -c 'import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b\"x\", \"{dgram}\"); print(\"ATTACK-OK\")'"),
            |f, out| {
                let mut b = [0u8; 8];
                if wait_until(|| f.dgram.recv(&mut b).is_ok()) {
                    return Err("the socket received the datagram".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "connect to a host abstract Unix socket",
            connect(&format!("\"\\0{abs}\"")),
            |f, out| {
                if wait_until(|| f.abstract_listener.accept().is_ok()) {
                    return Err("the listener accepted".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "connect over TCP to the host",
            format!("{py} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=3); print(\"ATTACK-OK\")'"),
            |f, out| {
                if wait_until(|| f.tcp.accept().is_ok()) {
                    return Err("the listener accepted".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "start processes without bound (fork bomb)",
            format!("rm -f forks; (i=0; while [ $i -lt {n} ]; do sleep 30 & i=$((i+1)); echo $i > forks; done) 2>/dev/null; read n < forks; echo forks=$n", n = max_processes * 2),
            move |_, out| {
                let n: u32 = out
                    .lines()
                    .find_map(|l| l.strip_prefix("forks="))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if n == 0 { return Err(format!("no process started at all: {out}")); }
                if n >= max_processes { Err(format!("{n} processes started (bound {max_processes})")) } else { Ok(()) }
            },
        ),
        attack(
            "start threads without bound",
            format!("{py} -c '{}'", THREADS.replace("LIMIT", &(max_processes * 2).to_string())),
            move |_, out| {
                let n: u32 = out
                    .lines()
                    .find_map(|l| l.strip_prefix("threads="))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(u32::MAX);
                if n >= max_processes { Err(format!("{n} threads started (bound {max_processes}): {out}")) } else { Ok(()) }
            },
        ),
        attack(
            "signal a host process",
            format!("kill -TERM {other_pid} && echo ATTACK-OK"),
            |f, out| {
                let path = format!("/proc/{}", f.other.id());
                let state = std::fs::read_to_string(format!("{path}/stat")).unwrap_or_default();
                if !Path::new(&path).exists() || state.contains(") Z") {
                    return Err("the host process was killed".into());
                }
                ok_marker(f, out)
            },
        ),
        attack(
            "write outside the workspace",
            format!("echo pwned > {out}/written"),
            |f, _| if f.outside.join("written").exists() { Err("file written".into()) } else { Ok(()) },
        ),
        attack(
            "write outside through symbolic links",
            format!("ln -sf {out}/existing ./l1; echo pwned >> ./l1; ln -sfn {out} ./l2; touch ./l2/via-link"),
            |f, _| {
                if std::fs::read_to_string(f.outside.join("existing")).unwrap() != "original" || f.outside.join("via-link").exists() {
                    return Err("written through a link".into());
                }
                Ok(())
            },
        ),
        attack(
            "escape through /proc/*/root",
            format!("echo pwned > /proc/self/root{out}/via-root; echo pwned > /proc/1/root{out}/via-root1; cat /proc/1/root$HOME/.ssh/id_ed25519"),
            |f, out| {
                if f.outside.join("via-root").exists() || f.outside.join("via-root1").exists() {
                    return Err("written through /proc/*/root".into());
                }
                no_canary(f, out)
            },
        ),
        attack(
            "hard links to credentials and outside files",
            format!("ln ~/.ssh/id_ed25519 ./h1 && cat ./h1; ln {out}/existing ./h2 && echo pwned >> ./h2"),
            |f, out| {
                if std::fs::read_to_string(f.outside.join("existing")).unwrap() != "original" {
                    return Err("outside file changed through a hard link".into());
                }
                no_canary(f, out)
            },
        ),
        attack(
            "write the host's /dev/shm",
            format!("echo pwned > /dev/shm/{marker}"),
            |f, _| {
                let p = Path::new("/dev/shm").join(&f.marker);
                if p.exists() {
                    let _ = std::fs::remove_file(&p);
                    return Err("wrote the host's /dev/shm".into());
                }
                Ok(())
            },
        ),
        attack(
            "mount file systems",
            "mkdir -p m; mount -t tmpfs none ./m && echo ATTACK-OK tmpfs; mount --bind / ./m && echo ATTACK-OK bind; true".into(),
            ok_marker,
        ),
        attack(
            "escape with unshare (new user and mount namespace)",
            format!("unshare -Urm sh -c 'mount -t tmpfs none {out} && echo ATTACK-OK mounted; echo pwned > {out}/via-unshare; cat $HOME/.ssh/id_ed25519'; true"),
            |f, out| {
                if f.outside.join("via-unshare").exists() {
                    return Err("wrote outside after unshare".into());
                }
                no_canary(f, out)
            },
        ),
        attack(
            "leave processes behind (setsid, double fork)",
            format!("rm -f up1 up2; setsid sh -c 'echo > up1; sleep 1000; : {marker}' >/dev/null 2>&1 & (nohup sh -c 'echo > up2; sleep 1000; : {marker}' >/dev/null 2>&1 &); n=0; while [ ! -e up1 ] || [ ! -e up2 ]; do n=$((n+1)); [ $n -gt 3000 ] && break; sleep 0.01; done; echo started"),
            |f, _| {
                if wait_until(|| processes_with(&format!("sleep 1000; : {}", f.marker)).is_empty()) {
                    Ok(())
                } else {
                    let left = processes_with(&format!("sleep 1000; : {}", f.marker));
                    for pid in &left {
                        let _ = rustix::process::kill_process(rustix::process::Pid::from_raw(*pid).unwrap(), rustix::process::Signal::KILL);
                    }
                    Err(format!("processes outlived the call: {left:?}"))
                }
            },
        ),
        attack(
            "flood the runner with 2 GB of output",
            "head -c 2147483648 /dev/zero; echo end-of-flood".into(),
            |_, out| {
                if out.len() > 1024 * 1024 {
                    return Err(format!("{} bytes kept", out.len()));
                }
                if !out.contains("bytes of output cut") {
                    return Err(format!("no cut marker: {}", &out[out.len().saturating_sub(200)..]));
                }
                Ok(())
            },
        ),
    ]
}

/// Each refused call, tried; prints `ATTACK-OK name` for any that succeeded.
const SYSCALLS: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
sc = libc.syscall
sc.restype = ctypes.c_long
def tried(name, r):
    print(("ATTACK-OK " if r >= 0 else "refused ") + name, ctypes.get_errno())
tried("add_key", sc(248, b"user", b"canary", b"x", 1, -2))
tried("keyctl", sc(250, 0, -2, 0, 0, 0))
attr = (ctypes.c_uint8 * 128)()
ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 128), 8)
ctypes.memmove(ctypes.byref(attr, 40), (ctypes.c_uint64 * 1)(0x60), 8)
tried("perf_event_open", sc(298, attr, 0, -1, -1, 0))
tried("ptrace_attach_init", sc(101, 16, 1, 0, 0))
battr = (ctypes.c_uint32 * 5)(2, 4, 4, 1, 0)
tried("bpf_map_create", sc(321, 0, battr, 20))
tried("userfaultfd", sc(323, 1))
params = (ctypes.c_uint8 * 120)()
tried("io_uring_setup", sc(425, 8, params))
"#;

/// Starts threads until LIMIT or a failure; prints how many ran.
const THREADS: &str = r#"
import threading, time
threading.stack_size(65536)
n = 0
try:
    for i in range(LIMIT):
        threading.Thread(target=time.sleep, args=(20,), daemon=True).start()
        n += 1
except Exception as e:
    print("stopped:", e)
print("threads=%d" % n, flush=True)
import os; os._exit(0)
"#;
