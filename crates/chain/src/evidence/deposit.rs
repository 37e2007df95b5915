//! A deposit's transaction as a pass reads it, for the witness's
//! [`opledger_domain::witness::deposit::judge_deposit`].
//!
//! Every endpoint of the pass is asked, in one request, for the transaction's receipt, the
//! transaction itself (its `to` and value) and its canonical block at the pinned height (which
//! must still be the pinned block). A receipt counts only in a block at or below the pinned one
//! that is that endpoint's canonical block at its height (a second request when it is below the
//! pinned block); otherwise the endpoint says [`ObservedDeposit::Absent`]. The log a token
//! deposit names is found by its `logIndex` field (block-wide), never by its position in the
//! receipt. An endpoint whose answer contradicts itself (a receipt of another transaction, a
//! transaction in another block than its receipt, two logs at one index, a transaction in a block
//! without its receipt) did not answer. The answers count as evidence only when at least the
//! reader's quorum answered and every answer is identical, absence included.

use alloy_primitives::B256;
use alloy_rpc_types_eth::{Log, TransactionReceipt};
use futures::future::join_all;
use opledger_domain::evidence::{BlockRef, NoAgreement};
use opledger_domain::witness::deposit::{ObservedDeposit, ObservedLog};

use super::endpoint::{Endpoint, EndpointError, TransactionPaid};
use super::pinned::Pinned;

mod receipt_logs;

impl Pinned {
    /// What the endpoints of this pass agree on about transaction `tx_hash` at the pinned block:
    /// its inclusion in a canonical block at or below it (status, `to`, value, and the receipt's
    /// log whose `logIndex` is `log_index`, when one is asked for), or its absence. At least the
    /// reader's quorum must answer ([`NoAgreement::TooFewAnswers`]) and all answers must be the
    /// same ([`NoAgreement::Disagreement`]); an endpoint that fails in any way did not answer.
    /// Judge the result against [`Pinned::final_block`].
    pub async fn deposit(
        &self,
        tx_hash: B256,
        log_index: Option<u32>,
    ) -> Result<ObservedDeposit, NoAgreement> {
        let (reader, members) = self.members();
        let inner = &reader.inner;
        let answers: Vec<Option<ObservedDeposit>> = join_all(
            inner
                .endpoints
                .iter()
                .zip(members)
                .map(|(e, member)| self.answer(e, member, tx_hash, log_index)),
        )
        .await;
        agreed(answers, inner.quorum)
    }

    /// One endpoint's answer: `None` when it is not part of the pass or did not answer.
    async fn answer(
        &self,
        endpoint: &Endpoint,
        member: bool,
        tx_hash: B256,
        log_index: Option<u32>,
    ) -> Option<ObservedDeposit> {
        if !member {
            return None;
        }
        answered(
            endpoint,
            "deposit",
            self.observe(endpoint, tx_hash, log_index).await,
        )
    }

    /// What one endpoint says, or why it said nothing.
    async fn observe(
        &self,
        endpoint: &Endpoint,
        tx_hash: B256,
        log_index: Option<u32>,
    ) -> Result<ObservedDeposit, EndpointError> {
        let pinned = (self.pinned.number, B256::from(self.pinned.hash));
        let (receipt, transaction) = endpoint.receipt_and_transaction(tx_hash, pinned).await?;
        let found = interpret(tx_hash, log_index, pinned.0, receipt, transaction)?;
        Ok(canonical(endpoint, pinned, found)
            .await?
            .map_or(ObservedDeposit::Absent, |found| found.observed))
    }
}

/// An endpoint's observation at `step`, or `None` (it did not answer, logged without the asked
/// transaction).
fn answered<T>(
    endpoint: &Endpoint,
    step: &'static str,
    seen: Result<T, EndpointError>,
) -> Option<T> {
    seen.map_err(|error| {
        tracing::debug!(
            endpoint = endpoint.index,
            step,
            error = error.kind(),
            code = error.code(),
            "evidence endpoint did not answer"
        );
    })
    .ok()
}

/// `found` when its block is canonical on the pinned chain (`pinned`: its number and hash);
/// `None` when it is absent or in another fork's block (not included).
async fn canonical(
    endpoint: &Endpoint,
    pinned: (u64, B256),
    found: Option<Found>,
) -> Result<Option<Found>, EndpointError> {
    let Some(found) = found else {
        return Ok(None);
    };
    let canonical = if found.number == pinned.0 {
        pinned.1
    } else {
        // Re-reads the pinned height too: the hash comes from the pinned chain.
        endpoint
            .hashes(&[found.number], pinned)
            .await?
            .get(&found.number)
            .copied()
            .ok_or(EndpointError::Inconsistent)?
    };
    Ok((canonical == found.hash).then_some(found))
}

/// One endpoint's inclusion of the asked transaction, before its block is checked canonical.
struct Found {
    number: u64,
    hash: B256,
    observed: ObservedDeposit,
}

/// What one endpoint's receipt and transaction say about `asked`: `None` when it has no receipt
/// in a block at or below `pinned` (none, pending, or above), the inclusion otherwise; an error
/// when the answers contradict the question or each other.
fn interpret(
    asked: B256,
    log_index: Option<u32>,
    pinned: u64,
    receipt: Option<TransactionReceipt>,
    transaction: Option<TransactionPaid>,
) -> Result<Option<Found>, EndpointError> {
    if transaction.as_ref().is_some_and(|t| t.hash != asked) {
        return Err(EndpointError::Inconsistent);
    }
    let mined = transaction
        .as_ref()
        .and_then(|t| Some((t.block_number?.to::<u64>(), t.block_hash?)));
    let block = match &receipt {
        Some(r) if r.transaction_hash != asked => return Err(EndpointError::Inconsistent),
        Some(r) => match (r.block_number, r.block_hash) {
            (Some(number), Some(hash)) => Some((number, hash)),
            (None, None) => None,
            _ => return Err(EndpointError::Inconsistent),
        },
        None => None,
    };
    let (Some(receipt), Some((number, hash))) = (receipt, block) else {
        // No receipt naming a block, while its own transaction is in a block at or below the
        // pinned one: its receipt index lags its blocks, and its "absent" is no evidence.
        if mined.is_some_and(|(number, _)| number <= pinned) {
            return Err(EndpointError::ReceiptMissing);
        }
        return Ok(None);
    };
    if number > pinned {
        return Ok(None);
    }
    let transaction = transaction.ok_or(EndpointError::Inconsistent)?;
    if mined != Some((number, hash)) || receipt.to.is_some_and(|to| transaction.to != Some(to)) {
        return Err(EndpointError::Inconsistent);
    }
    let log = match log_index {
        Some(index) => log_at(receipt.logs(), index, asked, hash)?,
        None => None,
    };
    Ok(Some(Found {
        number,
        hash,
        observed: ObservedDeposit::Included {
            tx_hash: asked.0,
            block: BlockRef {
                number,
                hash: hash.0,
            },
            success: receipt.status(),
            to: transaction.to.map(|to| to.into_array()),
            value: u128::try_from(transaction.value).ok(),
            log,
        },
    }))
}

/// The receipt's log whose `logIndex` (block-wide) is `index`, if any. Every log of the receipt
/// must name its index, belong to `asked` and to `block` where it names them, and not be removed;
/// two logs at one index are a contradiction.
fn log_at(
    logs: &[Log],
    index: u32,
    asked: B256,
    block: B256,
) -> Result<Option<ObservedLog>, EndpointError> {
    let mut found = None;
    for log in logs {
        let at = log.log_index.ok_or(EndpointError::Inconsistent)?;
        if log.removed
            || log.transaction_hash.is_some_and(|h| h != asked)
            || log.block_hash.is_some_and(|h| h != block)
        {
            return Err(EndpointError::Inconsistent);
        }
        if at != u64::from(index) {
            continue;
        }
        if found.is_some() {
            return Err(EndpointError::Inconsistent);
        }
        found = Some(ObservedLog {
            index,
            address: log.address().into_array(),
            topics: log.topics().iter().map(|t| t.0).collect(),
            data: log.data().data.to_vec(),
        });
    }
    Ok(found)
}

/// The one answer every answering endpoint gave, if at least `quorum` answered (a quorum of 0 is
/// taken as 1).
fn agreed<T: PartialEq>(answers: Vec<Option<T>>, quorum: usize) -> Result<T, NoAgreement> {
    let quorum = quorum.max(1);
    let mut answered = answers.into_iter().flatten();
    let Some(first) = answered.next() else {
        return Err(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum,
        });
    };
    let mut count = 1;
    let mut differ = false;
    for answer in answered {
        count += 1;
        differ |= answer != first;
    }
    if count < quorum {
        return Err(NoAgreement::TooFewAnswers {
            answered: count,
            quorum,
        });
    }
    if differ {
        return Err(NoAgreement::Disagreement);
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::keccak256;
    use opledger_domain::witness::deposit::ERC20_TRANSFER_TOPIC;
    use serde_json::{Value, json};

    const ASKED: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";
    const BLOCK: &str = "0x2222222222222222222222222222222222222222222222222222222222222222";
    const TO: &str = "0x3333333333333333333333333333333333333333";
    const TOKEN: &str = "0x4444444444444444444444444444444444444444";

    fn asked() -> B256 {
        B256::repeat_byte(0x11)
    }

    fn log(index: u64, data_byte: u8) -> Value {
        json!({
            "address": TOKEN,
            "topics": [format!("0x{}", hex::encode(ERC20_TRANSFER_TOPIC))],
            "data": format!("0x{}", hex::encode([data_byte; 32])),
            "blockHash": BLOCK,
            "blockNumber": "0x5",
            "transactionHash": ASKED,
            "transactionIndex": "0x1",
            "logIndex": format!("{index:#x}"),
            "removed": false,
        })
    }

    fn receipt(logs: Vec<Value>) -> Value {
        json!({
            "type": "0x2",
            "status": "0x1",
            "cumulativeGasUsed": "0x5208",
            "logs": logs,
            "logsBloom": format!("0x{}", "00".repeat(256)),
            "transactionHash": ASKED,
            "transactionIndex": "0x1",
            "blockHash": BLOCK,
            "blockNumber": "0x5",
            "gasUsed": "0x5208",
            "effectiveGasPrice": "0x1",
            "from": "0x5555555555555555555555555555555555555555",
            "to": TO,
            "contractAddress": null,
        })
    }

    fn transaction() -> Value {
        json!({
            "hash": ASKED,
            "blockHash": BLOCK,
            "blockNumber": "0x5",
            "to": TO,
            "value": "0x2a",
            "type": "0x7e",
        })
    }

    fn parse<T: serde::de::DeserializeOwned>(value: Value) -> T {
        match serde_json::from_value(value) {
            Ok(parsed) => parsed,
            Err(e) => panic!("fixture does not parse: {e}"),
        }
    }

    /// `interpret` of the fixtures (`None`: no answer for it) at pinned height `pinned`.
    fn read(
        log_index: Option<u32>,
        pinned: u64,
        receipt: Option<Value>,
        transaction: Option<Value>,
    ) -> Result<Option<ObservedDeposit>, &'static str> {
        interpret(
            asked(),
            log_index,
            pinned,
            receipt.map(parse),
            transaction.map(parse),
        )
        .map(|found| found.map(|f| f.observed))
        .map_err(|e| e.kind())
    }

    fn logs_of(found: Result<Option<ObservedDeposit>, &'static str>) -> Option<ObservedLog> {
        match found {
            Ok(Some(ObservedDeposit::Included { log, .. })) => log,
            other => panic!("not included: {other:?}"),
        }
    }

    #[test]
    fn the_transfer_topic_is_keccak_of_the_event_signature() {
        assert_eq!(
            keccak256("Transfer(address,address,uint256)").0,
            ERC20_TRANSFER_TOPIC
        );
    }

    #[test]
    fn an_included_transaction_is_read_from_its_receipt_and_itself() {
        let found = read(None, 5, Some(receipt(vec![])), Some(transaction()));
        assert_eq!(
            found,
            Ok(Some(ObservedDeposit::Included {
                tx_hash: [0x11; 32],
                block: BlockRef {
                    number: 5,
                    hash: [0x22; 32]
                },
                success: true,
                to: Some([0x33; 20]),
                value: Some(42),
                log: None,
            }))
        );
        // A value above 128 bits is no amount.
        let mut big = transaction();
        big["value"] = json!(format!("0x1{}", "0".repeat(32)));
        assert!(matches!(
            read(None, 5, Some(receipt(vec![])), Some(big)),
            Ok(Some(ObservedDeposit::Included { value: None, .. }))
        ));
        // A contract creation: no `to`.
        let (mut created, mut created_tx) = (receipt(vec![]), transaction());
        created["to"] = Value::Null;
        created_tx["to"] = Value::Null;
        assert!(matches!(
            read(None, 5, Some(created), Some(created_tx)),
            Ok(Some(ObservedDeposit::Included { to: None, .. }))
        ));
        // Reverted.
        let mut reverted = receipt(vec![]);
        reverted["status"] = json!("0x0");
        assert!(matches!(
            read(None, 5, Some(reverted), Some(transaction())),
            Ok(Some(ObservedDeposit::Included { success: false, .. }))
        ));
    }

    #[test]
    fn the_log_is_found_by_its_log_index_not_its_position() {
        // The transaction is not the block's first: its logs are at block-wide indexes 7 and 8.
        let logs = vec![log(7, 0x01), log(8, 0x02)];
        let second = logs_of(read(
            Some(8),
            5,
            Some(receipt(logs.clone())),
            Some(transaction()),
        ));
        assert_eq!(second.map(|l| (l.index, l.data[0])), Some((8, 0x02)));
        let first = logs_of(read(
            Some(7),
            5,
            Some(receipt(logs.clone())),
            Some(transaction()),
        ));
        assert_eq!(
            first.map(|l| (l.index, l.address, l.data)),
            Some((7, [0x44; 20], vec![0x01; 32]))
        );
        // Positions 0 and 1 are no log indexes of this transaction.
        for index in [0, 1, 9] {
            assert_eq!(
                logs_of(read(
                    Some(index),
                    5,
                    Some(receipt(logs.clone())),
                    Some(transaction())
                )),
                None,
                "{index}"
            );
        }
        // Not asked, not read.
        assert_eq!(
            logs_of(read(None, 5, Some(receipt(logs)), Some(transaction()))),
            None
        );
    }

    #[test]
    fn logs_that_contradict_the_receipt_are_no_answer() {
        let mut no_index = log(8, 0x02);
        no_index["logIndex"] = Value::Null;
        let mut removed = log(8, 0x02);
        removed["removed"] = json!(true);
        let mut other_tx = log(8, 0x02);
        other_tx["transactionHash"] = json!(BLOCK);
        let mut other_block = log(8, 0x02);
        other_block["blockHash"] = json!(ASKED);
        for logs in [
            vec![log(8, 0x01), log(8, 0x02)],
            vec![log(7, 0x01), no_index],
            vec![removed],
            vec![log(7, 0x01), other_tx],
            vec![other_block],
        ] {
            assert_eq!(
                read(Some(8), 5, Some(receipt(logs.clone())), Some(transaction())),
                Err("inconsistent answer"),
                "{logs:?}"
            );
        }
    }

    #[test]
    fn absence_is_no_receipt_at_or_below_the_pinned_block() {
        // No receipt and no transaction; a pending transaction; a receipt above the pinned block.
        assert_eq!(read(Some(1), 5, None, None), Ok(None));
        let mut pending = transaction();
        pending["blockHash"] = Value::Null;
        pending["blockNumber"] = Value::Null;
        assert_eq!(read(None, 5, None, Some(pending)), Ok(None));
        assert_eq!(
            read(None, 4, Some(receipt(vec![])), Some(transaction())),
            Ok(None)
        );
        // The transaction is in a block above the pinned one, the receipt not served yet.
        assert_eq!(read(None, 4, None, Some(transaction())), Ok(None));
        // In a block at or below the pinned one without its receipt: no answer.
        assert_eq!(
            read(None, 5, None, Some(transaction())),
            Err("receipt missing for an included attempt")
        );
    }

    #[test]
    fn answers_that_contradict_the_question_or_each_other_are_no_answer() {
        let mut other_receipt = receipt(vec![]);
        other_receipt["transactionHash"] = json!(BLOCK);
        let mut other_tx = transaction();
        other_tx["hash"] = json!(BLOCK);
        let mut other_block = transaction();
        other_block["blockHash"] = json!(ASKED);
        let mut other_height = transaction();
        other_height["blockNumber"] = json!("0x4");
        let mut other_to = transaction();
        other_to["to"] = json!(TOKEN);
        let mut half = receipt(vec![]);
        half["blockHash"] = Value::Null;
        for (receipt, transaction) in [
            (Some(other_receipt), Some(transaction())),
            (Some(receipt(vec![])), Some(other_tx)),
            (Some(receipt(vec![])), None),
            (Some(receipt(vec![])), Some(other_block)),
            (Some(receipt(vec![])), Some(other_height)),
            (Some(receipt(vec![])), Some(other_to)),
            (Some(half), Some(transaction())),
        ] {
            assert_eq!(
                read(None, 9, receipt, transaction),
                Err("inconsistent answer")
            );
        }
    }

    #[test]
    fn agreement_needs_the_quorum_and_identical_answers() {
        let included = |value| ObservedDeposit::Included {
            tx_hash: [1; 32],
            block: BlockRef {
                number: 3,
                hash: [2; 32],
            },
            success: true,
            to: Some([3; 20]),
            value: Some(value),
            log: None,
        };
        assert_eq!(
            agreed(vec![Some(included(1)), None, Some(included(1))], 2),
            Ok(included(1))
        );
        assert_eq!(
            agreed(
                vec![Some(ObservedDeposit::Absent), Some(ObservedDeposit::Absent)],
                2
            ),
            Ok(ObservedDeposit::Absent)
        );
        // Absence needs the quorum too.
        assert_eq!(
            agreed(vec![Some(ObservedDeposit::Absent), None], 2),
            Err(NoAgreement::TooFewAnswers {
                answered: 1,
                quorum: 2
            })
        );
        assert_eq!(
            agreed::<ObservedDeposit>(vec![None, None], 2),
            Err(NoAgreement::TooFewAnswers {
                answered: 0,
                quorum: 2
            })
        );
        // Any difference among the answers, even with a quorum agreeing beside it.
        assert_eq!(
            agreed(
                vec![Some(included(1)), Some(included(1)), Some(included(2))],
                2
            ),
            Err(NoAgreement::Disagreement)
        );
        assert_eq!(
            agreed(vec![Some(included(1)), Some(ObservedDeposit::Absent)], 1),
            Err(NoAgreement::Disagreement)
        );
        assert_eq!(agreed(vec![Some(included(1))], 0), Ok(included(1)));
    }
}
