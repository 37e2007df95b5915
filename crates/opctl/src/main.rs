//! `opctl`: the operator CLI of opledger. Parses the command line (usage errors exit 2), runs one
//! command against the services' gRPC APIs and exits with a code that says how it ended; see
//! `opctl --help` and [`error`] for the codes.

mod cli;
mod client;
mod commands;
mod credit_review;
mod error;
mod keyfile;
mod output;
mod review;
mod states;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let out = output::Output::new(cli.global.json);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: INTERNAL: cannot start the async runtime: {e}");
            return ExitCode::from(error::EXIT_REFUSED);
        }
    };
    let result = runtime.block_on(commands::run(&cli, &out));
    if let Err(failure) = &result {
        out.failure(failure);
    }
    error::exit_code(&result)
}
