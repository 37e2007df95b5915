//! What the chain says about a transaction a custodian's record names, with the evidence rules
//! of every other settlement: the executor's own endpoints, a quorum agreeing at one pinned
//! block, a canonical inclusion at final depth, and the transfer exactly as approved. For the
//! network's native coin: it succeeded, its `to` is the destination, its value the amount
//! (`judge_deposit`, the rule the witness credits deposits by). For a token of the network's
//! `[payout_assets]`: it succeeded and holds exactly one `Transfer` log of the token's contract to
//! the destination, of the amount (`judge_token_payout`, each log judged by the same deposit
//! rule). A network without endpoints is unwatched: only the custodian's COMPLETED record settles
//! there (docs/custodians.md says so plainly).

use crate::config::PayoutAssets;
use alloy_primitives::B256;
use opledger_chain::{EvidenceReader, PinError};
use opledger_domain::custodian::token::{
    ObservedReceipt, PayoutRefusal, PayoutVerdict, TokenPayout, judge_token_payout,
    paid_after_request, sent_by,
};
use opledger_domain::evidence::content::Asset;
use opledger_domain::evidence::{Address, BlockRef, Hash32};
use opledger_domain::witness::deposit::{DepositClaim, DepositVerdict, judge_deposit};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The executor's verdict on a custodian's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainSays {
    /// Included at final depth, paying exactly the approved transfer, in this block.
    Paid(BlockRef),
    /// Nothing to conclude yet (not at final depth, no agreement, not found): read again later.
    NotYet,
    /// The final chain shows something else than the approved transfer (reverted, another
    /// recipient, amount or asset, the destination paid twice): a security event for an
    /// operator, never a settlement.
    Contradicted(&'static str),
    /// The network has no evidence endpoints here: the custodian's record decides alone.
    Unwatched,
}

/// The transfer a custodian's transaction must have made. `Debug` never shows the destination.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Approved<'a> {
    /// The network id.
    pub network: &'a str,
    /// The asset code, as in the payload.
    pub asset: &'a str,
    /// The approved destination.
    pub destination: Address,
    /// The approved amount, in the asset's minimal units.
    pub amount: u128,
    /// The newest block the executor counted final when it stored the request: the payout must
    /// be included after it (`None`: no bound, the network was not watched then).
    pub final_before: Option<u64>,
}

impl fmt::Debug for Approved<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approved")
            .field("network", &self.network)
            .field("asset", &self.asset)
            .field("amount", &self.amount)
            .field("final_before", &self.final_before)
            .finish_non_exhaustive()
    }
}

/// The evidence readers of the networks this executor watches, and what each network's asset
/// codes are.
#[derive(Debug, Default)]
pub struct Chains {
    readers: HashMap<String, EvidenceReader>,
    assets: BTreeMap<String, PayoutAssets>,
}

impl Chains {
    /// Readers by network id; a network judges nothing until [`Chains::with_assets`] names its
    /// assets and the addresses its payouts are sent from.
    pub fn new(readers: HashMap<String, EvidenceReader>) -> Chains {
        Chains {
            readers,
            assets: BTreeMap::new(),
        }
    }

    /// These chains with the asset codes of each network and the addresses its custodian payouts
    /// are sent from (`[payout_assets]`).
    pub fn with_assets(mut self, assets: BTreeMap<String, PayoutAssets>) -> Chains {
        self.assets = assets;
        self
    }

    /// The newest block `network`'s evidence counts final now, by the same quorum and finality
    /// as every settlement: `Ok(None)` when the network is not watched, an error when the
    /// endpoints do not agree now (nothing is sent until they do: the bound a payout is judged
    /// against is stored with the request).
    pub async fn final_block(&self, network: &str) -> Result<Option<u64>, PinError> {
        let Some(reader) = self.readers.get(network) else {
            return Ok(None);
        };
        Ok(Some(reader.pin().await?.final_block.number))
    }

    /// What the chain says about `tx_hash` paying the `approved` transfer: a native transfer or
    /// a token's, by what the asset is on the network, included after the request.
    pub async fn judge(&self, approved: Approved<'_>, tx_hash: Hash32) -> ChainSays {
        let Some(reader) = self.readers.get(approved.network) else {
            return ChainSays::Unwatched;
        };
        let assets = self.assets.get(approved.network);
        let Some((asset, assets)) =
            assets.and_then(|assets| Some((assets.resolve(approved.asset)?, assets)))
        else {
            // Refused at load: only chains built in code without the accounts' assets get here.
            tracing::error!(
                network = approved.network,
                asset = approved.asset,
                "the asset is neither the network's native coin nor one of its tokens: not judged"
            );
            return ChainSays::NotYet;
        };
        let Ok(pinned) = reader.pin().await else {
            return ChainSays::NotYet;
        };
        let hash = B256::from(tx_hash);
        let senders: Vec<Address> = assets
            .senders
            .iter()
            .filter_map(|s| opledger_domain::evidence::parse_address(s))
            .collect();
        // One read for both: the transaction, its sender and every log of its receipt.
        let observed = pinned.receipt_logs(hash).await;
        let says = match asset {
            Asset::Native => {
                let claim = DepositClaim {
                    tx_hash,
                    log_index: None,
                    recipient: approved.destination,
                    asset: Asset::Native,
                    amount: approved.amount,
                };
                let deposit = observed.as_ref().map(ObservedReceipt::as_deposit);
                let verdict = judge_deposit(
                    &claim,
                    deposit.as_ref().map_err(|e| **e),
                    pinned.final_block,
                );
                from_senders(native_says(verdict), observed.as_ref().ok(), None, &senders)
            }
            Asset::Token(contract) => {
                let payout = TokenPayout {
                    tx_hash,
                    contract,
                    recipient: approved.destination,
                    amount: approved.amount,
                };
                let verdict = judge_token_payout(
                    &payout,
                    observed.as_ref().map_err(|e| *e),
                    pinned.final_block,
                );
                let log_index = match verdict {
                    PayoutVerdict::Paid { log_index, .. } => Some(log_index),
                    _ => None,
                };
                from_senders(
                    token_says(verdict),
                    observed.as_ref().ok(),
                    log_index,
                    &senders,
                )
            }
        };
        after_request(says, approved.final_before)
    }
}

/// `says`, unless it is a payment included at or below `final_before`, the block final when the
/// request was stored: then a transfer made before the request, contradicted.
fn after_request(says: ChainSays, final_before: Option<u64>) -> ChainSays {
    match says {
        ChainSays::Paid(block) if !paid_after_request(block.number, final_before) => {
            ChainSays::Contradicted(PayoutRefusal::BeforeRequest.reason_code())
        }
        says => says,
    }
}

/// `says`, unless it is a payment `observed` shows sent by none of `senders` (`log_index`: the
/// token's `Transfer`; `None`: the native transaction's sender): then someone else's transfer,
/// contradicted.
fn from_senders(
    says: ChainSays,
    observed: Option<&ObservedReceipt>,
    log_index: Option<u32>,
    senders: &[Address],
) -> ChainSays {
    match says {
        ChainSays::Paid(_) if !observed.is_some_and(|o| sent_by(o, log_index, senders)) => {
            ChainSays::Contradicted(PayoutRefusal::SenderMismatch.reason_code())
        }
        says => says,
    }
}

/// The executor's verdict from the deposit rule's on a native transfer.
fn native_says(verdict: DepositVerdict) -> ChainSays {
    match verdict {
        DepositVerdict::Confirmed { block } => ChainSays::Paid(block),
        DepositVerdict::NotYet(_) => ChainSays::NotYet,
        DepositVerdict::Contradicted(refusal) => ChainSays::Contradicted(refusal.reason_code()),
    }
}

/// The executor's verdict from the token payout rule's.
fn token_says(verdict: PayoutVerdict) -> ChainSays {
    match verdict {
        PayoutVerdict::Paid { block, .. } => ChainSays::Paid(block),
        PayoutVerdict::NotYet(_) => ChainSays::NotYet,
        PayoutVerdict::Contradicted(refusal) => ChainSays::Contradicted(refusal.reason_code()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opledger_chain::{EvidenceConfig, Finality};
    use std::time::Duration;

    fn approved(network: &'static str, asset: &'static str) -> Approved<'static> {
        Approved {
            network,
            asset,
            destination: [0xaa; 20],
            amount: 1,
            final_before: None,
        }
    }

    /// Chains watching `anvil` through an endpoint nobody listens on.
    fn chains() -> Chains {
        let reader = EvidenceReader::new(&EvidenceConfig {
            urls: vec!["http://127.0.0.1:9".to_owned()],
            chain_id: 31337,
            quorum: 1,
            finality: Finality::Confirmations(1),
            max_lag_blocks: 8,
            timeout: Duration::from_millis(200),
            ca_file: None,
            headers: Vec::new(),
            allow_clear_text: false,
        });
        let Ok(reader) = reader else {
            panic!("the reader is refused");
        };
        Chains::new(HashMap::from([("anvil".to_owned(), reader)]))
    }

    #[tokio::test]
    async fn a_network_without_a_reader_is_unwatched_whatever_its_asset() {
        for asset in ["ETH", "USDC"] {
            assert_eq!(
                chains().judge(approved("dark", asset), [1; 32]).await,
                ChainSays::Unwatched
            );
        }
    }

    #[tokio::test]
    async fn an_asset_the_network_does_not_have_concludes_nothing() {
        let usdc = PayoutAssets {
            native: "ETH".to_owned(),
            tokens: BTreeMap::from([(
                "USDC".to_owned(),
                "0x5fbdb2315678afecb367f032d93f642f64180aa3".to_owned(),
            )]),
            senders: vec!["0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f".to_owned()],
        };
        // A network without its assets judges nothing; then an asset not among them.
        for asset in ["ETH", "USDC"] {
            assert_eq!(
                chains().judge(approved("anvil", asset), [1; 32]).await,
                ChainSays::NotYet
            );
        }
        let chains = chains().with_assets(BTreeMap::from([("anvil".to_owned(), usdc)]));
        assert_eq!(
            chains.judge(approved("anvil", "USDT"), [1; 32]).await,
            ChainSays::NotYet
        );
        // Known assets are read (here from a silent endpoint: nothing concluded either).
        for asset in ["ETH", "USDC"] {
            assert_eq!(
                chains.judge(approved("anvil", asset), [1; 32]).await,
                ChainSays::NotYet
            );
        }
    }

    #[test]
    fn debug_shows_no_destination() {
        let shown = format!("{:?}", approved("anvil", "USDC"));
        assert!(!shown.contains("170"), "{shown}");
    }

    #[test]
    fn a_payment_included_by_the_final_block_at_the_request_is_contradicted() {
        let paid = |number| {
            ChainSays::Paid(BlockRef {
                number,
                hash: [2; 32],
            })
        };
        let before = ChainSays::Contradicted("PAYOUT_BEFORE_REQUEST");
        assert_eq!(after_request(paid(7), Some(7)), before);
        assert_eq!(after_request(paid(3), Some(7)), before);
        assert_eq!(after_request(paid(8), Some(7)), paid(8));
        assert_eq!(after_request(paid(3), None), paid(3));
        // Only a payment is bounded: what concludes nothing or is contradicted stays so.
        for says in [ChainSays::NotYet, ChainSays::Unwatched, before] {
            assert_eq!(after_request(says, Some(7)), says);
        }
    }

    #[test]
    fn verdicts_map_to_what_the_executor_does() {
        use opledger_domain::custodian::token::PayoutRefusal;
        use opledger_domain::witness::deposit::{DepositRefusal, NotYet};
        let block = BlockRef {
            number: 3,
            hash: [2; 32],
        };
        assert_eq!(
            token_says(PayoutVerdict::Paid {
                block,
                log_index: 4
            }),
            ChainSays::Paid(block)
        );
        assert_eq!(
            token_says(PayoutVerdict::NotYet(NotYet::Absent)),
            ChainSays::NotYet
        );
        assert_eq!(
            token_says(PayoutVerdict::Contradicted(
                PayoutRefusal::MoreThanOneTransfer
            )),
            ChainSays::Contradicted("PAYOUT_MORE_THAN_ONE_TRANSFER")
        );
        assert_eq!(
            native_says(DepositVerdict::Confirmed { block }),
            ChainSays::Paid(block)
        );
        assert_eq!(
            native_says(DepositVerdict::Contradicted(DepositRefusal::AmountMismatch)),
            ChainSays::Contradicted("DEPOSIT_AMOUNT_MISMATCH")
        );
    }
}
