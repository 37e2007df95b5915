//! `opledger-admin webhook ...`: the inbox's webhook endpoints and their verification keys.

use crate::cli::WebhookCommand;
use crate::output::print;
use anyhow::Context;
use opledger_store::Store;
use opledger_store::inbox::{NewSecret, SealedBody};
use opledger_webhook::seal;
use opledger_webhook::secret::{Ed25519PublicKey, SigningSecret};

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

pub(crate) async fn webhook(
    store: &Store,
    command: WebhookCommand,
    json: bool,
) -> anyhow::Result<()> {
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
