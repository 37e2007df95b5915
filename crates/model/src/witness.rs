//! The witness: a service of its own, with its own database login and its own endpoints
//! ([`crate::Config::witness_endpoints`], read with [`crate::config::Side::Witness`]). It takes a
//! proposal from its queue (not attested, not refused, the hold still held), reads the chain
//! through its own endpoints, makes its verdict with the domain's `decide`, and lets the domain's
//! `attest_release` say whether it attests the proposal's evidence, refuses it for good (a
//! security signal), or reads again later.
//!
//! It reads and records in one step. A crash before the insert is an evaluation that did
//! nothing; and what it attests is an inclusion at final depth, which the reorganizations the
//! safety properties assume (shallower than finality) cannot undo before the insert.

use opledger_domain::evidence::decide;
use opledger_domain::witness::{ReleaseEvidence, attest_release};

use crate::PayoutModel;
use crate::chain::NONCE;
use crate::endpoints::Evidence;
use crate::model::State;

/// What the witness decided about one proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing yet (a transient refusal: it reads again later).
    Nothing,
    /// Attest this evidence.
    Attest(ReleaseEvidence),
    /// Refuse the proposal of this evidence for good.
    Refuse(ReleaseEvidence),
}

impl PayoutModel {
    /// The witness's decision on the proposal recorded at `index`, from `evidence` read through
    /// its own endpoints: `decide` on the operation's attempts as the store holds them, then
    /// `attest_release` with the attempts' hashes.
    pub fn witness_decision(&self, state: &State, index: usize, evidence: &Evidence) -> Decision {
        let Some(proposal) = state.store.proposals.get(index) else {
            return Decision::Nothing;
        };
        let verdict = decide(&state.store.roles(), NONCE, evidence);
        match attest_release(proposal, verdict, &state.store.attempt_hashes()) {
            Ok(found) => Decision::Attest(found),
            Err(refusal) if !refusal.is_transient() => Decision::Refuse(proposal.evidence),
            Err(_) => Decision::Nothing,
        }
    }

    /// The witness judges the proposal at `index` if it is in its queue, and records its
    /// attestation or refusal with its own login: `None` when it records nothing.
    pub(crate) fn witness(
        &self,
        state: &mut State,
        index: usize,
        evidence: &Evidence,
    ) -> Option<()> {
        if !state.store.unwitnessed().any(|(i, _)| i == index) {
            return None;
        }
        let recorded = match self.witness_decision(state, index, evidence) {
            Decision::Nothing => false,
            Decision::Attest(found) => state.store.attest(found),
            Decision::Refuse(proposed) => state.store.refuse(proposed),
        };
        recorded.then_some(())
    }
}
