//! Two independent principals for every ledger effect that can pay twice.
//!
//! Releasing the hold of a withdrawal that has a signed attempt makes the funds spendable again
//! while the signed bytes still exist: if the evidence is wrong, the payout is paid twice. So a
//! release needs two records of the same evidence, made by two principals that share no login and
//! no host:
//! - the **proposer** (the reconciler, or an operator through the reconciler's operator API), with
//!   the evidence it decided on: the attempt whose inclusion at final depth proves that no transfer
//!   can happen any more (our own cancel, or an attempt that reverted), and the including block;
//! - the **witness**, a separate service with its own database login and its own evidence
//!   endpoints, which reads the chain again with the quorum rules and attests only when its own
//!   verdict names the same attempt in the same block ([`attest_release`]).
//!
//! [`release_allowed`] is the rule the ledger applies; migration 28 enforces the same rule in the
//! database (`opledger_resolve_holds`), tests/store checks the two agree, and the model checker
//! (`crates/model`) drives both against a compromised proposer and a compromised witness. A
//! withdrawal that was never signed needs no witness: nothing of it can ever reach the chain.

pub mod deposit;
use crate::evidence::{BlockRef, Hash32, Verdict};

/// What a release rests on: the attempt whose inclusion at final depth proves that no transfer
/// can happen (our cancel, or an attempt that reverted), and the block that includes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReleaseEvidence {
    /// The attempt's transaction hash.
    pub tx_hash: Hash32,
    /// The including block.
    pub block: BlockRef,
}

/// Who recorded a release's evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Principal {
    /// The reconciler service (its own verdict, read by its quorum).
    Reconciler,
    /// An operator's resolution, through the reconciler's operator API.
    Operator,
    /// The witness service.
    Witness,
}

impl Principal {
    /// Every principal.
    pub const ALL: [Principal; 3] = [
        Principal::Reconciler,
        Principal::Operator,
        Principal::Witness,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Principal::Reconciler => "reconciler",
            Principal::Operator => "operator",
            Principal::Witness => "witness",
        }
    }

    /// Whether this principal may propose a release.
    pub fn proposes(self) -> bool {
        match self {
            Principal::Reconciler | Principal::Operator => true,
            Principal::Witness => false,
        }
    }
}

/// One principal's record of a release's evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Record {
    /// Who recorded it.
    pub principal: Principal,
    /// What it recorded.
    pub evidence: ReleaseEvidence,
}

/// Why a hold is not released yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Withheld {
    /// No proposal with evidence is recorded.
    #[error("no release proposal is recorded")]
    NoProposal,
    /// The proposal was recorded by a principal that may not propose.
    #[error("the release proposal is not by a proposer")]
    NotAProposer,
    /// The witness has not attested.
    #[error("the witness has not attested the release")]
    NotWitnessed,
    /// The attestation was recorded by a principal other than the witness.
    #[error("the attestation is not by the witness")]
    NotTheWitness,
    /// The proposal and the attestation name different evidence.
    #[error("the proposal and the attestation name different evidence")]
    EvidenceDiffers,
    /// The evidence names a transaction that is none of the withdrawal's attempts.
    #[error("the evidence names none of the withdrawal's attempts")]
    NotOurAttempt,
}

impl Withheld {
    /// A stable reason code (UPPER_SNAKE) for errors and metrics.
    pub fn reason_code(self) -> &'static str {
        match self {
            Withheld::NoProposal => "RELEASE_NOT_PROPOSED",
            Withheld::NotAProposer => "RELEASE_PROPOSER_INVALID",
            Withheld::NotWitnessed => "RELEASE_AWAITING_WITNESS",
            Withheld::NotTheWitness => "RELEASE_WITNESS_INVALID",
            Withheld::EvidenceDiffers => "RELEASE_EVIDENCE_DIFFERS",
            Withheld::NotOurAttempt => "RELEASE_EVIDENCE_NOT_OURS",
        }
    }
}

/// Whether the hold of a withdrawal whose signed attempts have the hashes `attempts` may be
/// released: always when it has none (never signed: nothing of it can reach the chain),
/// otherwise only with a proposal by a proposer and the witness's attestation of exactly the
/// same evidence, naming one of those attempts.
pub fn release_allowed(
    attempts: &[Hash32],
    proposal: Option<&Record>,
    attestation: Option<&Record>,
) -> Result<(), Withheld> {
    if attempts.is_empty() {
        return Ok(());
    }
    let proposal = proposal.ok_or(Withheld::NoProposal)?;
    if !proposal.principal.proposes() {
        return Err(Withheld::NotAProposer);
    }
    let attestation = attestation.ok_or(Withheld::NotWitnessed)?;
    if attestation.principal != Principal::Witness {
        return Err(Withheld::NotTheWitness);
    }
    if attestation.evidence != proposal.evidence {
        return Err(Withheld::EvidenceDiffers);
    }
    if !attempts.contains(&proposal.evidence.tx_hash) {
        return Err(Withheld::NotOurAttempt);
    }
    Ok(())
}

/// Why the witness does not attest a proposed release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The witness's own reading gives no verdict (no agreement, lag, an inconsistent reading, a
    /// cancel not yet final, nothing included yet: its endpoints may lag the proposer's): it
    /// reads again later.
    #[error("the witness's evidence gives no verdict yet")]
    NoVerdict,
    /// The withdrawal has no signed attempt: its release needs no witness.
    #[error("the withdrawal was never signed")]
    NeverSigned,
    /// The witness's verdict does not allow a release at all (a transfer final, a nonce consumed
    /// by someone else, a tampered attempt).
    #[error("the witness's evidence does not support a release")]
    Contradicted,
    /// The witness's verdict supports a release, on other evidence than proposed.
    #[error("the proposal names other evidence than the witness found")]
    EvidenceDiffers,
}

impl Refusal {
    /// A stable reason code (UPPER_SNAKE) for the refusal record and metrics.
    pub fn reason_code(self) -> &'static str {
        match self {
            Refusal::NoVerdict => "WITNESS_NO_VERDICT",
            Refusal::NeverSigned => "WITNESS_NEVER_SIGNED",
            Refusal::Contradicted => "WITNESS_EVIDENCE_CONTRADICTS",
            Refusal::EvidenceDiffers => "WITNESS_EVIDENCE_DIFFERS",
        }
    }

    /// True when reading again later may change the answer; false when the proposal itself is
    /// wrong (a security event: an honest proposer does not make it).
    pub fn is_transient(self) -> bool {
        match self {
            Refusal::NoVerdict => true,
            Refusal::NeverSigned | Refusal::Contradicted | Refusal::EvidenceDiffers => false,
        }
    }
}

/// The witness's decision on a proposed release, from its own verdict on the withdrawal's
/// attempts (`attempt_hashes`, oldest first, as the verdict indexes them): it attests exactly the
/// evidence its verdict establishes, and only when that is the proposal's.
pub fn attest_release(
    proposal: &Record,
    verdict: Verdict,
    attempt_hashes: &[Hash32],
) -> Result<ReleaseEvidence, Refusal> {
    // A reverted attempt at final depth consumed the nonce and moved nothing: evidence as good as
    // our cancel. (The reconciler service sends it to an owner before anyone resolves it, but the
    // proposal's principal is the reconciler login's word, so the witness does not rest on it.)
    let (attempt, inclusion) = match verdict {
        Verdict::Cancelled { attempt, inclusion }
        | Verdict::Reverted {
            attempt, inclusion, ..
        } => (attempt, inclusion),
        // Nothing included at the witness's pinned block may only mean its endpoints lag the
        // proposer's: read again, never refuse for good on it.
        Verdict::NoVerdict(_) | Verdict::Pending { .. } | Verdict::NotIncluded => {
            return Err(Refusal::NoVerdict);
        }
        Verdict::NeverSigned => return Err(Refusal::NeverSigned),
        Verdict::Tampered { .. } | Verdict::Settled { .. } | Verdict::NonceMovedWithoutUs => {
            return Err(Refusal::Contradicted);
        }
    };
    let tx_hash = *attempt_hashes.get(attempt).ok_or(Refusal::NoVerdict)?;
    let found = ReleaseEvidence {
        tx_hash,
        block: inclusion.block,
    };
    if found != proposal.evidence {
        return Err(Refusal::EvidenceDiffers);
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
