//! The command line of `opledger-admin`: global flags and every subcommand with its arguments.

use crate::trust;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "opledger-admin", about = "opledger administration")]
pub(crate) struct Cli {
    /// PostgreSQL URL of the owner role (not needed for `keystore`).
    #[arg(
        long,
        env = "OPLEDGER_ADMIN_DATABASE_URL",
        hide_env_values = true,
        default_value = ""
    )]
    pub(crate) database_url: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Applies pending schema migrations.
    Migrate,
    /// Tenants.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Credits a tenant's account idempotently as the database owner: an opening balance, with no
    /// second principal (a service's credit, deposit or CreditAccount, needs the witness).
    Credit {
        /// The tenant's name.
        #[arg(long)]
        tenant: String,
        /// The account name.
        #[arg(long)]
        account: String,
        /// The asset code.
        #[arg(long)]
        asset: String,
        /// Amount in minimal units.
        #[arg(long)]
        amount: String,
        /// Idempotency key of this credit: running the command again with it credits nothing.
        #[arg(long)]
        key: String,
    },
    /// Deposit addresses: which tenant account a deposit to an address belongs to. The witness
    /// credits a deposit with chain evidence only to the account its recipient is registered to.
    DepositAddress {
        #[command(subcommand)]
        command: DepositAddressCommand,
    },
    /// Checks ledger and operation invariants; exits 1 when any is violated.
    CheckInvariants,
    /// Webhook endpoints of the inbox and their verification keys. HMAC secrets are sealed with
    /// the inbox's first body key (`OPLEDGER_INBOX_BODY_KEYS`, the same value the service reads).
    Webhook {
        #[command(subcommand)]
        command: WebhookCommand,
    },
    /// The go/no-go report of the 13 controls, from the `control_NN_*` tests; works without a
    /// database. Exits 1 unless the verdict is GO.
    Controls {
        #[command(subcommand)]
        command: ControlsCommand,
    },
    /// Tenant trust statements (key registry, approval policy and credit policy) signed by a
    /// tenant administrator key pinned in the signer's and the witness's `[[trust_roots]]`;
    /// `trust keygen` works without a database.
    Trust {
        #[command(subcommand)]
        command: trust::TrustCommand,
    },
    /// Signer keystores (Ethereum keystore v3); works without a database.
    Keystore {
        #[command(subcommand)]
        command: KeystoreCommand,
    },
    /// Signer keys in a PKCS#11 token (an HSM); works without a database.
    Hsm {
        #[command(subcommand)]
        command: HsmCommand,
    },
}

/// Where a key is in a PKCS#11 token.
#[derive(clap::Args, Debug)]
pub(crate) struct HsmKey {
    /// The token's PKCS#11 module (SoftHSM2: /usr/lib/softhsm/libsofthsm2.so).
    #[arg(long)]
    pub module: std::path::PathBuf,
    /// The token's label.
    #[arg(long)]
    pub token_label: String,
    /// The key pair's label (the signer's `pkcs11.key_label`).
    #[arg(long)]
    pub key_label: String,
    /// File holding the token's user PIN.
    #[arg(long)]
    pub pin_file: std::path::PathBuf,
    /// Accept a software token (SoftHSM2): development and tests only.
    #[arg(long)]
    pub allow_software_token: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum HsmCommand {
    /// Generates a secp256k1 key pair inside the token (private half sensitive, never
    /// extractable) and prints its address; refuses a label already used.
    Keygen {
        #[command(flatten)]
        key: HsmKey,
    },
    /// Prints a key's address and how the token protects it (sensitive, extractable).
    Show {
        #[command(flatten)]
        key: HsmKey,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum DepositAddressCommand {
    /// Registers an address on a network to a tenant's account (once; an address never moves to
    /// another account).
    Add {
        /// The tenant's name.
        #[arg(long)]
        tenant: String,
        /// The network id, as in the witness's `[evidence.<id>]`.
        #[arg(long)]
        network: String,
        /// The address: 0x and 40 hex digits.
        #[arg(long)]
        address: String,
        /// The account credited for deposits to it.
        #[arg(long)]
        account: String,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum KeystoreCommand {
    /// Generates a new key into an encrypted keystore file and prints its address.
    New {
        /// Where to write the keystore JSON (refuses to overwrite).
        #[arg(long)]
        out: std::path::PathBuf,
        /// File holding the passphrase.
        #[arg(long)]
        passphrase_file: std::path::PathBuf,
        /// Key-derivation cost: standard (production) or light (development and tests only).
        #[arg(long, default_value = "standard")]
        kdf: Kdf,
    },
    /// Encrypts an existing secret key (64 hex digits in a file) into a keystore file.
    Import {
        /// File holding the secret key as hex (0x optional).
        #[arg(long)]
        secret_file: std::path::PathBuf,
        /// Where to write the keystore JSON (refuses to overwrite).
        #[arg(long)]
        out: std::path::PathBuf,
        /// File holding the passphrase.
        #[arg(long)]
        passphrase_file: std::path::PathBuf,
        /// Key-derivation cost: standard (production) or light (development and tests only).
        #[arg(long, default_value = "standard")]
        kdf: Kdf,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum ControlsCommand {
    /// Writes controls.md and controls.json and prints the Markdown.
    Report {
        /// Use the results of a run already made (cargo-nextest's JUnit file) instead of running
        /// the control tests now.
        #[arg(long)]
        junit: Option<std::path::PathBuf>,
        /// The repository (for the tests' sources and the documents).
        #[arg(long, default_value = ".")]
        repo: std::path::PathBuf,
        /// Where to write the report.
        #[arg(long, default_value = "target/controls")]
        out: std::path::PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum WebhookCommand {
    /// Creates an endpoint for a tenant and prints its path and its first secret (once).
    CreateEndpoint {
        /// The tenant's name.
        #[arg(long)]
        tenant: String,
        /// The provider label (first path segment), e.g. `custodian`.
        #[arg(long)]
        source: String,
        /// Event types this provider may send, comma-separated (deposit.confirmed,
        /// transfer.status, kyt.result; custodian.status for a custodian's own scheme).
        #[arg(long, value_delimiter = ',', required = true)]
        types: Vec<String>,
        /// Verify `v1a` signatures with this Ed25519 public key (`whpk_...`) instead of minting
        /// an HMAC secret.
        #[arg(long)]
        ed25519_public_key: Option<String>,
        /// How deliveries are verified: standard (Standard Webhooks), fireblocks_jws (Fireblocks'
        /// JWS against --jwks-url), bitgo_hmac (x-signature-sha256) or prime_hmac
        /// (X-CB-SIGNATURE).
        #[arg(long, default_value = "standard")]
        scheme: String,
        /// fireblocks_jws: the provider's key set URL (http or https).
        #[arg(long)]
        jwks_url: Option<String>,
        /// bitgo_hmac, prime_hmac: the name of an environment variable holding the secret the
        /// provider signs with (its bytes as written, 24 to 64); absent: one is minted and
        /// printed once.
        #[arg(long)]
        secret_env: Option<String>,
    },
    /// Adds a key to an endpoint (rotation: old and new verify until the old one is retired).
    AddSecret {
        /// The endpoint id (`whe_...`).
        endpoint: String,
        /// An Ed25519 public key (`whpk_...`) instead of a new HMAC secret.
        #[arg(long)]
        ed25519_public_key: Option<String>,
        /// bitgo_hmac, prime_hmac: the name of an environment variable holding the provider's
        /// new secret; absent: one is minted and printed once.
        #[arg(long)]
        secret_env: Option<String>,
    },
    /// Retires a key of an endpoint; it stops verifying within the inbox's cache TTL.
    RetireSecret {
        /// The endpoint id (`whe_...`).
        endpoint: String,
        /// The key's id, as printed when it was created.
        secret_id: i64,
    },
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub(crate) enum Kdf {
    Standard,
    Light,
}

#[derive(Subcommand, Debug)]
pub(crate) enum TenantCommand {
    /// Creates a tenant and prints its id.
    Create {
        /// Lowercase letters, digits, '-' and '_'.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum KeyCommand {
    /// Issues an API key; the key is printed once and cannot be shown again.
    Create {
        /// The tenant's name.
        #[arg(long)]
        tenant: String,
        /// client, approver, operator or service.
        #[arg(long)]
        role: String,
        /// A label for humans.
        #[arg(long, default_value = "")]
        label: String,
    },
    /// Revokes an API key by its id.
    Revoke {
        /// The key id (the 16 hex digits after `olk_`).
        key_id: String,
    },
}
