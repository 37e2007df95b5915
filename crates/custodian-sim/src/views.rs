//! What each provider shows of a record: its status names and JSON (lookups, lists, webhooks).

use chrono::{DateTime, SecondsFormat};
use serde_json::{Value, json};

use crate::amount::to_whole;
use crate::config::Config;
use crate::profile::Profile;
use crate::record::{Operation, Record, Snapshot, Stage};

/// Fireblocks' status of a stage.
pub fn fireblocks_status(stage: Stage) -> &'static str {
    match stage {
        Stage::Submitted => "SUBMITTED",
        Stage::PendingAuthorization => "PENDING_AUTHORIZATION",
        Stage::Queued => "QUEUED",
        Stage::PendingSignature => "PENDING_SIGNATURE",
        Stage::Broadcasting => "BROADCASTING",
        Stage::Confirming => "CONFIRMING",
        Stage::Completed => "COMPLETED",
        Stage::Rejected => "REJECTED",
        Stage::Blocked => "BLOCKED",
        Stage::Failed | Stage::Replaced | Stage::Retried => "FAILED",
    }
}

/// BitGo's transfer state of a stage: `initialized` is "not yet signed" before and after the
/// approval, `signed` "signed and handed to the node", `unconfirmed` "in a block, short of the
/// confirmations required".
pub fn bitgo_state(stage: Stage) -> &'static str {
    match stage {
        Stage::Submitted | Stage::Queued | Stage::PendingSignature => "initialized",
        Stage::PendingAuthorization => "pendingApproval",
        Stage::Broadcasting => "signed",
        Stage::Confirming => "unconfirmed",
        Stage::Completed => "confirmed",
        Stage::Rejected | Stage::Blocked => "rejected",
        Stage::Failed => "failed",
        Stage::Replaced => "replaced",
        Stage::Retried => "removed",
    }
}

/// Coinbase Prime's transaction status of a stage.
pub fn prime_status(stage: Stage) -> &'static str {
    match stage {
        Stage::Submitted => "TRANSACTION_CREATED",
        Stage::PendingAuthorization => "TRANSACTION_REQUESTED",
        Stage::Queued => "TRANSACTION_APPROVED",
        Stage::PendingSignature => "TRANSACTION_PROCESSING",
        Stage::Broadcasting | Stage::Confirming | Stage::Replaced => "TRANSACTION_BROADCASTING",
        Stage::Completed => "TRANSACTION_DONE",
        Stage::Rejected | Stage::Blocked => "TRANSACTION_REJECTED",
        Stage::Failed => "TRANSACTION_FAILED",
        Stage::Retried => "TRANSACTION_RETRIED",
    }
}

/// The profile's name for a stage.
pub fn status_of(profile: Profile, stage: Stage) -> &'static str {
    match profile {
        Profile::Fireblocks => fireblocks_status(stage),
        Profile::Bitgo => bitgo_state(stage),
        Profile::Prime => prime_status(stage),
    }
}

/// RFC 3339 (UTC, milliseconds) of unix milliseconds.
pub fn rfc3339(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Renders records for one configuration.
#[derive(Debug, Clone, Copy)]
pub struct Views<'a> {
    /// The configuration.
    pub config: &'a Config,
    /// The hot wallet's address.
    pub hot_wallet: &'a str,
}

impl Views<'_> {
    /// The record as the profile shows it (lookup, list entry, webhook data).
    pub fn record(&self, op: &Operation, record: &Record, snap: &Snapshot) -> Value {
        match op.profile {
            Profile::Fireblocks => self.fireblocks(op, record, snap),
            Profile::Bitgo => self.bitgo(op, record, snap),
            Profile::Prime => self.prime(op, record, snap),
        }
    }

    fn fireblocks(&self, op: &Operation, record: &Record, snap: &Snapshot) -> Value {
        let (asset, vault) = self
            .config
            .fireblocks
            .as_ref()
            .map(|c| (c.asset_id.as_str(), c.vault_account_id.as_str()))
            .unwrap_or_default();
        let amount = to_whole(op.amount_wei, self.config.decimals);
        let mut value = json!({
            "id": record.id,
            "externalTxId": op.reference,
            "status": fireblocks_status(snap.stage),
            "subStatus": snap.sub_status,
            "txHash": snap.tx_hash.clone().unwrap_or_default(),
            "operation": "TRANSFER",
            "assetId": asset,
            "source": {"type": "VAULT_ACCOUNT", "id": vault, "name": ""},
            "sourceAddress": self.hot_wallet,
            "destination": {"type": "ONE_TIME_ADDRESS", "id": null, "name": "N/A"},
            "destinationAddress": op.destination,
            "amountInfo": {"amount": amount, "requestedAmount": amount},
            "numOfConfirmations": snap.confirmations,
            "createdAt": record.created_ms,
            "lastUpdated": snap.at_ms,
        });
        if let Some(map) = value.as_object_mut() {
            if let Some(replaced) = &snap.replaced_tx_hash {
                map.insert("replacedTxHash".to_owned(), json!(replaced));
            }
            if let Some(note) = &op.note {
                map.insert("note".to_owned(), json!(note));
            }
        }
        value
    }

    fn bitgo(&self, op: &Operation, record: &Record, snap: &Snapshot) -> Value {
        let (coin, wallet) = self
            .config
            .bitgo
            .as_ref()
            .map(|c| (c.coin.as_str(), c.wallet_id.as_str()))
            .unwrap_or_default();
        let amount = op.amount_wei.to_string();
        let mut value = json!({
            "id": record.id,
            "coin": coin,
            "wallet": wallet,
            "walletType": "hot",
            "type": "send",
            "sequenceId": op.reference,
            "state": bitgo_state(snap.stage),
            "valueString": format!("-{amount}"),
            "entries": [
                {"address": self.hot_wallet, "valueString": format!("-{amount}")},
                {"address": op.destination, "valueString": amount},
            ],
            "confirmations": snap.confirmations,
            "date": rfc3339(record.created_ms),
            "createdTime": rfc3339(record.created_ms),
        });
        if let (Some(map), Some(hash)) = (value.as_object_mut(), &snap.tx_hash) {
            map.insert("txid".to_owned(), json!(hash));
        }
        value
    }

    fn prime(&self, op: &Operation, record: &Record, snap: &Snapshot) -> Value {
        let (wallet, portfolio, symbol) = self
            .config
            .prime
            .as_ref()
            .map(|c| {
                let ids = (c.wallet_id.as_str(), c.portfolio_id.as_str());
                (ids.0, ids.1, c.currency_symbol.as_str())
            })
            .unwrap_or_default();
        let completed = match snap.stage {
            stage if stage.is_terminal() => rfc3339(snap.at_ms),
            _ => String::new(),
        };
        json!({
            "id": record.id,
            "wallet_id": wallet,
            "portfolio_id": portfolio,
            "type": "WITHDRAWAL",
            "status": prime_status(snap.stage),
            "symbol": symbol,
            "amount": to_whole(op.amount_wei, self.config.decimals),
            "created_at": rfc3339(record.created_ms),
            "completed_at": completed,
            "blockchain_ids": snap.hashes,
            "destination_address": op.destination,
            "destination_symbol": symbol,
            "network": "ethereum-mainnet",
        })
    }

    /// The webhook body of a record's new state (`created`: its first event).
    pub fn event(
        &self,
        op: &Operation,
        record: &Record,
        snap: &Snapshot,
        created: bool,
        event_id: &str,
    ) -> Value {
        let data = self.record(op, record, snap);
        match op.profile {
            Profile::Fireblocks => json!({
                "id": event_id,
                "eventType": if created { "transaction.created" } else { "transaction.status.updated" },
                "eventVersion": 1,
                "resourceId": record.id,
                "data": data,
                "createdAt": snap.at_ms,
                "workspaceId": self.config.fireblocks.as_ref().map(|c| c.workspace_id.as_str()),
            }),
            Profile::Bitgo => json!({
                "type": "transfer",
                "wallet": data.get("wallet"),
                "coin": data.get("coin"),
                "transfer": record.id,
                "hash": snap.tx_hash.clone().unwrap_or_default(),
                "state": bitgo_state(snap.stage),
                "sequenceId": op.reference,
            }),
            Profile::Prime => json!({
                "event_id": event_id,
                "event_type": if created { "TRANSACTION_CREATED" } else { "TRANSACTION_STATUS_UPDATED" },
                "portfolio_id": data.get("portfolio_id"),
                "created_at": rfc3339(snap.at_ms),
                "transaction": data,
            }),
        }
    }
}
