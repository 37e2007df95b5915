//! The modelled chain: one nonce of each of two wallets, the blocks that may include a
//! transaction at it, the transactions whose bytes have been submitted, and reorganizations.
//!
//! Only what the operation's decisions can observe is kept. A block either includes one
//! transaction at the watched nonce or none; a block's hash is derived from its number and the
//! inclusions at or below it, so two chains that include the same transactions in the same blocks
//! name every block alike, and a chain that differs names the differing blocks (and every block
//! above them) differently, as real hashes would.

use opledger_domain::evidence::{BlockRef, Hash32, Inclusion, Reading};

use crate::store::Attempt;

mod wallet;

pub use wallet::{NONCE, Wallet};

/// A transaction at the operation's nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tx {
    /// The stored attempt at this index (oldest first).
    Attempt(u8),
    /// A transaction signed by someone else holding wallet A's key (a compromised key); it is
    /// not in the store.
    Foreign,
}

/// A transaction included in a canonical block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mined {
    /// The including block's number.
    pub block: u8,
    /// What it includes.
    pub tx: Tx,
    /// Its receipt status.
    pub succeeded: bool,
}

/// The canonical chain as far as the operation is concerned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chain {
    /// The head's number (0 is genesis, which includes nothing).
    pub height: u8,
    /// What consumed wallet A's nonce, if anything.
    pub a: Option<Mined>,
    /// What consumed wallet B's nonce (the same number, another account), if anything.
    pub b: Option<Mined>,
    /// Bit `i` set: the bytes of attempt `i` were submitted, so anyone can submit them again and
    /// a miner may include them whenever the sender's nonce is unconsumed. Submitted bytes never
    /// become unsubmitted: a transaction dropped from every pool, or reorganized out, may come
    /// back, since anyone who saw it can replay it.
    pub public: u8,
    /// Reorganizations left in this run.
    pub reorgs_left: u8,
    /// Ghost: a succeeded transfer of ours was reorganized out of the canonical chain.
    pub transfer_reorged: bool,
}

impl Chain {
    /// An empty chain at genesis.
    pub fn genesis(reorgs: u8) -> Chain {
        Chain {
            height: 0,
            a: None,
            b: None,
            public: 0,
            reorgs_left: reorgs,
            transfer_reorged: false,
        }
    }

    /// The inclusion at `wallet`'s nonce.
    pub fn slot(&self, wallet: Wallet) -> Option<Mined> {
        match wallet {
            Wallet::A => self.a,
            Wallet::B => self.b,
        }
    }

    fn slot_mut(&mut self, wallet: Wallet) -> &mut Option<Mined> {
        match wallet {
            Wallet::A => &mut self.a,
            Wallet::B => &mut self.b,
        }
    }

    /// Every inclusion at the watched nonces.
    pub fn mined(&self) -> impl Iterator<Item = Mined> + '_ {
        self.a.iter().chain(self.b.iter()).copied()
    }

    /// The inclusion of attempt `index`, if it is in the canonical chain.
    pub fn inclusion_of(&self, index: u8) -> Option<Mined> {
        self.mined().find(|m| m.tx == Tx::Attempt(index))
    }

    /// True when `mined` has `confirmations` blocks on top of it, itself counted.
    pub fn is_final(&self, mined: Mined, confirmations: u8) -> bool {
        u16::from(self.height) + 1 >= u16::from(mined.block) + u16::from(confirmations)
    }

    /// The hash of block `number` in this chain.
    pub fn hash(&self, number: u8) -> Hash32 {
        let mut hash = [0u8; 32];
        hash[0] = number;
        let mut put = |at: usize, mined: Option<Mined>| {
            if let Some(m) = mined.filter(|m| m.block <= number) {
                hash[at] = m.block;
                hash[at + 1] = match m.tx {
                    Tx::Attempt(i) => 1 + i,
                    Tx::Foreign => 0xF0,
                };
                hash[at + 2] = u8::from(m.succeeded) + 1;
            }
        };
        put(1, self.a);
        put(4, self.b);
        hash
    }

    /// Block `number` of this chain, by number and hash.
    pub fn block(&self, number: u8) -> BlockRef {
        BlockRef {
            number: u64::from(number),
            hash: self.hash(number),
        }
    }

    /// The newest final block when `pinned` is the head: `pinned + 1 - confirmations`, or
    /// genesis (which includes nothing) when the chain is shorter.
    pub fn final_number(pinned: u8, confirmations: u8) -> u8 {
        (pinned + 1).saturating_sub(confirmations)
    }

    /// What an honest endpoint reads at block `pinned` about an operation with `attempts`
    /// stored attempts whose original was sent by wallet A.
    pub fn reading(&self, pinned: u8, attempts: usize, confirmations: u8) -> Reading {
        let final_number = Chain::final_number(pinned, confirmations);
        let inclusions = (0..attempts)
            .map(|i| {
                u8::try_from(i)
                    .ok()
                    .and_then(|i| self.inclusion_of(i))
                    .filter(|m| m.block <= pinned)
                    .map(|m| Inclusion {
                        block: self.block(m.block),
                        succeeded: m.succeeded,
                    })
            })
            .collect();
        let consumed_by = |number: u8| NONCE + u64::from(self.a.is_some_and(|m| m.block <= number));
        Reading {
            pinned: self.block(pinned),
            final_block: self.block(final_number),
            inclusions,
            nonce_at_pinned: consumed_by(pinned),
            nonce_at_final: consumed_by(final_number),
        }
    }

    /// The wallet whose nonce `tx` uses.
    pub fn sender_of(tx: Tx, attempts: &[Attempt]) -> Option<Wallet> {
        match tx {
            Tx::Attempt(i) => attempts.get(usize::from(i)).map(|a| a.sender),
            Tx::Foreign => Some(Wallet::A),
        }
    }

    /// The transactions a miner may include now: submitted attempts and, with a compromised key,
    /// the foreign transaction, each only while its sender's nonce is unconsumed.
    pub fn mineable(&self, attempts: &[Attempt], compromised_key: bool) -> Vec<Tx> {
        let mut txs: Vec<Tx> = (0..attempts.len())
            .filter_map(|i| u8::try_from(i).ok())
            .filter(|i| self.public & (1 << i) != 0)
            .map(Tx::Attempt)
            .collect();
        if compromised_key {
            txs.push(Tx::Foreign);
        }
        txs.retain(|tx| {
            Chain::sender_of(*tx, attempts).is_some_and(|wallet| self.slot(wallet).is_none())
        });
        txs
    }

    /// A new block on top, including `tx` (or nothing).
    pub fn mine(&mut self, tx: Option<(Tx, bool)>, attempts: &[Attempt]) {
        self.height += 1;
        if let Some((tx, succeeded)) = tx
            && let Some(wallet) = Chain::sender_of(tx, attempts)
        {
            *self.slot_mut(wallet) = Some(Mined {
                block: self.height,
                tx,
                succeeded,
            });
        }
    }

    /// Replaces the top `depth` blocks by as many new ones; the first of them plus `offset`
    /// includes `refill` when given. What the removed blocks included stays submitted (it may be
    /// mined again, or never).
    pub fn reorganize(
        &mut self,
        depth: u8,
        refill: Option<(Tx, bool, u8)>,
        attempts: &[Attempt],
        is_value_move: impl Fn(Mined) -> bool,
    ) {
        let lowest_removed = self.height + 1 - depth;
        for wallet in [Wallet::A, Wallet::B] {
            if let Some(m) = self.slot(wallet)
                && m.block >= lowest_removed
            {
                if is_value_move(m) {
                    self.transfer_reorged = true;
                }
                *self.slot_mut(wallet) = None;
            }
        }
        if let Some((tx, succeeded, offset)) = refill
            && let Some(wallet) = Chain::sender_of(tx, attempts)
        {
            *self.slot_mut(wallet) = Some(Mined {
                block: lowest_removed + offset,
                tx,
                succeeded,
            });
        }
        self.reorgs_left = self.reorgs_left.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn mined(block: u8, index: u8) -> Option<Mined> {
        Some(Mined {
            block,
            tx: Tx::Attempt(index),
            succeeded: true,
        })
    }

    #[test]
    fn a_block_hash_names_the_inclusions_at_or_below_it() {
        let empty = Chain {
            height: 4,
            ..Chain::genesis(0)
        };
        let with_original = Chain {
            a: mined(3, 0),
            ..empty.clone()
        };
        let with_bump = Chain {
            a: mined(3, 1),
            ..empty.clone()
        };
        assert_eq!(empty.hash(2), with_original.hash(2));
        assert_ne!(empty.hash(3), with_original.hash(3));
        assert_ne!(with_original.hash(4), with_bump.hash(4));
        assert_ne!(empty.hash(3), empty.hash(4));
    }

    #[test]
    fn an_honest_reading_counts_confirmations_from_the_pinned_block() {
        let chain = Chain {
            height: 5,
            a: mined(3, 0),
            ..Chain::genesis(0)
        };
        // Three confirmations: block 3 is final at 5, not at 4.
        let at_five = chain.reading(5, 1, 3);
        assert_eq!(at_five.final_block.number, 3);
        assert_eq!(
            (at_five.nonce_at_pinned, at_five.nonce_at_final),
            (NONCE + 1, NONCE + 1)
        );
        let at_four = chain.reading(4, 1, 3);
        assert_eq!(at_four.final_block.number, 2);
        assert_eq!(
            (at_four.nonce_at_pinned, at_four.nonce_at_final),
            (NONCE + 1, NONCE)
        );
        let at_two = chain.reading(2, 1, 3);
        assert_eq!(at_two.inclusions, vec![None]);
        assert!(chain.is_final(chain.a.expect("mined"), 3));
        assert!(!chain.is_final(chain.a.expect("mined"), 4));
    }

    #[test]
    fn a_reorganization_keeps_what_is_below_it_and_may_include_again() {
        let attempts = Store::signed().attempts;
        let mut chain = Chain {
            height: 4,
            a: mined(3, 0),
            public: 1,
            ..Chain::genesis(1)
        };
        chain.reorganize(1, None, &attempts, |_| true);
        assert_eq!(
            (chain.height, chain.a, chain.transfer_reorged),
            (4, mined(3, 0), false)
        );
        chain.reorganize(2, Some((Tx::Attempt(0), true, 1)), &attempts, |_| true);
        assert_eq!(
            (chain.height, chain.a, chain.transfer_reorged),
            (4, mined(4, 0), true)
        );
        assert_eq!(chain.reorgs_left, 0);
        assert_eq!(chain.mineable(&attempts, false), vec![]);
    }
}
