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

/// One network's clients ([`ChainLinks::networks`]).
#[derive(Debug)]
pub struct NetworkLinks {
    /// The network id.
    pub network: String,
    /// Where its transactions are submitted.
    pub rpc: Rpc,
    /// Its evidence quorum.
    pub evidence: EvidenceReader,
}

/// Why a network's clients could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LinksError {
    /// Its submission client.
    #[error("rpc client: {0}")]
    Rpc(#[from] RpcSetupError),
    /// Its evidence reader (or its missing evidence settings).
    #[error("evidence: {0}")]
    Evidence(#[from] ReaderError),
}

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
            .keys()
            .map(|network| Ok((network.clone(), self.rpc_of(network, timeout)?)))
            .collect()
    }

    /// Both clients of every configured network, each call bounded by `timeout`: where its
    /// replacements are submitted and the reader whose quorum is its evidence. A network without
    /// evidence settings is refused (as `validate` refuses it), never left out.
    pub fn networks(&self, timeout: Duration) -> Result<Vec<NetworkLinks>, LinksError> {
        self.rpc
            .keys()
            .map(|network| {
                Ok(NetworkLinks {
                    network: network.clone(),
                    rpc: self.rpc_of(network, timeout)?,
                    evidence: self.reader_of(network, timeout)?,
                })
            })
            .collect()
    }

    /// The evidence reader of every configured network, each call bounded by `timeout`.
    pub fn readers(&self, timeout: Duration) -> Result<Vec<(String, EvidenceReader)>, ReaderError> {
        self.rpc
            .keys()
            .map(|network| Ok((network.clone(), self.reader_of(network, timeout)?)))
            .collect()
    }

    /// `network`'s submission client.
    fn rpc_of(&self, network: &str, timeout: Duration) -> Result<Rpc, RpcSetupError> {
        let url = self.rpc.get(network).map_or("", String::as_str);
        Rpc::configured(url, timeout, self.rpc_ca.as_deref(), self.headers(network))
    }

    /// `network`'s evidence reader.
    fn reader_of(&self, network: &str, timeout: Duration) -> Result<EvidenceReader, ReaderError> {
        service_reader(
            network,
            self.evidence.get(network),
            timeout,
            self.rpc_ca.as_deref(),
            self.headers(network),
        )
    }
}

/// Refuses what [`evidence_readers`] would be built from wrongly: headers for a network without
/// an `[evidence]` entry, and any entry's settings [`check_evidence`] refuses.
pub fn check_reader_settings(
    evidence: &BTreeMap<String, NetworkEvidence>,
    rpc_headers: &BTreeMap<String, BTreeMap<String, Secret>>,
) -> Result<(), ConfigError> {
    let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
    if rpc_headers.keys().any(|n| !evidence.contains_key(n)) {
        return invalid("rpc_headers", "names a network without an [evidence] entry");
    }
    if let Err((field, problem)) = check_evidence(evidence.keys(), evidence) {
        return invalid(field, problem);
    }
    Ok(())
}

/// An evidence reader per network of `evidence`, each call bounded by `timeout`, trusting only
/// `rpc_ca` for `https://` URLs when it is given and sending `rpc_headers` of the network: the
/// readers of a service that only reads (the witness, the custodian executor). The error names
/// the network refused.
pub fn evidence_readers(
    evidence: &BTreeMap<String, NetworkEvidence>,
    rpc_ca: Option<&std::path::Path>,
    rpc_headers: &BTreeMap<String, BTreeMap<String, Secret>>,
    timeout: Duration,
) -> Result<std::collections::HashMap<String, EvidenceReader>, (String, ReaderError)> {
    let mut readers = std::collections::HashMap::new();
    for (network, settings) in evidence {
        let headers = rpc_headers
            .get(network)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str()));
        let reader = service_reader(network, Some(settings), timeout, rpc_ca, headers)
            .map_err(|source| (network.clone(), source))?;
        readers.insert(network.clone(), reader);
    }
    Ok(readers)
}

#[cfg(test)]
mod tests {
    use super::{ChainLinks, LinksError, NetworkEvidence};
    use std::time::Duration;

    fn evidence() -> NetworkEvidence {
        NetworkEvidence {
            urls: vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
            chain_id: 1,
            quorum: 2,
            confirmations: Some(12),
            finalized: false,
            min_confirmations: 12,
            allow_shallow_finality: false,
            max_lag_blocks: 8,
            insecure_clear_text: false,
        }
    }

    #[test]
    fn every_network_comes_with_its_submission_client_and_its_evidence_reader() {
        let mut links = ChainLinks::default();
        for network in ["dev", "mainnet"] {
            links
                .rpc
                .insert(network.into(), "http://127.0.0.1:8545".into());
            links.evidence.insert(network.into(), evidence());
        }
        assert!(links.validate().is_ok());
        let networks = links.networks(Duration::from_secs(1));
        let names: Vec<String> = networks
            .iter()
            .flatten()
            .map(|n| n.network.clone())
            .collect();
        assert_eq!(names, ["dev", "mainnet"]);
    }

    #[test]
    fn a_network_without_evidence_is_refused_not_dropped() {
        let mut links = ChainLinks::default();
        links
            .rpc
            .insert("dev".into(), "http://127.0.0.1:8545".into());
        assert!(links.validate().is_err());
        // Built without validation, the network is refused rather than silently left out.
        let refused = links.networks(Duration::from_secs(1));
        assert!(
            matches!(
                refused,
                Err(LinksError::Evidence(super::ReaderError::Missing))
            ),
            "{refused:?}"
        );
    }
}
