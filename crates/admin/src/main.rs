//! `opledger-admin`: schema migrations, tenants, API keys, webhook endpoints and ledger invariant
//! checks.
//!
//! Runs with the owner role's database URL (`--database-url` or `OPLEDGER_ADMIN_DATABASE_URL`).
//! Issued API keys are printed once on stdout and never stored in clear. Trust statements are
//! signed here with a tenant administrator key read from a file and published as new versions.

mod controls;
mod trust;

use anyhow::Context;
use clap::{Parser, Subcommand};
use opledger_store::inbox::{NewSecret, SealedBody};
use opledger_store::keys::Role;
use opledger_store::{MIGRATOR, Store, StoreConfig};
use opledger_webhook::seal;
use opledger_webhook::secret::{Ed25519PublicKey, SigningSecret};

#[derive(Parser, Debug)]
#[command(name = "opledger-admin", about = "opledger administration")]
struct Cli {
    /// PostgreSQL URL of the owner role (not needed for `keystore`).
    #[arg(
        long,
        env = "OPLEDGER_ADMIN_DATABASE_URL",
        hide_env_values = true,
        default_value = ""
    )]
    database_url: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
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
}

#[derive(Subcommand, Debug)]
enum DepositAddressCommand {
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
enum KeystoreCommand {
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
enum ControlsCommand {
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
enum WebhookCommand {
    /// Creates an endpoint for a tenant and prints its path and its first secret (once).
    CreateEndpoint {
        /// The tenant's name.
        #[arg(long)]
        tenant: String,
        /// The provider label (first path segment), e.g. `custodian`.
        #[arg(long)]
        source: String,
        /// Event types this provider may send, comma-separated (deposit.confirmed,
        /// transfer.status, kyt.result).
        #[arg(long, value_delimiter = ',', required = true)]
        types: Vec<String>,
        /// Verify `v1a` signatures with this Ed25519 public key (`whpk_...`) instead of minting
        /// an HMAC secret.
        #[arg(long)]
        ed25519_public_key: Option<String>,
    },
    /// Adds a key to an endpoint (rotation: old and new verify until the old one is retired).
    AddSecret {
        /// The endpoint id (`whe_...`).
        endpoint: String,
        /// An Ed25519 public key (`whpk_...`) instead of a new HMAC secret.
        #[arg(long)]
        ed25519_public_key: Option<String>,
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
enum Kdf {
    Standard,
    Light,
}

#[derive(Subcommand, Debug)]
enum TenantCommand {
    /// Creates a tenant and prints its id.
    Create {
        /// Lowercase letters, digits, '-' and '_'.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
enum KeyCommand {
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Keystore { command } = &cli.command {
        return keystore(command, cli.json);
    }
    if let Command::Trust {
        command: trust::TrustCommand::Keygen { out },
    } = &cli.command
    {
        return trust::keygen(out, cli.json);
    }
    if let Command::Controls {
        command: ControlsCommand::Report { junit, repo, out },
    } = &cli.command
    {
        let go = controls::report(junit.as_deref(), repo, out, &machine())?;
        std::process::exit(if go { 0 } else { 1 });
    }
    let config = StoreConfig {
        max_connections: 2,
        ..StoreConfig::default()
    };
    let store = Store::connect(&cli.database_url, config)
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to the database: {}", e.log_safe()))?;
    match cli.command {
        Command::Migrate => {
            MIGRATOR
                .run(store.pool())
                .await
                .context("migration failed")?;
            let applied = MIGRATOR.iter().count();
            print(
                cli.json,
                &format!("schema is current ({applied} migrations)"),
                serde_json::json!({ "migrations": applied }),
            );
        }
        Command::Tenant {
            command: TenantCommand::Create { name },
        } => {
            let tenant_id = store
                .create_tenant(&name)
                .await
                .map_err(|e| anyhow::anyhow!("cannot create tenant: {}", e.log_safe()))?;
            print(
                cli.json,
                &tenant_id.to_string(),
                serde_json::json!({ "tenant_id": tenant_id.to_string(), "name": name }),
            );
        }
        Command::Key {
            command:
                KeyCommand::Create {
                    tenant,
                    role,
                    label,
                },
        } => {
            let role =
                Role::parse(&role).context("role must be client, approver, operator or service")?;
            let tenant_id = store
                .tenant_by_name(&tenant)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
                .context("no such tenant")?;
            let issued = store
                .create_api_key(tenant_id, role, &label)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
            print(
                cli.json,
                issued.token.as_str(),
                serde_json::json!({ "key_id": issued.key_id, "api_key": issued.token.as_str(), "tenant_id": tenant_id.to_string(), "role": role.as_str() }),
            );
        }
        Command::Key {
            command: KeyCommand::Revoke { key_id },
        } => {
            store
                .revoke_api_key(&key_id)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
            print(
                cli.json,
                "revoked",
                serde_json::json!({ "revoked": key_id }),
            );
        }
        Command::Credit {
            tenant,
            account,
            asset,
            amount,
            key,
        } => {
            use opledger_domain::{amount::Amount, idempotency::IdempotencyKey, payload};
            let tenant_id = store
                .tenant_by_name(&tenant)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
                .context("no such tenant")?;
            let key = IdempotencyKey::parse(&key).map_err(|e| anyhow::anyhow!("--key: {e}"))?;
            let account = payload::AccountName::parse(&account)
                .map_err(|e| anyhow::anyhow!("--account: {e}"))?;
            let asset =
                payload::AssetCode::parse(&asset).map_err(|e| anyhow::anyhow!("--asset: {e}"))?;
            let amount = Amount::parse(&amount).map_err(|e| anyhow::anyhow!("--amount: {e}"))?;
            anyhow::ensure!(!amount.is_zero(), "--amount must be greater than zero");
            let credited = store
                .credit_account(opledger_store::ledger::NewCredit {
                    tenant_id,
                    key: &key,
                    account: &account,
                    asset: &asset,
                    amount,
                })
                .await
                .map_err(|e| anyhow::anyhow!("cannot credit: {}", e.log_safe()))?;
            let b = &credited.balance;
            print(
                cli.json,
                &format!(
                    "available {} held {} (replayed: {})",
                    b.available, b.held, credited.replayed
                ),
                serde_json::json!({ "available": b.available.to_string(), "held": b.held.to_string(), "replayed": credited.replayed }),
            );
        }
        Command::DepositAddress {
            command:
                DepositAddressCommand::Add {
                    tenant,
                    network,
                    address,
                    account,
                },
        } => {
            use opledger_domain::payload;
            let tenant_id = store
                .tenant_by_name(&tenant)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
                .context("no such tenant")?;
            let network = payload::NetworkId::parse(&network)
                .map_err(|e| anyhow::anyhow!("--network: {e}"))?;
            let account = payload::AccountName::parse(&account)
                .map_err(|e| anyhow::anyhow!("--account: {e}"))?;
            let mut bytes = [0_u8; 20];
            address
                .strip_prefix("0x")
                .and_then(|digits| hex::decode_to_slice(digits, &mut bytes).ok())
                .context("--address must be 0x and 40 hex digits")?;
            let added = store
                .register_deposit_address(network.as_str(), &bytes, tenant_id, &account)
                .await
                .map_err(|e| match e {
                    opledger_store::StoreError::Conflict { .. } => anyhow::anyhow!(
                        "the address is already registered to another account: nothing changed"
                    ),
                    other => anyhow::anyhow!("cannot register: {}", other.log_safe()),
                })?;
            print(
                cli.json,
                if added {
                    "registered"
                } else {
                    "already registered to this account"
                },
                serde_json::json!({ "registered": added }),
            );
        }
        Command::Webhook { command } => webhook(&store, command, cli.json).await?,
        Command::Trust { command } => trust::run(&store, command, cli.json).await?,
        // Handled before connecting to the database.
        Command::Keystore { .. } | Command::Controls { .. } => {}
        Command::CheckInvariants => {
            let violations = store
                .check_invariants()
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
            let report: Vec<_> = violations
                .iter()
                .map(|v| serde_json::json!({ "invariant": v.invariant, "rows": v.rows }))
                .collect();
            let text = if violations.is_empty() {
                format!(
                    "all {} invariants hold",
                    opledger_store::invariants::CHECKS.len()
                )
            } else {
                violations
                    .iter()
                    .map(|v| format!("VIOLATED: {} ({:?})", v.invariant, v.rows))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            print(cli.json, &text, serde_json::json!({ "violations": report }));
            if !violations.is_empty() {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

pub(crate) fn print(json: bool, text: &str, value: serde_json::Value) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}

fn read_passphrase(path: &std::path::Path) -> anyhow::Result<zeroize::Zeroizing<Vec<u8>>> {
    let raw =
        zeroize::Zeroizing::new(std::fs::read(path).context("cannot read the passphrase file")?);
    let end = raw
        .iter()
        .rposition(|b| *b != b'\n' && *b != b'\r')
        .map_or(0, |i| i + 1);
    anyhow::ensure!(end >= 8, "the passphrase must have at least 8 bytes");
    Ok(zeroize::Zeroizing::new(raw[..end].to_vec()))
}

fn keystore(command: &KeystoreCommand, json: bool) -> anyhow::Result<()> {
    use opledger_evm::signer::{KdfCost, KeyProvider, LocalKey, encrypt_keystore};
    use rand::RngCore;
    let (secret, out, passphrase_file, kdf) = match command {
        KeystoreCommand::New {
            out,
            passphrase_file,
            kdf,
        } => {
            let mut secret = zeroize::Zeroizing::new([0_u8; 32]);
            rand::rng().fill_bytes(secret.as_mut());
            (secret, out, passphrase_file, kdf)
        }
        KeystoreCommand::Import {
            secret_file,
            out,
            passphrase_file,
            kdf,
        } => {
            let text = zeroize::Zeroizing::new(
                std::fs::read_to_string(secret_file).context("cannot read the secret file")?,
            );
            let hex_digits = text.trim().trim_start_matches("0x");
            let mut secret = zeroize::Zeroizing::new([0_u8; 32]);
            hex::decode_to_slice(hex_digits, secret.as_mut())
                .context("the secret file must hold 64 hex digits")?;
            (secret, out, passphrase_file, kdf)
        }
    };
    let cost = match kdf {
        Kdf::Standard => KdfCost::Standard,
        Kdf::Light => KdfCost::Light,
    };
    anyhow::ensure!(
        !out.exists(),
        "{} exists: refusing to overwrite a keystore",
        out.display()
    );
    let passphrase = read_passphrase(passphrase_file)?;
    let address = LocalKey::from_secret_bytes(secret.clone())?.address();
    let document = encrypt_keystore(&secret, &passphrase, cost, &mut rand::rng())?;
    std::fs::write(out, document).context("cannot write the keystore")?;
    let address = format!("{address:#x}");
    print(
        json,
        &address,
        serde_json::json!({ "address": address, "keystore": out.display().to_string() }),
    );
    Ok(())
}

const EVENT_TYPES: [&str; 3] = ["deposit.confirmed", "transfer.status", "kyt.result"];

/// A new key for an endpoint: an Ed25519 public key as given, or a freshly minted HMAC secret
/// sealed with the inbox's first body key (returned so it can be printed once).
fn new_secret(
    endpoint_id: &str,
    ed25519: Option<&str>,
) -> anyhow::Result<(NewSecret, Option<SigningSecret>)> {
    if let Some(text) = ed25519 {
        let key = Ed25519PublicKey::parse(text)
            .map_err(|e| anyhow::anyhow!("--ed25519-public-key: {e}"))?;
        return Ok((NewSecret::Ed25519(key.to_bytes().to_vec()), None));
    }
    let keys = std::env::var("OPLEDGER_INBOX_BODY_KEYS")
        .context("OPLEDGER_INBOX_BODY_KEYS must hold the inbox's body keys to seal a secret")?;
    let keys = zeroize::Zeroizing::new(keys);
    let keys = seal::parse_key_list(&keys)
        .map_err(|e| anyhow::anyhow!("OPLEDGER_INBOX_BODY_KEYS: {e}"))?;
    let secret = SigningSecret::generate();
    let sealed = seal::seal_secret(&keys[0], endpoint_id, &secret)
        .map_err(|e| anyhow::anyhow!("cannot seal the secret: {e}"))?;
    let stored = SealedBody {
        key_id: i16::from_ne_bytes(sealed.key_id.to_ne_bytes()),
        nonce: sealed.nonce.to_vec(),
        ciphertext: sealed.ciphertext,
    };
    Ok((NewSecret::Hmac(stored), Some(secret)))
}

async fn webhook(store: &Store, command: WebhookCommand, json: bool) -> anyhow::Result<()> {
    match command {
        WebhookCommand::CreateEndpoint {
            tenant,
            source,
            types,
            ed25519_public_key,
        } => {
            if let Some(bad) = types.iter().find(|t| !EVENT_TYPES.contains(&t.as_str())) {
                anyhow::bail!("--types: unknown event type {bad:?} (known: {EVENT_TYPES:?})");
            }
            let tenant_id = store
                .tenant_by_name(&tenant)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
                .context("no such tenant")?;
            let endpoint_id = opledger_store::inbox::new_endpoint_id();
            let (first, secret) = new_secret(&endpoint_id, ed25519_public_key.as_deref())?;
            let secret_id = store
                .create_webhook_endpoint_with_id(&endpoint_id, tenant_id, &source, &types, &first)
                .await
                .map_err(|e| anyhow::anyhow!("cannot create the endpoint: {}", e.log_safe()))?;
            let path = format!("/webhooks/{source}/{endpoint_id}");
            let secret_text = secret.map(|s| s.to_whsec_string());
            let shown = secret_text.as_ref().map_or("(ed25519 key)", |s| s.as_str());
            print(
                json,
                &format!("endpoint {path}\nsecret {shown} (id {secret_id}; shown once)"),
                serde_json::json!({ "endpoint_id": endpoint_id, "path": path, "secret_id": secret_id, "secret": secret_text.as_ref().map(|s| s.as_str()) }),
            );
        }
        WebhookCommand::AddSecret {
            endpoint,
            ed25519_public_key,
        } => {
            let (new, secret) = new_secret(&endpoint, ed25519_public_key.as_deref())?;
            let secret_id = store
                .add_webhook_secret(&endpoint, &new)
                .await
                .map_err(|e| anyhow::anyhow!("cannot add the secret: {}", e.log_safe()))?;
            let secret_text = secret.map(|s| s.to_whsec_string());
            let shown = secret_text.as_ref().map_or("(ed25519 key)", |s| s.as_str());
            print(
                json,
                &format!("secret {shown} (id {secret_id}; shown once)"),
                serde_json::json!({ "secret_id": secret_id, "secret": secret_text.as_ref().map(|s| s.as_str()) }),
            );
        }
        WebhookCommand::RetireSecret {
            endpoint,
            secret_id,
        } => {
            let retired = store
                .retire_webhook_secret(&endpoint, secret_id)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
            anyhow::ensure!(retired, "no active secret {secret_id} on that endpoint");
            print(json, "retired", serde_json::json!({ "retired": secret_id }));
        }
    }
    Ok(())
}

/// The machine this runs on, for reports: CPU model and count.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cpus} cores, {model}, {}", std::env::consts::OS)
}
