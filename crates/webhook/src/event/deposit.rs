//! `deposit.confirmed`: the event, its chain evidence, and its schema.

use std::fmt;

use opledger_domain::{AccountName, Amount, AssetCode};
use serde_json::Value;

use super::fields::{
    ExternalRef, Members, check_members, external_ref, optional_string, parse_tx_hash, rule,
    string_field,
};

/// `deposit.confirmed`: a deposit reached finality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositConfirmed {
    deposit_id: ExternalRef,
    account: AccountName,
    asset: AssetCode,
    amount: Amount,
    chain: Option<DepositChain>,
}

/// A deposit's chain evidence as the provider reported it. `Debug` shows neither the transaction
/// nor the recipient.
#[derive(Clone, PartialEq, Eq)]
pub struct DepositChain {
    /// The network id.
    pub network: opledger_domain::payload::NetworkId,
    /// The transaction.
    pub tx_hash: [u8; 32],
    /// The token transfer's log in the receipt; `None` for the native coin.
    pub log_index: Option<u32>,
    /// The address that received it.
    pub recipient: [u8; 20],
}

impl fmt::Debug for DepositChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DepositChain")
            .field("network", &self.network)
            .field("log_index", &self.log_index)
            .finish_non_exhaustive()
    }
}

impl DepositConfirmed {
    /// The watcher's id of the deposit.
    pub fn deposit_id(&self) -> &ExternalRef {
        &self.deposit_id
    }

    /// The credited account.
    pub fn account(&self) -> &AccountName {
        &self.account
    }

    /// The deposited asset.
    pub fn asset(&self) -> &AssetCode {
        &self.asset
    }

    /// The deposited amount in minimal units, always greater than zero.
    pub fn amount(&self) -> Amount {
        self.amount
    }

    /// The deposit's chain evidence, when the provider sent it.
    pub fn chain(&self) -> Option<&DepositChain> {
        self.chain.as_ref()
    }
}

/// Reads a `deposit.confirmed` event's `data`.
pub(super) fn deposit_confirmed(data: &Members<Value>) -> Result<DepositConfirmed, String> {
    check_members(
        data,
        &[
            "deposit_id",
            "account",
            "asset",
            "amount",
            "network",
            "tx_hash",
            "log_index",
            "recipient",
        ],
    )?;
    let deposit_id = external_ref(data, "deposit_id")?;
    let account = AccountName::parse(string_field(data, "account")?)
        .map_err(|_| rule("account", "must match [a-z0-9][a-z0-9_-]{0,62}"))?;
    let asset = AssetCode::parse(string_field(data, "asset")?)
        .map_err(|_| rule("asset", "must match [A-Z0-9]{1,16}"))?;
    let amount = Amount::parse(string_field(data, "amount")?).map_err(|_| {
        rule(
            "amount",
            "must be a canonical decimal integer of minimal units",
        )
    })?;
    if amount.is_zero() {
        return Err(rule("amount", "must be greater than zero"));
    }
    let chain = deposit_chain(data)?;
    Ok(DepositConfirmed {
        deposit_id,
        account,
        asset,
        amount,
        chain,
    })
}

fn deposit_chain(data: &Members<Value>) -> Result<Option<DepositChain>, String> {
    let network = optional_string(data, "network")?;
    let tx_hash = optional_string(data, "tx_hash")?;
    let recipient = optional_string(data, "recipient")?;
    let log_index = optional_string(data, "log_index")?;
    let (Some(network), Some(tx_hash), Some(recipient)) = (network, tx_hash, recipient) else {
        if network.is_some() || tx_hash.is_some() || recipient.is_some() || log_index.is_some() {
            return Err(rule(
                "network",
                "network, tx_hash and recipient come together (log_index only with them)",
            ));
        }
        return Ok(None);
    };
    let network = opledger_domain::payload::NetworkId::parse(network)
        .map_err(|_| rule("network", "must match [a-z0-9][a-z0-9_-]{0,62}"))?;
    let tx_hash = parse_tx_hash(tx_hash)
        .ok_or_else(|| rule("tx_hash", "must be 0x followed by 64 hex digits"))?;
    let recipient = recipient
        .strip_prefix("0x")
        .and_then(|digits| {
            let mut out = [0_u8; 20];
            hex::decode_to_slice(digits, &mut out).ok().map(|()| out)
        })
        .ok_or_else(|| rule("recipient", "must be 0x followed by 40 hex digits"))?;
    let log_index = log_index
        .map(|text| {
            let canonical = !text.is_empty()
                && text.bytes().all(|b| b.is_ascii_digit())
                && (text == "0" || !text.starts_with('0'));
            text.parse::<u32>()
                .ok()
                .filter(|n| canonical && *n <= i32::MAX as u32)
                .ok_or_else(|| {
                    rule(
                        "log_index",
                        "must be a decimal integer from 0 to 2147483647",
                    )
                })
        })
        .transpose()?;
    Ok(Some(DepositChain {
        network,
        tx_hash,
        log_index,
        recipient,
    }))
}
