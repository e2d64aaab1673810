//! The memory allocator of every Lazarus binary, and giving freed memory back.
//!
//! A binary turns on the `global` feature and links the crate (`use lazarus_allocator as _;`);
//! a library depends on it without the feature, for [`release_free_memory`], so an embedder
//! keeps its own allocator.
//!
//! jemalloc, not the C library's, for what was measured (docs/benchmarks.md):
//! - A big ledger's replay decodes records on worker threads while the main thread builds the
//!   resume state from them. glibc serves memory allocated on one thread and kept or freed on
//!   another slowly: that replay ran at 0.94x plain serde_json on glibc and 1.2-1.3x on
//!   jemalloc, each measured in one process against the same baseline.
//! - jemalloc's background purging thread slowed that replay by a tenth (1.10-1.13x against
//!   1.18-1.28x), so it is off: freed memory goes back to the system after a second of
//!   allocator activity (`dirty_decay_ms`, `muzzy_decay_ms`), and at once when an idle
//!   process calls [`release_free_memory`].
//! - What stays after a gateway's 10⁴ sessions closed is mostly pages pinned by a few live
//!   objects each (jemalloc's statistics: 5.4 MB allocated on 24 MB of active pages). Thread
//!   caches hold only objects up to 4 KiB (`tcache_max`) and are emptied when a thread goes
//!   idle after a release; small objects live on one-page slabs (`slab_sizes`), so a page
//!   pins less. Idle RSS after/before went from 2.1-2.3x to under 1.5x; replay kept 1.4x
//!   plain serde_json (1.5x before), each measured in one process (docs/benchmarks.md).

#[cfg(all(feature = "global", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` (the C name is `malloc_conf`; the crate builds
/// jemalloc with the `_rjem_` prefix, so `_RJEM_MALLOC_CONF` in the environment overrides
/// them). A thin pointer to a NUL-terminated string, as C declares it. See the crate's
/// documentation for why each option.
#[cfg(all(feature = "global", not(target_env = "msvc")))]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8; 76] =
    b"dirty_decay_ms:1000,muzzy_decay_ms:1000,tcache_max:4096,slab_sizes:1-4096:1\0";

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The allocator this process uses, for reports.
pub const NAME: &str = if cfg!(all(feature = "global", not(target_env = "msvc"))) {
    "jemalloc"
} else {
    "system"
};

/// Asked of every thread by [`release_free_memory`]: a thread that has not flushed its cache
/// since the last ask does so at its next [`flush_thread_cache_if_asked`].
static FLUSH_ASKED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The last ask this thread answered.
    static FLUSH_ANSWERED: Cell<u64> = const { Cell::new(0) };
}

/// Gives the pages the allocator holds free back to the system now (an idle process does
/// not allocate, so jemalloc's decay would not run), and asks every thread to empty its
/// thread cache ([`flush_thread_cache_if_asked`]). Under the C library's allocator, its
/// `malloc_trim`.
///
/// Why the caches: each thread keeps freed small objects for its next allocations, and each
/// object kept pins the page (slab) it lives on. After a gateway served 10⁴ sessions and they
/// closed, its threads' caches held 5.4 MB of objects pinning 24 MB of pages that no purge
/// could return (jemalloc's own statistics); with no thread caches at all the same run kept
/// 1.6 MB. Emptied when the thread goes idle, the caches cost nothing under load.
pub fn release_free_memory() {
    FLUSH_ASKED.fetch_add(1, Ordering::Relaxed);
    flush_thread_cache_if_asked();
    // "arena.<MALLCTL_ARENAS_ALL>.purge": every arena's unused dirty pages
    #[cfg(all(feature = "global", not(target_env = "msvc")))]
    run_control(c"arena.4096.purge");
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free pages of glibc's own heaps
    // to the kernel and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Empties this thread's cache of freed objects back to the allocator's arenas when
/// [`release_free_memory`] asked for it since this thread last did; otherwise one atomic load.
/// Meant for a runtime's "thread goes idle" hook (tokio's `on_thread_park`): a thread that
/// never parks keeps its cache until it exits.
pub fn flush_thread_cache_if_asked() {
    let asked = FLUSH_ASKED.load(Ordering::Relaxed);
    if FLUSH_ANSWERED.with(|a| a.replace(asked)) != asked {
        #[cfg(all(feature = "global", not(target_env = "msvc")))]
        run_control(c"thread.tcache.flush");
    }
}

/// Runs the jemalloc control `name`, one that reads and writes nothing.
#[cfg(all(feature = "global", not(target_env = "msvc")))]
fn run_control(name: &std::ffi::CStr) {
    // SAFETY: a valid NUL-terminated name; no old or new value is passed (null, length 0).
    unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_options_are_one_c_string() {
        #[cfg(all(feature = "global", not(target_env = "msvc")))]
        {
            let conf = super::MALLOC_CONF;
            assert_eq!(conf.iter().position(|&b| b == 0), Some(conf.len() - 1));
        }
        super::release_free_memory();
        super::flush_thread_cache_if_asked();
    }

    #[test]
    fn a_thread_flushes_once_per_ask() {
        use std::sync::atomic::Ordering;
        let asked = super::FLUSH_ASKED.load(Ordering::Relaxed);
        super::FLUSH_ANSWERED.with(|a| a.set(asked.wrapping_sub(1)));
        super::flush_thread_cache_if_asked();
        assert_eq!(super::FLUSH_ANSWERED.with(|a| a.get()), asked);
        // answered: nothing more until the next ask
        super::flush_thread_cache_if_asked();
        assert_eq!(super::FLUSH_ANSWERED.with(|a| a.get()), asked);
        super::release_free_memory();
        assert_eq!(
            super::FLUSH_ANSWERED.with(|a| a.get()),
            super::FLUSH_ASKED.load(Ordering::Relaxed)
        );
    }
}
