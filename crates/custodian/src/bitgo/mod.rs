//! `one_send_per_reference`: BitGo. A send carries our reference as `sequenceId` (only the first
//! send with it is ever executed) and the transfer is found again by it. Every request carries the
//! access token.
//!
//! The stored body is the send without `walletPassphrase`: the passphrase is a secret and is
//! added as the body's last key when sent, so that it is never persisted with the request.

pub mod webhook;
pub mod wire;

use crate::api::Adapter;
use crate::classify::{classify_lookup, classify_submit, lookup_outcome, submission};
use crate::codec::{reference_text, sha256};
use crate::config::{
    BitGoConfig, SetupError, base_url, bitgo_wallet_id, invalid, plain_id, timeout, window,
};
use crate::secret::{SecretBytes, read_secret};
use crate::transport::exchange;
use crate::types::{
    LookupFailure, LookupOutcome, RequestBody, RequestError, Submission, SubmitError,
    TransferRequest,
};
use opledger_domain::custodian::Profile;
use reqwest::header::CONTENT_TYPE;
use std::time::Duration;
use uuid::Uuid;
use wire::{Account, is_not_found, read_accepted, read_bad_request, read_record, send_body};
use zeroize::Zeroizing;

/// A BitGo wallet.
#[derive(Debug)]
pub struct BitGo {
    client: reqwest::Client,
    base: String,
    passphrase: SecretBytes,
    account: Account,
    window: Duration,
}

impl BitGo {
    /// The wallet `config` describes: its secrets read, its settings checked.
    pub fn new(config: &BitGoConfig) -> Result<BitGo, SetupError> {
        let base = base_url("base_url", &config.base_url)?;
        let call_timeout = timeout("timeout_secs", config.timeout_secs)?;
        let window = window("consistency_window_secs", config.consistency_window_secs)?;
        plain_id("coin", &config.coin)?;
        bitgo_wallet_id("wallet_id", &config.wallet_id)?;
        let token = read_secret("access_token_file", &config.access_token_file)?;
        let passphrase = read_secret("wallet_passphrase_file", &config.wallet_passphrase_file)?;
        if passphrase.expose_str().is_none() {
            return invalid("wallet_passphrase_file", "the passphrase is not UTF-8");
        }
        let Some(token) = token.expose_str() else {
            return invalid("access_token_file", "the token is not UTF-8");
        };
        let bearer = Zeroizing::new(format!("Bearer {token}"));
        let client = opledger_chain::http_client(
            call_timeout,
            config.ca_file.as_deref(),
            [("authorization", bearer.as_str())],
        )?;
        Ok(BitGo {
            client,
            base,
            passphrase,
            account: Account {
                coin: config.coin.clone(),
                wallet_id: config.wallet_id.clone(),
            },
            window,
        })
    }

    /// The wallet's path prefix.
    fn wallet_path(&self) -> String {
        format!(
            "/api/v2/{}/wallet/{}",
            self.account.coin, self.account.wallet_id
        )
    }
}

impl Adapter for BitGo {
    fn profile(&self) -> Profile {
        Profile::OneSendPerReference
    }

    fn consistency_window(&self) -> Duration {
        self.window
    }

    fn request(&self, request: &TransferRequest) -> Result<RequestBody, RequestError> {
        let bytes = send_body(request)?;
        let sha256 = sha256(&bytes);
        Ok(RequestBody { bytes, sha256 })
    }

    async fn submit(&self, reference: Uuid, body: &[u8]) -> Result<Submission, SubmitError> {
        let stored = wire::stored_reference(body).ok_or(SubmitError::Body)?;
        let reference = reference_text(reference);
        if stored != reference {
            return Err(SubmitError::Reference);
        }
        let passphrase = self.passphrase.expose_str().ok_or(SubmitError::Body)?;
        let sent = wire::with_passphrase(body, passphrase).ok_or(SubmitError::Body)?;
        let request = self
            .client
            .post(format!("{}{}/sendcoins", self.base, self.wallet_path()))
            .header(CONTENT_TYPE, "application/json")
            .body(sent.to_vec())
            .build()
            .map_err(|_| SubmitError::Build)?;
        let exchanged = exchange(&self.client, request).await;
        Ok(submission(exchanged, |answer| {
            classify_submit(
                answer.status,
                || read_accepted(&answer.body, &reference),
                || read_bad_request(&answer.body),
            )
        }))
    }

    async fn lookup(&self, expected: &TransferRequest) -> LookupOutcome {
        let url = format!(
            "{}{}/transfer/sequenceId/{}",
            self.base,
            self.wallet_path(),
            reference_text(expected.reference)
        );
        let Ok(request) = self.client.get(url).build() else {
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
