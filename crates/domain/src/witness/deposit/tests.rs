//! Tests of the deposit verdict.

use super::*;
use proptest::prelude::*;

const RECIPIENT: Address = [0xaa; 20];
const OTHER: Address = [0xbb; 20];
const TOKEN: Address = [0x70; 20];
const OTHER_TOKEN: Address = [0x71; 20];
const TX: Hash32 = [0x11; 32];
const AMOUNT: u128 = 1_500_000;

fn block(number: u64, tag: u8) -> BlockRef {
    BlockRef {
        number,
        hash: [tag; 32],
    }
}

const FINAL: u64 = 10;

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

fn native_claim() -> DepositClaim {
    DepositClaim {
        tx_hash: TX,
        log_index: None,
        recipient: RECIPIENT,
        asset: Asset::Native,
        amount: AMOUNT,
    }
}

fn native_seen(number: u64) -> ObservedDeposit {
    ObservedDeposit::Included {
        tx_hash: TX,
        block: block(number, 0x0b),
        success: true,
        to: Some(RECIPIENT),
        value: Some(AMOUNT),
        log: None,
    }
}

fn transfer_log(index: u32) -> ObservedLog {
    ObservedLog {
        index,
        address: TOKEN,
        topics: vec![ERC20_TRANSFER_TOPIC, topic(OTHER), topic(RECIPIENT)],
        data: amount_data(AMOUNT),
    }
}

fn token_claim() -> DepositClaim {
    DepositClaim {
        tx_hash: TX,
        log_index: Some(3),
        recipient: RECIPIENT,
        asset: Asset::Token(TOKEN),
        amount: AMOUNT,
    }
}

fn token_seen(number: u64, log: Option<ObservedLog>) -> ObservedDeposit {
    ObservedDeposit::Included {
        tx_hash: TX,
        block: block(number, 0x0b),
        success: true,
        // A router, not the token: a token deposit's transaction target is not bound.
        to: Some(OTHER),
        value: Some(0),
        log,
    }
}

fn judge(claim: &DepositClaim, seen: &ObservedDeposit) -> DepositVerdict {
    judge_deposit(claim, Ok(seen), final_block())
}

fn with(seen: &ObservedDeposit, change: impl FnOnce(&mut ObservedDeposit)) -> ObservedDeposit {
    let mut seen = seen.clone();
    change(&mut seen);
    seen
}

fn log_of(seen: &mut ObservedDeposit) -> &mut ObservedLog {
    match seen {
        ObservedDeposit::Included { log: Some(log), .. } => log,
        _ => panic!("no log to change"),
    }
}

fn contradicted(refusal: DepositRefusal) -> DepositVerdict {
    DepositVerdict::Contradicted(refusal)
}

#[test]
fn a_native_transfer_at_final_depth_is_confirmed() {
    for number in [1, FINAL - 1] {
        assert_eq!(
            judge(&native_claim(), &native_seen(number)),
            DepositVerdict::Confirmed {
                block: block(number, 0x0b)
            }
        );
    }
    // In the final block itself, named by its hash.
    let seen = with(&native_seen(FINAL), |s| {
        if let ObservedDeposit::Included { block, .. } = s {
            *block = final_block();
        }
    });
    assert_eq!(
        judge(&native_claim(), &seen),
        DepositVerdict::Confirmed {
            block: final_block()
        }
    );
}

#[test]
fn a_token_transfer_log_at_final_depth_is_confirmed() {
    let seen = token_seen(FINAL - 2, Some(transfer_log(3)));
    assert_eq!(
        judge(&token_claim(), &seen),
        DepositVerdict::Confirmed {
            block: block(FINAL - 2, 0x0b)
        }
    );
    // The largest amount a claim can name.
    let claim = DepositClaim {
        amount: u128::MAX,
        ..token_claim()
    };
    let seen = with(&seen, |s| log_of(s).data = amount_data(u128::MAX));
    assert!(matches!(
        judge(&claim, &seen),
        DepositVerdict::Confirmed { .. }
    ));
}

#[test]
fn no_agreement_absence_and_inclusion_above_final_are_not_yet() {
    for no in [
        NoAgreement::Disagreement,
        NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2,
        },
        NoAgreement::Lag {
            blocks: 9,
            max_lag: 2,
        },
    ] {
        assert_eq!(
            judge_deposit(&native_claim(), Err(no), final_block()),
            DepositVerdict::NotYet(NotYet::NoAgreement(no))
        );
    }
    for claim in [native_claim(), token_claim()] {
        assert_eq!(
            judge(&claim, &ObservedDeposit::Absent),
            DepositVerdict::NotYet(NotYet::Absent)
        );
    }
    // Above the final block: not yet, whatever it shows (even a contradiction: a block that
    // is not final may be reorganized away and the claim's transaction mined otherwise).
    let reverted = with(&native_seen(FINAL + 1), |s| {
        if let ObservedDeposit::Included { success, .. } = s {
            *success = false;
        }
    });
    for seen in [native_seen(FINAL + 1), reverted] {
        assert_eq!(
            judge(&native_claim(), &seen),
            DepositVerdict::NotYet(NotYet::NotFinal {
                block: block(FINAL + 1, 0x0b)
            })
        );
    }
    let seen = token_seen(FINAL + 5, None);
    assert!(matches!(
        judge(&token_claim(), &seen),
        DepositVerdict::NotYet(NotYet::NotFinal { .. })
    ));
}

#[test]
fn an_observation_of_another_transaction_or_log_is_inconsistent() {
    let other_tx = with(&native_seen(1), |s| {
        if let ObservedDeposit::Included { tx_hash, .. } = s {
            *tx_hash = [0x12; 32];
        }
    });
    assert_eq!(
        judge(&native_claim(), &other_tx),
        DepositVerdict::NotYet(NotYet::Inconsistent)
    );
    // The log of another index than claimed; a log for a claim that names none.
    let other_log = token_seen(1, Some(transfer_log(4)));
    assert_eq!(
        judge(&token_claim(), &other_log),
        DepositVerdict::NotYet(NotYet::Inconsistent)
    );
    let unasked = with(&native_seen(1), |s| {
        if let ObservedDeposit::Included { log, .. } = s {
            *log = Some(transfer_log(0));
        }
    });
    assert_eq!(
        judge(&native_claim(), &unasked),
        DepositVerdict::NotYet(NotYet::Inconsistent)
    );
    // At the final block's height, but another block than the final one.
    assert_eq!(
        judge(&native_claim(), &native_seen(FINAL)),
        DepositVerdict::NotYet(NotYet::Inconsistent)
    );
}

#[test]
fn native_contradictions_have_exact_reasons() {
    let seen =
        |success: bool, to: Option<Address>, value: Option<u128>| ObservedDeposit::Included {
            tx_hash: TX,
            block: block(2, 0x0b),
            success,
            to,
            value,
            log: None,
        };
    let cases = [
        (
            seen(false, Some(RECIPIENT), Some(AMOUNT)),
            DepositRefusal::Reverted,
        ),
        // Reverted comes first: a reverted transaction moved nothing, whatever it names.
        (seen(false, Some(OTHER), None), DepositRefusal::Reverted),
        (
            seen(true, Some(OTHER), Some(AMOUNT)),
            DepositRefusal::RecipientMismatch,
        ),
        // A contract creation pays no deposit address.
        (
            seen(true, None, Some(AMOUNT)),
            DepositRefusal::RecipientMismatch,
        ),
        (
            seen(true, Some(RECIPIENT), Some(AMOUNT - 1)),
            DepositRefusal::AmountMismatch,
        ),
        (
            seen(true, Some(RECIPIENT), Some(AMOUNT + 1)),
            DepositRefusal::AmountMismatch,
        ),
        (
            seen(true, Some(RECIPIENT), None),
            DepositRefusal::AmountMismatch,
        ),
    ];
    for (seen, refusal) in cases {
        assert_eq!(
            judge(&native_claim(), &seen),
            contradicted(refusal),
            "{seen:?}"
        );
    }
    let seen = native_seen(2);
    // A native claim naming a log (a token's transfer taken for a native one).
    let claim = DepositClaim {
        log_index: Some(0),
        ..native_claim()
    };
    let seen = with(&seen, |s| {
        if let ObservedDeposit::Included { log, .. } = s {
            *log = Some(transfer_log(0));
        }
    });
    assert_eq!(
        judge(&claim, &seen),
        contradicted(DepositRefusal::AssetMismatch)
    );
    // A token claim of a native transfer: no log named.
    let claim = DepositClaim {
        log_index: None,
        ..token_claim()
    };
    assert_eq!(
        judge(&claim, &native_seen(2)),
        contradicted(DepositRefusal::AssetMismatch)
    );
}

#[test]
fn token_contradictions_have_exact_reasons() {
    let seen = token_seen(2, Some(transfer_log(3)));
    let claim = token_claim();
    let cases: Vec<(ObservedDeposit, DepositRefusal)> = vec![
        (
            with(&seen, |s| {
                if let ObservedDeposit::Included { success, log, .. } = s {
                    *success = false;
                    *log = None;
                }
            }),
            DepositRefusal::Reverted,
        ),
        (token_seen(2, None), DepositRefusal::LogMissing),
        (
            with(&seen, |s| log_of(s).address = OTHER_TOKEN),
            DepositRefusal::AssetMismatch,
        ),
        (
            with(&seen, |s| log_of(s).topics[0] = [0x01; 32]),
            DepositRefusal::NotATransfer,
        ),
        (
            with(&seen, |s| {
                log_of(s).topics.pop();
            }),
            DepositRefusal::NotATransfer,
        ),
        (
            with(&seen, |s| log_of(s).topics.push(topic(RECIPIENT))),
            DepositRefusal::NotATransfer,
        ),
        (
            with(&seen, |s| log_of(s).topics.clear()),
            DepositRefusal::NotATransfer,
        ),
        (
            // The recipient's bytes, but not an address topic.
            with(&seen, |s| log_of(s).topics[2][0] = 1),
            DepositRefusal::NotATransfer,
        ),
        (
            with(&seen, |s| log_of(s).topics[1][11] = 1),
            DepositRefusal::NotATransfer,
        ),
        (
            // An ERC-721 Transfer: the same signature, the token id indexed, no data.
            with(&seen, |s| {
                let log = log_of(s);
                let mut id = [0; 32];
                id.copy_from_slice(&log.data);
                log.topics.push(id);
                log.data.clear();
            }),
            DepositRefusal::NotATransfer,
        ),
        (
            with(&seen, |s| log_of(s).data.push(0)),
            DepositRefusal::NotATransfer,
        ),
        (
            with(&seen, |s| {
                log_of(s).data.pop();
            }),
            DepositRefusal::NotATransfer,
        ),
        (
            with(&seen, |s| log_of(s).topics[2] = topic(OTHER)),
            DepositRefusal::RecipientMismatch,
        ),
        (
            with(&seen, |s| log_of(s).data = amount_data(AMOUNT + 1)),
            DepositRefusal::AmountMismatch,
        ),
        (
            // Above 128 bits, whatever its low half says.
            with(&seen, |s| log_of(s).data[0] = 1),
            DepositRefusal::AmountMismatch,
        ),
    ];
    for (seen, refusal) in cases {
        assert_eq!(judge(&claim, &seen), contradicted(refusal), "{seen:?}");
    }
    // The same log claimed as another token.
    let other = DepositClaim {
        asset: Asset::Token(OTHER_TOKEN),
        ..token_claim()
    };
    assert_eq!(
        judge(&other, &seen),
        contradicted(DepositRefusal::AssetMismatch)
    );
    // The token transfer claimed as a native deposit (of the token's address or anyone).
    let native = DepositClaim {
        asset: Asset::Native,
        ..token_claim()
    };
    assert_eq!(
        judge(&native, &seen),
        contradicted(DepositRefusal::AssetMismatch)
    );
}

#[test]
fn what_a_token_deposit_does_not_bind_does_not_matter() {
    // The payer, the transaction's target and its native value: a deposit may come from
    // anyone, through any contract.
    let seen = token_seen(2, Some(transfer_log(3)));
    let confirmed = judge(&token_claim(), &seen);
    assert!(matches!(confirmed, DepositVerdict::Confirmed { .. }));
    let changed = [
        with(&seen, |s| log_of(s).topics[1] = topic([0x5e; 20])),
        with(&seen, |s| {
            if let ObservedDeposit::Included { to, value, .. } = s {
                *to = None;
                *value = None;
            }
        }),
    ];
    for seen in changed {
        assert_eq!(judge(&token_claim(), &seen), confirmed);
    }
}

#[test]
fn reason_codes_are_stable_and_distinct() {
    let refusals = [
        (DepositRefusal::Reverted, "DEPOSIT_REVERTED"),
        (
            DepositRefusal::RecipientMismatch,
            "DEPOSIT_RECIPIENT_MISMATCH",
        ),
        (DepositRefusal::AmountMismatch, "DEPOSIT_AMOUNT_MISMATCH"),
        (DepositRefusal::AssetMismatch, "DEPOSIT_ASSET_MISMATCH"),
        (DepositRefusal::LogMissing, "DEPOSIT_LOG_MISSING"),
        (DepositRefusal::NotATransfer, "DEPOSIT_NOT_A_TRANSFER"),
    ];
    for (refusal, code) in refusals {
        assert_eq!(refusal.reason_code(), code);
    }
    let not_yet = [
        NotYet::NoAgreement(NoAgreement::Disagreement),
        NotYet::Absent,
        NotYet::NotFinal { block: block(1, 1) },
        NotYet::Inconsistent,
    ];
    let mut codes: Vec<&str> = refusals
        .iter()
        .map(|(r, _)| r.reason_code())
        .chain(not_yet.iter().map(|n| n.reason_code()))
        .collect();
    assert!(
        codes
            .iter()
            .all(|c| c.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
    );
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), refusals.len() + not_yet.len());
}

#[test]
fn debug_never_shows_an_address_or_a_hash() {
    let seen = token_seen(2, Some(transfer_log(3)));
    let shown = [
        format!("{:?}", token_claim()),
        format!("{:?}", native_claim()),
        format!("{seen:?}"),
        format!("{:?}", judge(&token_claim(), &seen)),
        format!(
            "{:?}",
            NotYet::NotFinal {
                block: block(7, 0xcd)
            }
        ),
    ];
    // Every address and hash byte of the fixtures, as `Debug` of a byte array or as hex.
    let secrets: Vec<String> = [0xaa_u8, 0xbb, 0x70, 0x11, 0xcd, 0x0b]
        .iter()
        .flat_map(|b| [format!("{b}, {b}"), format!("{b:02x}{b:02x}")])
        .collect();
    for text in shown {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{secret} in {text}");
        }
    }
}

#[test]
fn the_transfer_topic_is_the_erc20_event_signature() {
    assert_eq!(
        hex::encode(ERC20_TRANSFER_TOPIC),
        "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
    );
}

/// One change to a confirmed (claim, observation) pair, in a field the verdict rests on.
#[derive(Debug, Clone)]
enum Mutation {
    TxHash([u8; 32]),
    ClaimTxHash([u8; 32]),
    BlockAboveFinal(u64),
    FinalHeightOtherHash(u8),
    Reverted,
    To(Option<[u8; 20]>),
    Value(Option<u128>),
    Recipient([u8; 20]),
    Amount(u128),
    ClaimAsset(Option<[u8; 20]>),
    ClaimLogIndex(Option<u32>),
    LogRemoved,
    LogIndex(u32),
    LogAddress([u8; 20]),
    Topic(usize, usize, u8),
    TopicCount(Vec<[u8; 32]>),
    DataByte(usize, u8),
    DataLength(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let bytes20 = any::<[u8; 20]>();
    prop_oneof![
        any::<[u8; 32]>().prop_map(Mutation::TxHash),
        any::<[u8; 32]>().prop_map(Mutation::ClaimTxHash),
        (1..1_000_u64).prop_map(Mutation::BlockAboveFinal),
        any::<u8>().prop_map(Mutation::FinalHeightOtherHash),
        Just(Mutation::Reverted),
        proptest::option::of(bytes20).prop_map(Mutation::To),
        proptest::option::of(any::<u128>()).prop_map(Mutation::Value),
        bytes20.prop_map(Mutation::Recipient),
        any::<u128>().prop_map(Mutation::Amount),
        proptest::option::of(bytes20).prop_map(Mutation::ClaimAsset),
        proptest::option::of(any::<u32>()).prop_map(Mutation::ClaimLogIndex),
        Just(Mutation::LogRemoved),
        any::<u32>().prop_map(Mutation::LogIndex),
        bytes20.prop_map(Mutation::LogAddress),
        // topic 0 (signature) and 2 (recipient), any byte; topic 1 (payer) in its padding.
        (prop_oneof![Just(0_usize), Just(2)], 0..32_usize, 1..=255_u8)
            .prop_map(|(t, i, x)| Mutation::Topic(t, i, x)),
        (0..12_usize, 1..=255_u8).prop_map(|(i, x)| Mutation::Topic(1, i, x)),
        proptest::collection::vec(any::<[u8; 32]>(), 0..6).prop_map(Mutation::TopicCount),
        (0..32_usize, 1..=255_u8).prop_map(|(i, x)| Mutation::DataByte(i, x)),
        proptest::collection::vec(any::<u8>(), 0..80).prop_map(Mutation::DataLength),
    ]
}

/// Applies `m`; false when it happens to change nothing (a random value equal to the old).
fn apply(m: &Mutation, claim: &mut DepositClaim, seen: &mut ObservedDeposit) -> bool {
    let before = (claim.clone(), seen.clone());
    let ObservedDeposit::Included {
        tx_hash,
        block,
        success,
        to,
        value,
        log,
    } = seen
    else {
        return false;
    };
    match m {
        Mutation::TxHash(h) => *tx_hash = *h,
        Mutation::ClaimTxHash(h) => claim.tx_hash = *h,
        Mutation::BlockAboveFinal(d) => block.number = FINAL + d,
        Mutation::FinalHeightOtherHash(x) => {
            *block = final_block();
            block.hash[0] ^= x | 1;
        }
        Mutation::Reverted => *success = false,
        Mutation::To(a) => *to = *a,
        Mutation::Value(v) => *value = *v,
        Mutation::Recipient(r) => claim.recipient = *r,
        Mutation::Amount(a) => claim.amount = *a,
        Mutation::ClaimAsset(a) => claim.asset = a.map_or(Asset::Native, Asset::Token),
        Mutation::ClaimLogIndex(i) => claim.log_index = *i,
        Mutation::LogRemoved => *log = None,
        Mutation::LogIndex(i) => {
            if let Some(log) = log {
                log.index = *i;
            }
        }
        Mutation::LogAddress(a) => {
            if let Some(log) = log {
                log.address = *a;
            }
        }
        Mutation::Topic(t, i, x) => {
            if let Some(topic) = log.as_mut().and_then(|l| l.topics.get_mut(*t)) {
                topic[*i] ^= x;
            }
        }
        Mutation::TopicCount(topics) => {
            if let Some(log) = log {
                log.topics.clone_from(topics);
            }
        }
        Mutation::DataByte(i, x) => {
            if let Some(byte) = log.as_mut().and_then(|l| l.data.get_mut(*i)) {
                *byte ^= x;
            }
        }
        Mutation::DataLength(data) => {
            if let Some(log) = log {
                log.data.clone_from(data);
            }
        }
    }
    before != (claim.clone(), seen.clone())
}

/// Whether a change is one the verdict deliberately does not rest on (see the module
/// documentation): the target and value of a token deposit's transaction, and, for a native
/// deposit, the log fields it never has.
fn unbound(m: &Mutation, asset: Asset) -> bool {
    matches!(
        (asset, m),
        (Asset::Token(_), Mutation::To(_) | Mutation::Value(_))
            | (
                Asset::Native,
                Mutation::LogRemoved
                    | Mutation::LogIndex(_)
                    | Mutation::LogAddress(_)
                    | Mutation::Topic(..)
                    | Mutation::TopicCount(_)
                    | Mutation::DataByte(..)
                    | Mutation::DataLength(_),
            )
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_mutation_of_a_confirmed_deposit_is_never_confirmed(
        token in any::<bool>(),
        recipient in any::<[u8; 20]>(),
        contract in any::<[u8; 20]>(),
        payer in any::<[u8; 20]>(),
        amount in any::<u128>(),
        log_index in any::<u32>(),
        below_final in 0..FINAL,
        m in mutation(),
    ) {
        let mut claim = DepositClaim {
            tx_hash: TX,
            log_index: token.then_some(log_index),
            recipient,
            asset: if token { Asset::Token(contract) } else { Asset::Native },
            amount,
        };
        let mut seen = ObservedDeposit::Included {
            tx_hash: TX,
            block: block(FINAL - below_final, 0x0b),
            success: true,
            to: Some(if token { contract } else { recipient }),
            value: Some(if token { 0 } else { amount }),
            log: token.then(|| ObservedLog {
                index: log_index,
                address: contract,
                topics: vec![ERC20_TRANSFER_TOPIC, topic(payer), topic(recipient)],
                data: amount_data(amount),
            }),
        };
        if below_final == 0
            && let ObservedDeposit::Included { block, .. } = &mut seen
        {
            *block = final_block();
        }
        let confirmed = judge(&claim, &seen);
        prop_assert!(matches!(confirmed, DepositVerdict::Confirmed { .. }), "{confirmed:?}");
        let asset = claim.asset;
        if !apply(&m, &mut claim, &mut seen) {
            // A random value equal to the old one (or a log change without a log).
            return Ok(());
        }
        let after = judge(&claim, &seen);
        if unbound(&m, asset) {
            prop_assert_eq!(after, confirmed, "{:?}", m);
        } else {
            prop_assert!(
                !matches!(after, DepositVerdict::Confirmed { .. }),
                "{:?} still confirmed", m
            );
        }
    }
}
