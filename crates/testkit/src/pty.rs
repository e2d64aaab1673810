//! A command on a terminal of its own, for tests of what reaches a person's terminal: a new
//! pseudo-terminal whose slave is the command's standard input, output, error and
//! controlling terminal (a session of its own, as a login shell has), and whose master the
//! test reads (everything the terminal showed) and may type into.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A command running on its own terminal.
pub struct Pty {
    pub child: Child,
    master: File,
    shown: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty fills two descriptors; the name, termios and size are optional.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both were just opened for us.
    unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) }
}

impl Pty {
    /// Starts `cmd` on a new terminal (80x24): its stdin, stdout and stderr are the terminal,
    /// which is its controlling terminal.
    pub fn spawn(cmd: &mut Command) -> Pty {
        use std::os::unix::process::CommandExt;
        let (master, slave) = openpty();
        for fd in [&master, &slave] {
            // SAFETY: setting close-on-exec on descriptors we own.
            unsafe {
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        let ws = libc::winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ with a valid struct on a terminal we own.
        unsafe {
            libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &ws);
        }
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start the command on its terminal");
        // the parent's copies of the slave went with `cmd`'s stdio
        let master = File::from(master);
        let mut reading = master.try_clone().unwrap();
        let shown = Arc::new(Mutex::new(Vec::new()));
        let sink = shown.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once every slave descriptor is closed
            while let Ok(n) = reading.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            child,
            master,
            shown,
            reader: Some(reader),
        }
    }

    /// Types `text` into the terminal.
    pub fn type_text(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
    }

    /// Everything the terminal showed so far, raw (escape sequences included).
    pub fn shown(&self) -> Vec<u8> {
        self.shown.lock().unwrap().clone()
    }

    /// Waits (at most `timeout`) until the terminal showed `text`; what it showed.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let s = String::from_utf8_lossy(&self.shown()).into_owned();
            if s.contains(text) {
                return s;
            }
            assert!(
                t0.elapsed() < timeout,
                "the terminal never showed {text:?}; it showed:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the command to exit (at most `timeout`, then kills it), and for the
    /// terminal's last output; the status and everything it showed.
    pub fn finish(mut self, timeout: Duration) -> (ExitStatus, Vec<u8>) {
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if t0.elapsed() > timeout {
                let _ = self.child.kill();
                break self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // what is left on the terminal is read until no process holds it any more (a few
        // seconds at most: something that kept it open is the test's failure to show)
        if let Some(r) = self.reader.take() {
            let t1 = Instant::now();
            while !r.is_finished() && t1.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let shown = self.shown();
        (status, shown)
    }
}
