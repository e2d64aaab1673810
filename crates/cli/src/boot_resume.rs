//! `lazarus boot-resume`: wiring only; the command lives in the `lazarus-boot-resume` crate.
pub use lazarus_boot_resume::cli::{BootResumeArgs, run};
