//! Tests of the token payout verdict.

use super::*;
use crate::witness::deposit::ERC20_TRANSFER_TOPIC;
use proptest::prelude::*;

const DESTINATION: Address = [0xaa; 20];
const OTHER: Address = [0xbb; 20];
const CUSTODIAN: Address = [0xcc; 20];
/// The token transactions' sender (a relayer of the custodian's).
const RELAYER: Address = [0xdd; 20];
const TOKEN: Address = [0x70; 20];
const OTHER_TOKEN: Address = [0x71; 20];
const TX: Hash32 = [0x11; 32];
const AMOUNT: u128 = 1_500_000;
const FINAL: u64 = 10;

fn block(number: u64, tag: u8) -> BlockRef {
    BlockRef {
        number,
        hash: [tag; 32],
    }
}

fn final_block() -> BlockRef {
    block(FINAL, 0xf0)
}

fn topic(address: Address) -> Hash32 {
    let mut topic = [0; 32];
    topic[12..].copy_from_slice(&address);
    topic
}

fn amount_data(amount: u128) -> Vec<u8> {
    let mut data = vec![0; 16];
    data.extend_from_slice(&amount.to_be_bytes());
    data
}

fn payout() -> TokenPayout {
    TokenPayout {
        tx_hash: TX,
        contract: TOKEN,
        recipient: DESTINATION,
        amount: AMOUNT,
    }
}

/// A standard `Transfer` log at `index` of `contract`, from the custodian to `to`.
fn transfer(index: u32, contract: Address, to: Address, amount: u128) -> ObservedLog {
    ObservedLog {
        index,
        address: contract,
        topics: vec![ERC20_TRANSFER_TOPIC, topic(CUSTODIAN), topic(to)],
        data: amount_data(amount),
    }
}

/// The approved transfer, at `index`.
fn approved(index: u32) -> ObservedLog {
    transfer(index, TOKEN, DESTINATION, AMOUNT)
}

/// Included at height `number` (the final block itself at [`FINAL`]).
fn included(number: u64, success: bool, logs: Vec<ObservedLog>) -> ObservedReceipt {
    let at = if number == FINAL {
        final_block()
    } else {
        block(number, 0x0b)
    };
    ObservedReceipt::Included {
        tx_hash: TX,
        block: at,
        success,
        from: Some(RELAYER),
        to: Some(TOKEN),
        value: Some(0),
        logs,
    }
}

fn judge(observed: &ObservedReceipt) -> PayoutVerdict {
    judge_token_payout(&payout(), Ok(observed), final_block())
}

fn refused(logs: Vec<ObservedLog>) -> Option<PayoutRefusal> {
    match judge(&included(FINAL - 2, true, logs)) {
        PayoutVerdict::Contradicted(why) => Some(why),
        _ => None,
    }
}

#[test]
fn one_final_transfer_of_the_token_to_the_destination_of_the_amount_is_paid() {
    for logs in [
        vec![approved(7)],
        // The same transaction also pays a fee in the token to someone else, emits an approval,
        // and moves another token to the destination: none of it is bound.
        vec![
            transfer(3, TOKEN, OTHER, 10),
            approved(4),
            ObservedLog {
                index: 5,
                address: TOKEN,
                topics: vec![[0x8c; 32], topic(CUSTODIAN), topic(OTHER)],
                data: amount_data(1),
            },
            transfer(6, OTHER_TOKEN, DESTINATION, AMOUNT * 2),
        ],
    ] {
        let index = logs
            .iter()
            .find(|l| *l == &approved(l.index))
            .map(|l| l.index);
        for number in [FINAL, 1] {
            assert_eq!(
                judge(&included(number, true, logs.clone())),
                PayoutVerdict::Paid {
                    block: if number == FINAL {
                        final_block()
                    } else {
                        block(number, 0x0b)
                    },
                    log_index: index.unwrap_or(u32::MAX),
                }
            );
        }
    }
}

#[test]
fn nothing_is_concluded_before_a_final_agreed_inclusion_of_this_transaction() {
    assert_eq!(
        judge_token_payout(&payout(), Err(NoAgreement::Disagreement), final_block()),
        PayoutVerdict::NotYet(NotYet::NoAgreement(NoAgreement::Disagreement))
    );
    assert_eq!(
        judge(&ObservedReceipt::Absent),
        PayoutVerdict::NotYet(NotYet::Absent)
    );
    // Above the final block: not final, whatever its logs say (none, or a contradiction).
    for logs in [
        vec![approved(0)],
        vec![],
        vec![transfer(0, TOKEN, OTHER, 1)],
    ] {
        for success in [true, false] {
            assert_eq!(
                judge(&included(FINAL + 1, success, logs.clone())),
                PayoutVerdict::NotYet(NotYet::NotFinal {
                    block: block(FINAL + 1, 0x0b)
                })
            );
        }
    }
    // Another transaction; the final height in another block: a node's or a caller's fault.
    let other_tx = ObservedReceipt::Included {
        tx_hash: [0x12; 32],
        block: block(FINAL, 0xf0),
        success: true,
        from: Some(RELAYER),
        to: Some(TOKEN),
        value: Some(0),
        logs: vec![approved(0)],
    };
    let other_fork = ObservedReceipt::Included {
        tx_hash: TX,
        block: block(FINAL, 0x0f),
        success: true,
        from: Some(RELAYER),
        to: Some(TOKEN),
        value: Some(0),
        logs: vec![approved(0)],
    };
    for observed in [other_tx, other_fork] {
        assert_eq!(
            judge(&observed),
            PayoutVerdict::NotYet(NotYet::Inconsistent)
        );
    }
}

#[test]
fn a_final_transaction_that_is_not_the_approved_transfer_is_contradicted() {
    use PayoutRefusal as R;
    // Reverted (a reverted receipt has no logs; an observation with one is reverted all the same).
    for logs in [vec![], vec![approved(0)]] {
        assert_eq!(
            judge(&included(FINAL, false, logs)),
            PayoutVerdict::Contradicted(R::Reverted)
        );
    }
    // The native coin (no log), another token.
    for logs in [vec![], vec![transfer(0, OTHER_TOKEN, DESTINATION, AMOUNT)]] {
        assert_eq!(refused(logs.clone()), Some(R::NoTokenTransfer), "{logs:?}");
    }
    // A look-alike event of the token: a transfer that cannot be read.
    let mut four_topics = approved(0);
    four_topics.topics.push(topic(OTHER));
    let mut long_data = approved(0);
    long_data.data.push(0);
    for logs in [vec![four_topics], vec![long_data]] {
        assert_eq!(
            refused(logs.clone()),
            Some(R::MalformedTransfer),
            "{logs:?}"
        );
    }
    // The token, to someone else only.
    assert_eq!(
        refused(vec![
            transfer(0, TOKEN, OTHER, AMOUNT),
            transfer(1, OTHER_TOKEN, DESTINATION, AMOUNT),
        ]),
        Some(R::RecipientMismatch)
    );
    // The token to the destination, another amount (more, less, beyond 128 bits).
    let mut huge = approved(0);
    huge.data = vec![0x01; 32];
    for log in [
        transfer(0, TOKEN, DESTINATION, AMOUNT + 1),
        transfer(0, TOKEN, DESTINATION, AMOUNT - 1),
        huge,
    ] {
        assert_eq!(refused(vec![log]), Some(R::AmountMismatch));
    }
}

#[test]
fn a_transaction_paying_the_destination_twice_is_never_paid() {
    use PayoutRefusal::MoreThanOneTransfer as Twice;
    // The approved transfer twice; once plus another amount; two halves.
    assert_eq!(refused(vec![approved(2), approved(5)]), Some(Twice));
    assert_eq!(
        refused(vec![approved(2), transfer(3, TOKEN, DESTINATION, 1)]),
        Some(Twice)
    );
    assert_eq!(
        refused(vec![
            transfer(2, TOKEN, DESTINATION, AMOUNT / 2),
            transfer(3, TOKEN, DESTINATION, AMOUNT / 2),
        ]),
        Some(Twice)
    );
}

#[test]
fn debug_shows_no_address_or_hash() {
    let shown = format!(
        "{:?} {:?} {:?}",
        payout(),
        included(FINAL, true, vec![approved(0)]),
        judge(&included(FINAL, true, vec![approved(0)]))
    );
    for secret in [
        "aaaa", "170", "1111", "0b0b", "112, 112", "17, 17", "11, 11", "240, 240",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

proptest! {
    /// Whatever the logs, `Paid` needs exactly one log equal to the approved transfer and no
    /// other transfer of the token to the destination; and it names that log.
    #[test]
    fn paid_means_exactly_one_transfer_to_the_destination(
        picks in prop::collection::vec((0_u8..6, 0_u32..64), 0..6),
        success in any::<bool>(),
    ) {
        let logs: Vec<ObservedLog> = picks
            .iter()
            .map(|(kind, index)| match kind {
                0 => approved(*index),
                1 => transfer(*index, TOKEN, DESTINATION, AMOUNT + 1),
                2 => transfer(*index, TOKEN, OTHER, AMOUNT),
                3 => transfer(*index, OTHER_TOKEN, DESTINATION, AMOUNT),
                4 => ObservedLog { index: *index, address: TOKEN, topics: vec![], data: vec![] },
                _ => transfer(*index, TOKEN, DESTINATION, 0),
            })
            .collect();
        let to_destination = picks.iter().filter(|(k, _)| matches!(k, 0 | 1 | 5)).count();
        let exact: Vec<u32> = picks.iter().filter(|(k, _)| *k == 0).map(|(_, i)| *i).collect();
        let verdict = judge(&included(FINAL, success, logs));
        match verdict {
            PayoutVerdict::Paid { log_index, .. } => {
                prop_assert!(success);
                prop_assert_eq!(to_destination, 1);
                prop_assert_eq!(exact, vec![log_index]);
            }
            PayoutVerdict::Contradicted(_) => {
                prop_assert!(!success || to_destination != 1 || exact.len() != 1);
            }
            PayoutVerdict::NotYet(_) => prop_assert!(false, "final: {verdict:?}"),
        }
    }
}

/// Only a payout sent from one of the custodian's addresses is ours: the `Transfer`'s `from`
/// for a token, the transaction's sender for the native coin.
#[test]
fn only_a_payout_sent_from_the_custodians_addresses_is_ours() {
    let observed = included(FINAL - 3, true, vec![approved(0)]);
    let PayoutVerdict::Paid { log_index, .. } = judge(&observed) else {
        panic!("not paid: {:?}", judge(&observed));
    };
    // The fixture's transfers are from CUSTODIAN; the transaction's sender is RELAYER.
    assert!(sent_by(&observed, Some(log_index), &[CUSTODIAN]));
    assert!(!sent_by(&observed, Some(log_index), &[RELAYER]));
    assert!(!sent_by(&observed, Some(log_index), &[]));
    assert!(!sent_by(&observed, Some(log_index + 1), &[CUSTODIAN]));
    assert!(sent_by(&observed, None, &[RELAYER]));
    assert!(!sent_by(&observed, None, &[CUSTODIAN]));
    assert!(!sent_by(&ObservedReceipt::Absent, None, &[RELAYER]));
    // A `from` topic that is no address (non-zero padding) is no sender.
    let mut padded = approved(0);
    padded.topics[1][0] = 1;
    let odd = included(FINAL - 3, true, vec![padded]);
    assert!(!sent_by(&odd, Some(0), &[CUSTODIAN]));
    assert_eq!(
        PayoutRefusal::SenderMismatch.reason_code(),
        "PAYOUT_SENDER_MISMATCH"
    );
}

/// A `Transfer`-signed log of the token that does not decode (a fourth topic, padding that is
/// not zero, data that is not one word) makes the payout unreadable: contradicted, never paid,
/// even beside the approved transfer. Another event of the token (an approval) is ignored.
#[test]
fn a_malformed_transfer_of_the_token_is_never_paid() {
    let mut four_topics = approved(1);
    four_topics.topics.push([0; 32]);
    let mut padded = approved(1);
    padded.topics[2][0] = 1;
    let mut long_data = approved(1);
    long_data.data.push(0);
    for odd in [four_topics, padded, long_data] {
        let observed = included(FINAL - 3, true, vec![approved(0), odd]);
        assert_eq!(
            judge(&observed),
            PayoutVerdict::Contradicted(PayoutRefusal::MalformedTransfer)
        );
    }
    let mut approval = approved(1);
    approval.topics[0] = [0x8c; 32];
    let observed = included(FINAL - 3, true, vec![approved(0), approval]);
    assert!(matches!(
        judge(&observed),
        PayoutVerdict::Paid { log_index: 0, .. }
    ));
    assert_eq!(
        PayoutRefusal::MalformedTransfer.reason_code(),
        "PAYOUT_MALFORMED_TRANSFER"
    );
}

#[test]
fn only_a_payout_included_after_the_chain_at_the_request_is_the_requests() {
    // Stored when block 100 was final and the head was 112.
    let bound = RequestBound {
        final_block: 100,
        head: block(112, 9),
    };
    for (included, since) in [
        (0, SinceRequest::Before),
        (100, SinceRequest::Before),
        (101, SinceRequest::BeforeUnlessHeadReplaced),
        (112, SinceRequest::BeforeUnlessHeadReplaced),
        (113, SinceRequest::After),
        (5000, SinceRequest::After),
    ] {
        assert_eq!(since_request(included, &bound), since, "{included}");
    }
    assert_eq!(
        PayoutRefusal::BeforeRequest.reason_code(),
        "PAYOUT_BEFORE_REQUEST"
    );
}
