//! placeholder: boot-resume lives here.
pub mod cli {
    /// Arguments of `lazarus boot-resume`.
    #[derive(Debug, clap::Args)]
    pub struct BootResumeArgs {}

    /// Runs `lazarus boot-resume`; returns the process exit code.
    pub fn run(_args: BootResumeArgs) -> anyhow::Result<i32> {
        anyhow::bail!("boot-resume is not built yet")
    }
}
