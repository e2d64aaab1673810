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

#[cfg(all(feature = "global", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` (the C name is `malloc_conf`; the crate builds
/// jemalloc with the `_rjem_` prefix, so `_RJEM_MALLOC_CONF` in the environment overrides
/// them). A thin pointer to a NUL-terminated string, as C declares it.
#[cfg(all(feature = "global", not(target_env = "msvc")))]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8; 40] = b"dirty_decay_ms:1000,muzzy_decay_ms:1000\0";

/// The allocator this process uses, for reports.
pub const NAME: &str = if cfg!(all(feature = "global", not(target_env = "msvc"))) {
    "jemalloc"
} else {
    "system"
};

/// Gives the pages the allocator holds free back to the system now (an idle process does
/// not allocate, so jemalloc's decay would not run). Under the C library's allocator, its
/// `malloc_trim`.
pub fn release_free_memory() {
    #[cfg(all(feature = "global", not(target_env = "msvc")))]
    {
        // "arena.<MALLCTL_ARENAS_ALL>.purge": every arena's unused dirty pages
        const PURGE_ALL: &std::ffi::CStr = c"arena.4096.purge";
        // SAFETY: a valid NUL-terminated name; this control reads and writes nothing.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                PURGE_ALL.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            );
        }
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free pages of glibc's own heaps
    // to the kernel and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
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
    }
}
