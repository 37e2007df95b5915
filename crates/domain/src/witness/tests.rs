use super::*;
use crate::evidence::{Inclusion, NoAgreement, NoVerdict, Role};

fn block(number: u64, tag: u8) -> BlockRef {
    BlockRef {
        number,
        hash: [tag; 32],
    }
}

fn evidence(tx: u8, number: u64, tag: u8) -> ReleaseEvidence {
    ReleaseEvidence {
        tx_hash: [tx; 32],
        block: block(number, tag),
    }
}

fn record(principal: Principal, evidence: ReleaseEvidence) -> Record {
    Record {
        principal,
        evidence,
    }
}

const HASHES: [Hash32; 2] = [[1; 32], [2; 32]];

fn cancelled(attempt: usize, number: u64, tag: u8) -> Verdict {
    Verdict::Cancelled {
        attempt,
        inclusion: Inclusion {
            block: block(number, tag),
            succeeded: true,
        },
    }
}

#[test]
fn a_never_signed_withdrawal_is_released_without_any_record() {
    assert_eq!(release_allowed(&[], None, None), Ok(()));
}

#[test]
fn a_signed_withdrawal_needs_a_proposer_and_the_witness_on_the_same_evidence() {
    let e = evidence(2, 10, 7);
    let proposal = record(Principal::Reconciler, e);
    let witness = record(Principal::Witness, e);
    assert_eq!(
        release_allowed(&HASHES, None, None),
        Err(Withheld::NoProposal)
    );
    assert_eq!(
        release_allowed(&HASHES, None, Some(&witness)),
        Err(Withheld::NoProposal)
    );
    assert_eq!(
        release_allowed(&HASHES, Some(&proposal), None),
        Err(Withheld::NotWitnessed)
    );
    assert_eq!(
        release_allowed(&HASHES, Some(&proposal), Some(&witness)),
        Ok(())
    );
    let operator = record(Principal::Operator, e);
    assert_eq!(
        release_allowed(&HASHES, Some(&operator), Some(&witness)),
        Ok(())
    );
}

#[test]
fn one_principal_twice_never_releases() {
    let e = evidence(2, 10, 7);
    for principal in Principal::ALL {
        let one = record(principal, e);
        assert!(
            release_allowed(&HASHES, Some(&one), Some(&one)).is_err(),
            "{principal:?} alone released"
        );
    }
}

#[test]
fn the_witness_and_the_proposer_must_name_the_same_attempt_and_block() {
    let proposal = record(Principal::Reconciler, evidence(2, 10, 7));
    for other in [evidence(1, 10, 7), evidence(2, 11, 7), evidence(2, 10, 8)] {
        assert_eq!(
            release_allowed(
                &HASHES,
                Some(&proposal),
                Some(&record(Principal::Witness, other))
            ),
            Err(Withheld::EvidenceDiffers)
        );
    }
}

#[test]
fn the_witness_attests_its_own_final_cancel_when_it_is_the_proposal() {
    let proposal = record(Principal::Reconciler, evidence(2, 10, 7));
    assert_eq!(
        attest_release(&proposal, cancelled(1, 10, 7), &HASHES),
        Ok(proposal.evidence)
    );
    // Another attempt, another block, another hash at the same height (a fork).
    for verdict in [
        cancelled(0, 10, 7),
        cancelled(1, 11, 7),
        cancelled(1, 10, 9),
    ] {
        assert_eq!(
            attest_release(&proposal, verdict, &HASHES),
            Err(Refusal::EvidenceDiffers)
        );
    }
}

#[test]
fn the_witness_refuses_what_its_own_reading_does_not_support() {
    let proposal = record(Principal::Reconciler, evidence(2, 10, 7));
    let settled = Verdict::Settled {
        attempt: 0,
        inclusion: Inclusion {
            block: block(10, 7),
            succeeded: true,
        },
    };
    for verdict in [settled, Verdict::NonceMovedWithoutUs] {
        let refusal = attest_release(&proposal, verdict, &HASHES);
        assert_eq!(refusal, Err(Refusal::Contradicted), "{verdict:?}");
        assert!(!Refusal::Contradicted.is_transient());
    }
    let silent = Verdict::NoVerdict(NoVerdict::NoAgreement(NoAgreement::Disagreement));
    let pending = Verdict::Pending {
        attempt: 1,
        role: Role::Cancel,
    };
    // Nothing included yet at the witness's block: its endpoints may lag the proposer's.
    for verdict in [silent, pending, Verdict::NotIncluded] {
        assert_eq!(
            attest_release(&proposal, verdict, &HASHES),
            Err(Refusal::NoVerdict)
        );
    }
    assert!(Refusal::NoVerdict.is_transient());
    assert_eq!(
        attest_release(&proposal, Verdict::NeverSigned, &HASHES),
        Err(Refusal::NeverSigned)
    );
    // A verdict naming an attempt the witness does not know of is no verdict.
    assert_eq!(
        attest_release(&proposal, cancelled(5, 10, 7), &HASHES),
        Err(Refusal::NoVerdict)
    );
}

#[test]
fn a_final_reverted_attempt_is_attested_whoever_proposes_it() {
    let reverted = Verdict::Reverted {
        attempt: 0,
        role: Role::Transfer,
        inclusion: Inclusion {
            block: block(10, 7),
            succeeded: false,
        },
    };
    let by_reconciler = record(Principal::Reconciler, evidence(1, 10, 7));
    assert_eq!(
        attest_release(&by_reconciler, reverted, &HASHES),
        Ok(by_reconciler.evidence)
    );
    let by_operator = record(Principal::Operator, evidence(1, 10, 7));
    assert_eq!(
        attest_release(&by_operator, reverted, &HASHES),
        Ok(by_operator.evidence)
    );
}

#[test]
fn the_evidence_must_name_one_of_the_withdrawals_attempts() {
    let foreign = evidence(9, 10, 7);
    let proposal = record(Principal::Reconciler, foreign);
    let witness = record(Principal::Witness, foreign);
    assert_eq!(
        release_allowed(&HASHES, Some(&proposal), Some(&witness)),
        Err(Withheld::NotOurAttempt)
    );
}
