//! Chain evidence for verdicts that cannot be undone (settlements, releases, operator
//! resolutions): every answer is read at one pinned block, named by hash, from a quorum of
//! independent JSON-RPC endpoints, and combined by [`opledger_domain::evidence::agree`].
//!
//! One node's word is no evidence: a lagging or pruned node says "no receipt", a node on another
//! fork names other blocks, a man in the middle of a clear-text link says whatever it likes. So
//! [`EvidenceReader::pin`] first agrees on a pinned block (the lowest head that answered, its hash
//! named identically by every answering endpoint) and on a final block (by the network's
//! [`Finality`]); [`Pinned::read`] and [`Pinned::canonical`] then read every endpoint at exactly
//! those blocks. An endpoint that fails in any way did not answer; too few answers, heads too far
//! apart or any difference between answers is [`NoAgreement`]: no verdict.
//!
//! Built on alloy's provider and RPC types (typed hashes, receipts, block ids and errors), like
//! the submissions of [`crate::rpc::Rpc`]. Nothing here shows a URL, a header value, an
//! address or a hash in `Debug`, `Display` or a log line.

mod deposit;
mod endpoint;
mod pinned;
mod settings;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::http::ClientError;
use endpoint::Endpoint;

pub use alloy_primitives::{Address, B256};
pub use opledger_domain::evidence::{BlockRef, EndpointReading, Inclusion, NoAgreement, Reading};
pub use opledger_domain::witness::deposit::{ObservedDeposit, ObservedLog};
pub use pinned::{BATCH_CALLS, PinError, Pinned, Pins, Query};
pub use settings::{
    NetworkEvidence, NoEvidenceCounter, ReaderError, SettingsError, check_evidence, no_evidence,
    reason_label, service_reader,
};

/// When a network counts a block final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Finality {
    /// A block is final once it has this many confirmations, the including block counted: with
    /// `Confirmations(1)` the pinned block itself is final. At least 1; there is no default.
    Confirmations(u64),
    /// The node's `finalized` block tag (proof-of-stake finality), where the node supports it.
    FinalizedTag,
}

/// How to read evidence on one network.
#[derive(Clone)]
pub struct EvidenceConfig {
    /// The independent JSON-RPC endpoints (`https://`, or `http://` on loopback only).
    pub urls: Vec<String>,
    /// The network's EIP-155 chain id: every head read asks each endpoint for its chain id in
    /// the same request (`eth_chainId`), and an endpoint of another chain answers nothing.
    pub chain_id: u64,
    /// How many endpoints must answer, and agree, for a reading to count. At least 1, at most the
    /// number of `urls`; production configurations use 2 or more.
    pub quorum: usize,
    /// The network's finality rule.
    pub finality: Finality,
    /// The largest spread of the endpoints' heads, in blocks, that still allows a verdict.
    pub max_lag_blocks: u64,
    /// How long one HTTP call (connect included) may take before the endpoint counts as silent.
    pub timeout: Duration,
    /// A PEM CA that alone is trusted for the `https://` endpoints (a private CA); `None`: the
    /// system's roots.
    pub ca_file: Option<PathBuf>,
    /// Headers sent with every call (a node provider's API key). Their values are secret: never
    /// shown by `Debug`, in errors or in logs.
    pub headers: Vec<(String, String)>,
    /// Development only: also accept `http://` to a host that is not loopback (a dev cluster's
    /// in-network node). Never in production: a clear-text link can be made to say anything.
    pub allow_clear_text: bool,
}

impl fmt::Debug for EvidenceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("EvidenceConfig")
            .field("urls", &self.urls.len())
            .field("chain_id", &self.chain_id)
            .field("quorum", &self.quorum)
            .field("finality", &self.finality)
            .field("max_lag_blocks", &self.max_lag_blocks)
            .field("timeout", &self.timeout)
            .field("ca_file", &self.ca_file.is_some())
            .field("header_names", &header_names)
            .field("allow_clear_text", &self.allow_clear_text)
            .finish()
    }
}

/// Why an [`EvidenceReader`] cannot be built from a configuration. Endpoints are named by their
/// position in `urls` (from 0), never by their URL, which may carry a key.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceSetupError {
    /// No endpoint is configured.
    #[error("no evidence endpoint is configured")]
    NoEndpoints,
    /// A quorum of 0 would make silence evidence.
    #[error("the evidence quorum must be at least 1")]
    QuorumZero,
    /// Chain id 0 is no EIP-155 chain: no endpoint could serve it.
    #[error("the evidence chain id must be above 0")]
    ZeroChainId,
    /// The quorum needs more endpoints than are configured.
    #[error("the evidence quorum {quorum} is above the {endpoints} configured endpoint(s)")]
    QuorumAboveEndpoints {
        /// The configured quorum.
        quorum: usize,
        /// The number of configured endpoints.
        endpoints: usize,
    },
    /// `Confirmations(0)` would count blocks that do not exist yet as final.
    #[error("the finality depth must be at least 1 confirmation")]
    ZeroConfirmations,
    /// A zero timeout makes every call fail.
    #[error("the evidence rpc timeout must be above zero")]
    ZeroTimeout,
    /// An endpoint is not a valid absolute URL.
    #[error("evidence endpoint {endpoint} is not a valid url")]
    BadUrl {
        /// Its position in `urls`.
        endpoint: usize,
    },
    /// An endpoint is neither `https://` nor `http://` on a loopback host.
    #[error("evidence endpoint {endpoint} must use https:// (clear text only on loopback)")]
    NotHttps {
        /// Its position in `urls`.
        endpoint: usize,
    },
    /// The same endpoint is configured twice: it would count twice towards the quorum.
    #[error("evidence endpoints {first} and {second} are the same url")]
    DuplicateUrl {
        /// The first position.
        first: usize,
        /// The repeated position.
        second: usize,
    },
    /// A header name or value is not valid HTTP.
    #[error("evidence header {index} has an invalid name or value")]
    Header {
        /// Its position in `headers`.
        index: usize,
    },
    /// The CA file could not be read.
    #[error("cannot read the evidence ca file")]
    ReadCa(#[source] std::io::Error),
    /// The HTTP client refused the settings (an unparsable CA certificate, say).
    #[error("the evidence http client refused its tls settings")]
    Client(#[source] reqwest::Error),
}

/// Reads chain evidence from a quorum of endpoints of one network. Cheap to clone (shared
/// connections); `Debug` shows counts and rules, never URLs or headers.
#[derive(Clone)]
pub struct EvidenceReader {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: Vec<Endpoint>,
    chain_id: u64,
    quorum: usize,
    finality: Finality,
    max_lag: u64,
}

impl fmt::Debug for EvidenceReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvidenceReader")
            .field("endpoints", &self.inner.endpoints.len())
            .field("chain_id", &self.inner.chain_id)
            .field("quorum", &self.inner.quorum)
            .field("finality", &self.inner.finality)
            .field("max_lag_blocks", &self.inner.max_lag)
            .finish()
    }
}

impl EvidenceReader {
    /// A reader of `config`'s endpoints, after checking the configuration: at least one URL, each
    /// `https://` unless its host is loopback (127.0.0.0/8, `::1`, `localhost`), no URL twice, a
    /// quorum between 1 and the number of URLs, at least 1 confirmation, valid headers and a
    /// readable CA. Nothing is sent yet.
    pub fn new(config: &EvidenceConfig) -> Result<EvidenceReader, EvidenceSetupError> {
        if config.urls.is_empty() {
            return Err(EvidenceSetupError::NoEndpoints);
        }
        if config.quorum == 0 {
            return Err(EvidenceSetupError::QuorumZero);
        }
        if config.chain_id == 0 {
            return Err(EvidenceSetupError::ZeroChainId);
        }
        if config.quorum > config.urls.len() {
            return Err(EvidenceSetupError::QuorumAboveEndpoints {
                quorum: config.quorum,
                endpoints: config.urls.len(),
            });
        }
        if config.finality == Finality::Confirmations(0) {
            return Err(EvidenceSetupError::ZeroConfirmations);
        }
        if config.timeout.is_zero() {
            return Err(EvidenceSetupError::ZeroTimeout);
        }
        let mut urls: Vec<reqwest::Url> = Vec::with_capacity(config.urls.len());
        for (endpoint, raw) in config.urls.iter().enumerate() {
            let url = checked_url(endpoint, raw, config.allow_clear_text)?;
            if let Some(first) = urls.iter().position(|seen| *seen == url) {
                return Err(EvidenceSetupError::DuplicateUrl {
                    first,
                    second: endpoint,
                });
            }
            urls.push(url);
        }
        let headers = config.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        let http = crate::http::client(config.timeout, config.ca_file.as_deref(), headers)
            .map_err(|e| match e {
                ClientError::Header(index) => EvidenceSetupError::Header { index },
                ClientError::ReadCa(e) => EvidenceSetupError::ReadCa(e),
                ClientError::Client(e) => EvidenceSetupError::Client(e),
            })?;
        let endpoints = urls
            .into_iter()
            .enumerate()
            .map(|(index, url)| Endpoint::new(index, http.clone(), url))
            .collect();
        Ok(EvidenceReader {
            inner: Arc::new(Inner {
                endpoints,
                chain_id: config.chain_id,
                quorum: config.quorum,
                finality: config.finality,
                max_lag: config.max_lag_blocks,
            }),
        })
    }

    /// How many endpoints must answer and agree.
    pub fn quorum(&self) -> usize {
        self.inner.quorum
    }

    /// How many endpoints are configured.
    pub fn endpoints(&self) -> usize {
        self.inner.endpoints.len()
    }

    /// The network's finality rule.
    pub fn finality(&self) -> Finality {
        self.inner.finality
    }

    /// The largest spread of heads allowed, in blocks.
    pub fn max_lag_blocks(&self) -> u64 {
        self.inner.max_lag
    }
}

/// `raw` parsed, if it is `https://`, or `http://` on a loopback host (or anywhere with
/// `allow_clear_text`).
fn checked_url(
    endpoint: usize,
    raw: &str,
    allow_clear_text: bool,
) -> Result<reqwest::Url, EvidenceSetupError> {
    let url = reqwest::Url::parse(raw).map_err(|_| EvidenceSetupError::BadUrl { endpoint })?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => return Err(EvidenceSetupError::BadUrl { endpoint }),
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback || allow_clear_text => Ok(url),
        _ => Err(EvidenceSetupError::NotHttps { endpoint }),
    }
}
