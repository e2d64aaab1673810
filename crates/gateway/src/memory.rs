//! Giving memory back once sessions go idle. An allocator keeps what was freed: glibc's in one
//! heap per thread that allocated (up to 8 per core), and at each heap's top until
//! `malloc_trim`; jemalloc (the `lazarus` binary's) until its decay runs, which it does only
//! while allocating. A gateway that served 10,000 sessions kept ~9x its starting RSS after they
//! all closed while holding under 4 MB of live data (measured with `malloc_stats`; see
//! docs/benchmarks.md). So: one glibc heap per core, and freed memory released
//! ([`lazarus_allocator::release_free_memory`]) once sessions close and again once the last
//! frees of a wave are done.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Trims at most this often.
const TRIM_EVERY: Duration = Duration::from_secs(5);

/// One malloc heap (arena) per core, at least two, for the whole process (glibc's default is
/// eight per core), set before any thread starts: threads still rarely wait for a heap, and
/// far fewer heaps hold freed memory.
pub(crate) fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = i32::try_from(cores.max(2)).unwrap_or(i32::MAX);
        // SAFETY: mallopt takes plain integers; called before the runtimes start threads.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

struct Trim {
    last: Option<Instant>,
    /// Memory was freed since the last trim (a trim was skipped for the rate limit).
    owed: bool,
    /// The last trim was for a wave of closes: one more follows. What a wave leaves is freed
    /// after its closes too (idle connections, pool threads leaving after their keep-alive),
    /// and an idle jemalloc without a background thread never purges it by itself: left to
    /// that, RSS after 10⁴ sessions went idle read anywhere from 2.1x to 4.2x the start.
    follow_up: bool,
}

static TRIM: Mutex<Trim> = Mutex::new(Trim {
    last: None,
    owed: false,
    follow_up: false,
});

/// Memory was freed in bulk (sessions closed): trim now unless one ran in the last
/// [`TRIM_EVERY`]; then [`trim_if_owed`] trims later.
pub(crate) fn freed() {
    let mut t = TRIM.lock().unwrap_or_else(|p| p.into_inner());
    t.owed = true;
    trim_locked(&mut t);
}

/// Whether memory was freed since the last trim and [`TRIM_EVERY`] has passed: asked on
/// every housekeeping pass (cheap: no thread is woken unless a trim is due), so the last wave
/// of closes is trimmed too, by [`trim_if_owed`].
pub(crate) fn trim_owed() -> bool {
    owes(&TRIM.lock().unwrap_or_else(|p| p.into_inner()))
}

fn owes(t: &Trim) -> bool {
    (t.owed || t.follow_up) && may_trim(t)
}

/// Trims if [`trim_owed`].
pub(crate) fn trim_if_owed() {
    let mut t = TRIM.lock().unwrap_or_else(|p| p.into_inner());
    if t.owed || t.follow_up {
        trim_locked(&mut t);
    }
}

fn may_trim(t: &Trim) -> bool {
    t.last.is_none_or(|l| l.elapsed() >= TRIM_EVERY)
}

fn trim_locked(t: &mut Trim) {
    if !may_trim(t) {
        return;
    }
    t.last = Some(Instant::now());
    // a trim for freed memory owes one follow-up; the follow-up owes none
    t.follow_up = t.owed;
    t.owed = false;
    lazarus_allocator::release_free_memory();
}

/// `tokio::task::spawn_blocking` for the gateway: the task ends by emptying its thread's
/// allocator cache when memory was released since that thread last did
/// ([`lazarus_allocator::flush_thread_cache_if_asked`]; otherwise one atomic load). Blocking
/// threads kept alive by periodic work (the inbox poll) never park, so the runtime's park
/// hook does not reach them; without this they held ~4 MB of freed objects (and the pages
/// under them) after 10⁴ sessions closed.
pub(crate) fn spawn_blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        let r = f();
        lazarus_allocator::flush_thread_cache_if_asked();
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wave's closes are trimmed at once, and once more after the rate limit (for what was
    /// freed after them); then nothing more is owed until memory is freed again.
    #[test]
    fn a_trim_for_freed_memory_is_followed_by_exactly_one_more() {
        let long_ago = |t: &mut Trim| {
            t.last = Some(
                Instant::now()
                    .checked_sub(TRIM_EVERY)
                    .expect("the machine has been up longer than TRIM_EVERY"),
            );
        };
        let mut t = Trim {
            last: None,
            owed: true,
            follow_up: false,
        };
        trim_locked(&mut t);
        assert!(!t.owed && t.follow_up);
        assert!(!owes(&t), "the rate limit holds the follow-up back");
        long_ago(&mut t);
        assert!(owes(&t), "the follow-up is owed once the rate allows");
        trim_locked(&mut t);
        long_ago(&mut t);
        assert!(!owes(&t), "a follow-up owes no further trim");
        t.owed = true;
        assert!(owes(&t));
    }
}
