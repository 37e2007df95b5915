//! One module per group of subcommands; each builds its requests, calls one service and returns a
//! [`Report`](crate::output::Report) or a [`Failure`].

mod approvals;
mod credits;
mod custodian;
mod demo;
mod inbox;
mod operator;
mod refusal;
mod watch;
mod withdrawals;

use crate::cli::{Cli, Command};
use crate::client::Session;
use crate::error::{Done, Failure};
use crate::output::Output;

/// Runs the parsed command line.
pub async fn run(cli: &Cli, out: &Output) -> Result<Done, Failure> {
    if let Command::Approver { command } = &cli.command {
        // Local only: no service, no API key.
        return approvals::approver(out, command);
    }
    let session = Session::new(&cli.global)?;
    match &cli.command {
        Command::Create(args) => withdrawals::create(&session, out, args).await,
        Command::Get { id } => withdrawals::get(&session, out, id).await,
        Command::List(args) => withdrawals::list(&session, out, args).await,
        Command::Balance { account, asset } => {
            withdrawals::balance(&session, out, account, asset).await
        }
        Command::Approve(args) => approvals::approve(&session, out, args).await,
        Command::Reject(args) => approvals::reject(&session, out, args).await,
        Command::Policy { asset } => approvals::policy(&session, out, asset).await,
        Command::Approver { command } => approvals::approver(out, command),
        Command::Watch(args) => watch::watch(&session, out, args).await,
        Command::Demo(args) => demo::demo(session, out, args).await,
        Command::Unresolved { page_size } => {
            operator::unresolved(&session, out, page_size.unwrap_or(0)).await
        }
        Command::Resolve {
            id,
            outcome,
            reason,
        } => operator::resolve(&session, out, id, *outcome, reason).await,
        Command::Inbox { command } => inbox::run(&session, out, command).await,
        Command::Credit { command } => credits::run(&session, out, command).await,
        Command::Custodian { command } => custodian::run(&session, out, command).await,
    }
}
