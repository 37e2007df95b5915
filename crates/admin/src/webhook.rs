//! `opledger-admin webhook ...`: the inbox's webhook endpoints, their verification scheme and
//! their keys.
//!
//! - `standard` endpoints verify Standard Webhooks with minted `whsec_` secrets or Ed25519 keys;
//! - `fireblocks_jws` endpoints verify Fireblocks' JWS against the provider's key set URL and
//!   store no key;
//! - `bitgo_hmac` and `prime_hmac` endpoints verify the provider's HMAC with a secret the provider
//!   signs with: read from an environment variable (never an argument, which other users can
//!   see), or minted here and printed once.

use crate::cli::WebhookCommand;
use crate::output::print;
use anyhow::Context;
use opledger_store::Store;
use opledger_store::inbox::{NewEndpoint, NewSecret, SealedBody};
use opledger_webhook::provider::{CUSTODIAN_STATUS, EndpointScheme};
use opledger_webhook::seal;
use opledger_webhook::secret::{Ed25519PublicKey, SigningSecret};
use zeroize::Zeroizing;

const EVENT_TYPES: [&str; 3] = ["deposit.confirmed", "transfer.status", "kyt.result"];

/// A key for an endpoint and the text to print once (none for a public key or an imported
/// secret).
type NewKey = (NewSecret, Option<Zeroizing<String>>);

/// Seals an HMAC secret with the inbox's first body key (`OPLEDGER_INBOX_BODY_KEYS`).
fn sealed(endpoint_id: &str, secret: &SigningSecret) -> anyhow::Result<NewSecret> {
    let keys = std::env::var("OPLEDGER_INBOX_BODY_KEYS")
        .context("OPLEDGER_INBOX_BODY_KEYS must hold the inbox's body keys to seal a secret")?;
    let keys = Zeroizing::new(keys);
    let keys = seal::parse_key_list(&keys)
        .map_err(|e| anyhow::anyhow!("OPLEDGER_INBOX_BODY_KEYS: {e}"))?;
    let sealed = seal::seal_secret(&keys[0], endpoint_id, secret)
        .map_err(|e| anyhow::anyhow!("cannot seal the secret: {e}"))?;
    Ok(NewSecret::Hmac(SealedBody {
        key_id: i16::from_ne_bytes(sealed.key_id.to_ne_bytes()),
        nonce: sealed.nonce.to_vec(),
        ciphertext: sealed.ciphertext,
    }))
}

/// A Standard Webhooks key: an Ed25519 public key as given, or a freshly minted HMAC secret.
fn standard_key(endpoint_id: &str, ed25519: Option<&str>) -> anyhow::Result<NewKey> {
    if let Some(text) = ed25519 {
        let key = Ed25519PublicKey::parse(text)
            .map_err(|e| anyhow::anyhow!("--ed25519-public-key: {e}"))?;
        return Ok((NewSecret::Ed25519(key.to_bytes().to_vec()), None));
    }
    let secret = SigningSecret::generate();
    Ok((
        sealed(endpoint_id, &secret)?,
        Some(secret.to_whsec_string()),
    ))
}

/// A custodian's HMAC secret (its bytes as the provider uses them): read from the environment
/// variable `secret_env`, or minted (64 hex digits) and returned for printing once.
fn provider_key(endpoint_id: &str, secret_env: Option<&str>) -> anyhow::Result<NewKey> {
    let (text, shown) = match secret_env {
        Some(name) => {
            let text = Zeroizing::new(
                std::env::var(name)
                    .with_context(|| format!("--secret-env: {name} is not set (or not UTF-8)"))?,
            );
            (text, false)
        }
        None => (
            Zeroizing::new(hex::encode(rand::random::<[u8; 32]>())),
            true,
        ),
    };
    let secret = SigningSecret::from_bytes(text.as_bytes())
        .map_err(|_| anyhow::anyhow!("the provider's secret must be 24 to 64 bytes"))?;
    let key = sealed(endpoint_id, &secret)?;
    Ok((key, shown.then_some(text)))
}

/// The key an endpoint of `scheme` gets (none for `fireblocks_jws`), refusing options that do not
/// belong to the scheme.
fn key_for(
    scheme: EndpointScheme,
    endpoint_id: &str,
    ed25519: Option<&str>,
    secret_env: Option<&str>,
) -> anyhow::Result<Option<NewKey>> {
    match scheme {
        EndpointScheme::Standard => {
            anyhow::ensure!(
                secret_env.is_none(),
                "--secret-env is for bitgo_hmac and prime_hmac"
            );
            standard_key(endpoint_id, ed25519).map(Some)
        }
        EndpointScheme::FireblocksJws => {
            anyhow::ensure!(
                ed25519.is_none() && secret_env.is_none(),
                "a fireblocks_jws endpoint has no key of its own: it verifies with --jwks-url"
            );
            Ok(None)
        }
        EndpointScheme::BitgoHmac | EndpointScheme::PrimeHmac => {
            anyhow::ensure!(
                ed25519.is_none(),
                "--ed25519-public-key is for standard endpoints"
            );
            provider_key(endpoint_id, secret_env).map(Some)
        }
    }
}

/// Checks the event types and the key set URL against the scheme.
fn check_endpoint(
    scheme: EndpointScheme,
    types: &[String],
    jwks_url: Option<&str>,
) -> anyhow::Result<()> {
    let known: &[&str] = if scheme.is_custodian() {
        &[CUSTODIAN_STATUS]
    } else {
        &EVENT_TYPES
    };
    if let Some(bad) = types.iter().find(|t| !known.contains(&t.as_str())) {
        anyhow::bail!("--types: unknown event type {bad:?} for {scheme} (known: {known:?})");
    }
    match (scheme, jwks_url) {
        (EndpointScheme::FireblocksJws, Some(url)) => {
            let rest = url
                .strip_prefix("https://")
                .or_else(|| url.strip_prefix("http://"));
            anyhow::ensure!(
                rest.is_some_and(|r| !r.is_empty()
                    && r.len() <= 2040
                    && !r.starts_with('/')
                    && !r.chars().any(char::is_whitespace)),
                "--jwks-url must be an http(s) URL with a host"
            );
            Ok(())
        }
        (EndpointScheme::FireblocksJws, None) => anyhow::bail!("fireblocks_jws needs --jwks-url"),
        (_, Some(_)) => anyhow::bail!("--jwks-url is for fireblocks_jws"),
        (_, None) => Ok(()),
    }
}

fn parse_scheme(text: &str) -> anyhow::Result<EndpointScheme> {
    EndpointScheme::parse(text).with_context(|| {
        let known: Vec<&str> = EndpointScheme::ALL.iter().map(|s| s.as_str()).collect();
        format!("--scheme: unknown scheme (known: {known:?})")
    })
}

/// The endpoint's line of output: its path and the secret shown once, if any.
fn shown(secret: Option<&Zeroizing<String>>, key: bool) -> &str {
    match (secret, key) {
        (Some(text), _) => text.as_str(),
        (None, true) => "(provided key)",
        (None, false) => "(none: the provider's published keys)",
    }
}

#[allow(clippy::too_many_arguments)]
async fn create_endpoint(
    store: &Store,
    tenant: &str,
    source: &str,
    types: &[String],
    ed25519: Option<&str>,
    scheme: &str,
    jwks_url: Option<&str>,
    secret_env: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let scheme = parse_scheme(scheme)?;
    check_endpoint(scheme, types, jwks_url)?;
    let tenant_id = store
        .tenant_by_name(tenant)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
        .context("no such tenant")?;
    let endpoint_id = opledger_store::inbox::new_endpoint_id();
    let key = key_for(scheme, &endpoint_id, ed25519, secret_env)?;
    let secret_id = store
        .create_webhook_endpoint(&NewEndpoint {
            endpoint_id: &endpoint_id,
            tenant_id,
            source,
            allowed_types: types,
            scheme,
            jwks_url,
            first: key.as_ref().map(|(k, _)| k),
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot create the endpoint: {}", e.log_safe()))?;
    let path = format!("/webhooks/{source}/{endpoint_id}");
    let secret = key.as_ref().and_then(|(_, text)| text.as_ref());
    let secret_text = shown(secret, key.is_some());
    let id_text = secret_id.map_or_else(|| "none".to_owned(), |id| id.to_string());
    print(
        json,
        &format!("endpoint {path} ({scheme})\nsecret {secret_text} (id {id_text}; shown once)"),
        serde_json::json!({ "endpoint_id": endpoint_id, "path": path, "scheme": scheme.as_str(),
            "secret_id": secret_id, "secret": secret.map(|s| s.as_str()) }),
    );
    Ok(())
}

async fn add_secret(
    store: &Store,
    endpoint: &str,
    ed25519: Option<&str>,
    secret_env: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let found = store
        .webhook_endpoint(endpoint)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
        .context("no such endpoint")?;
    let (new, secret) = key_for(found.scheme, endpoint, ed25519, secret_env)?
        .context("a fireblocks_jws endpoint has no key of its own")?;
    let secret_id = store
        .add_webhook_secret(endpoint, &new)
        .await
        .map_err(|e| anyhow::anyhow!("cannot add the secret: {}", e.log_safe()))?;
    let shown = shown(secret.as_ref(), true);
    print(
        json,
        &format!("secret {shown} (id {secret_id}; shown once)"),
        serde_json::json!({ "secret_id": secret_id, "secret": secret.as_ref().map(|s| s.as_str()) }),
    );
    Ok(())
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
            scheme,
            jwks_url,
            secret_env,
        } => {
            create_endpoint(
                store,
                &tenant,
                &source,
                &types,
                ed25519_public_key.as_deref(),
                &scheme,
                jwks_url.as_deref(),
                secret_env.as_deref(),
                json,
            )
            .await?;
        }
        WebhookCommand::AddSecret {
            endpoint,
            ed25519_public_key,
            secret_env,
        } => {
            add_secret(
                store,
                &endpoint,
                ed25519_public_key.as_deref(),
                secret_env.as_deref(),
                json,
            )
            .await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn types(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn each_scheme_takes_its_own_event_types_and_key_set_url() {
        let url = Some("https://keys.example/.well-known/jwks.json");
        assert!(check_endpoint(EndpointScheme::Standard, &types(&["kyt.result"]), None).is_ok());
        assert!(
            check_endpoint(
                EndpointScheme::Standard,
                &types(&["custodian.status"]),
                None
            )
            .is_err()
        );
        assert!(check_endpoint(EndpointScheme::Standard, &types(&["kyt.result"]), url).is_err());
        let status = types(&["custodian.status"]);
        assert!(check_endpoint(EndpointScheme::FireblocksJws, &status, url).is_ok());
        assert!(check_endpoint(EndpointScheme::FireblocksJws, &status, None).is_err());
        for bad in ["ftp://x/jwks", "https://", "https:///path", "http://a b/"] {
            assert!(
                check_endpoint(EndpointScheme::FireblocksJws, &status, Some(bad)).is_err(),
                "{bad}"
            );
        }
        assert!(check_endpoint(EndpointScheme::BitgoHmac, &status, None).is_ok());
        assert!(check_endpoint(EndpointScheme::PrimeHmac, &status, url).is_err());
        assert!(
            check_endpoint(
                EndpointScheme::PrimeHmac,
                &types(&["transfer.status"]),
                None
            )
            .is_err()
        );
        assert!(parse_scheme("bitgo_hmac").is_ok());
        assert!(parse_scheme("hmac").is_err());
    }

    #[test]
    fn keys_that_do_not_belong_to_a_scheme_are_refused() {
        let id = "whe_00000000000000000000000000000000";
        assert!(matches!(
            key_for(EndpointScheme::FireblocksJws, id, None, None),
            Ok(None)
        ));
        assert!(key_for(EndpointScheme::FireblocksJws, id, None, Some("X")).is_err());
        assert!(key_for(EndpointScheme::BitgoHmac, id, Some("whpk_x"), None).is_err());
        assert!(key_for(EndpointScheme::Standard, id, None, Some("X")).is_err());
        // An unset variable is refused without naming any value.
        let refused = key_for(
            EndpointScheme::PrimeHmac,
            id,
            None,
            Some("OPLEDGER_TEST_UNSET_SECRET_VARIABLE"),
        );
        assert!(refused.is_err());
    }
}
