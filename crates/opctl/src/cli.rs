//! The command line: global flags, subcommands and the local checks clap runs on their values.
//!
//! The subcommands' arguments live in [`args`] (withdrawals, approvals, watch, inbox) and
//! [`credit`] (credits); the value types and parsers clap runs on them in [`values`].

mod args;
mod credit;
#[cfg(test)]
mod tests;
mod values;

pub use args::{
    ApproveArgs, ApproverCommand, CreateArgs, CustodianCommand, DemoArgs, InboxCommand, ListArgs,
    RejectArgs, SigningArgs, WatchArgs,
};
pub use credit::{CreditCommand, CreditCreateArgs, CreditSignArgs, OperatorSigningArgs};
pub use values::{ApiKey, Outcome};
// Named by the commands' unit tests only.
#[cfg(test)]
pub use values::{IdempotencyKeyArg, SecretHex};

use clap::{Args, Parser, Subcommand};
use values::{parse_api_key, parse_withdrawal_id};

/// `opctl --help`: what the exit codes mean.
pub const LONG_ABOUT: &str = "\
Operator CLI of opledger: creates, approves, watches and resolves withdrawals, proposes and \
co-signs credits and handles webhook inbox issues over the services' gRPC APIs (operations, \
approvals, the reconciler's operator API, the inbox's operator API, the custodian executor's \
operator API).

The API key (--api-key or, better, OPCTL_API_KEY) is sent as `authorization: Bearer <key>`; its \
role decides what may be called (client: create, get, list, balance; approver: approve, reject, \
policy; operator: credit, balance, policy, unresolved, resolve, inbox, custodian). It is never printed.

Approvals and rejections are approval statements signed locally with your own Ed25519 approver key \
(`opctl approver keygen`; then --key-file or OPLEDGER_APPROVER_KEY, with --tenant or \
OPCTL_TENANT_ID): only the statement and its signature are sent, never the key. The key counts \
once it is registered in the tenant's trust statement (`opledger-admin trust publish`). What you \
see is what you sign: opctl rebuilds the payload from the fields it shows (for --tenant), hashes \
it with the canonical encoding and signs only its own hash; an answer of the operations service \
naming another withdrawal, holding a field that does not parse, or whose payload hash is not the \
hash of the fields shown is refused (exit 6) and nothing is sent to the approvals service.

Credits need two principals: `opctl credit create` proposes one with a credit statement signed \
locally with your own Ed25519 operator key (a key file written by `opctl approver keygen` and \
registered as an OPERATOR by `opledger-admin trust publish --operator`; --key-file or \
OPLEDGER_OPERATOR_KEY, with --tenant or OPCTL_TENANT_ID); the credit stays PENDING (not \
spendable, shown as pending by `balance`) until the independent witness has verified enough \
operators' statements, then it is CREDITED once. `opctl credit sign` adds your statement to a \
pending credit (a credit above the tenant's threshold, a deposit without chain evidence): it \
reads the credit, shows the fields it signs and builds the statement from exactly those fields \
and the id you asked for; an answer naming another credit or holding a field that does not \
parse is refused (exit 6) and nothing is signed or sent.

Service URLs: https:// trusts only the CA of --ca-file (OPCTL_CA_FILE), never the system's roots; \
http:// is refused before connecting unless the host is loopback (127.0.0.0/8, ::1, localhost) \
or --allow-clear-text is given.

With --json every result is one JSON object on one line of stdout; errors are \
{\"error\":{\"code\",\"reason\",\"message\",\"metadata\",\"violations\"}} on stdout too. Without \
--json results go to stdout and errors to stderr as `error: <REASON>: <message>`.

Exit codes:
  0  success (watch: the withdrawal reached CONFIRMED)
  1  the service refused the request (its ErrorInfo reason is printed), or opctl refused it on the
     service's rules before sending it (unacknowledged risk flags, a different payload hash, a
     credit that is no longer pending)
  2  usage error: unknown flag, missing or malformed argument, an https:// URL without --ca-file,
     an http:// URL to a host that is not loopback without --allow-clear-text
  3  cannot connect, service unavailable, or no answer within --timeout (watch: still so when
     --until-timeout elapsed): transient, retrying is safe for idempotent calls (create and credit
     create only with the same --idempotency-key)
  4  watch: the withdrawal ended in an unwanted final state (REJECTED, VERIFIED_NOT_SENT,
     FAILED_TERMINAL)
  5  watch: --until-timeout elapsed before a final state
  6  approve, reject, credit sign: the operations service's answer did not verify (another
     withdrawal or credit than the one asked for, a field that does not parse, a payload hash that
     is not the hash of the fields shown): nothing was signed or sent; do not retry, report it";

/// The whole command line.
#[derive(Parser, Debug)]
#[command(
    name = "opctl",
    version,
    about = "Operator CLI of opledger",
    long_about = LONG_ABOUT,
    args_override_self = true
)]
pub struct Cli {
    /// Service addresses, credentials and output format.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand accepts.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// The operations service (create, get, list, balance, watch, credit; approve reads the
    /// withdrawal, credit sign the credit).
    /// https:// with --ca-file; http:// only to loopback unless --allow-clear-text.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "OPCTL_OPERATIONS_URL",
        default_value = "http://127.0.0.1:15051"
    )]
    pub operations: String,
    /// The approvals service (approve, reject, policy; credit create and credit sign read the
    /// tenant's policy version there unless --policy-version is given).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "OPCTL_APPROVALS_URL",
        default_value = "http://127.0.0.1:15052"
    )]
    pub approvals: String,
    /// The reconciler's operator API (unresolved, resolve).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "OPCTL_RECONCILER_URL",
        default_value = "http://127.0.0.1:15055"
    )]
    pub reconciler: String,
    /// The inbox's operator API (inbox ...).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "OPCTL_INBOX_URL",
        default_value = "http://127.0.0.1:15056"
    )]
    pub inbox: String,
    /// The custodian executor's operator API (custodian ...).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "OPCTL_CUSTODIAN_URL",
        default_value = "http://127.0.0.1:15058"
    )]
    pub custodian: String,
    /// API key, sent as `authorization: Bearer <key>`; prefer the environment variable (a flag is
    /// visible to other local users in the process list). Never printed.
    #[arg(
        long,
        global = true,
        value_name = "KEY",
        env = "OPCTL_API_KEY",
        hide_env_values = true,
        value_parser = parse_api_key
    )]
    pub api_key: Option<ApiKey>,
    /// PEM certificate of the CA that issued the services' certificates, for https:// URLs: the
    /// only root trusted (no system roots), so no other CA can stand in for a service.
    #[arg(long, global = true, value_name = "PATH", env = "OPCTL_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Also accept http:// to a host that is not loopback (a private segment you trust). Without
    /// it opctl refuses such a URL before connecting: in clear text the API key can be read and
    /// every answer (what you approve) changed on the way.
    #[arg(long, global = true)]
    pub allow_clear_text: bool,
    /// One JSON object per result on stdout, for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    /// Seconds to wait for a connection and for each answer.
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub timeout: u64,
}

/// The subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Creates a withdrawal (client key). Without --idempotency-key a UUIDv4 key is generated
    /// and printed before the request is sent: pass it to retry the same create safely.
    Create(CreateArgs),
    /// Shows one withdrawal as the operations service answers it (approve and reject verify the
    /// answer before signing).
    Get {
        /// The withdrawal id.
        #[arg(value_parser = parse_withdrawal_id)]
        id: String,
    },
    /// Lists withdrawals, newest first.
    List(ListArgs),
    /// Shows an account's available and held balance, and the credits pending on it (proposed,
    /// not witnessed yet, not spendable).
    Balance {
        /// The account, e.g. treasury.
        #[arg(long)]
        account: String,
        /// The asset, e.g. ETH.
        #[arg(long)]
        asset: String,
    },
    /// Approves a withdrawal (approver API key): reads it, rebuilds its payload from the fields
    /// shown, hashes it and shows what it signs (exit 6 when the answer names another withdrawal
    /// or its hash is not that of its fields); reads the tenant's policy version, signs the
    /// approval statement over its own hash locally with your approver key (--key-file or
    /// OPLEDGER_APPROVER_KEY; never sent) and sends the statement and signature.
    Approve(ApproveArgs),
    /// Rejects a REQUESTED withdrawal and releases its hold (approver or operator API key): signs
    /// a REJECT statement locally with your approver key, like `approve`.
    Reject(RejectArgs),
    /// Shows the tenant's approval rules for an asset and the version of the trust statement
    /// they come from (the policy version approvals are signed under). Policies are changed only
    /// by publishing a new signed trust statement with `opledger-admin trust publish`.
    Policy {
        /// The asset, e.g. ETH.
        #[arg(long)]
        asset: String,
    },
    /// Approver and operator keys (local only; no service is called).
    Approver {
        /// What to do.
        #[command(subcommand)]
        command: ApproverCommand,
    },
    /// Pushes one withdrawal end to end: creates it (client key), approves it (--approver-key, signing
    /// with the approver key of --key-file or OPLEDGER_APPROVER_KEY for --tenant),
    /// watches it to CONFIRMED, and prints its trace id and timeline. The calls carry a W3C
    /// `traceparent` opctl makes, so the services' spans (when they export OTLP) form one trace
    /// with that id. Exit codes as for `watch`.
    Demo(DemoArgs),
    /// Polls a withdrawal until CONFIRMED, REJECTED, VERIFIED_NOT_SENT or FAILED_TERMINAL and
    /// prints the timeline of the state changes it saw (exit 0 on CONFIRMED, 4 on another final
    /// state, 5 when --until-timeout elapses).
    Watch(WatchArgs),
    /// UNKNOWN and FAILED_TERMINAL withdrawals, oldest first (operator key).
    Unresolved {
        /// At most this many (server default 50, at most 500).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=500))]
        page_size: Option<i32>,
    },
    /// Resolves an UNKNOWN or FAILED_TERMINAL withdrawal to what the chain evidence shows
    /// (operator key); anything else is refused with EVIDENCE_MISMATCH and nothing changes.
    Resolve {
        /// The withdrawal id.
        #[arg(value_parser = parse_withdrawal_id)]
        id: String,
        /// The outcome the evidence shows.
        #[arg(long, value_enum, ignore_case = true)]
        outcome: Outcome,
        /// Why, 1 to 200 characters, kept in the transition log; no personal data.
        #[arg(long)]
        reason: String,
    },
    /// The webhook inbox's operator API (operator key).
    Inbox {
        /// What to do.
        #[command(subcommand)]
        command: InboxCommand,
    },
    /// Withdrawals a custodian without lookup by our reference (`no_lookup`) left UNKNOWN
    /// (operator key): list the provider's transactions that may be the withdrawal's, bind the one
    /// that is, with a reason; the custodian executor then follows that transaction.
    Custodian {
        /// What to do.
        #[command(subcommand)]
        command: CustodianCommand,
    },
    /// Credits (operator API key): propose one signed with your operator key, list the pending
    /// ones, show one, co-sign a pending one. A credit is PENDING (not spendable) until the
    /// witness has verified enough distinct operators' statements; then it is CREDITED once.
    Credit {
        /// What to do.
        #[command(subcommand)]
        command: CreditCommand,
    },
}
