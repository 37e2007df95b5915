use super::*;
use crate::state::OperationState;

const SENDER: Address = [0x11; 20];
const OTHER: Address = [0x22; 20];
const RECIPIENT: Address = [0x33; 20];
const TOKEN: Address = [0x44; 20];

fn expected(asset: Asset) -> ExpectedTransfer {
    ExpectedTransfer {
        chain_id: 31337,
        sender: SENDER,
        nonce: 7,
        recipient: RECIPIENT,
        asset,
        amount: 1_000,
    }
}

fn native(to: Address, value: u128) -> TxContent {
    TxContent {
        chain_id: 31337,
        sender: SENDER,
        nonce: 7,
        to,
        value: Some(value),
        call: Call::Empty,
    }
}

fn block(number: u64) -> BlockRef {
    BlockRef {
        number,
        hash: [u8::try_from(number % 256).unwrap_or(0); 32],
    }
}

fn reading(
    inclusions: Vec<Option<Inclusion>>,
    pinned: u64,
    depth: u64,
    nonces: (u64, u64),
) -> Reading {
    Reading {
        pinned: block(pinned),
        final_block: block(pinned + 1 - depth),
        inclusions,
        nonce_at_pinned: nonces.0,
        nonce_at_final: nonces.1,
    }
}

fn included(number: u64, succeeded: bool) -> Option<Inclusion> {
    Some(Inclusion {
        block: block(number),
        succeeded,
    })
}

#[test]
fn role_comes_from_content() {
    let e = expected(Asset::Native);
    assert_eq!(role_of(&native(RECIPIENT, 1_000), &e), Ok(Role::Transfer));
    assert_eq!(role_of(&native(SENDER, 0), &e), Ok(Role::Cancel));
    assert_eq!(
        role_of(&native(RECIPIENT, 999), &e),
        Err(ContentMismatch::Neither)
    );
    assert_eq!(
        role_of(&native(OTHER, 1_000), &e),
        Err(ContentMismatch::Neither)
    );
    let rotated = TxContent {
        sender: OTHER,
        ..native(OTHER, 0)
    };
    assert_eq!(role_of(&rotated, &e), Err(ContentMismatch::Sender));
    let later = TxContent {
        nonce: 8,
        ..native(RECIPIENT, 1_000)
    };
    assert_eq!(role_of(&later, &e), Err(ContentMismatch::Nonce));
    let token = expected(Asset::Token(TOKEN));
    let erc20 = TxContent {
        call: Call::Erc20Transfer {
            recipient: RECIPIENT,
            amount: Some(1_000),
        },
        ..native(TOKEN, 0)
    };
    assert_eq!(role_of(&erc20, &token), Ok(Role::Transfer));
    assert_eq!(role_of(&native(SENDER, 0), &token), Ok(Role::Cancel));
    let to_attacker = TxContent {
        call: Call::Erc20Transfer {
            recipient: OTHER,
            amount: Some(1_000),
        },
        ..erc20
    };
    assert_eq!(role_of(&to_attacker, &token), Err(ContentMismatch::Neither));
}

#[test]
fn a_bump_of_a_cancel_is_a_cancel() {
    assert_eq!(
        replacement_kind(ReplacementRequest::FeeBump, Role::Cancel),
        AttemptKind::Cancel
    );
    assert_eq!(
        replacement_kind(ReplacementRequest::FeeBump, Role::Transfer),
        AttemptKind::FeeBump
    );
    assert!(AttemptKind::FeeBump.check(Role::Cancel).is_err());
}

#[test]
fn replacements_come_from_the_original_sender() {
    assert_eq!(replacement_sender(SENDER, &[OTHER, SENDER]), Ok(SENDER));
    assert_eq!(replacement_sender(SENDER, &[OTHER]), Err(NoKeyForSender));
}

#[test]
fn a_cancel_included_but_not_final_is_never_a_payout() {
    let attempts = [Ok(Role::Transfer), Ok(Role::Cancel)];
    // Cancel included at block 10, head 10, three confirmations: pending.
    let r = Ok(reading(vec![None, included(10, true)], 10, 3, (8, 7)));
    let verdict = decide(&attempts, 7, &r);
    assert_eq!(
        verdict,
        Verdict::Pending {
            attempt: 1,
            role: Role::Cancel
        }
    );
    let timing = Timing {
        latest_attempt_age_secs: 1_000,
        latest_role: Role::Cancel,
        unchanged_secs: 0,
        cancel_after_secs: 300,
        escalate_after_secs: 3_600,
    };
    assert_eq!(
        next_step(OperationState::Unknown, verdict, timing),
        Step::Wait
    );
    assert_eq!(
        next_step(OperationState::Broadcast, verdict, timing),
        Step::Move(OperationState::Unknown)
    );
    assert_eq!(watcher_step(verdict), Step::Move(OperationState::Unknown));
    // Final: released, never confirmed.
    let r = Ok(reading(vec![None, included(10, true)], 12, 3, (8, 8)));
    let verdict = decide(&attempts, 7, &r);
    assert!(matches!(verdict, Verdict::Cancelled { attempt: 1, .. }));
    assert_eq!(
        next_step(OperationState::Unknown, verdict, timing),
        Step::Release
    );
    assert_eq!(watcher_step(verdict), Step::Move(OperationState::Unknown));
}

#[test]
fn a_moved_nonce_is_not_proof() {
    let attempts = [Ok(Role::Transfer)];
    let r = Ok(reading(vec![None], 20, 3, (8, 8)));
    assert_eq!(decide(&attempts, 7, &r), Verdict::NonceMovedWithoutUs);
    assert!(!resolution_allowed(
        Verdict::NonceMovedWithoutUs,
        Resolution::VerifiedNotSent
    ));
    let r = Ok(reading(vec![None], 20, 3, (8, 7)));
    assert_eq!(
        decide(&attempts, 7, &r),
        Verdict::NoVerdict(NoVerdict::NonceMovedNotFinal)
    );
}

#[test]
fn reverted_goes_to_an_owner_and_may_be_released_by_an_operator() {
    let attempts = [Ok(Role::Transfer)];
    let r = Ok(reading(vec![included(5, false)], 20, 3, (8, 8)));
    let verdict = decide(&attempts, 7, &r);
    assert!(matches!(verdict, Verdict::Reverted { .. }));
    assert_eq!(watcher_step(verdict), Step::Escalate(Escalation::REVERTED));
    assert!(resolution_allowed(verdict, Resolution::VerifiedNotSent));
    assert!(!resolution_allowed(verdict, Resolution::Confirmed));
}

#[test]
fn inconsistent_readings_give_no_verdict() {
    let attempts = [Ok(Role::Transfer), Ok(Role::Transfer)];
    let two = Ok(reading(
        vec![included(5, true), included(6, true)],
        20,
        3,
        (8, 8),
    ));
    assert_eq!(
        decide(&attempts, 7, &two),
        Verdict::NoVerdict(NoVerdict::Inconsistent)
    );
    let unconsumed = Ok(reading(vec![included(5, true), None], 20, 3, (7, 7)));
    assert_eq!(
        decide(&attempts, 7, &unconsumed),
        Verdict::NoVerdict(NoVerdict::Inconsistent)
    );
    let short = Ok(reading(vec![None], 20, 3, (7, 7)));
    assert_eq!(
        decide(&attempts, 7, &short),
        Verdict::NoVerdict(NoVerdict::Inconsistent)
    );
}

#[test]
fn a_defective_attempt_goes_to_security_whatever_the_chain_says() {
    let defect = AttemptDefect::Content(ContentMismatch::Neither);
    let attempts = [Ok(Role::Transfer), Err(defect)];
    let r = Ok(reading(vec![included(5, true), None], 20, 3, (8, 8)));
    let verdict = decide(&attempts, 7, &r);
    assert_eq!(verdict, Verdict::Tampered { attempt: 1, defect });
    assert_eq!(watcher_step(verdict), Step::Escalate(Escalation::TAMPERED));
}

fn answer(head: u64, r: &Reading) -> Option<EndpointReading> {
    Some(EndpointReading {
        head,
        reading: r.clone(),
    })
}

#[test]
fn quorum_needs_agreeing_answers_close_in_height() {
    let honest = reading(vec![included(5, true)], 20, 3, (8, 8));
    let lying = reading(vec![None], 20, 3, (8, 8));
    assert_eq!(
        agree(&[answer(20, &honest), answer(21, &honest)], 2, 4),
        Ok(honest.clone())
    );
    assert_eq!(
        agree(&[answer(20, &honest), None], 2, 4),
        Err(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2
        })
    );
    assert_eq!(
        agree(&[answer(20, &honest), answer(20, &lying)], 2, 4),
        Err(NoAgreement::Disagreement)
    );
    // With three endpoints and a quorum of two, a contradicting third still blocks the verdict.
    assert_eq!(
        agree(
            &[answer(20, &honest), answer(20, &honest), answer(20, &lying)],
            2,
            4
        ),
        Err(NoAgreement::Disagreement)
    );
    assert_eq!(
        agree(&[answer(20, &honest), answer(30, &honest)], 2, 4),
        Err(NoAgreement::Lag {
            blocks: 10,
            max_lag: 4
        })
    );
    let verdict = decide(
        &[Ok(Role::Transfer)],
        7,
        &agree(&[answer(20, &honest), answer(20, &lying)], 2, 4),
    );
    assert!(matches!(
        verdict,
        Verdict::NoVerdict(NoVerdict::NoAgreement(_))
    ));
}

#[test]
fn no_verdict_escalates_after_the_window() {
    let timing = Timing {
        latest_attempt_age_secs: 10,
        latest_role: Role::Transfer,
        unchanged_secs: 4_000,
        cancel_after_secs: 300,
        escalate_after_secs: 3_600,
    };
    let none = Verdict::NoVerdict(NoVerdict::Inconsistent);
    assert_eq!(
        next_step(OperationState::Unknown, none, timing),
        Step::Escalate(Escalation::NO_VERDICT)
    );
    assert_eq!(
        next_step(OperationState::Broadcast, none, timing),
        Step::Escalate(Escalation::NO_VERDICT),
        "a node that keeps lying blocks no operation forever"
    );
    let fresh = Timing {
        unchanged_secs: 10,
        ..timing
    };
    assert_eq!(
        next_step(OperationState::Broadcast, none, fresh),
        Step::Wait
    );
    let old = Timing {
        latest_attempt_age_secs: 400,
        unchanged_secs: 0,
        ..timing
    };
    assert_eq!(
        next_step(OperationState::Unknown, Verdict::NotIncluded, old),
        Step::SignCancel
    );
    assert_eq!(
        next_step(OperationState::Broadcast, Verdict::NotIncluded, old),
        Step::Move(OperationState::Unknown)
    );
    assert_eq!(
        next_step(
            OperationState::Unknown,
            Verdict::NotIncluded,
            Timing {
                latest_role: Role::Cancel,
                ..old
            }
        ),
        Step::ResubmitCancel
    );
}
