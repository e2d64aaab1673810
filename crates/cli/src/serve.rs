//! `lazarus serve`: wiring only; the gateway lives in the `lazarus-gateway` crate.
use anyhow::Result;
use clap::Args;

/// Arguments of `lazarus serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> Result<i32> {
    anyhow::bail!("the gateway is not built yet")
}
