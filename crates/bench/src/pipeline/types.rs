//! The pipeline benchmark's data: senders, gRPC clients, what the node baseline and each phase
//! measured, the duplicate work counted, and everything a phase needs.

use super::cpu;
use super::node::Node;
use super::options::Args;
use super::services::{Services, WatchTotals};
use super::witness;
use opledger_domain::ids::TenantId;
use opledger_store::Store;
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::Channel;

/// One sender: a tenant with client and approver keys, a funded account and its hot wallet.
#[derive(Debug, Clone)]
pub(super) struct Sender {
    pub(super) tenant: TenantId,
    pub(super) client: Arc<str>,
    pub(super) approver: Arc<str>,
    /// The tenant's published trust statement and approver key.
    pub(super) trust: crate::trust::TenantTrust,
    /// The hot wallet's address, lowercase 0x hex.
    pub(super) address: String,
}

/// gRPC clients of operations and approvals.
#[derive(Debug, Clone)]
pub(super) struct Clients {
    pub(super) operations: Vec<Channel>,
    pub(super) approvals: Vec<Channel>,
}

/// What the node baseline measured.
#[derive(Debug)]
pub(super) struct Baseline {
    pub(super) sent: usize,
    pub(super) per_sec: f64,
    pub(super) mined_after: Duration,
    pub(super) node_cpu: Option<f64>,
}

/// What one phase measured and verified.
#[derive(Debug)]
pub(super) struct PhaseResult {
    pub(super) label: String,
    pub(super) senders: usize,
    pub(super) instances: usize,
    pub(super) duplicates: Duplicates,
    /// Transitions made by each broadcaster, watcher and reconciler instance in the phase.
    pub(super) per_instance: Vec<(String, String, i64)>,
    pub(super) withdrawals: usize,
    pub(super) per_sec: f64,
    pub(super) p50: Duration,
    pub(super) p99: Duration,
    pub(super) used: cpu::Used,
    /// PostgreSQL CPU seconds of each login's live backends over the phase, largest first.
    pub(super) logins: Vec<(String, f64)>,
    /// Seconds from the first create until every create and approval had answered.
    pub(super) ingest_secs: f64,
    /// Seconds from the first create until the last confirmation.
    pub(super) span_secs: f64,
    pub(super) states: BTreeMap<String, i64>,
    pub(super) stages: Vec<(&'static str, Duration)>,
    /// Seconds from the first create until the last withdrawal reached each state.
    pub(super) reached: Vec<(&'static str, f64)>,
    pub(super) watch: WatchTotals,
    /// What the witnesses' passes did over the phase.
    pub(super) witness: witness::WitnessTotals,
    pub(super) client_errors: usize,
    pub(super) first_error: Option<String>,
    pub(super) failures: Vec<String>,
}

/// Work done more than once in a phase: each count is how many times beyond the first.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Duplicates {
    /// `eth_sendRawTransaction` calls of one signed transaction beyond its first (`None`: not
    /// counted, `--no-send-counter`).
    pub(super) sends: Option<u64>,
    /// Signed attempts never submitted (through the counting proxy; `None`: not counted).
    pub(super) unsent: Option<u64>,
    /// Attempts of one withdrawal beyond its first.
    pub(super) attempts: i64,
    /// SIGNED -> BROADCAST (or UNKNOWN) moves of one withdrawal beyond its first.
    pub(super) broadcasts: i64,
    /// CONFIRMED moves of one withdrawal beyond its first.
    pub(super) confirmations: i64,
    /// Settlements (ledger SETTLE entries) of one withdrawal beyond its first.
    pub(super) settlements: i64,
}

impl Duplicates {
    pub(super) fn total(&self) -> i64 {
        i64::try_from(self.sends.unwrap_or(0) + self.unsent.unwrap_or(0)).unwrap_or(i64::MAX)
            + self.attempts
            + self.broadcasts
            + self.confirmations
            + self.settlements
    }
}

/// Everything a phase needs.
#[derive(Debug)]
pub(super) struct Bench {
    pub(super) owner: PgPool,
    pub(super) setup: Store,
    pub(super) node: Node,
    /// The broadcasters' and reconcilers' `[rpc]` endpoint, counting every submission (`None`
    /// with `--no-send-counter`: they submit to the node itself).
    pub(super) recorder: Option<opledger_testkit::RpcProxy>,
    pub(super) services: Services,
    pub(super) clients: Clients,
    pub(super) meter: cpu::Meter,
    pub(super) args: Args,
}

/// A withdrawal the clients created: its id and when its create request was sent (Unix seconds).
pub(super) type Sent = (uuid::Uuid, f64);

/// What the clients did: the withdrawals created, failed calls and the first failure.
pub(super) type Driven = (Vec<Sent>, usize, Option<String>);
