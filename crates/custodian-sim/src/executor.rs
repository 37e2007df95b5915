//! A transfer's course after the accept, on a background task: authorization window, signing,
//! one broadcast, receipt, confirmations; or the outcome the fault schedule chose (rejected,
//! failed with a hash, replaced, retried). Every visible change is a webhook. The transfer pays
//! the native coin, or the token configured for the profile's asset (`tokens`).

use std::sync::Arc;

use anyhow::Context;

use crate::app::App;
use crate::chain::{Coin, Payment, Sent, SignedTx};
use crate::faults::FailedVariant;
use crate::profile::Profile;
use crate::record::{Operation, Outcome, Record, Snapshot, Stage};
use crate::state::ChainTransfer;
use crate::views::status_of;
use crate::webhooks::Outgoing;

/// Polls between two re-sends of a transaction not yet mined.
const RESEND_EVERY: u32 = 40;

/// Which operation a task drives.
#[derive(Debug, Clone)]
pub struct Key {
    /// The profile.
    pub profile: Profile,
    /// Our reference.
    pub reference: String,
}

/// The first state of a record.
pub fn submitted(at_ms: i64) -> Snapshot {
    Snapshot {
        stage: Stage::Submitted,
        sub_status: String::new(),
        tx_hash: None,
        replaced_tx_hash: None,
        hashes: Vec::new(),
        confirmations: 0,
        at_ms,
    }
}

/// Drives an accepted operation to its end (spawn it).
pub async fn run(app: Arc<App>, key: Key) {
    emit(&app, &key, 0, true).await;
    if let Err(e) = drive(&app, &key).await {
        tracing::warn!(reference = %key.reference, "transfer stopped: {e:#}");
        let last = app
            .shared
            .op(key.profile, &key.reference)
            .map_or(0, |op| op.records.len().saturating_sub(1));
        step(&app, &key, last, |s| {
            if !s.stage.is_terminal() && s.tx_hash.is_none() {
                s.stage = Stage::Failed;
                s.sub_status = "NETWORK_ERROR".to_owned();
            }
        })
        .await;
    }
}

/// Emits the webhook of record `index`'s current state.
async fn emit(app: &Arc<App>, key: &Key, index: usize, created: bool) {
    let event = app.shared.update(key.profile, &key.reference, |op| {
        let record = op.records.get(index)?;
        Some(outgoing(app, op, record, record.current(), created))
    });
    if let Some(Some((out, plan))) = event {
        app.hub.emit(out, &plan).await;
    }
}

fn outgoing(
    app: &App,
    op: &Operation,
    record: &Record,
    snap: &Snapshot,
    created: bool,
) -> (Outgoing, crate::record::WebhookPlan) {
    let event_id = uuid::Uuid::new_v4().to_string();
    let body = app.views().event(op, record, snap, created, &event_id);
    let out = Outgoing {
        profile: op.profile,
        reference: op.reference.clone(),
        event_id,
        body: body.to_string().into_bytes(),
        terminal: snap.stage.is_terminal(),
        created_ms: snap.at_ms,
    };
    (out, op.plan.webhooks.clone())
}

/// Moves record `index` to a new state; a webhook when the profile shows a change.
async fn step(app: &Arc<App>, key: &Key, index: usize, change: impl FnOnce(&mut Snapshot)) {
    let now = app.now_ms();
    let event = app.shared.update(key.profile, &key.reference, |op| {
        let record = op.records.get_mut(index)?;
        let before = record.current().clone();
        let mut next = before.clone();
        change(&mut next);
        if next == before {
            return None;
        }
        next.at_ms = now;
        record.push(next.clone());
        let visible = status_of(op.profile, before.stage) != status_of(op.profile, next.stage)
            || before.sub_status != next.sub_status
            || before.tx_hash != next.tx_hash;
        let record = op.records.get(index)?;
        visible.then(|| outgoing(app, op, record, &next, false))
    });
    if let Some(Some((out, plan))) = event {
        app.hub.emit(out, &plan).await;
    }
}

/// Adds a record (a replacement transfer, a retried transaction) in `first`; gives its index.
async fn add_record(app: &Arc<App>, key: &Key, first: Snapshot) -> usize {
    let id = new_id(key.profile);
    let index = app.shared.update(key.profile, &key.reference, |op| {
        op.records.push(Record::new(id, first));
        op.records.len() - 1
    });
    let index = index.unwrap_or_default();
    emit(app, key, index, true).await;
    index
}

/// A new provider id (UUID; 24 hex digits for BitGo, like its object ids).
pub fn new_id(profile: Profile) -> String {
    let id = uuid::Uuid::new_v4();
    match profile {
        Profile::Bitgo => id.simple().to_string()[..24].to_owned(),
        _ => id.to_string(),
    }
}

fn set_hash(snap: &mut Snapshot, hash: &str) {
    snap.tx_hash = Some(hash.to_owned());
    if !snap.hashes.iter().any(|h| h == hash) {
        snap.hashes.push(hash.to_owned());
    }
}

fn stage(to: Stage) -> impl FnOnce(&mut Snapshot) {
    move |s: &mut Snapshot| s.stage = to
}

fn fail(sub_status: &str) -> impl FnOnce(&mut Snapshot) + '_ {
    move |s: &mut Snapshot| {
        s.stage = Stage::Failed;
        s.sub_status = sub_status.to_owned();
    }
}

async fn drive(app: &Arc<App>, key: &Key) -> anyhow::Result<()> {
    let op = app
        .shared
        .op(key.profile, &key.reference)
        .ok_or_else(|| anyhow::anyhow!("operation gone"))?;
    let clock = app.shared.clock.clone();
    step(app, key, 0, stage(Stage::PendingAuthorization)).await;
    let authorized_at = op
        .accepted_ms
        .saturating_add(app.timing(key.profile).authorization_delay_ms);
    if let Outcome::Reject {
        blocked,
        sub_status,
        hold_ms,
    } = &op.plan.outcome
    {
        clock
            .sleep_until(authorized_at.saturating_add(*hold_ms))
            .await;
        let to = if *blocked {
            Stage::Blocked
        } else {
            Stage::Rejected
        };
        step(app, key, 0, |s| {
            s.stage = to;
            s.sub_status = sub_status.clone();
        })
        .await;
        return Ok(());
    }
    clock.sleep_until(authorized_at).await;
    step(app, key, 0, stage(Stage::Queued)).await;
    step(app, key, 0, stage(Stage::PendingSignature)).await;
    let mut index = 0;
    if op.plan.outcome == Outcome::Retried {
        step(app, key, 0, stage(Stage::Retried)).await;
        index = add_record(app, key, submitted(app.now_ms())).await;
        step(app, key, index, stage(Stage::Queued)).await;
        step(app, key, index, stage(Stage::PendingSignature)).await;
    }
    if let Some(hash) = &app.config.names_hash {
        return named(app, key, index, hash).await;
    }
    let payment = payment(app, key, &op)?;
    let sent = match op.plan.outcome {
        Outcome::Failed {
            variant: FailedVariant::NotBroadcast,
        } => return unsent(app, key, index, payment).await,
        Outcome::Replacement => replaced(app, key, index, payment).await?,
        _ => broadcast(app, key, index, payment).await?,
    };
    match sent {
        Some((index, tx)) => follow(app, key, index, &tx, &op).await,
        None => Ok(()),
    }
}

/// What `op` pays on chain: its amount in the profile's coin (the native one, or the token
/// configured for its asset), to its destination (or to `divert_to`, when the double is told to
/// misdirect its payouts).
fn payment(app: &App, key: &Key, op: &Operation) -> anyhow::Result<Payment> {
    let coin = match app.config.token_of(key.profile) {
        Some(contract) => Coin::Token(contract.parse().context("token contract")?),
        None => Coin::Native,
    };
    let to = app.config.divert_to.as_deref().unwrap_or(&op.destination);
    Ok(Payment {
        coin,
        to: to.parse().context("destination address")?,
        amount: op.amount_wei,
    })
}

/// The address a transfer of `op` paid, as the transfer log shows it.
fn paid_to(app: &App, op: &Operation) -> String {
    match &app.config.divert_to {
        Some(elsewhere) => elsewhere.to_ascii_lowercase(),
        None => op.destination.clone(),
    }
}

/// `names_hash` (adversarial tests): nothing is paid; the record names a transaction already on
/// chain and completes as if it were the payout.
async fn named(app: &Arc<App>, key: &Key, index: usize, hash: &str) -> anyhow::Result<()> {
    let hash = hash.to_ascii_lowercase();
    let confirmations = app.config.confirmations;
    step(app, key, index, |s| {
        s.stage = Stage::Broadcasting;
        set_hash(s, &hash);
    })
    .await;
    step(app, key, index, |s| {
        s.stage = Stage::Completed;
        s.confirmations = confirmations;
    })
    .await;
    Ok(())
}

/// Fault 8b: signed, hash reported, never broadcast.
async fn unsent(app: &Arc<App>, key: &Key, index: usize, payment: Payment) -> anyhow::Result<()> {
    let tx = app.chain.sign_unsent(payment).await?;
    step(app, key, index, |s| {
        s.stage = Stage::Broadcasting;
        set_hash(s, &tx.hash);
    })
    .await;
    step(app, key, index, fail("DROPPED_BY_BLOCKCHAIN")).await;
    Ok(())
}

fn refused_sub_status(message: &str) -> &'static str {
    if message.contains("insufficient funds") {
        "INSUFFICIENT_FUNDS"
    } else {
        "NETWORK_ERROR"
    }
}

fn log_transfer(app: &App, key: &Key, index: usize, tx: &SignedTx, replaced: Vec<String>) {
    let op = app.shared.op(key.profile, &key.reference);
    let Some(op) = op else { return };
    let provider_id = op
        .records
        .get(index)
        .map(|r| r.id.clone())
        .unwrap_or_default();
    app.shared.log_transfer(ChainTransfer {
        reference: key.reference.clone(),
        profile: key.profile,
        provider_id,
        hash: tx.hash.clone(),
        nonce: tx.nonce,
        destination: paid_to(app, &op),
        amount_wei: op.amount_wei.to_string(),
        replaced_hashes: replaced,
        at_ms: app.now_ms(),
    });
}

/// The one broadcast of a transfer.
async fn broadcast(
    app: &Arc<App>,
    key: &Key,
    index: usize,
    payment: Payment,
) -> anyhow::Result<Option<(usize, SignedTx)>> {
    match app.chain.send(payment).await? {
        Sent::Refused(message) => {
            step(app, key, index, fail(refused_sub_status(&message))).await;
            Ok(None)
        }
        Sent::Accepted(tx) | Sent::Unknown(tx) => {
            log_transfer(app, key, index, &tx, Vec::new());
            step(app, key, index, |s| {
                s.stage = Stage::Broadcasting;
                set_hash(s, &tx.hash);
            })
            .await;
            Ok(Some((index, tx)))
        }
    }
}

/// Fault 9: a first signature reported, replaced at the same nonce; only the second is sent.
async fn replaced(
    app: &Arc<App>,
    key: &Key,
    index: usize,
    payment: Payment,
) -> anyhow::Result<Option<(usize, SignedTx)>> {
    let (first, sent) = app.chain.send_replaced(payment).await?;
    step(app, key, index, |s| {
        s.stage = Stage::Broadcasting;
        set_hash(s, &first.hash);
    })
    .await;
    let second = match sent {
        Sent::Refused(message) => {
            step(app, key, index, fail(refused_sub_status(&message))).await;
            return Ok(None);
        }
        Sent::Accepted(tx) | Sent::Unknown(tx) => tx,
    };
    let index = if key.profile == Profile::Bitgo {
        step(app, key, index, stage(Stage::Replaced)).await;
        let mut next = submitted(app.now_ms());
        next.stage = Stage::Broadcasting;
        next.replaced_tx_hash = Some(first.hash.clone());
        set_hash(&mut next, &second.hash);
        add_record(app, key, next).await
    } else {
        step(app, key, index, |s| {
            s.replaced_tx_hash = Some(first.hash.clone());
            set_hash(s, &second.hash);
        })
        .await;
        index
    };
    log_transfer(app, key, index, &second, vec![first.hash.clone()]);
    Ok(Some((index, second)))
}

/// Waits for the receipt and the confirmations (re-sending the same bytes while not mined).
async fn follow(
    app: &Arc<App>,
    key: &Key,
    index: usize,
    tx: &SignedTx,
    op: &Operation,
) -> anyhow::Result<()> {
    let mut polls = 0_u32;
    let receipt = loop {
        if let Ok(Some(receipt)) = app.chain.receipt(&tx.hash).await {
            break receipt;
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(RESEND_EVERY) {
            app.chain.resend(tx).await;
        }
        tokio::time::sleep(app.chain.poll).await;
    };
    if !receipt.success {
        step(app, key, index, fail("REJECTED_BY_BLOCKCHAIN")).await;
        return Ok(());
    }
    let needed = app.config.confirmations;
    let mut seen = confirmations(app, receipt.block).await;
    step(app, key, index, |s| {
        s.stage = Stage::Confirming;
        s.confirmations = seen;
    })
    .await;
    if let Outcome::Failed {
        variant: FailedVariant::Mined,
    } = op.plan.outcome
    {
        step(app, key, index, fail("INTERNAL_ERROR")).await;
        return Ok(());
    }
    while seen < needed {
        tokio::time::sleep(app.chain.poll).await;
        let now = confirmations(app, receipt.block).await;
        if now != seen {
            seen = now;
            app.shared.update(key.profile, &key.reference, |op| {
                if let Some(record) = op.records.get_mut(index) {
                    record.amend(|s| s.confirmations = now);
                }
            });
        }
    }
    step(app, key, index, |s| {
        s.stage = Stage::Completed;
        s.confirmations = seen;
    })
    .await;
    Ok(())
}

async fn confirmations(app: &App, block: u64) -> u64 {
    match app.chain.block_number().await {
        Ok(head) => head.saturating_sub(block).saturating_add(1),
        Err(_) => 0,
    }
}
