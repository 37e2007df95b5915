//! The sign benchmark's data: senders, phases and what a phase measured.

use crate::report::Summary;
use opledger_domain::ids::{OperationId, TenantId};
use std::time::Duration;

/// One sender: a tenant with its hot wallet on the bench network.
#[derive(Debug, Clone)]
pub(super) struct Sender {
    pub(super) tenant: TenantId,
    pub(super) client_key_id: String,
    pub(super) approver_key_id: String,
    /// The tenant's published trust statement and approver key.
    pub(super) trust: crate::trust::TenantTrust,
    pub(super) address: String,
}

/// One measured phase: its senders and the approved withdrawals it signs.
#[derive(Debug)]
pub(super) struct Phase {
    pub(super) label: String,
    pub(super) senders: Vec<Sender>,
    pub(super) work: Vec<(TenantId, OperationId)>,
}

/// What a phase measured.
#[derive(Debug)]
pub(super) struct Measured {
    pub(super) summary: Summary,
    /// Sum of the latencies of the successful calls.
    pub(super) busy: Duration,
    pub(super) first_error: Option<String>,
}

/// The `evm::sign` baselines: signatures made and the time taken, on one thread and on
/// `BASELINE_THREADS` threads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Baselines {
    pub(super) single: (usize, Duration),
    pub(super) parallel: (usize, Duration),
}

/// One reported phase: its label, its number of senders and what it measured.
pub(super) type Row = (String, usize, Measured);
