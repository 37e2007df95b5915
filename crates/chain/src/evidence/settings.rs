//! How a service configures evidence for one network (`[evidence.<network id>]` in the
//! broadcaster's, the reconciler's and the witness's TOML), and the counters of readings that were
//! no evidence.

use super::{EvidenceConfig, EvidenceReader, EvidenceSetupError, Finality};
use opledger_domain::evidence::NoAgreement;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// One network's evidence settings. `urls`, `chain_id`, `quorum` and the finality
/// (`confirmations` or `finalized`) are required: there is no silent default for which chain is
/// read, what counts as final or how many nodes must agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkEvidence {
    /// Independent JSON-RPC endpoints (`https://`; `http://` only on loopback). The same URL
    /// twice is refused: it would count twice towards the quorum.
    pub urls: Vec<String>,
    /// The network's EIP-155 chain id (1: Ethereum mainnet; 31337: a default anvil). Every head
    /// read asks each endpoint for its chain id in the same request; an endpoint serving another
    /// chain answers nothing (logged as an error), so endpoints pointed at a testnet never
    /// count as evidence for the mainnet.
    pub chain_id: u64,
    /// How many endpoints must answer and agree. Production uses 2 or more; 1 is accepted only
    /// when set explicitly, with a warning at start.
    pub quorum: usize,
    /// A block is final with this many confirmations, the including block counted: at least 1,
    /// and at least `min_confirmations` unless `allow_shallow_finality`. Exactly one of this and
    /// `finalized = true`.
    #[serde(default)]
    pub confirmations: Option<u64>,
    /// A block is final once the node's `finalized` tag covers it: the protocol's own finality,
    /// the safe choice on a proof-of-stake network. Exactly one of this and `confirmations`.
    #[serde(default)]
    pub finalized: bool,
    /// The floor of `confirmations` on this network (12 unless set; at least 1): fewer are
    /// refused at start. A reorganization deeper than `confirmations` can undo a settlement or a
    /// release after the fact (paid twice). On Ethereum's proof-of-stake chain a reorganization
    /// of more than a few blocks is rare, and 12 blocks (about 2.4 minutes of 12-second slots) is
    /// well past the one- or two-block ones seen there; it is still a depth, not a proof:
    /// `finalized = true` (the protocol's own finality, about two epochs) is the safe choice. A
    /// network whose reorganizations run deeper sets a higher floor here, one with faster
    /// finality may set a lower one.
    #[serde(default = "default_min_confirmations")]
    pub min_confirmations: u64,
    /// Development only (anvil, a test chain): start although `confirmations` is below
    /// `min_confirmations`, with a warning naming the network and the depth. Never in production.
    #[serde(default)]
    pub allow_shallow_finality: bool,
    /// The largest spread of the endpoints' heads, in blocks, that still allows a verdict.
    #[serde(default = "default_max_lag")]
    pub max_lag_blocks: u64,
    /// Development only (a dev cluster's in-network node): also accept `http://` to a host that
    /// is not loopback. Never in production: a clear-text link can be made to say anything.
    #[serde(default)]
    pub insecure_clear_text: bool,
}

fn default_max_lag() -> u64 {
    8
}

/// The floor of `confirmations` when a network names none: see
/// [`NetworkEvidence::min_confirmations`].
const DEFAULT_MIN_CONFIRMATIONS: u64 = 12;

fn default_min_confirmations() -> u64 {
    DEFAULT_MIN_CONFIRMATIONS
}

/// Why a network's evidence settings are unusable, before any endpoint is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// Neither or both of `confirmations` and `finalized`.
    #[error("set exactly one of confirmations and finalized = true")]
    Finality,
    /// `confirmations = 0`: not even the including block.
    #[error("confirmations must be at least 1")]
    ZeroConfirmations,
    /// `min_confirmations = 0`: a floor that refuses nothing.
    #[error("min_confirmations must be at least 1")]
    ZeroFloor,
    /// `confirmations` below `min_confirmations` without `allow_shallow_finality = true`.
    #[error(
        "confirmations {confirmations} is below min_confirmations {min_confirmations}: raise \
         confirmations, use finalized = true, or set allow_shallow_finality = true (development \
         only)"
    )]
    ShallowFinality {
        /// The depth configured.
        confirmations: u64,
        /// The network's floor.
        min_confirmations: u64,
    },
}

impl SettingsError {
    /// The configuration key at fault and what is wrong with it, for a configuration error
    /// (which carries no values).
    pub fn field_and_problem(&self) -> (&'static str, &'static str) {
        match self {
            SettingsError::Finality => (
                "evidence.confirmations",
                "set exactly one of confirmations and finalized = true",
            ),
            SettingsError::ZeroConfirmations => ("evidence.confirmations", "must be at least 1"),
            SettingsError::ZeroFloor => ("evidence.min_confirmations", "must be at least 1"),
            SettingsError::ShallowFinality { .. } => (
                "evidence.confirmations",
                "is below min_confirmations (12 unless set): raise confirmations, use \
                 finalized = true, or set allow_shallow_finality = true (development only)",
            ),
        }
    }
}

impl NetworkEvidence {
    /// The finality rule these settings name, refused when it is shallower than the network's
    /// `min_confirmations` and `allow_shallow_finality` is not set. `finalized = true` always
    /// passes: it is the protocol's own finality, no depth of ours.
    pub fn finality(&self) -> Result<Finality, SettingsError> {
        if self.min_confirmations == 0 {
            return Err(SettingsError::ZeroFloor);
        }
        match (self.confirmations, self.finalized) {
            (Some(0), false) => Err(SettingsError::ZeroConfirmations),
            (Some(n), false) if n < self.min_confirmations && !self.allow_shallow_finality => {
                Err(SettingsError::ShallowFinality {
                    confirmations: n,
                    min_confirmations: self.min_confirmations,
                })
            }
            (Some(n), false) => Ok(Finality::Confirmations(n)),
            (None, true) => Ok(Finality::FinalizedTag),
            _ => Err(SettingsError::Finality),
        }
    }

    /// The depth below the network's floor these settings run at by explicit opt-in
    /// (`allow_shallow_finality = true`), if any: what the start warns about.
    pub fn shallow_confirmations(&self) -> Option<u64> {
        match self.finality() {
            Ok(Finality::Confirmations(n)) if n < self.min_confirmations => Some(n),
            _ => None,
        }
    }

    /// The reader of these endpoints: calls give up after `timeout`; `ca_file` is the only CA
    /// trusted for `https://` endpoints when set; `headers` go with every call.
    pub fn reader<'a>(
        &self,
        timeout: Duration,
        ca_file: Option<&Path>,
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<EvidenceReader, ReaderError> {
        let finality = self.finality().map_err(ReaderError::Settings)?;
        EvidenceReader::new(&EvidenceConfig {
            urls: self.urls.clone(),
            chain_id: self.chain_id,
            quorum: self.quorum,
            finality,
            max_lag_blocks: self.max_lag_blocks,
            timeout,
            ca_file: ca_file.map(Path::to_path_buf),
            headers: headers
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            allow_clear_text: self.insecure_clear_text,
        })
        .map_err(ReaderError::Setup)
    }
}

/// The reader of `network` for a service: its `[evidence]` entry (`None`: a configuration error),
/// calls giving up after `timeout`, `ca_file` the only CA for `https://` endpoints when set,
/// `headers` with every call. A quorum of one is logged as a warning: it is one node's word; so
/// is a depth below the network's `min_confirmations` that `allow_shallow_finality` lets start.
pub fn service_reader<'a>(
    network: &str,
    settings: Option<&NetworkEvidence>,
    timeout: Duration,
    ca_file: Option<&Path>,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<EvidenceReader, ReaderError> {
    let settings = settings.ok_or(ReaderError::Missing)?;
    let reader = settings.reader(timeout, ca_file, headers)?;
    if reader.quorum() < 2 {
        tracing::warn!(%network, quorum = reader.quorum(), "evidence rests on a single endpoint: set quorum 2 or more in production");
    }
    if let Some(confirmations) = settings.shallow_confirmations() {
        tracing::warn!(
            %network,
            confirmations,
            min_confirmations = settings.min_confirmations,
            "finality shallower than min_confirmations (allow_shallow_finality = true): a deeper reorganization can undo a settlement or a release; development only"
        );
    }
    Ok(reader)
}

/// Why a reader could not be built from settings.
#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    /// The network has no `[evidence.<network>]` entry.
    #[error("every network of rpc needs an [evidence.<network>] entry")]
    Missing,
    /// The settings contradict themselves.
    #[error(transparent)]
    Settings(SettingsError),
    /// The endpoints or TLS settings are refused.
    #[error(transparent)]
    Setup(EvidenceSetupError),
}

/// Counts, per network and reason, the readings that were no evidence (too few answers, lag,
/// disagreement, an inconsistent reading), for `GET /metrics`.
#[derive(Debug, Default)]
pub struct NoEvidenceCounter {
    counts: Mutex<BTreeMap<(String, &'static str), u64>>,
}

/// The stable label of a reason.
pub fn reason_label(reason: &NoAgreement) -> &'static str {
    match reason {
        NoAgreement::TooFewAnswers { .. } => "too_few_answers",
        NoAgreement::Lag { .. } => "lag",
        NoAgreement::Disagreement => "disagreement",
    }
}

impl NoEvidenceCounter {
    /// Counts one reading of `network` that was no evidence, for `reason` (a stable label such
    /// as [`reason_label`]'s, or `inconsistent`).
    pub fn record(&self, network: &str, reason: &'static str) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        *counts.entry((network.to_owned(), reason)).or_default() += 1;
    }

    /// The counter in Prometheus text format, `service` naming the process.
    pub fn render(&self, service: &str) -> String {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::from(
            "# HELP opledger_evidence_no_verdict_total Chain readings that were no evidence \
             (endpoints too few, lagging, disagreeing, or the reading inconsistent): no verdict.\n\
             # TYPE opledger_evidence_no_verdict_total counter\n",
        );
        for ((network, reason), n) in counts.iter() {
            out.push_str(&format!(
                "opledger_evidence_no_verdict_total{{service=\"{service}\",network=\"{network}\",reason=\"{reason}\"}} {n}\n"
            ));
        }
        out
    }
}

/// The process's counter.
pub fn no_evidence() -> &'static NoEvidenceCounter {
    static COUNTER: OnceLock<NoEvidenceCounter> = OnceLock::new();
    COUNTER.get_or_init(NoEvidenceCounter::default)
}

/// Checks a service's `[evidence]` against its `[rpc]` networks: every network has an entry,
/// each names its finality once, no shallower than its `min_confirmations` unless
/// `allow_shallow_finality` (see [`NetworkEvidence::finality`]), and a quorum between 1 and its
/// number of urls, and no entry names a network without an rpc URL. On a problem:
/// `(field, problem)` for the configuration error.
pub fn check_evidence<'a>(
    networks: impl IntoIterator<Item = &'a String>,
    evidence: &BTreeMap<String, NetworkEvidence>,
) -> Result<(), (&'static str, &'static str)> {
    let mut named = 0;
    for network in networks {
        named += 1;
        let Some(entry) = evidence.get(network) else {
            return Err((
                "evidence",
                "needs an entry for every network of rpc (urls, quorum, confirmations or finalized)",
            ));
        };
        if let Err(error) = entry.finality() {
            return Err(error.field_and_problem());
        }
        if entry.quorum == 0 || entry.quorum > entry.urls.len() {
            return Err((
                "evidence.quorum",
                "must be at least 1 and at most the number of urls",
            ));
        }
    }
    if evidence.len() > named {
        return Err(("evidence", "names a network without an rpc URL"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
