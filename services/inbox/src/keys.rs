//! The configured AEAD keys: raw bodies and endpoint HMAC secrets are sealed with the first key
//! and opened with whichever key sealed them (rotation). Associated data binds a ciphertext to its
//! row: a body to (tenant, source, event id), a secret to its endpoint id, so neither can be
//! copied onto another row and opened there.

use opledger_domain::ids::TenantId;
use opledger_store::inbox::{Endpoint, NewSecret, SealedBody, SecretKind};
use opledger_webhook::seal::{self, BodyKey, Sealed};
use opledger_webhook::secret::VerificationKey;
use opledger_webhook::secret::{Ed25519PublicKey, SigningSecret};
use zeroize::Zeroizing;

/// Why a sealed value could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("sealed value cannot be opened (unknown key or corrupt)")]
pub struct Unreadable;

/// The keys, sealing key first.
#[derive(Debug)]
pub struct KeyRing {
    keys: Vec<BodyKey>,
}

fn body_aad(tenant_id: TenantId, source: &str, event_id: &str) -> Vec<u8> {
    seal::row_aad(&tenant_id, source, event_id)
}

fn to_store(sealed: Sealed) -> SealedBody {
    SealedBody {
        key_id: i16::from_ne_bytes(sealed.key_id.to_ne_bytes()),
        nonce: sealed.nonce.to_vec(),
        ciphertext: sealed.ciphertext,
    }
}

fn from_store(sealed: &SealedBody) -> Option<Sealed> {
    Some(Sealed {
        key_id: u16::from_ne_bytes(sealed.key_id.to_ne_bytes()),
        nonce: sealed.nonce.as_slice().try_into().ok()?,
        ciphertext: sealed.ciphertext.clone(),
    })
}

impl KeyRing {
    /// A ring over `keys` (at least one; the first seals).
    pub fn new(keys: Vec<BodyKey>) -> Option<KeyRing> {
        (!keys.is_empty()).then_some(KeyRing { keys })
    }

    fn sealing_key(&self) -> &BodyKey {
        // `new` refuses an empty list.
        &self.keys[0]
    }

    /// Seals a raw body for its inbox row (`None` only beyond the cipher's size limit, far above
    /// any configurable body limit).
    pub fn seal_body(
        &self,
        endpoint: &Endpoint,
        event_id: &str,
        body: &[u8],
    ) -> Option<SealedBody> {
        let aad = body_aad(endpoint.tenant_id, &endpoint.source, event_id);
        seal::seal(self.sealing_key(), body, &aad)
            .ok()
            .map(to_store)
    }

    /// Opens a stored body.
    pub fn open_body(
        &self,
        tenant_id: TenantId,
        source: &str,
        event_id: &str,
        sealed: &SealedBody,
    ) -> Result<Zeroizing<Vec<u8>>, Unreadable> {
        let sealed = from_store(sealed).ok_or(Unreadable)?;
        seal::open(&self.keys, &sealed, &body_aad(tenant_id, source, event_id))
            .map_err(|_| Unreadable)
    }

    /// Mints a new HMAC secret for endpoint `endpoint_id`, sealed for storage; the secret is
    /// returned once, for the provider.
    pub fn new_hmac_secret(&self, endpoint_id: &str) -> Option<(NewSecret, SigningSecret)> {
        let secret = SigningSecret::generate();
        let sealed = self.seal_secret(endpoint_id, &secret)?;
        Some((NewSecret::Hmac(sealed), secret))
    }

    /// Seals an endpoint's HMAC secret for storage.
    pub fn seal_secret(&self, endpoint_id: &str, secret: &SigningSecret) -> Option<SealedBody> {
        seal::seal_secret(self.sealing_key(), endpoint_id, secret)
            .ok()
            .map(to_store)
    }

    /// The endpoint's verification keys. A key that cannot be opened (its sealing key is no
    /// longer configured) is skipped with a warning: the others still verify.
    pub fn open_endpoint_keys(&self, endpoint: &Endpoint) -> Vec<VerificationKey> {
        let mut out = Vec::with_capacity(endpoint.secrets.len());
        for stored in &endpoint.secrets {
            let key = match (stored.kind, &stored.sealed) {
                (SecretKind::Hmac, Some(sealed)) => from_store(sealed)
                    .and_then(|s| seal::open_secret(&self.keys, &endpoint.endpoint_id, &s).ok())
                    .map(VerificationKey::Hmac),
                (SecretKind::Ed25519, _) => <&[u8; 32]>::try_from(stored.public_key.as_slice())
                    .ok()
                    .and_then(|k| Ed25519PublicKey::from_bytes(k).ok())
                    .map(VerificationKey::Ed25519),
                (SecretKind::Hmac, None) => None,
            };
            match key {
                Some(key) => out.push(key),
                None => tracing::warn!(
                    secret_id = stored.secret_id,
                    "webhook secret cannot be opened with the configured keys; skipped"
                ),
            }
        }
        out
    }
}
