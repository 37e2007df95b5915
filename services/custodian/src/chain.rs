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
use opledger_chain::evidence::{no_evidence, reason_label};
use opledger_chain::{EvidenceReader, PinError};
use opledger_domain::custodian::token::{
    ObservedReceipt, PayoutRefusal, PayoutVerdict, RequestBound, SinceRequest, TokenPayout,
    judge_token_payout, sent_by, since_request,
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
    /// The network is watched, but the request was stored with no bound (before migration 41,
    /// or while the network was not watched): no transaction can be shown to be after it, so
    /// nothing is settled on one; an operator decides.
    Unbound,
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
    /// The chain when the request was stored: the payout must be included after it (`None`:
    /// none was stored).
    pub bound: Option<RequestBound>,
}

impl fmt::Debug for Approved<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approved")
            .field("network", &self.network)
            .field("asset", &self.asset)
            .field("amount", &self.amount)
            .field("bound", &self.bound)
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

    /// The bound of a request stored now on `network`: its final block and pinned head, by the
    /// same quorum and finality as every settlement. `Ok(None)` when the network is not watched,
    /// an error when the endpoints do not agree now (nothing is sent until they do).
    pub async fn bound(&self, network: &str) -> Result<Option<RequestBound>, PinError> {
        let Some(reader) = self.readers.get(network) else {
            return Ok(None);
        };
        let pinned = reader.pin().await.inspect_err(|e| {
            no_evidence().record(network, reason_label(&e.no_agreement()));
        })?;
        Ok(Some(RequestBound {
            final_block: pinned.final_block.number,
            head: pinned.pinned,
        }))
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
        let Some(bound) = approved.bound else {
            return ChainSays::Unbound;
        };
        let pinned = match reader.pin().await {
            Ok(pinned) => pinned,
            Err(e) => {
                no_evidence().record(approved.network, reason_label(&e.no_agreement()));
                return ChainSays::NotYet;
            }
        };
        let senders: Vec<Address> = assets
            .senders
            .iter()
            .filter_map(|s| opledger_domain::evidence::parse_address(s))
            .collect();
        let says = paid_as_approved(&pinned, &approved, asset, tx_hash, &senders).await;
        let ChainSays::Paid(block) = says else {
            return says;
        };
        let since = since_request(block.number, &bound);
        let head_canonical = match since {
            SinceRequest::BeforeUnlessHeadReplaced => pinned.canonical(bound.head).await.ok(),
            SinceRequest::After | SinceRequest::Before => None,
        };
        after_request(says, since, head_canonical)
    }
}

/// What the chain pinned in `pinned` says of `tx_hash` paying `approved` in `asset` from one of
/// `senders`: the native transfer by the deposit rule, a token's by the payout rule, both read
/// from one read of the transaction, its sender and every log of its receipt.
async fn paid_as_approved(
    pinned: &opledger_chain::Pinned,
    approved: &Approved<'_>,
    asset: Asset,
    tx_hash: Hash32,
    senders: &[Address],
) -> ChainSays {
    let observed = pinned.receipt_logs(B256::from(tx_hash)).await;
    match asset {
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
            from_senders(native_says(verdict), observed.as_ref().ok(), None, senders)
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
                senders,
            )
        }
    }
}

/// `says` (a payment) once its block is placed against the request's bound: before it (at or
/// below the final block then, or at or below the head then while that head is still canonical,
/// `head_canonical`), a transfer made before the request, contradicted; the head's fate unknown
/// (no agreement), nothing concluded yet.
fn after_request(says: ChainSays, since: SinceRequest, head_canonical: Option<bool>) -> ChainSays {
    let before = ChainSays::Contradicted(PayoutRefusal::BeforeRequest.reason_code());
    match (since, head_canonical) {
        (SinceRequest::After, _) | (SinceRequest::BeforeUnlessHeadReplaced, Some(false)) => says,
        (SinceRequest::Before, _) | (SinceRequest::BeforeUnlessHeadReplaced, Some(true)) => before,
        (SinceRequest::BeforeUnlessHeadReplaced, None) => ChainSays::NotYet,
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
            bound: Some(RequestBound {
                final_block: 0,
                head: BlockRef {
                    number: 0,
                    hash: [0; 32],
                },
            }),
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
    fn a_payment_included_in_the_chain_the_request_saw_is_contradicted() {
        let paid = ChainSays::Paid(BlockRef {
            number: 8,
            hash: [2; 32],
        });
        let before = ChainSays::Contradicted("PAYOUT_BEFORE_REQUEST");
        let (after, at_or_below, between) = (
            SinceRequest::After,
            SinceRequest::Before,
            SinceRequest::BeforeUnlessHeadReplaced,
        );
        assert_eq!(after_request(paid, after, None), paid);
        assert_eq!(after_request(paid, at_or_below, None), before);
        // Between the final block and the head: the head's fate decides.
        assert_eq!(after_request(paid, between, Some(true)), before);
        assert_eq!(after_request(paid, between, Some(false)), paid);
        assert_eq!(after_request(paid, between, None), ChainSays::NotYet);
    }

    #[tokio::test]
    async fn a_watched_network_without_a_stored_bound_settles_nothing() {
        let unbound = Approved {
            bound: None,
            ..approved("anvil", "ETH")
        };
        let eth = PayoutAssets {
            native: "ETH".to_owned(),
            tokens: BTreeMap::new(),
            senders: vec!["0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f".to_owned()],
        };
        let watched = chains().with_assets(BTreeMap::from([("anvil".to_owned(), eth)]));
        assert_eq!(watched.judge(unbound, [1; 32]).await, ChainSays::Unbound);
        // Unwatched, the provider's record decides as before.
        let dark = Approved {
            bound: None,
            ..approved("dark", "ETH")
        };
        assert_eq!(chains().judge(dark, [1; 32]).await, ChainSays::Unwatched);
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
