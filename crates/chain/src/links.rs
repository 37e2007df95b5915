//! How a chain-facing service reaches each network's nodes (`rpc`, `rpc_ca`, `rpc_headers`,
//! `evidence`), flattened into the broadcaster's and the reconciler's configurations, and the
//! per-network clients those settings give.

use crate::evidence::{NetworkEvidence, ReaderError, check_evidence, service_reader};
use crate::{EvidenceReader, Rpc, RpcSetupError};
use opledger_config::{ConfigError, Secret};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The node settings of a service that submits to or reads from chains.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChainLinks {
    /// JSON-RPC URL per network id: where transfers and replacements are submitted.
    pub rpc: BTreeMap<String, String>,
    /// PEM CA that alone is trusted for `https://` JSON-RPC URLs (a node behind a private CA);
    /// absent: the system's root certificates.
    #[serde(default)]
    pub rpc_ca: Option<PathBuf>,
    /// HTTP headers sent with every JSON-RPC call, per network id (a node provider's API key:
    /// `[rpc_headers.mainnet]` `x-api-key = "..."`); values are secrets, never logged.
    #[serde(default)]
    pub rpc_headers: BTreeMap<String, BTreeMap<String, Secret>>,
    /// Evidence per network id (`[evidence.<id>]`, one for every network of `rpc`): `urls` (the
    /// independent endpoints whose agreement is evidence), `quorum`, `confirmations` or
    /// `finalized = true`, `min_confirmations` (12), `max_lag_blocks` (8), all keys in the
    /// evidence section below. Verdicts that cannot be undone (a settlement, a release, an
    /// operator's resolution) rest only on what a quorum of these agree on at one pinned block,
    /// at final depth. No default: each network names its finality.
    #[serde(default)]
    pub evidence: BTreeMap<String, NetworkEvidence>,
}

impl ChainLinks {
    /// Refuses no network, headers for a network without a URL, and evidence settings that do
    /// not cover every network.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if self.rpc.is_empty() {
            return invalid("rpc", "must name at least one network");
        }
        if self.rpc_headers.keys().any(|n| !self.rpc.contains_key(n)) {
            return invalid("rpc_headers", "names a network without an rpc URL");
        }
        if let Err((field, problem)) = check_evidence(self.rpc.keys(), &self.evidence) {
            return invalid(field, problem);
        }
        Ok(())
    }

    /// The headers configured for `network`.
    fn headers(&self, network: &str) -> impl Iterator<Item = (&str, &str)> {
        self.rpc_headers
            .get(network)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str()))
    }

    /// The submission client of every configured network, each call bounded by `timeout`.
    pub fn rpcs(&self, timeout: Duration) -> Result<Vec<(String, Rpc)>, RpcSetupError> {
        self.rpc
            .iter()
            .map(|(network, url)| {
                let rpc =
                    Rpc::configured(url, timeout, self.rpc_ca.as_deref(), self.headers(network))?;
                Ok((network.clone(), rpc))
            })
            .collect()
    }

    /// The evidence reader of every configured network, each call bounded by `timeout`.
    pub fn readers(&self, timeout: Duration) -> Result<Vec<(String, EvidenceReader)>, ReaderError> {
        self.rpc
            .keys()
            .map(|network| {
                let reader = service_reader(
                    network,
                    self.evidence.get(network),
                    timeout,
                    self.rpc_ca.as_deref(),
                    self.headers(network),
                )?;
                Ok((network.clone(), reader))
            })
            .collect()
    }
}
