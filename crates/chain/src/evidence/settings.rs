//! How a service configures evidence for one network (`[evidence.<network id>]` in the
//! broadcaster's and the reconciler's TOML), and the counters of readings that were no evidence.

use super::{EvidenceConfig, EvidenceReader, EvidenceSetupError, Finality};
use opledger_domain::evidence::NoAgreement;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// One network's evidence settings. Every field but `max_lag_blocks` is required: there is no
/// silent default for what counts as final or how many nodes must agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkEvidence {
    /// Independent JSON-RPC endpoints (`https://`; `http://` only on loopback). The same URL
    /// twice is refused: it would count twice towards the quorum.
    pub urls: Vec<String>,
    /// How many endpoints must answer and agree. Production uses 2 or more; 1 is accepted only
    /// when set explicitly, with a warning at start.
    pub quorum: usize,
    /// A block is final with this many confirmations (the including block counted)...
    #[serde(default)]
    pub confirmations: Option<u64>,
    /// ...or, with `finalized = true`, once the node's `finalized` tag covers it. Exactly one of
    /// the two.
    #[serde(default)]
    pub finalized: bool,
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

/// Why a network's evidence settings are unusable, before any endpoint is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// Neither or both of `confirmations` and `finalized`.
    #[error("set exactly one of confirmations and finalized = true")]
    Finality,
}

impl NetworkEvidence {
    /// The finality rule these settings name.
    pub fn finality(&self) -> Result<Finality, SettingsError> {
        match (self.confirmations, self.finalized) {
            (Some(n), false) => Ok(Finality::Confirmations(n)),
            (None, true) => Ok(Finality::FinalizedTag),
            _ => Err(SettingsError::Finality),
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
/// `headers` with every call. A quorum of one is logged as a warning: it is one node's word.
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
/// each names its finality once and a quorum between 1 and its number of urls, and no entry
/// names a network without an rpc URL. On a problem: `(field, problem)` for the configuration
/// error.
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
        if entry.finality().is_err() {
            return Err((
                "evidence.confirmations",
                "set exactly one of confirmations and finalized = true",
            ));
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
mod tests {
    use super::*;

    fn settings(confirmations: Option<u64>, finalized: bool) -> NetworkEvidence {
        NetworkEvidence {
            urls: vec!["http://127.0.0.1:1".to_owned()],
            quorum: 1,
            confirmations,
            finalized,
            max_lag_blocks: 8,
            insecure_clear_text: false,
        }
    }

    #[test]
    fn finality_is_named_exactly_once() {
        assert_eq!(
            settings(Some(3), false).finality(),
            Ok(Finality::Confirmations(3))
        );
        assert_eq!(settings(None, true).finality(), Ok(Finality::FinalizedTag));
        assert_eq!(
            settings(None, false).finality(),
            Err(SettingsError::Finality)
        );
        assert_eq!(
            settings(Some(3), true).finality(),
            Err(SettingsError::Finality)
        );
    }

    /// What a service logs while building its readers.
    fn logged_while(build: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, build);
        let bytes = captured
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn a_quorum_of_one_is_a_warning_at_start_and_two_are_not() {
        let one = settings(Some(3), false);
        let logs = logged_while(|| {
            assert!(service_reader("anvil", Some(&one), Duration::from_secs(1), None, []).is_ok());
        });
        assert!(
            logs.contains("WARN") && logs.contains("evidence rests on a single endpoint"),
            "{logs}"
        );
        assert!(
            logs.contains("network=anvil") && logs.contains("quorum=1"),
            "{logs}"
        );
        let two = NetworkEvidence {
            urls: vec![
                "http://127.0.0.1:1".to_owned(),
                "http://127.0.0.1:2".to_owned(),
            ],
            quorum: 2,
            ..settings(Some(3), false)
        };
        let logs = logged_while(|| {
            assert!(service_reader("anvil", Some(&two), Duration::from_secs(1), None, []).is_ok());
        });
        assert_eq!(logs, "", "no warning at quorum 2");
    }

    #[test]
    fn the_counter_renders_per_network_and_reason() {
        let counter = NoEvidenceCounter::default();
        counter.record("anvil", "lag");
        counter.record("anvil", "lag");
        counter.record("anvil", "disagreement");
        let text = counter.render("reconciler");
        assert!(text.contains(
            "opledger_evidence_no_verdict_total{service=\"reconciler\",network=\"anvil\",reason=\"lag\"} 2"
        ));
        assert!(text.contains("reason=\"disagreement\"} 1"));
    }
}
