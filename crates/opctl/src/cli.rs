//! The command line: global flags, subcommands and the local checks clap runs on their values.

use crate::credit_review::CreditId;
use crate::states;
use clap::{Args, Parser, Subcommand, ValueEnum};
use opledger_proto::v1::WithdrawalState;
use std::fmt;

/// `opctl --help`: what the exit codes mean.
pub const LONG_ABOUT: &str = "\
Operator CLI of opledger: creates, approves, watches and resolves withdrawals, proposes and \
co-signs credits and handles webhook inbox issues over the services' gRPC APIs (operations, \
approvals, the reconciler's operator API, the inbox's operator API).

The API key (--api-key or, better, OPCTL_API_KEY) is sent as `authorization: Bearer <key>`; its \
role decides what may be called (client: create, get, list, balance; approver: approve, reject, \
policy; operator: credit, balance, policy, unresolved, resolve, inbox). It is never printed.

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
    /// Credits (operator API key): propose one signed with your operator key, list the pending
    /// ones, show one, co-sign a pending one. A credit is PENDING (not spendable) until the
    /// witness has verified enough distinct operators' statements; then it is CREDITED once.
    Credit {
        /// What to do.
        #[command(subcommand)]
        command: CreditCommand,
    },
}

/// `opctl create`.
#[derive(Args, Debug, Clone)]
pub struct CreateArgs {
    /// The tenant's source account, e.g. treasury.
    #[arg(long)]
    pub account: String,
    /// Asset code, e.g. ETH.
    #[arg(long)]
    pub asset: String,
    /// Network id, e.g. anvil.
    #[arg(long)]
    pub network: String,
    /// Destination address (0x and 40 hex digits).
    #[arg(long, value_name = "ADDR")]
    pub to: String,
    /// Amount in minimal units (wei for ETH): digits only, no leading zero.
    #[arg(long, value_name = "N", value_parser = parse_amount)]
    pub amount: String,
    /// Maximum network fee in minimal units of the network's native asset.
    #[arg(long, value_name = "N", value_parser = parse_amount)]
    pub fee_cap: String,
    /// Optional memo or tag (not empty).
    #[arg(long, value_name = "M")]
    pub memo: Option<String>,
    /// Version of the tenant's withdrawal policy the request is made under.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub policy_version: u32,
    /// Reuse the key of an earlier attempt to retry it; generated (UUIDv4) when absent.
    #[arg(long, value_name = "K")]
    pub idempotency_key: Option<IdempotencyKeyArg>,
}

/// `opctl list`.
#[derive(Args, Debug, Clone)]
pub struct ListArgs {
    /// Only these states (repeat the flag or separate with commas), e.g. UNKNOWN,broadcast.
    #[arg(long = "state", value_name = "S", value_delimiter = ',', value_parser = parse_state)]
    pub states: Vec<WithdrawalState>,
    /// At most this many (server default 50, at most 500).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=500))]
    pub page_size: Option<i32>,
    /// The next page: the token printed by the previous list with the same --state.
    #[arg(long, value_name = "TOKEN")]
    pub page_token: Option<String>,
}

/// `opctl approve`.
#[derive(Args, Debug, Clone)]
pub struct ApproveArgs {
    /// The withdrawal id.
    #[arg(value_parser = parse_withdrawal_id)]
    pub id: String,
    /// Acknowledge the withdrawal's risk flags explicitly (required when it carries any).
    #[arg(long)]
    pub ack_risk: bool,
    /// The payload hash you reviewed; refused locally when the hash opctl computes from the
    /// withdrawal's fields differs.
    #[arg(long, value_name = "HASH")]
    pub payload_hash: Option<String>,
    /// The approver key and tenant the statement is signed for.
    #[command(flatten)]
    pub signing: SigningArgs,
}

/// `opctl reject`.
#[derive(Args, Debug, Clone)]
pub struct RejectArgs {
    /// The withdrawal id.
    #[arg(value_parser = parse_withdrawal_id)]
    pub id: String,
    /// Why, 1 to 200 characters, kept in the transition log; no personal data.
    #[arg(long)]
    pub reason: String,
    /// The payload hash you reviewed; refused locally when the hash opctl computes from the
    /// withdrawal's fields differs.
    #[arg(long, value_name = "HASH")]
    pub payload_hash: Option<String>,
    /// The approver key and tenant the statement is signed for.
    #[command(flatten)]
    pub signing: SigningArgs,
}

/// The approver's own Ed25519 key and the tenant an approval statement names.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Signing")]
pub struct SigningArgs {
    /// File holding your approver key (64 hex digits, as written by `opctl approver keygen`);
    /// wins over OPLEDGER_APPROVER_KEY. The key signs locally and is never sent.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// Your approver key as 64 hex digits; prefer the environment variable or --key-file (a flag
    /// is visible to other local users in the process list). Never printed.
    #[arg(
        long,
        value_name = "HEX",
        env = "OPLEDGER_APPROVER_KEY",
        hide_env_values = true,
        value_parser = parse_secret_hex
    )]
    pub approver_signing_key: Option<SecretHex>,
    /// The tenant's id (a UUID, as printed by `opledger-admin tenant create`): the payload opctl
    /// hashes and the statement name it, so another tenant's withdrawal does not verify and the
    /// service refuses a statement for another tenant than the API key's.
    #[arg(long, value_name = "UUID", env = "OPCTL_TENANT_ID", value_parser = parse_tenant_id)]
    pub tenant: String,
}

/// `opctl approver ...`.
#[derive(Subcommand, Debug, Clone)]
pub enum ApproverCommand {
    /// Writes a new Ed25519 key (the seed as 64 hex digits, one line) to a new file with mode 0600
    /// and prints its public key and key id: give those to the tenant administrator, who
    /// registers the key in a trust statement (`opledger-admin trust publish --approver`, or
    /// `--operator` for a key that signs credit statements with `opctl credit`).
    Keygen {
        /// The key file to create (never overwritten).
        #[arg(long, value_name = "FILE")]
        out: std::path::PathBuf,
    },
}

/// `opctl credit ...`.
#[derive(Subcommand, Debug, Clone)]
pub enum CreditCommand {
    /// Proposes a credit of an account (operator API key): prints the fields it signs (tenant,
    /// credit id = SHA-256 of the idempotency key, account, asset, amount, your key id, policy
    /// version), signs the credit statement of exactly those fields locally with your operator
    /// key and sends it; prints the credit (PENDING until the witness has verified enough
    /// operators' statements) and the account's balance. Without --idempotency-key a UUIDv4
    /// key is generated and printed before anything is sent: pass it to retry the same credit
    /// safely (a retry with another operator's key adds that operator's statement).
    Create(CreditCreateArgs),
    /// Credits that are not credited yet, oldest first.
    Pending {
        /// At most this many (server default 50, at most 500).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=500))]
        page_size: Option<i32>,
    },
    /// Shows one credit as the operations service answers it.
    Get {
        /// The credit id (64 hex digits, as printed by `credit create` and `credit pending`).
        #[arg(value_parser = parse_credit_id)]
        credit_id: CreditId,
    },
    /// Adds your signed statement to a pending credit (a credit that needs another operator, a
    /// deposit that arrived without chain evidence). What you see is what you sign: reads the
    /// credit, refuses (exit 6, nothing signed or sent) an answer naming another credit or a
    /// field that does not parse, prints the fields it signs and signs the statement built from
    /// exactly those fields and the id you asked for. Compare them with the request you were
    /// given outside the system (a ticket, a bank statement).
    Sign(CreditSignArgs),
}

/// `opctl credit create`.
#[derive(Args, Debug, Clone)]
pub struct CreditCreateArgs {
    /// The account credited, e.g. treasury.
    #[arg(long)]
    pub account: String,
    /// Asset code, e.g. ETH.
    #[arg(long)]
    pub asset: String,
    /// Amount in minimal units (wei for ETH): digits only, no leading zero, at least 1.
    #[arg(long, value_name = "N", value_parser = parse_credit_amount)]
    pub amount: String,
    /// Reuse the key of an earlier attempt to retry it (or to add your statement to a credit
    /// another operator proposed with it); generated (UUIDv4) when absent.
    #[arg(long, value_name = "K")]
    pub idempotency_key: Option<IdempotencyKeyArg>,
    /// The trust statement version you sign under; default: the tenant's current version as
    /// the approvals service reports it (`opctl policy`).
    #[arg(long, value_name = "V", value_parser = clap::value_parser!(u64).range(1..))]
    pub policy_version: Option<u64>,
    /// Your operator key and tenant.
    #[command(flatten)]
    pub signing: OperatorSigningArgs,
}

/// `opctl credit sign`.
#[derive(Args, Debug, Clone)]
pub struct CreditSignArgs {
    /// The credit id (64 hex digits, as printed by `credit create` and `credit pending`).
    #[arg(value_parser = parse_credit_id)]
    pub credit_id: CreditId,
    /// The trust statement version you sign under; default: the tenant's current version as
    /// the approvals service reports it for the credit's asset (`opctl policy`).
    #[arg(long, value_name = "V", value_parser = clap::value_parser!(u64).range(1..))]
    pub policy_version: Option<u64>,
    /// Your operator key and tenant.
    #[command(flatten)]
    pub signing: OperatorSigningArgs,
}

/// The operator's own Ed25519 key and the tenant a credit statement names.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Signing")]
pub struct OperatorSigningArgs {
    /// File holding your operator key (64 hex digits, as written by `opctl approver keygen`);
    /// wins over OPLEDGER_OPERATOR_KEY. The key signs locally and is never sent.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// Your operator key as 64 hex digits; prefer the environment variable or --key-file (a flag
    /// is visible to other local users in the process list). Never printed.
    #[arg(
        long,
        value_name = "HEX",
        env = "OPLEDGER_OPERATOR_KEY",
        hide_env_values = true,
        value_parser = parse_secret_hex
    )]
    pub operator_signing_key: Option<SecretHex>,
    /// The tenant's id (a UUID, as printed by `opledger-admin tenant create`): field 1 of the
    /// statement, so the service refuses a statement for another tenant than the API key's.
    #[arg(long, value_name = "UUID", env = "OPCTL_TENANT_ID", value_parser = parse_tenant_id)]
    pub tenant: String,
}

/// `opctl demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// The source account.
    #[arg(long, default_value = "treasury")]
    pub account: String,
    /// The asset.
    #[arg(long, default_value = "ETH")]
    pub asset: String,
    /// The network.
    #[arg(long, default_value = "anvil")]
    pub network: String,
    /// The destination address (default: anvil's second public dev account).
    #[arg(long, default_value = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8")]
    pub to: String,
    /// Amount in minimal units (a few wei are added so repeated demos are not flagged as the
    /// same destination and amount).
    #[arg(long, default_value = "1000000000000000")]
    pub amount: u128,
    /// Fee cap in minimal units.
    #[arg(long, default_value = "1000000000000000")]
    pub fee_cap: String,
    /// The approver's API key (the global --api-key is the client's).
    #[arg(long, env = "OPCTL_APPROVER_KEY", hide_env_values = true, value_parser = parse_api_key)]
    pub approver_key: ApiKey,
    /// The approver's signing key and the tenant, for the approval statement.
    #[command(flatten)]
    pub signing: SigningArgs,
    /// Give up (exit 5) after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub until_timeout: u64,
}

/// `opctl watch`.
#[derive(Args, Debug, Clone)]
pub struct WatchArgs {
    /// The withdrawal id.
    #[arg(value_parser = parse_withdrawal_id)]
    pub id: String,
    /// Milliseconds between polls.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 500,
        value_parser = clap::value_parser!(u64).range(50..=60_000)
    )]
    pub interval_ms: u64,
    /// Give up (exit 5) after this many seconds; no limit when absent.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub until_timeout: Option<u64>,
}

/// `opctl inbox ...`.
#[derive(Subcommand, Debug, Clone)]
pub enum InboxCommand {
    /// Dead letters, quarantined bodies and UNHANDLED events nobody resolved yet, oldest first.
    Issues {
        /// At most this many (server default 50, at most 500).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=500))]
        page_size: Option<i32>,
    },
    /// Puts a dead letter back to the processor with fresh attempts.
    Replay {
        /// The issue's inbox id.
        inbox_id: i64,
        /// Why, 1 to 200 characters, kept in the action log; no personal data.
        #[arg(long)]
        reason: String,
    },
    /// Marks a dead letter, quarantine or UNHANDLED event resolved by hand; nothing is applied.
    Resolve {
        /// The issue's inbox id.
        inbox_id: i64,
        /// Why, 1 to 200 characters, kept in the action log; no personal data.
        #[arg(long)]
        reason: String,
    },
}

/// Outcomes an operator may resolve to.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A transfer attempt is included and final.
    #[value(name = "CONFIRMED")]
    Confirmed,
    /// A cancel is included and final, or the nonce was consumed by another transaction.
    #[value(name = "VERIFIED_NOT_SENT", alias = "verified-not-sent")]
    VerifiedNotSent,
    /// A transfer is included but not final yet.
    #[value(name = "BROADCAST")]
    Broadcast,
}

impl Outcome {
    /// The wire state.
    pub fn state(self) -> WithdrawalState {
        match self {
            Outcome::Confirmed => WithdrawalState::Confirmed,
            Outcome::VerifiedNotSent => WithdrawalState::VerifiedNotSent,
            Outcome::Broadcast => WithdrawalState::Broadcast,
        }
    }
}

/// An API key; its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key itself, only to build the authorization header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A secret given as hex (an approver key seed); its `Debug` never shows it and it is zeroized
/// when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretHex(zeroize::Zeroizing<String>);

impl SecretHex {
    /// The hex text, only to decode the key.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHex(<redacted>)")
    }
}

#[cfg(test)]
impl SecretHex {
    /// A value as the parser would make it.
    pub fn from_test(text: &str) -> SecretHex {
        SecretHex(zeroize::Zeroizing::new(text.to_owned()))
    }
}

// Never fails: an error message would quote the key (it is checked when it is used).
fn parse_secret_hex(text: &str) -> Result<SecretHex, std::convert::Infallible> {
    Ok(SecretHex(zeroize::Zeroizing::new(text.trim().to_owned())))
}

fn parse_tenant_id(text: &str) -> Result<String, String> {
    uuid::Uuid::parse_str(text.trim())
        .map(|id| id.to_string())
        .map_err(|_| "not a tenant id (a UUID)".to_owned())
}

/// An idempotency key given on the command line; its `Debug` never shows it. Checked after
/// parsing (see `commands::create`) because clap would echo a value it refuses.
#[derive(Clone, PartialEq, Eq)]
pub struct IdempotencyKeyArg(pub String);

impl fmt::Debug for IdempotencyKeyArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdempotencyKeyArg(<redacted>)")
    }
}

impl From<String> for IdempotencyKeyArg {
    fn from(value: String) -> Self {
        IdempotencyKeyArg(value)
    }
}

// Never fails: an error message would quote the key.
fn parse_api_key(text: &str) -> Result<ApiKey, std::convert::Infallible> {
    Ok(ApiKey(text.trim().to_owned()))
}

fn parse_amount(text: &str) -> Result<String, String> {
    opledger_domain::Amount::parse(text)
        .map(|a| a.to_string())
        .map_err(|e| format!("{e} (minimal units as digits, e.g. 1000000000000000 wei)"))
}

fn parse_credit_amount(text: &str) -> Result<String, String> {
    let amount = parse_amount(text)?;
    if amount == "0" {
        return Err("a credit is at least 1 minimal unit".to_owned());
    }
    Ok(amount)
}

fn parse_credit_id(text: &str) -> Result<CreditId, String> {
    CreditId::parse(text.trim()).ok_or_else(|| "not a credit id (64 hex digits)".to_owned())
}

fn parse_withdrawal_id(text: &str) -> Result<String, String> {
    uuid::Uuid::parse_str(text.trim())
        .map(|id| id.to_string())
        .map_err(|_| "not a withdrawal id (a UUID)".to_owned())
}

fn parse_state(text: &str) -> Result<WithdrawalState, String> {
    states::parse_state(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("opctl").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn help_documents_every_exit_code() {
        let help = Cli::command().render_long_help().to_string();
        for code in [
            "0  success",
            "1  the service refused",
            "2  usage",
            "3  cannot connect",
        ] {
            assert!(help.contains(code), "{code} missing from --help");
        }
        assert!(help.contains("4  watch") && help.contains("5  watch"));
        assert!(help.contains(
            "6  approve, reject, credit sign: the operations service's answer did not verify"
        ));
        assert!(help.contains("operator: credit"));
        for flag in ["--ca-file", "OPCTL_CA_FILE", "--allow-clear-text"] {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
    }

    #[test]
    fn tls_flags_are_global() {
        let cli = parse(&[
            "get",
            "0190c4c8-4b5d-7c6e-8f90-123456789abc",
            "--ca-file",
            "/etc/opledger/ca.pem",
            "--allow-clear-text",
        ])
        .expect("valid");
        assert_eq!(
            cli.global.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/opledger/ca.pem"))
        );
        assert!(cli.global.allow_clear_text);
        if std::env::var_os("OPCTL_CA_FILE").is_none() {
            let cli = parse(&["get", "0190c4c8-4b5d-7c6e-8f90-123456789abc"]).expect("valid");
            assert_eq!(
                (cli.global.ca_file, cli.global.allow_clear_text),
                (None, false)
            );
        }
    }

    #[test]
    fn the_api_key_from_the_environment_is_never_shown_in_help() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("OPCTL_API_KEY"));
        assert!(!help.contains("OPCTL_API_KEY="));
    }

    #[test]
    fn keys_never_appear_in_debug_output() {
        let cli = parse(&[
            "--api-key",
            "olk_abc_secretsecret",
            "create",
            "--account",
            "treasury",
            "--asset",
            "ETH",
            "--network",
            "anvil",
            "--to",
            "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
            "--amount",
            "1000",
            "--fee-cap",
            "10",
            "--idempotency-key",
            "f3c1f1a2-7d0e-4a43-9d55-0f7b0f1e2d3c",
        ])
        .expect("valid");
        let debug = format!("{cli:?}");
        assert!(!debug.contains("secretsecret"));
        assert!(!debug.contains("f3c1f1a2"));
        assert_eq!(
            cli.global.api_key.as_ref().map(ApiKey::expose),
            Some("olk_abc_secretsecret")
        );
    }

    #[test]
    fn a_repeated_flag_takes_the_last_value_and_states_accumulate() {
        let cli = parse(&[
            "--operations",
            "http://a:1",
            "list",
            "--operations",
            "http://b:2",
            "--state",
            "unknown",
            "--state",
            "signed",
        ])
        .expect("valid");
        assert_eq!(cli.global.operations, "http://b:2");
        match cli.command {
            Command::List(list) => assert_eq!(list.states.len(), 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_services_default_ports() {
        let cli = parse(&["get", "0190c4c8-4b5d-7c6e-8f90-123456789abc"]).expect("valid");
        let g = &cli.global;
        // The environment may override them; only check when it does not.
        if std::env::var_os("OPCTL_OPERATIONS_URL").is_none() {
            assert_eq!(g.operations, "http://127.0.0.1:15051");
        }
        if std::env::var_os("OPCTL_RECONCILER_URL").is_none() {
            assert_eq!(g.reconciler, "http://127.0.0.1:15055");
        }
        assert_eq!((g.timeout, g.json), (10, false));
    }

    #[test]
    fn malformed_values_are_usage_errors() {
        for args in [
            &["get", "not-a-uuid"][..],
            &[
                "resolve",
                "0190c4c8-4b5d-7c6e-8f90-123456789abc",
                "--outcome",
                "PAID",
                "--reason",
                "x",
            ],
            &["list", "--state", "PAID"],
            &["create", "--account", "a"],
            &[
                "watch",
                "0190c4c8-4b5d-7c6e-8f90-123456789abc",
                "--interval-ms",
                "1",
            ],
        ] {
            let err = parse(args).expect_err("usage error");
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
        let err = parse(&[
            "create",
            "--account",
            "a",
            "--asset",
            "ETH",
            "--network",
            "anvil",
            "--to",
            "0x0",
            "--amount",
            "01",
            "--fee-cap",
            "1",
        ])
        .expect_err("leading zero");
        assert!(err.to_string().contains("leading zero"));
    }

    #[test]
    fn credit_commands_parse_ids_amounts_and_versions_and_never_show_keys() {
        let id = "AB".repeat(32);
        let cli = parse(&[
            "credit",
            "sign",
            &id,
            "--tenant",
            "0190c4c8-0000-7c6e-8f90-123456789abc",
            "--operator-signing-key",
            &"5e".repeat(32),
            "--policy-version",
            "2",
        ])
        .expect("valid");
        assert!(!format!("{cli:?}").contains(&"5e".repeat(32)));
        match cli.command {
            Command::Credit {
                command: CreditCommand::Sign(args),
            } => {
                assert_eq!(args.credit_id.to_hex(), "ab".repeat(32));
                assert_eq!(args.policy_version, Some(2));
                assert_eq!(
                    args.signing
                        .operator_signing_key
                        .as_ref()
                        .map(SecretHex::expose),
                    Some("5e".repeat(32).as_str())
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        let create = |amount: &'static str, version: &'static str| {
            parse(&[
                "credit",
                "create",
                "--account",
                "treasury",
                "--asset",
                "ETH",
                "--amount",
                amount,
                "--tenant",
                "0190c4c8-0000-7c6e-8f90-123456789abc",
                "--policy-version",
                version,
            ])
        };
        assert!(create("500", "1").is_ok());
        for (amount, version) in [("0", "1"), ("05", "1"), ("500", "0"), ("500", "x")] {
            let err = create(amount, version).expect_err("usage error");
            assert_eq!(err.exit_code(), 2, "{amount} {version}");
        }
        for bad in ["00", "not-an-id", &"g".repeat(64)] {
            let err = parse(&["credit", "get", bad]).expect_err("not a credit id");
            assert_eq!(err.exit_code(), 2, "{bad}");
        }
        let help = Cli::command()
            .find_subcommand_mut("credit")
            .and_then(|c| c.find_subcommand_mut("sign"))
            .map(|c| c.render_long_help().to_string())
            .unwrap_or_default();
        assert!(help.contains("OPLEDGER_OPERATOR_KEY") && !help.contains("OPLEDGER_OPERATOR_KEY="));
        assert!(help.contains("--key-file") && help.contains("OPCTL_TENANT_ID"));
    }

    #[test]
    fn outcomes_and_states_parse_case_insensitively() {
        let cli = parse(&[
            "resolve",
            "0190c4c8-4b5d-7c6e-8f90-123456789abc",
            "--outcome",
            "verified_not_sent",
            "--reason",
            "x",
        ])
        .expect("valid");
        match cli.command {
            Command::Resolve { outcome, .. } => {
                assert_eq!(outcome.state(), WithdrawalState::VerifiedNotSent);
            }
            other => panic!("unexpected {other:?}"),
        }
        let cli = parse(&[
            "list",
            "--state",
            "unknown,Failed-Terminal",
            "--state",
            "CONFIRMED",
        ])
        .expect("valid");
        match cli.command {
            Command::List(list) => assert_eq!(
                list.states,
                vec![
                    WithdrawalState::Unknown,
                    WithdrawalState::FailedTerminal,
                    WithdrawalState::Confirmed
                ]
            ),
            other => panic!("unexpected {other:?}"),
        }
    }
}
