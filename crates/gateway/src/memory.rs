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
}

static TRIM: Mutex<Trim> = Mutex::new(Trim {
    last: None,
    owed: false,
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
    let t = TRIM.lock().unwrap_or_else(|p| p.into_inner());
    t.owed && may_trim(&t)
}

/// Trims if [`trim_owed`].
pub(crate) fn trim_if_owed() {
    let mut t = TRIM.lock().unwrap_or_else(|p| p.into_inner());
    if t.owed {
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
    t.owed = false;
    lazarus_allocator::release_free_memory();
}
