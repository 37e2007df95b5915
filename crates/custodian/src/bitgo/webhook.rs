//! BitGo webhooks: `x-signature-sha256` is the lowercase hex HMAC-SHA256 of the raw body under the
//! webhook secret, compared in constant time.

use crate::bitgo::wire::map_state;
use crate::codec::parse_optional_hash;
use crate::types::WebhookError;
use hmac::{Hmac, KeyInit, Mac};
use opledger_domain::custodian::ProviderStatus;
use opledger_domain::evidence::Hash32;
use serde::Deserialize;
use sha2::Sha256;
use std::fmt;

/// A verified BitGo webhook.
#[derive(Clone, PartialEq, Eq)]
pub struct BitGoEvent {
    /// `type` (`transfer`).
    pub event_type: String,
    /// `wallet`.
    pub wallet: Option<String>,
    /// `coin`.
    pub coin: Option<String>,
    /// `transfer`: the transfer id.
    pub transfer_id: Option<String>,
    /// `hash`, when not empty.
    pub hash: Option<Hash32>,
    /// `state` as written.
    pub state: Option<String>,
    /// `state` mapped by [`crate::map_bitgo_state`], when documented.
    pub status: Option<ProviderStatus>,
    /// `sequenceId`: our reference, when set.
    pub sequence_id: Option<String>,
}

impl fmt::Debug for BitGoEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BitGoEvent")
            .field("event_type", &self.event_type)
            .field("coin", &self.coin)
            .field("hash", &self.hash.is_some())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct RawEvent {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(default)]
    wallet: Option<String>,
    #[serde(default)]
    coin: Option<String>,
    #[serde(default)]
    transfer: Option<String>,
    #[serde(default)]
    hash: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(rename = "sequenceId", default)]
    sequence_id: Option<String>,
}

/// Verifies a BitGo webhook: `signature_hex` (the `x-signature-sha256` header) must be the 64 hex
/// digits of HMAC-SHA256(`secret`, `raw_body`); the comparison is constant-time.
pub fn verify_bitgo_webhook(
    raw_body: &[u8],
    signature_hex: &str,
    secret: &[u8],
) -> Result<BitGoEvent, WebhookError> {
    let signature_hex = signature_hex.trim();
    let mut tag = [0_u8; 32];
    if signature_hex.len() != 64 || hex::decode_to_slice(signature_hex, &mut tag).is_err() {
        return Err(WebhookError::Header);
    }
    if secret.is_empty() {
        return Err(WebhookError::Signature);
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| WebhookError::Signature)?;
    mac.update(raw_body);
    mac.verify_slice(&tag)
        .map_err(|_| WebhookError::Signature)?;
    let raw: RawEvent = serde_json::from_slice(raw_body).map_err(|_| WebhookError::Body)?;
    let hash = parse_optional_hash(raw.hash.as_deref()).map_err(|()| WebhookError::Body)?;
    Ok(BitGoEvent {
        status: raw.state.as_deref().and_then(map_state),
        event_type: raw.event_type,
        wallet: raw.wallet,
        coin: raw.coin,
        transfer_id: raw.transfer,
        hash,
        state: raw.state,
        sequence_id: raw.sequence_id,
    })
}
