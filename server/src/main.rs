//! `pi-forge`: the command-line entry point. Each module owns one concern.
#![forbid(unsafe_code)]

mod agent;
mod bench;
mod cli;
mod clock;
mod commands;
mod files;
mod golden;
mod http;
mod import;
mod input;
mod live;
mod paths;
mod payload_cli;
mod payloads;
mod pi_install;
mod preview;
mod process;
mod state;
mod template;
mod ui;
mod version;
mod watch;

pub(crate) use version::VERSION;

use std::process::ExitCode;

/// Unix builds use mimalloc: musl's allocator made the live bridge 1.8x slower, glibc's a draft
/// preview 1.4x (docs/performance.md).
#[cfg(unix)]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The command line, with a `--version` that also names the target and this binary's path (so
/// a user, the Pi extension's `/forge status` and an npm install can tell which binary runs).
fn parse_cli() -> cli::Cli {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let path = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "(path unknown)".to_string());
    let version: &'static str = Box::leak(
        format!("{} ({}) {path}", crate::VERSION, env!("PI_FORGE_TARGET")).into_boxed_str(),
    );
    let matches = cli::Cli::command().version(version).get_matches();
    cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    let cli = parse_cli();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("pi-forge: {error:#}");
            ExitCode::from(2)
        }
    }
}
