//! The arguments of the withdrawal, approval, watch, demo, inbox and custodian subcommands.

use super::values::{
    ApiKey, IdempotencyKeyArg, SecretHex, parse_amount, parse_api_key, parse_secret_hex,
    parse_state, parse_tenant_id, parse_withdrawal_id,
};
use clap::{Args, Subcommand};
use opledger_proto::v1::WithdrawalState;

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

/// `opctl custodian ...`.
#[derive(Subcommand, Debug, Clone)]
pub enum CustodianCommand {
    /// The provider's transactions with the withdrawal's destination and amount, created from a
    /// few minutes before its request was stored until now, as the provider lists them now; with
    /// the withdrawal's state and the transaction already bound to it, if any.
    Candidates {
        /// The withdrawal id.
        #[arg(value_parser = parse_withdrawal_id)]
        id: String,
    },
    /// Binds one listed transaction to a BROADCAST or UNKNOWN withdrawal, once and for good: it
    /// must be listed as a candidate now and be no other withdrawal's. The executor then follows
    /// it (a hash settles from the chain; terminal without one is released once the witness
    /// attests it).
    Bind {
        /// The withdrawal id.
        #[arg(value_parser = parse_withdrawal_id)]
        id: String,
        /// The provider's id of the transaction, as `opctl custodian candidates` lists it.
        #[arg(value_name = "PROVIDER_ID")]
        provider_id: String,
        /// Why this transaction is the withdrawal's, 1 to 200 characters, kept with the binding;
        /// no personal data.
        #[arg(long)]
        reason: String,
    },
}
