//! What is really so, read straight from the modelled chain and store, never through the
//! domain's decisions: the properties and the evidence checks compare what the workers did
//! against these facts.

use opledger_domain::evidence::{Escalation, Role};
use opledger_domain::witness::ReleaseEvidence;

use crate::chain::{Chain, Mined, Tx, Wallet};
use crate::store::{Attempt, Confirmation};

fn attempt(attempts: &[Attempt], tx: Tx) -> Option<&Attempt> {
    match tx {
        Tx::Attempt(i) => attempts.get(usize::from(i)),
        Tx::Foreign => None,
    }
}

/// True when `mined` is one of our transfers that succeeded: it moved the operation's value.
pub fn is_value_move(mined: Mined, attempts: &[Attempt]) -> bool {
    mined.succeeded && attempt(attempts, mined.tx).is_some_and(|a| a.content == Role::Transfer)
}

/// How many value-moving transactions of the operation the canonical chain holds.
pub fn value_moves(chain: &Chain, attempts: &[Attempt]) -> usize {
    chain
        .mined()
        .filter(|m| is_value_move(*m, attempts))
        .count()
}

/// The attempts (as a bit set) whose value-moving inclusion is final in the canonical chain.
pub fn final_value_moves(chain: &Chain, attempts: &[Attempt], confirmations: u8) -> u8 {
    chain
        .mined()
        .filter(|m| is_value_move(*m, attempts) && chain.is_final(*m, confirmations))
        .fold(0, |bits, m| match m.tx {
            Tx::Attempt(i) => bits | (1 << i),
            Tx::Foreign => bits,
        })
}

/// True when the recorded confirmation is one of our transfers, in the canonical chain in the
/// recorded block (by number and hash), succeeded, at final depth.
pub fn settlement_backed(
    chain: &Chain,
    attempts: &[Attempt],
    confirmation: &Confirmation,
    confirmations: u8,
) -> bool {
    let Some(mined) = chain.inclusion_of(confirmation.attempt) else {
        return false;
    };
    is_value_move(mined, attempts)
        && chain.block(mined.block) == confirmation.inclusion.block
        && confirmation.inclusion.succeeded
        && chain.is_final(mined, confirmations)
}

/// True when the recorded confirmation is still in the canonical chain where it was recorded.
pub fn confirmation_present(chain: &Chain, confirmation: &Confirmation) -> bool {
    chain
        .inclusion_of(confirmation.attempt)
        .is_some_and(|m| chain.block(m.block) == confirmation.inclusion.block)
}

/// True when the attempt a release proof names is in the canonical chain in the proof's block
/// (by number and hash).
pub fn proof_present(chain: &Chain, proof: &ReleaseEvidence) -> bool {
    crate::store::attempt_of(&proof.tx_hash)
        .and_then(|i| chain.inclusion_of(i))
        .is_some_and(|m| chain.block(m.block) == proof.block)
}

/// True when our own cancel succeeded, or an attempt of ours reverted, at final depth: nothing
/// of the operation's value can move any more.
pub fn release_backed(chain: &Chain, attempts: &[Attempt], confirmations: u8) -> bool {
    chain.mined().any(|m| {
        chain.is_final(m, confirmations)
            && attempt(attempts, m.tx).is_some_and(|a| !m.succeeded || a.content == Role::Cancel)
    })
}

/// True when our own cancel succeeded at final depth.
pub fn cancelled(chain: &Chain, attempts: &[Attempt], confirmations: u8) -> bool {
    chain.mined().any(|m| {
        chain.is_final(m, confirmations)
            && m.succeeded
            && attempt(attempts, m.tx).is_some_and(|a| a.content == Role::Cancel)
    })
}

/// True when one of our transfers is in the canonical chain.
pub fn transfer_included(chain: &Chain, attempts: &[Attempt]) -> bool {
    chain
        .mined()
        .any(|m| attempt(attempts, m.tx).is_some_and(|a| a.content == Role::Transfer))
}

/// True when one of our attempts reverted at final depth.
pub fn reverted(chain: &Chain, attempts: &[Attempt], confirmations: u8) -> bool {
    chain.mined().any(|m| {
        !m.succeeded && chain.is_final(m, confirmations) && attempt(attempts, m.tx).is_some()
    })
}

/// True when an attempt's bytes are not what the operation's attempts must be: signed by
/// another wallet than the original, or of another role than its stored kind.
pub fn tampered(attempts: &[Attempt]) -> bool {
    let original = attempts.first().map_or(Wallet::A, |a| a.sender);
    attempts
        .iter()
        .any(|a| a.sender != original || a.kind.role() != a.content)
}

/// True when the chain or the store shows the cause an escalation names.
pub fn escalation_backed(
    escalation: Escalation,
    chain: &Chain,
    attempts: &[Attempt],
    confirmations: u8,
) -> bool {
    if escalation == Escalation::REVERTED {
        reverted(chain, attempts, confirmations)
    } else if escalation == Escalation::NONCE_MOVED {
        chain
            .a
            .is_some_and(|m| m.tx == Tx::Foreign && chain.is_final(m, confirmations))
    } else if escalation == Escalation::TAMPERED {
        tampered(attempts)
    } else {
        // NO_VERDICT claims nothing: it keeps the hold for a person.
        true
    }
}

/// True when a transfer of ours is in the canonical chain with a successful receipt, or may still
/// get there: some transfer attempt's sender nonce is unconsumed (any stored attempt may be
/// published and mined at any time), or consumed by an inclusion not yet final (which a
/// reorganization may remove). Releasing the hold then may pay twice.
pub fn transfer_possible(chain: &Chain, attempts: &[Attempt], confirmations: u8) -> bool {
    value_moves(chain, attempts) > 0
        || attempts
            .iter()
            .filter(|a| a.content == Role::Transfer)
            .any(|a| {
                chain
                    .slot(a.sender)
                    .is_none_or(|m| !chain.is_final(m, confirmations))
            })
}
