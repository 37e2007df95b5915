//! One pass of the witness: every proposed release it has not attested yet is judged again from
//! the witness's own endpoints, and attested only when its own verdict names the same attempt in
//! the same block ([`opledger_domain::witness::attest_release`]). It never moves an operation or
//! a hold: the database releases once both records exist, when the reconciler next moves the
//! operation. What cannot be read now is read again next pass; a proposal its evidence
//! contradicts is refused for good (a security signal: an honest proposer does not make it).

use crate::metrics::Counters;
use crate::outcome::Outcome;
use opledger_chain::evidence::{
    EvidenceReader, NoAgreement, Pinned, Pins, no_evidence, reason_label,
};
use opledger_domain::evidence::{NoVerdict, Verdict, decide};
use opledger_domain::witness::{Record, Refusal, attest_release};
use opledger_evm::evidence::StoredAttempt;
use opledger_store::StoreError;
use opledger_store::roles::WitnessStore;
use opledger_store::signing::Attempt;
use opledger_store::witness::PendingRelease;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tracing::Instrument as _;

/// Why a proposal could not be examined (it is examined again next pass).
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// The store failed.
    #[error("store: {}", .0.log_safe())]
    Store(#[from] StoreError),
}

/// The witness over a store and its own evidence readers.
#[derive(Debug, Clone)]
pub struct Witness {
    store: WitnessStore,
    networks: HashMap<String, EvidenceReader>,
    witness_id: String,
    counters: Arc<Counters>,
    /// The last proposal of the previous pass's page, when the page was full.
    cursor: Arc<Mutex<Option<PendingRelease>>>,
}

impl Witness {
    /// A witness reading `networks` (its own endpoints) and recording as `witness_id`.
    pub fn new(
        store: WitnessStore,
        networks: HashMap<String, EvidenceReader>,
        witness_id: String,
        counters: Arc<Counters>,
    ) -> Witness {
        Witness {
            store,
            networks,
            witness_id,
            counters,
            cursor: Arc::new(Mutex::new(None)),
        }
    }

    /// One pass over up to `limit` proposals, oldest first; each network is pinned once.
    pub async fn tick(&self, limit: u32) -> Vec<Outcome> {
        // A page per pass, round robin: proposals it cannot decide yet never starve the others.
        let after = self
            .cursor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut page = self.store.releases_to_witness(after.as_ref(), limit).await;
        if after.is_some() && page.as_ref().is_ok_and(Vec::is_empty) {
            page = self.store.releases_to_witness(None, limit).await;
        }
        let pending = match page {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read proposed releases");
                return Vec::new();
            }
        };
        *self.cursor.lock().unwrap_or_else(PoisonError::into_inner) = match pending.last() {
            Some(last) if pending.len() == limit as usize => Some(last.clone()),
            _ => None,
        };
        let mut pins = Pins::default();
        let mut outcomes = Vec::with_capacity(pending.len());
        for release in &pending {
            let pinned = pins
                .get(&release.network, self.networks.get(&release.network))
                .await;
            let span = tracing::info_span!(
                "witness.examine",
                opledger.service = "witness",
                op_id = %release.op_id,
                outcome = tracing::field::Empty,
            );
            let outcome = async {
                match self.examine(release, pinned).await {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        tracing::warn!(op_id = %release.op_id, error = %e, "examination deferred");
                        Outcome::NoVerdict
                    }
                }
            }
            .instrument(span.clone())
            .await;
            span.record("outcome", tracing::field::debug(outcome));
            self.counters.count(outcome);
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Judges one proposal at `pinned` (`None`: the witness has no endpoints for its network).
    pub async fn examine(
        &self,
        release: &PendingRelease,
        pinned: Option<Result<Pinned, NoAgreement>>,
    ) -> Result<Outcome, WitnessError> {
        let Some(pinned) = pinned else {
            tracing::warn!(op_id = %release.op_id, network = %release.network, "no evidence endpoints for the proposal's network: not attested");
            return Ok(Outcome::NoVerdict);
        };
        let (verdict, hashes) = self.verdict(release, &pinned).await?;
        let proposal = Record {
            principal: release.principal,
            evidence: release.evidence,
        };
        match attest_release(&proposal, verdict, &hashes) {
            Ok(_) => {
                self.store.attest_release(release, &self.witness_id).await?;
                tracing::info!(op_id = %release.op_id, "release attested");
                Ok(Outcome::Attested)
            }
            Err(refusal) if refusal.is_transient() => Ok(Outcome::NoVerdict),
            Err(refusal) => self.refuse(release, refusal).await,
        }
    }

    async fn refuse(
        &self,
        release: &PendingRelease,
        refusal: Refusal,
    ) -> Result<Outcome, WitnessError> {
        let reason = refusal.reason_code();
        self.store
            .refuse_release(release, reason, &self.witness_id)
            .await?;
        tracing::error!(op_id = %release.op_id, reason, "release refused: the witness's evidence does not support it; hold kept");
        Ok(Outcome::Refused(reason))
    }

    /// The witness's own verdict on the operation's attempts, and their hashes computed from
    /// their bytes (oldest first).
    async fn verdict(
        &self,
        release: &PendingRelease,
        pinned: &Result<Pinned, NoAgreement>,
    ) -> Result<(Verdict, Vec<[u8; 32]>), WitnessError> {
        let attempts = self
            .store
            .attempts(release.tenant_id, release.op_id)
            .await?;
        let Some(original) = attempts.first() else {
            return Ok((Verdict::NeverSigned, Vec::new()));
        };
        // A held-back attempt has no bytes for this login: no verdict until its release.
        if attempts.iter().any(|a| !a.released) {
            return Ok((Verdict::NoVerdict(NoVerdict::Inconsistent), Vec::new()));
        }
        let operation = self
            .store
            .withdrawal(release.tenant_id, release.op_id)
            .await?;
        let stored: Vec<StoredAttempt<'_>> = attempts.iter().map(Attempt::as_stored).collect();
        let judged = opledger_evm::evidence::judge_payout(&stored, &operation.payload);
        let nonce = original.signed.nonce;
        let mut verdict = match pinned {
            Ok(pinned) => {
                pinned
                    .verdict(&judged.roles, judged.sender, nonce, &judged.hashes)
                    .await
            }
            Err(no) => decide(&judged.roles, nonce, &Err(*no)),
        };
        // A replacement persisted while the chain was read would look like another verdict.
        if self
            .store
            .attempts(release.tenant_id, release.op_id)
            .await?
            .len()
            != attempts.len()
        {
            verdict = Verdict::NoVerdict(NoVerdict::Inconsistent);
        }
        if let Verdict::NoVerdict(NoVerdict::NoAgreement(no)) = verdict {
            no_evidence().record(&release.network, reason_label(&no));
        }
        Ok((verdict, judged.hashes.iter().map(|h| h.0).collect()))
    }
}
