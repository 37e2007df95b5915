//! `lookup_by_reference`: Fireblocks' v1 API as documented. Creates carry our reference as
//! `externalTxId` and `Idempotency-Key`; the record is found again by `externalTxId`. Every request
//! carries `X-API-Key` and a fresh RS256 token bound to its path and body.
//!
//! Fireblocks' statuses are the decision vocabulary itself: a record's `status` is parsed as a
//! [`ProviderStatus`] (an undocumented one makes the record unreadable).

pub mod jwt;
pub mod webhook;
pub mod wire;

use crate::api::Adapter;
use crate::classify::{classify_lookup, classify_submit, lookup_outcome, submission};
use crate::codec::{reference_text, sha256};
use crate::config::{FireblocksConfig, SetupError, base_url, decimals, plain_id, timeout, window};
use crate::secret::read_secret;
use crate::transport::{exchange, unix_now};
use crate::types::{
    LookupFailure, LookupOutcome, RequestBody, RequestError, Submission, SubmitError,
    TransferRequest,
};
use jwt::FireblocksSigner;
use opledger_domain::custodian::Profile;
use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use std::time::Duration;
use uuid::Uuid;
use wire::{Account, create_body, is_not_found, read_accepted, read_bad_request, read_record};

/// Where creates go.
pub const CREATE_PATH: &str = "/v1/transactions";

/// Where a record is looked up by our reference.
pub fn lookup_path(reference: Uuid) -> String {
    format!(
        "/v1/transactions/external_tx_id/{}",
        reference_text(reference)
    )
}

/// A Fireblocks vault account.
#[derive(Debug)]
pub struct Fireblocks {
    client: reqwest::Client,
    base: String,
    signer: FireblocksSigner,
    account: Account,
    window: Duration,
}

impl Fireblocks {
    /// The account `config` describes: its secrets read, its settings checked.
    pub fn new(config: &FireblocksConfig) -> Result<Fireblocks, SetupError> {
        let base = base_url("base_url", &config.base_url)?;
        let call_timeout = timeout("timeout_secs", config.timeout_secs)?;
        let window = window("consistency_window_secs", config.consistency_window_secs)?;
        plain_id("vault_account_id", &config.vault_account_id)?;
        plain_id("asset_id", &config.asset_id)?;
        let decimals = decimals("decimals", config.decimals)?;
        let api_key = read_secret("api_key_file", &config.api_key_file)?;
        let secret = read_secret("api_secret_file", &config.api_secret_file)?;
        let signer = FireblocksSigner::new(&api_key, &secret)?;
        let client = opledger_chain::http_client(
            call_timeout,
            config.ca_file.as_deref(),
            [("x-api-key", signer.api_key())],
        )?;
        Ok(Fireblocks {
            client,
            base,
            signer,
            account: Account {
                asset_id: config.asset_id.clone(),
                vault_account_id: config.vault_account_id.clone(),
                decimals,
            },
            window,
        })
    }

    /// A request to `uri` with `body`, signed now with a fresh nonce.
    fn signed(
        &self,
        method: Method,
        uri: &str,
        body: &[u8],
        idempotency_key: Option<String>,
    ) -> Result<reqwest::Request, SubmitError> {
        let iat = unix_now().ok_or(SubmitError::Signing)?;
        let token = self
            .signer
            .token(uri, body, Uuid::new_v4(), iat)
            .map_err(|_| SubmitError::Signing)?;
        let mut bearer =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| SubmitError::Signing)?;
        bearer.set_sensitive(true);
        let mut builder = self
            .client
            .request(method, format!("{}{uri}", self.base))
            .header(AUTHORIZATION, bearer);
        if let Some(key) = idempotency_key {
            builder = builder.header("idempotency-key", key);
        }
        if !body.is_empty() {
            builder = builder
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_vec());
        }
        builder.build().map_err(|_| SubmitError::Build)
    }
}

impl Adapter for Fireblocks {
    fn profile(&self) -> Profile {
        Profile::LookupByReference
    }

    fn consistency_window(&self) -> Duration {
        self.window
    }

    fn request(&self, request: &TransferRequest) -> Result<RequestBody, RequestError> {
        let bytes = create_body(request, &self.account)?;
        let sha256 = sha256(&bytes);
        Ok(RequestBody { bytes, sha256 })
    }

    async fn submit(&self, reference: Uuid, body: &[u8]) -> Result<Submission, SubmitError> {
        let stored = wire::stored_reference(body).ok_or(SubmitError::Body)?;
        let reference = reference_text(reference);
        if stored != reference {
            return Err(SubmitError::Reference);
        }
        let request = self.signed(Method::POST, CREATE_PATH, body, Some(reference))?;
        let exchanged = exchange(&self.client, request).await;
        Ok(submission(exchanged, |answer| {
            classify_submit(
                answer.status,
                || read_accepted(&answer.body),
                || read_bad_request(&answer.body),
            )
        }))
    }

    async fn lookup(&self, expected: &TransferRequest) -> LookupOutcome {
        let uri = lookup_path(expected.reference);
        let Ok(request) = self.signed(Method::GET, &uri, b"", None) else {
            return LookupOutcome::failed(LookupFailure::NotSent);
        };
        let exchanged = exchange(&self.client, request).await;
        lookup_outcome(exchanged, |answer| {
            classify_lookup(
                answer.status,
                || read_record(&answer.body, expected, &self.account),
                || is_not_found(&answer.body),
            )
        })
    }
}

#[cfg(test)]
mod tests;
