//! Deliveries to an endpoint of a custodian's own scheme: verified over the raw bytes with the
//! provider's scheme, deduplicated by the provider's event id, recorded with their work item
//! before the 2xx, exactly as Standard Webhooks deliveries are (the table of the parent module).
//!
//! | scheme | verified with | event id | our reference |
//! |---|---|---|---|
//! | `fireblocks_jws` | `Fireblocks-Webhook-Signature`, RS512, a key of the set at the endpoint's `jwks_url` (an unknown key id fetches the set again, rate-limited) | body `id` | `data.externalTxId` |
//! | `bitgo_hmac` | `x-signature-sha256` under the endpoint's HMAC secret | header `idempotency-key` | `sequenceId` |
//! | `prime_hmac` | `X-CB-SIGNATURE` over `X-CB-TIMESTAMP` + body under the endpoint's secret; the timestamp within `timestamp_tolerance_secs` | body `event_id` | none |
//!
//! A verified transfer event is stored as `custodian.status` (when the endpoint may send it) with
//! our reference as its operation; anything else verified is stored UNHANDLED. A refused request
//! is counted like any other (400 malformed, 401 unauthenticated); when the provider's key set
//! cannot be fetched at all, nothing is acknowledged (503: the provider retries).

use super::jwks::Want;
use super::{Ingress, Resolved, answer, single};
use crate::metrics::Outcome;
use crate::recorder::{Class, Pending};
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use opledger_custodian::{FireblocksEvent, FireblocksEventKind, WebhookError};
use opledger_domain::ids::OperationId;
use opledger_store::inbox::Endpoint;
use opledger_webhook::provider::{
    self, CUSTODIAN_STATUS, EndpointScheme, ProviderDelivery, ProviderError,
};
use opledger_webhook::secret::VerificationKey;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The Fireblocks signature header.
const FIREBLOCKS_SIGNATURE: &str = "fireblocks-webhook-signature";

/// Why a custodian delivery is not recorded.
#[derive(Debug)]
enum Refused {
    /// The provider's scheme refused it.
    Provider(ProviderError),
    /// The provider's key set could not be obtained: nothing can be verified now.
    KeysUnavailable,
}

impl Ingress {
    /// Verifies, classifies, seals and records a delivery to a custodian's endpoint.
    pub(super) async fn custodian(
        &self,
        resolved: &Resolved,
        source: &str,
        endpoint_id: &str,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Response {
        let endpoint = &resolved.endpoint;
        let delivery = match self
            .verified_custodian(resolved, source, endpoint_id, headers, body)
            .await
        {
            Ok(delivery) => delivery,
            Err(Refused::KeysUnavailable) => {
                self.stats.count(Outcome::Unavailable);
                return answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the provider's key set is unavailable; retry",
                );
            }
            Err(Refused::Provider(e)) => {
                let (status, outcome) = if e.is_malformed() {
                    (StatusCode::BAD_REQUEST, Outcome::BadRequest)
                } else {
                    (StatusCode::UNAUTHORIZED, Outcome::BadSignature)
                };
                self.reject(outcome, Some(endpoint), source, endpoint_id, e.code())
                    .await;
                return answer(status, e.code(), e.code());
            }
        };
        let sent_at = delivery
            .sent_at
            .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
            .unwrap_or_else(chrono::Utc::now);
        let Some(sealed) = self.ring.seal_body(endpoint, &delivery.event_id, body) else {
            self.stats.count(Outcome::BadRequest);
            return answer(StatusCode::PAYLOAD_TOO_LARGE, "too_large", "body too large");
        };
        let pending = Pending {
            endpoint: endpoint.clone(),
            class: class_of(endpoint, &delivery),
            event_id: delivery.event_id,
            body_hash: Sha256::digest(body).into(),
            sent_at,
            body: sealed,
            signature: None,
        };
        self.record(pending).await
    }

    /// The delivery verified with the endpoint's scheme; an HMAC scheme's keys are re-read once
    /// when they refuse it (a secret added with `add-secret` verifies at once).
    async fn verified_custodian(
        &self,
        resolved: &Resolved,
        source: &str,
        endpoint_id: &str,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<ProviderDelivery, Refused> {
        let endpoint = &resolved.endpoint;
        if endpoint.scheme == EndpointScheme::FireblocksJws {
            return self.verified_fireblocks(endpoint, headers, body).await;
        }
        let now = chrono::Utc::now().timestamp();
        let mut checked = self.hmac_scheme(endpoint.scheme, &resolved.keys, headers, body, now);
        if let Err(ProviderError::NoValidSignature | ProviderError::NoKeys) = checked
            && let Some(fresh) = self.reloaded(endpoint_id).await
            && fresh.endpoint.source == source
            && fresh.endpoint.scheme == endpoint.scheme
        {
            checked = self.hmac_scheme(endpoint.scheme, &fresh.keys, headers, body, now);
        }
        checked.map_err(Refused::Provider)
    }

    /// BitGo's or Prime's HMAC with `keys`.
    fn hmac_scheme(
        &self,
        scheme: EndpointScheme,
        keys: &[VerificationKey],
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<ProviderDelivery, ProviderError> {
        match scheme {
            EndpointScheme::BitgoHmac => provider::verify_bitgo(
                keys,
                single(headers, "x-signature-sha256"),
                single(headers, "idempotency-key"),
                body,
            ),
            EndpointScheme::PrimeHmac => provider::verify_prime(
                keys,
                single(headers, "x-cb-timestamp"),
                single(headers, "x-cb-signature"),
                body,
                now,
                self.tolerance_secs,
            ),
            // Not an HMAC scheme: nothing here verifies it.
            EndpointScheme::Standard | EndpointScheme::FireblocksJws => Err(ProviderError::NoKeys),
        }
    }

    /// Fireblocks' detached JWS against the endpoint's key set; a key id the cached set does not
    /// hold fetches the set again (at most once per `jwks_refresh_min_interval_ms`) and verifies
    /// once more.
    async fn verified_fireblocks(
        &self,
        endpoint: &Endpoint,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<ProviderDelivery, Refused> {
        let Some(url) = endpoint.jwks_url.as_deref() else {
            return Err(Refused::Provider(ProviderError::NoKeys));
        };
        let header = single(headers, FIREBLOCKS_SIGNATURE).ok_or(Refused::Provider(
            ProviderError::MissingHeader(FIREBLOCKS_SIGNATURE),
        ))?;
        let header = std::str::from_utf8(header)
            .map_err(|_| Refused::Provider(ProviderError::InvalidHeader(FIREBLOCKS_SIGNATURE)))?;
        let keys = self
            .jwks
            .keys(url, Want::Current)
            .await
            .map_err(|_| Refused::KeysUnavailable)?;
        let mut checked = opledger_custodian::verify_fireblocks_webhook(body, header, &keys);
        if let Err(WebhookError::UnknownKey) = checked
            && let Ok(fresh) = self.jwks.keys(url, Want::Refresh).await
            && !Arc::ptr_eq(&fresh, &keys)
        {
            checked = opledger_custodian::verify_fireblocks_webhook(body, header, &fresh);
        }
        checked
            .map(fireblocks_delivery)
            .map_err(|e| Refused::Provider(fireblocks_error(e)))
    }
}

/// A verified Fireblocks event as the inbox reads it: its id, time, whether it is about a
/// transaction, and our reference (`externalTxId`).
fn fireblocks_delivery(event: FireblocksEvent) -> ProviderDelivery {
    ProviderDelivery {
        event_id: event.id.to_string(),
        sent_at: event.created_at.map(|at| at.timestamp()),
        about_transfer: event.kind != FireblocksEventKind::Other,
        event_type: Some(provider::kept_event_type(&event.event_type)),
        reference: event.transaction.and_then(|t| t.external_tx_id),
    }
}

/// The inbox's refusal of a Fireblocks verification error.
fn fireblocks_error(error: WebhookError) -> ProviderError {
    match error {
        WebhookError::Header => ProviderError::InvalidHeader(FIREBLOCKS_SIGNATURE),
        WebhookError::Algorithm => ProviderError::Algorithm,
        WebhookError::UnknownKey => ProviderError::UnknownKey,
        WebhookError::Signature => ProviderError::NoValidSignature,
        WebhookError::Body => ProviderError::Body,
    }
}

/// How a verified custodian delivery is stored: a transfer event the endpoint may send is a
/// `custodian.status` event about the operation its reference names (none when the reference is
/// absent or not one of our operation ids); anything else is UNHANDLED.
fn class_of(endpoint: &Endpoint, delivery: &ProviderDelivery) -> Class {
    if !delivery.about_transfer {
        return Class::Unhandled {
            event_type: delivery.event_type.clone(),
            reason: "unknown_type",
        };
    }
    if !endpoint.allowed_types.iter().any(|t| t == CUSTODIAN_STATUS) {
        return Class::Unhandled {
            event_type: Some(CUSTODIAN_STATUS.to_owned()),
            reason: "type_not_allowed",
        };
    }
    Class::Event {
        event_type: CUSTODIAN_STATUS,
        op_id: delivery
            .reference
            .as_deref()
            .and_then(|r| r.parse::<OperationId>().ok()),
    }
}
