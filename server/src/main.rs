//! `pi-forge`: the command-line entry point. Each module owns one concern.
#![forbid(unsafe_code)]

mod agent;
mod bench;
mod cli;
mod commands;
mod http;
mod import;
mod live;
mod paths;
mod payload_cli;
mod payloads;
mod pi_install;
mod preview;
mod state;
mod template;
mod ui;
mod watch;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("pi-forge: {error:#}");
            ExitCode::from(2)
        }
    }
}
