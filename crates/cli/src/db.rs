//! `lazarus db migrate`: apply the PostgreSQL store's embedded schema migrations.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct DbArgs {
    /// The PostgreSQL store: `postgres://user@host:port/db[?schema=NAME]`
    #[arg(long, env = "LAZARUS_STORE")]
    pub store: String,
    #[command(subcommand)]
    pub command: DbCommand,
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Create or upgrade the schema (a schema newer than this build is refused).
    Migrate,
}

pub fn run(args: DbArgs) -> Result<i32> {
    match args.command {
        DbCommand::Migrate => {
            let store = lazarus_store_postgres::PgStore::connect(&args.store)
                .context("connecting to the PostgreSQL store")?;
            let version = store.schema_version()?;
            println!(
                "schema {} of {} is at version {version} (this build: {})",
                store.schema(),
                lazarus_session::Store::location(&store),
                lazarus_store_postgres::SCHEMA_VERSION
            );
            Ok(0)
        }
    }
}
