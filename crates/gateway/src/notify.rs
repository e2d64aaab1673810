//! `sd_notify` by hand: one datagram to `$NOTIFY_SOCKET` (a path, or `@name` for the abstract
//! namespace).

use std::os::unix::net::UnixDatagram;

/// Sends `msg` to `$NOTIFY_SOCKET` if set. Errors are logged, never fatal.
pub fn send(msg: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET").filter(|p| !p.is_empty()) else {
        return;
    };
    let r = (|| -> std::io::Result<()> {
        let sock = UnixDatagram::unbound()?;
        let p = path.to_string_lossy();
        if let Some(name) = p.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            sock.send_to_addr(msg.as_bytes(), &addr)?;
        } else {
            sock.send_to(msg.as_bytes(), &*p)?;
        }
        Ok(())
    })();
    if let Err(e) = r {
        tracing::warn!(error = %e, "sd_notify {msg:?} failed");
    }
}

pub fn ready() {
    send("READY=1\nSTATUS=sessions recovered, serving");
}

pub fn stopping() {
    send("STOPPING=1");
}
