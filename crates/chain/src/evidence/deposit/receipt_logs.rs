//! A transaction with every log of its receipt, as a pass reads it, for
//! [`opledger_domain::custodian::token::judge_token_payout`]: a custodian's token payout, whose
//! provider names the transaction but not the log that paid.
//!
//! The read is a deposit's (see the parent module): one request per endpoint for the receipt, the
//! transaction and the pinned height again, the same checks of what they say about each other and
//! about the pinned chain, an inclusion only in a canonical block at or below the pinned one.
//! What is agreed on is every log of the receipt instead of one: each must name its `logIndex`,
//! belong to the asked transaction and its block where it names them, and not be removed; two
//! logs at one index are a contradiction. The logs are ordered by index, so that endpoints that
//! list them in another order still agree. The answers count only when at least the reader's
//! quorum answered and every answer is identical, absence included.

use alloy_primitives::B256;
use alloy_rpc_types_eth::Log;
use futures::future::join_all;
use opledger_domain::custodian::token::ObservedReceipt;
use opledger_domain::evidence::NoAgreement;
use opledger_domain::witness::deposit::{ObservedDeposit, ObservedLog};

use super::super::endpoint::{Endpoint, EndpointError};
use super::super::pinned::Pinned;
use super::{agreed, answered, canonical, interpret};

impl Pinned {
    /// What the endpoints of this pass agree on about transaction `tx_hash` at the pinned block:
    /// its inclusion in a canonical block at or below it (status and every log of its receipt),
    /// or its absence. At least the reader's quorum must answer ([`NoAgreement::TooFewAnswers`])
    /// and all answers must be the same ([`NoAgreement::Disagreement`]); an endpoint that fails
    /// in any way did not answer. Judge the result against [`Pinned::final_block`].
    pub async fn receipt_logs(&self, tx_hash: B256) -> Result<ObservedReceipt, NoAgreement> {
        let (reader, members) = self.members();
        let inner = &reader.inner;
        let answers: Vec<Option<ObservedReceipt>> = join_all(
            inner
                .endpoints
                .iter()
                .zip(members)
                .map(|(e, member)| self.logs_answer(e, member, tx_hash)),
        )
        .await;
        agreed(answers, inner.quorum)
    }

    /// One endpoint's answer: `None` when it is not part of the pass or did not answer.
    async fn logs_answer(
        &self,
        endpoint: &Endpoint,
        member: bool,
        tx_hash: B256,
    ) -> Option<ObservedReceipt> {
        if !member {
            return None;
        }
        answered(
            endpoint,
            "receipt logs",
            self.observe_logs(endpoint, tx_hash).await,
        )
    }

    /// What one endpoint says, or why it said nothing.
    async fn observe_logs(
        &self,
        endpoint: &Endpoint,
        tx_hash: B256,
    ) -> Result<ObservedReceipt, EndpointError> {
        let pinned = (self.pinned.number, B256::from(self.pinned.hash));
        let (receipt, transaction) = endpoint.receipt_and_transaction(tx_hash, pinned).await?;
        let logs = receipt
            .as_ref()
            .map(|r| r.logs().to_vec())
            .unwrap_or_default();
        let from = transaction.as_ref().and_then(|t| t.from);
        let found = interpret(tx_hash, None, pinned.0, receipt, transaction)?;
        let Some(found) = canonical(endpoint, pinned, found).await? else {
            return Ok(ObservedReceipt::Absent);
        };
        included(
            found.observed,
            from.map(|a| a.into_array()),
            &logs,
            tx_hash,
            found.hash,
        )
    }
}

/// The inclusion `observed` (a deposit read's, without a log), sent by `from`, with every log of
/// its receipt.
fn included(
    observed: ObservedDeposit,
    from: Option<opledger_domain::evidence::Address>,
    logs: &[Log],
    asked: B256,
    block: B256,
) -> Result<ObservedReceipt, EndpointError> {
    let ObservedDeposit::Included {
        tx_hash,
        block: at,
        success,
        to,
        value,
        ..
    } = observed
    else {
        return Err(EndpointError::Inconsistent);
    };
    Ok(ObservedReceipt::Included {
        tx_hash,
        block: at,
        success,
        from,
        to,
        value,
        logs: every_log(logs, asked, block)?,
    })
}

/// Every log of a receipt, by ascending `logIndex` (block-wide). Each must name its index, belong
/// to `asked` and to `block` where it names them, and not be removed; two logs at one index are a
/// contradiction.
fn every_log(logs: &[Log], asked: B256, block: B256) -> Result<Vec<ObservedLog>, EndpointError> {
    let mut found = Vec::with_capacity(logs.len());
    for log in logs {
        let at = log.log_index.ok_or(EndpointError::Inconsistent)?;
        let index = u32::try_from(at).map_err(|_| EndpointError::Inconsistent)?;
        if log.removed
            || log.transaction_hash.is_some_and(|h| h != asked)
            || log.block_hash.is_some_and(|h| h != block)
        {
            return Err(EndpointError::Inconsistent);
        }
        found.push(ObservedLog {
            index,
            address: log.address().into_array(),
            topics: log.topics().iter().map(|t| t.0).collect(),
            data: log.data().data.to_vec(),
        });
    }
    found.sort_by_key(|l| l.index);
    if found.windows(2).any(|pair| pair[0].index == pair[1].index) {
        return Err(EndpointError::Inconsistent);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opledger_domain::evidence::BlockRef;
    use opledger_domain::witness::deposit::ERC20_TRANSFER_TOPIC;
    use serde_json::{Value, json};

    const ASKED: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";
    const BLOCK: &str = "0x2222222222222222222222222222222222222222222222222222222222222222";
    const TOKEN: &str = "0x4444444444444444444444444444444444444444";

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

    fn read(logs: Vec<Value>) -> Result<Vec<(u32, u8)>, &'static str> {
        let logs: Vec<Log> = logs
            .into_iter()
            .map(|l| match serde_json::from_value(l) {
                Ok(parsed) => parsed,
                Err(e) => panic!("fixture does not parse: {e}"),
            })
            .collect();
        every_log(&logs, B256::repeat_byte(0x11), B256::repeat_byte(0x22))
            .map(|found| found.iter().map(|l| (l.index, l.data[0])).collect())
            .map_err(|e| e.kind())
    }

    #[test]
    fn every_log_is_read_by_its_log_index_in_order() {
        assert_eq!(read(vec![]), Ok(vec![]));
        // Block-wide indexes, listed out of order by the endpoint: ordered by index.
        assert_eq!(
            read(vec![log(9, 0x03), log(7, 0x01), log(8, 0x02)]),
            Ok(vec![(7, 0x01), (8, 0x02), (9, 0x03)])
        );
        // A log that names neither its transaction nor its block is taken as the receipt's.
        let mut bare = log(4, 0x04);
        bare["transactionHash"] = Value::Null;
        bare["blockHash"] = Value::Null;
        assert_eq!(read(vec![bare]), Ok(vec![(4, 0x04)]));
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
            vec![log(8, 0x01), log(7, 0x03), log(8, 0x02)],
            vec![log(7, 0x01), no_index],
            vec![removed],
            vec![log(7, 0x01), other_tx],
            vec![other_block],
            vec![log(u64::from(u32::MAX) + 1, 0x01)],
        ] {
            assert_eq!(read(logs.clone()), Err("inconsistent answer"), "{logs:?}");
        }
    }

    #[test]
    fn the_inclusion_keeps_the_transaction_its_block_and_status() {
        let block = BlockRef {
            number: 5,
            hash: [0x22; 32],
        };
        let observed = ObservedDeposit::Included {
            tx_hash: [0x11; 32],
            block,
            success: false,
            to: Some([0x33; 20]),
            value: Some(1),
            log: None,
        };
        let logs: Vec<Log> = match serde_json::from_value(json!([log(3, 0x09)])) {
            Ok(logs) => logs,
            Err(e) => panic!("fixture does not parse: {e}"),
        };
        let read = included(
            observed,
            Some([0x44; 20]),
            &logs,
            B256::repeat_byte(0x11),
            B256::repeat_byte(0x22),
        );
        let Ok(ObservedReceipt::Included {
            tx_hash,
            block: at,
            success,
            from,
            logs,
            ..
        }) = read
        else {
            panic!("not included");
        };
        assert_eq!((tx_hash, at, success), ([0x11; 32], block, false));
        assert_eq!(from, Some([0x44; 20]));
        assert_eq!(
            logs.iter()
                .map(|l| (l.index, l.address, l.topics.len(), l.data.len()))
                .collect::<Vec<_>>(),
            vec![(3, [0x44; 20], 1, 32)]
        );
        assert!(matches!(
            included(ObservedDeposit::Absent, None, &[], B256::ZERO, B256::ZERO),
            Err(EndpointError::Inconsistent)
        ));
    }
}
