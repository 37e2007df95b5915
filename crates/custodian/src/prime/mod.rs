//! `no_lookup`: Coinbase Prime. A withdrawal carries our reference as `idempotency_key` (the same
//! key again replays the first answer, never a second withdrawal), but nothing finds it again by
//! that key: an ambiguous withdrawal is left to an operator, who confirms one of the candidates
//! the transaction list shows (same destination and amount in a time window), or none.
//! Every request is signed: HMAC-SHA256 over timestamp, method, path and query, and body.

pub mod wire;

use crate::api::Adapter;
use crate::classify::{classify_submit, status_failure, submission, transport_failure};
use crate::codec::{query_value, reference_text, sha256};
use crate::config::{
    PrimeConfig, SetupError, base_url, decimals, invalid, plain_id, timeout, window,
};
use crate::secret::{SecretBytes, read_secret};
use crate::transport::{exchange, unix_now};
use crate::types::{
    Candidate, CandidatesError, LookupFailure, LookupOutcome, RequestBody, RequestError,
    Submission, SubmitError, TimeWindow, TransferRequest,
};
use chrono::SecondsFormat;
use opledger_domain::custodian::Profile;
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use std::time::Duration;
use uuid::Uuid;
use wire::{
    Account, read_accepted, read_bad_request, read_page, read_transaction, withdrawal_body,
};

/// The most list pages read for one candidates call.
const MAX_PAGES: usize = 50;

/// A Coinbase Prime portfolio wallet.
#[derive(Debug)]
pub struct Prime {
    client: reqwest::Client,
    base: String,
    signing_key: SecretBytes,
    account: Account,
    window: Duration,
}

impl Prime {
    /// The wallet `config` describes: its secrets read, its settings checked.
    pub fn new(config: &PrimeConfig) -> Result<Prime, SetupError> {
        let base = base_url("base_url", &config.base_url)?;
        let call_timeout = timeout("timeout_secs", config.timeout_secs)?;
        let window = window("consistency_window_secs", config.consistency_window_secs)?;
        plain_id("portfolio_id", &config.portfolio_id)?;
        plain_id("wallet_id", &config.wallet_id)?;
        plain_id("currency_symbol", &config.currency_symbol)?;
        let decimals = decimals("decimals", config.decimals)?;
        let access_key = read_secret("access_key_file", &config.access_key_file)?;
        let passphrase = read_secret("passphrase_file", &config.passphrase_file)?;
        let signing_key = read_secret("signing_key_file", &config.signing_key_file)?;
        let (Some(access_key), Some(passphrase)) =
            (access_key.expose_str(), passphrase.expose_str())
        else {
            return invalid(
                "access_key_file",
                "the access key or passphrase is not UTF-8",
            );
        };
        let client = opledger_chain::http_client(
            call_timeout,
            config.ca_file.as_deref(),
            [
                ("x-cb-access-key", access_key),
                ("x-cb-access-passphrase", passphrase),
            ],
        )?;
        Ok(Prime {
            client,
            base,
            signing_key,
            account: Account {
                portfolio_id: config.portfolio_id.clone(),
                wallet_id: config.wallet_id.clone(),
                currency_symbol: config.currency_symbol.clone(),
                decimals,
            },
            window,
        })
    }

    /// A request to `path_and_query` with `body`, signed now.
    fn signed(
        &self,
        method: Method,
        path_and_query: &str,
        body: &[u8],
    ) -> Result<reqwest::Request, SubmitError> {
        let timestamp = unix_now().ok_or(SubmitError::Signing)?.to_string();
        let signature = wire::signature(
            self.signing_key.expose(),
            &timestamp,
            method.as_str(),
            path_and_query,
            body,
        )
        .ok_or(SubmitError::Signing)?;
        let mut signature = HeaderValue::from_str(&signature).map_err(|_| SubmitError::Signing)?;
        signature.set_sensitive(true);
        let mut builder = self
            .client
            .request(method, format!("{}{path_and_query}", self.base))
            .header("x-cb-access-timestamp", timestamp)
            .header("x-cb-access-signature", signature);
        if !body.is_empty() {
            builder = builder
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_vec());
        }
        builder.build().map_err(|_| SubmitError::Build)
    }

    /// A signed `GET` of `path_and_query`, answered whole.
    async fn get(&self, path_and_query: &str) -> Result<crate::transport::Answer, LookupFailure> {
        let http = self
            .signed(Method::GET, path_and_query, b"")
            .map_err(|_| LookupFailure::NotSent)?;
        exchange(&self.client, http)
            .await
            .map_err(transport_failure)
    }

    /// The list's path and query for `window`, from `cursor` when set. The times are written as
    /// `2026-01-02T03:04:05Z` (no character a query must escape); the cursor is percent-encoded.
    fn list_path(&self, window: TimeWindow, cursor: Option<&str>) -> String {
        let time = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        let mut path = format!(
            "/v1/portfolios/{}/transactions?types=WITHDRAWAL&start_time={}&end_time={}",
            self.account.portfolio_id,
            time(window.start),
            time(window.end),
        );
        if let Some(cursor) = cursor {
            path.push_str("&cursor=");
            path.push_str(&query_value(cursor));
        }
        path
    }
}

impl Adapter for Prime {
    fn profile(&self) -> Profile {
        Profile::NoLookup
    }

    fn consistency_window(&self) -> Duration {
        self.window
    }

    fn request(&self, request: &TransferRequest) -> Result<RequestBody, RequestError> {
        let bytes = withdrawal_body(request, &self.account)?;
        let sha256 = sha256(&bytes);
        Ok(RequestBody { bytes, sha256 })
    }

    async fn submit(&self, reference: Uuid, body: &[u8]) -> Result<Submission, SubmitError> {
        let sent = wire::stored(body).ok_or(SubmitError::Body)?;
        if sent.idempotency_key() != reference_text(reference) {
            return Err(SubmitError::Reference);
        }
        let path = format!(
            "/v1/portfolios/{}/wallets/{}/withdrawals",
            self.account.portfolio_id, self.account.wallet_id
        );
        let request = self.signed(Method::POST, &path, body)?;
        let exchanged = exchange(&self.client, request).await;
        // The provider id kept is the transaction the answer names, never the activity: the
        // executor follows that transaction by its id (an answer naming none leaves an operator
        // to bind one).
        let mut transaction_id = None;
        let mut submission = submission(exchanged, |answer| {
            classify_submit(
                answer.status,
                || {
                    let ids = read_accepted(&answer.body, &sent, self.account.decimals)?;
                    transaction_id = ids.transaction_id;
                    Some(ids.activity_id)
                },
                || read_bad_request(&answer.body),
            )
        });
        submission.provider_id = transaction_id.filter(|_| submission.provider_id.is_some());
        Ok(submission)
    }

    async fn lookup(&self, _expected: &TransferRequest) -> LookupOutcome {
        LookupOutcome::failed(LookupFailure::Unsupported)
    }

    async fn candidates(
        &self,
        request: &TransferRequest,
        window: TimeWindow,
    ) -> Result<Vec<Candidate>, CandidatesError> {
        if window.end < window.start {
            return Err(CandidatesError::Window);
        }
        let failed = CandidatesError::Failed;
        let mut candidates = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let answer = self
                .get(&self.list_path(window, cursor.as_deref()))
                .await
                .map_err(failed)?;
            if answer.status != 200 {
                return Err(failed(status_failure(answer.status)));
            }
            let (found, next) = read_page(&answer.body, request, &self.account).map_err(failed)?;
            candidates.extend(found);
            match next {
                Some(next) => cursor = Some(next),
                None => return Ok(candidates),
            }
        }
        Err(failed(LookupFailure::Unreadable))
    }

    async fn transaction(
        &self,
        request: &TransferRequest,
        provider_id: &str,
    ) -> Result<Option<Candidate>, CandidatesError> {
        let failed = CandidatesError::Failed;
        if !crate::codec::is_plain_id(provider_id) {
            return Err(failed(LookupFailure::NotSent));
        }
        let path = format!(
            "/v1/portfolios/{}/transactions/{provider_id}",
            self.account.portfolio_id
        );
        let answer = self.get(&path).await.map_err(failed)?;
        match answer.status {
            200 => read_transaction(&answer.body, request, &self.account, provider_id)
                .map(Some)
                .map_err(failed),
            404 if read_bad_request(&answer.body).is_some() => Ok(None),
            status => Err(failed(status_failure(status))),
        }
    }
}

#[cfg(test)]
mod tests;
