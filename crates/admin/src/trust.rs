//! `opledger-admin trust ...`: tenant administrator keys and the signed trust statements (key
//! registry, approval policy and credit policy) the signer and the witness check against the
//! administrator key they pin.
//!
//! Key files hold an Ed25519 seed as 64 hex digits on one line, created with mode 0600 and never
//! overwritten (the same format as `opctl approver keygen`).

use anyhow::Context;
use opledger_domain::amount::Amount;
use opledger_domain::approval::{
    AutomatedApprover, CreditRule, KeyId, KeyKind, RegisteredKey, SigningKey, TrustParts,
    TrustStatement, verifying_key,
};
use opledger_domain::ids::TenantId;
use opledger_domain::payload::AssetCode;
use opledger_domain::policy::ApprovalRule;
use opledger_keyfile::public_hex;
use opledger_store::Store;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand, Debug)]
pub enum TrustCommand {
    /// Writes a new Ed25519 administrator key to a new file (mode 0600) and prints its public key
    /// (pin it in the signer's and the witness's `[[trust_roots]]`) and key id.
    Keygen {
        /// The key file to create (never overwritten).
        #[arg(long)]
        out: PathBuf,
    },
    /// Builds a trust statement, signs it with the administrator key and publishes it as the
    /// tenant's next version. Every statement is complete: list every active key, rule and credit
    /// rule.
    Publish(Box<PublishArgs>),
    /// Prints the tenant's newest trust statement, decoded (the signature is checked by the
    /// signer against its pinned keys, not here).
    Show {
        /// The tenant's name or id.
        #[arg(long)]
        tenant: String,
    },
}

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// The tenant's name or id.
    #[arg(long)]
    tenant: String,
    /// The administrator key file (its public key must be pinned in the signer's and the witness's
    /// config).
    #[arg(long)]
    admin_key_file: PathBuf,
    /// The version to publish (default: the newest published plus one, or 1).
    #[arg(long)]
    version: Option<u64>,
    /// An approver's Ed25519 public key (64 hex digits); repeat for each approver.
    #[arg(long = "approver", value_name = "PUBHEX", required = true)]
    approvers: Vec<String>,
    /// A service (automated approver) public key (64 hex digits); repeatable.
    #[arg(long = "service", value_name = "PUBHEX")]
    services: Vec<String>,
    /// An operator's Ed25519 public key (64 hex digits); repeatable. Operators sign credit
    /// statements (operator credits, deposits without chain evidence) and never count as
    /// withdrawal approvers.
    #[arg(long = "operator", value_name = "PUBHEX")]
    operators: Vec<String>,
    /// A KYT screening provider's Ed25519 public key (64 hex digits, or the provider's Standard
    /// Webhooks `whpk_...` form); repeatable. A screening result counts (for approvals and for the
    /// signer) only when its `v1a` signature verifies with one of these keys.
    #[arg(long = "kyt", value_name = "PUBHEX")]
    kyt_providers: Vec<String>,
    /// A revoked key id (32 hex digits); repeatable. Revoked keys never count again.
    #[arg(long = "revoke", value_name = "KEYID")]
    revoked: Vec<String>,
    /// A rule: withdrawals of ASSET from MIN_AMOUNT (minimal units) on need REQUIRED distinct
    /// approvers (1 to 10); repeatable. An asset with rules needs one at MIN_AMOUNT 0; an asset
    /// without rules needs one approver.
    #[arg(long = "rule", value_name = "ASSET:MIN_AMOUNT:REQUIRED")]
    rules: Vec<String>,
    /// An automated approver: the SERVICE key KEYID counts as one approver of ASSET for amounts
    /// strictly below BELOW; repeatable.
    #[arg(long = "automated", value_name = "ASSET:KEYID:BELOW")]
    automated: Vec<String>,
    /// An asset whose withdrawals need a KYT pass signed by a `--kyt` key before approvals count
    /// and before the signer signs; repeatable.
    #[arg(long = "kyt-required", value_name = "ASSET")]
    kyt_required: Vec<String>,
    /// A credit rule: credits of ASSET from MIN_AMOUNT (minimal units) on need REQUIRED distinct
    /// operators' signed credit statements (1 to 10); repeatable. An asset with credit rules needs
    /// one at MIN_AMOUNT 0; an asset without credit rules needs one operator.
    #[arg(long = "credit-rule", value_name = "ASSET:MIN_AMOUNT:REQUIRED")]
    credit_rules: Vec<String>,
}

/// A new administrator key written to `path` (mode 0600, never overwriting).
pub fn generate_key(path: &Path) -> anyhow::Result<SigningKey> {
    Ok(opledger_keyfile::generate(path)?)
}

/// Reads a key file (the error never quotes the content).
pub fn read_key(path: &Path) -> anyhow::Result<SigningKey> {
    opledger_keyfile::read(path).with_context(|| format!("key file {}", path.display()))
}

fn public_key(flag: &str, text: &str, kind: KeyKind) -> anyhow::Result<RegisteredKey> {
    let text = text.trim();
    let bytes = match (kind, text.strip_prefix("whpk_")) {
        (KeyKind::Kyt, Some(_)) => opledger_webhook::Ed25519PublicKey::parse(text)
            .map_err(|e| anyhow::anyhow!("{flag} {text}: {e}"))?
            .to_bytes()
            .to_vec(),
        _ => hex::decode(text)
            .map_err(|_| anyhow::anyhow!("{flag} {text}: expected 64 hex digits"))?,
    };
    let key = verifying_key(&bytes)
        .map_err(|_| anyhow::anyhow!("{flag} {text}: not a valid Ed25519 public key"))?;
    Ok(RegisteredKey::new(key, kind))
}

fn asset(flag: &str, text: &str) -> anyhow::Result<AssetCode> {
    AssetCode::parse(text).map_err(|e| anyhow::anyhow!("{flag} {text}: asset: {e}"))
}

fn three<'a>(flag: &str, text: &'a str, form: &str) -> anyhow::Result<[&'a str; 3]> {
    let parts: Vec<&str> = text.split(':').collect();
    parts
        .try_into()
        .map_err(|_| anyhow::anyhow!("{flag} {text}: expected {form}"))
}

/// `ASSET:MIN_AMOUNT:REQUIRED` of `--rule` and `--credit-rule`.
fn threshold(flag: &str, text: &str, what: &str) -> anyhow::Result<(AssetCode, Amount, u32)> {
    let [a, min, required] = three(flag, text, "ASSET:MIN_AMOUNT:REQUIRED")?;
    Ok((
        asset(flag, a)?,
        Amount::parse(min).map_err(|e| anyhow::anyhow!("{flag} {text}: min amount: {e}"))?,
        required
            .parse()
            .map_err(|_| anyhow::anyhow!("{flag} {text}: required {what}: 1 to 10"))?,
    ))
}

/// The trust parts the flags describe.
pub fn parts(args: &PublishArgs) -> anyhow::Result<TrustParts> {
    let mut parts = TrustParts::default();
    for (flag, texts, kind) in [
        ("--approver", &args.approvers, KeyKind::Approver),
        ("--service", &args.services, KeyKind::Service),
        ("--operator", &args.operators, KeyKind::Operator),
        ("--kyt", &args.kyt_providers, KeyKind::Kyt),
    ] {
        for text in texts {
            parts.keys.push(public_key(flag, text, kind)?);
        }
    }
    for text in &args.revoked {
        parts.revoked.push(
            KeyId::parse(text.trim())
                .map_err(|_| anyhow::anyhow!("--revoke {text}: expected a 32-hex-digit key id"))?,
        );
    }
    for text in &args.rules {
        let (asset, min_amount, required_approvals) = threshold("--rule", text, "approvals")?;
        parts.rules.push((
            asset,
            ApprovalRule {
                min_amount,
                required_approvals,
            },
        ));
    }
    for text in &args.automated {
        let [a, key_id, below] = three("--automated", text, "ASSET:KEYID:BELOW")?;
        parts.automated.push(AutomatedApprover {
            asset: asset("--automated", a)?,
            key_id: KeyId::parse(key_id)
                .map_err(|_| anyhow::anyhow!("--automated {text}: expected a key id"))?,
            below: Amount::parse(below)
                .map_err(|e| anyhow::anyhow!("--automated {text}: below: {e}"))?,
        });
    }
    for text in &args.kyt_required {
        parts.kyt_required.push(asset("--kyt-required", text)?);
    }
    for text in &args.credit_rules {
        let (asset, min_amount, required_operators) =
            threshold("--credit-rule", text, "operators")?;
        parts.credit_rules.push((
            asset,
            CreditRule {
                min_amount,
                required_operators,
            },
        ));
    }
    Ok(parts)
}

async fn tenant_id(store: &Store, tenant: &str) -> anyhow::Result<TenantId> {
    if let Ok(id) = tenant.parse::<TenantId>() {
        return Ok(id);
    }
    store
        .tenant_by_name(tenant)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
        .context("no such tenant")
}

/// The statement as JSON and as text.
fn describe(statement: &TrustStatement) -> (String, serde_json::Value) {
    (describe_text(statement), describe_json(statement))
}

/// The statement as JSON: keys, revoked key ids, approval rules, automated approvers, the assets
/// that need a KYT pass and the credit rules.
fn describe_json(statement: &TrustStatement) -> serde_json::Value {
    let keys: Vec<_> = statement
        .keys()
        .map(|k| {
            serde_json::json!({
                "key_id": k.key_id.to_hex(),
                "public_key": hex::encode(k.public_key.as_bytes()),
                "kind": k.kind.as_str(),
            })
        })
        .collect();
    let revoked: Vec<String> = statement.revoked().iter().map(KeyId::to_hex).collect();
    let mut rules = Vec::new();
    for (asset, policy) in statement.policies() {
        for r in policy.rules() {
            rules.push(serde_json::json!({
                "asset": asset,
                "min_amount": r.min_amount.to_string(),
                "required_approvals": r.required_approvals,
            }));
        }
    }
    let automated: Vec<_> = statement
        .automated()
        .iter()
        .map(|a| {
            serde_json::json!({
                "asset": a.asset.as_str(),
                "key_id": a.key_id.to_hex(),
                "below": a.below.to_string(),
            })
        })
        .collect();
    let kyt: Vec<&str> = statement
        .kyt_required_assets()
        .iter()
        .map(AssetCode::as_str)
        .collect();
    let credit_rules: Vec<_> = statement
        .credit_rules()
        .map(|(asset, r)| {
            serde_json::json!({
                "asset": asset,
                "min_amount": r.min_amount.to_string(),
                "required_operators": r.required_operators,
            })
        })
        .collect();
    serde_json::json!({
        "tenant_id": statement.tenant_id().to_string(),
        "version": statement.version(),
        "keys": keys,
        "revoked": revoked,
        "rules": rules,
        "automated": automated,
        "kyt_required": kyt,
        "credit_rules": credit_rules,
    })
}

/// The statement as text, one line per key, revoked key id, rule, automated approver, KYT asset
/// and credit rule; says what applies when there are no (credit) rules.
fn describe_text(statement: &TrustStatement) -> String {
    let mut text = format!(
        "tenant     {}\nversion    {}\n",
        statement.tenant_id(),
        statement.version()
    );
    for k in statement.keys() {
        text.push_str(&format!(
            "key        {} {:<8} {}\n",
            k.key_id,
            k.kind.as_str(),
            hex::encode(k.public_key.as_bytes())
        ));
    }
    for id in statement.revoked() {
        text.push_str(&format!("revoked    {}\n", id.to_hex()));
    }
    let mut rules = String::new();
    for (asset, policy) in statement.policies() {
        for r in policy.rules() {
            rules.push_str(&format!(
                "rule       {asset} from {} needs {}\n",
                r.min_amount, r.required_approvals
            ));
        }
    }
    if rules.is_empty() {
        text.push_str("rules      none (1 approver for every asset and amount)\n");
    }
    text.push_str(&rules);
    for a in statement.automated() {
        text.push_str(&format!(
            "automated  {} key {} below {}\n",
            a.asset.as_str(),
            a.key_id,
            a.below
        ));
    }
    for asset in statement.kyt_required_assets() {
        text.push_str(&format!("kyt pass   {}\n", asset.as_str()));
    }
    let mut credits = String::new();
    for (asset, r) in statement.credit_rules() {
        credits.push_str(&format!(
            "credit     {asset} from {} needs {} operators\n",
            r.min_amount, r.required_operators
        ));
    }
    if credits.is_empty() {
        text.push_str("credits    no rules (1 operator for every asset and amount)\n");
    }
    text.push_str(&credits);
    text.trim_end().to_owned()
}

/// `trust keygen`, which needs no database.
pub fn keygen(out: &Path, json: bool) -> anyhow::Result<()> {
    let key = generate_key(out)?;
    let public = public_hex(&key);
    let key_id = KeyId::of(&key.verifying_key());
    crate::output::print(
        json,
        &format!(
            "key file    {} (mode 0600; keep it offline when not publishing)\npublic key  {public}\n\
             key id      {key_id}",
            out.display()
        ),
        serde_json::json!({ "key_file": out.display().to_string(), "public_key": public, "key_id": key_id.to_hex() }),
    );
    Ok(())
}

/// `trust publish` and `trust show`.
pub async fn run(store: &Store, command: TrustCommand, json: bool) -> anyhow::Result<()> {
    match command {
        TrustCommand::Keygen { out } => keygen(&out, json)?,
        TrustCommand::Publish(args) => {
            let admin = read_key(&args.admin_key_file)?;
            let tenant = tenant_id(store, &args.tenant).await?;
            let newest = store
                .trust_statement(tenant)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
                .map_or(0, |t| t.version);
            let version = match args.version {
                Some(v) => {
                    anyhow::ensure!(
                        v > newest,
                        "--version {v}: the newest published version is {newest}; a new \
                         statement needs a higher one"
                    );
                    v
                }
                None => newest + 1,
            };
            let statement = TrustStatement::new(tenant, version, parts(&args)?)
                .map_err(|e| anyhow::anyhow!("the trust statement is refused: {e}"))?;
            let bytes = statement.canonical_bytes();
            let signature = statement.sign(&admin);
            // What the signer will do with its pinned key: refuse to publish what would not verify.
            TrustStatement::verify_signed(&bytes, &signature, tenant, &[admin.verifying_key()])
                .map_err(|e| anyhow::anyhow!("the signed statement does not verify: {e}"))?;
            let published = store
                .publish_trust_statement(tenant, &bytes, &signature.to_bytes())
                .await
                .map_err(|e| {
                    anyhow::anyhow!("cannot publish the trust statement: {}", e.log_safe())
                })?;
            let admin_public = public_hex(&admin);
            let (text, mut value) = describe(&statement);
            value["admin_public_key"] = serde_json::Value::String(admin_public.clone());
            crate::output::print(
                json,
                &format!(
                    "published version {published}\nadmin key  {admin_public} (the signer must \
                     pin it in [[trust_roots]])\n{text}"
                ),
                value,
            );
        }
        TrustCommand::Show { tenant } => {
            let tenant = tenant_id(store, &tenant).await?;
            let stored = store
                .trust_statement(tenant)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
                .context("the tenant has no published trust statement")?;
            let statement = stored
                .decode()
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
            let (text, value) = describe(&statement);
            crate::output::print(json, &text, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
