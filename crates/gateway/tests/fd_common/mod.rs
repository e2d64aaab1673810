//! What the descriptor tests share: a child process lowers its descriptor limit, then fills
//! its table but `k` (the children run this test binary again, one k each).

use std::os::fd::OwnedFd;

/// Lowers the soft descriptor limit to at most 256, so filling the table is quick.
pub fn lower_nofile() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let max = getrlimit(Resource::Nofile).maximum;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(max.map_or(256, |m| m.min(256))),
            maximum: max,
        },
    )
    .unwrap();
}

/// Opens descriptors until none is left, then closes `k` of them; keep the rest until the
/// work under test is done.
pub fn fill_leaving(k: usize) -> Vec<OwnedFd> {
    let mut held: Vec<OwnedFd> = Vec::new();
    loop {
        match rustix::fs::open(
            "/",
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) {
            Ok(fd) => held.push(fd),
            Err(rustix::io::Errno::MFILE) => break,
            Err(e) => panic!("filling the descriptor table: {e}"),
        }
    }
    held.truncate(held.len().saturating_sub(k));
    held
}
