//! The arguments of `opctl credit ...`.

use super::values::{
    IdempotencyKeyArg, SecretHex, parse_credit_amount, parse_credit_id, parse_secret_hex,
    parse_tenant_id,
};
use crate::credit_review::CreditId;
use clap::{Args, Subcommand};

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
