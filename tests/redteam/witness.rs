//! Adversaries of the release of a signed withdrawal's hold (issue 25, finding 2): it needs the
//! reconciler's proposal and the witness's attestation of the same chain evidence, enforced by
//! the database. Each scenario starts from a withdrawal whose transfer is signed and broadcast
//! (its payout can still be mined) and plays one principal alone with everything its login
//! allows; the hold must stay OPEN and the balances unchanged. The baseline, both principals
//! honest on a real final cancel, is `tests/reconciler/dropped.rs`.

use crate::forge::Outcome;
use opledger_testkit::ServiceRole;
use opledger_tests::chain::{Chain, broadcaster_config, witness};
use opledger_tests::signer::approve;
use opledger_tests::{BOB, Stack, Tenant};
use sqlx::PgPool;
use std::future::Future;
use std::pin::Pin;

type Scenario = Pin<Box<dyn Future<Output = anyhow::Result<Outcome>> + Send>>;

/// Every scenario, named after its adversary.
pub fn scenarios() -> Vec<(&'static str, Scenario)> {
    vec![
        (
            "reconciler_login_moving_a_broadcast_withdrawal_to_verified_not_sent_and_releasing",
            Box::pin(reconciler_login_alone(Forgery::None)),
        ),
        (
            "reconciler_login_proposing_invented_evidence_and_releasing",
            Box::pin(reconciler_login_alone(Forgery::Proposal)),
        ),
        (
            "reconciler_login_writing_the_witness_attestation_itself",
            Box::pin(reconciler_login_alone(Forgery::Attestation)),
        ),
        (
            "witness_login_attesting_and_releasing_without_a_proposal",
            Box::pin(witness_login_alone()),
        ),
        (
            "reconciler_login_proposal_that_the_witness_chain_reading_contradicts",
            Box::pin(contradicted_proposal()),
        ),
    ]
}

/// A signed and broadcast withdrawal of 0.007 ETH (its transfer mined, not final).
struct Broadcast {
    chain: Chain,
    op: uuid::Uuid,
    id: String,
}

async fn broadcast() -> anyhow::Result<Broadcast> {
    let chain = Chain::start().await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&chain.stack, &chain.signer, &chain.node.rpc_url()),
        chain.stack.admin.broadcaster(),
    )?;
    let w = chain
        .stack
        .withdraw(&chain.acme, "7000000000000000", BOB)
        .await?;
    approve(&chain.stack, &chain.acme, &w).await?;
    // A pass may find the attempt still held back by the signed-bytes gate (its release commits
    // just after the signature): it is sent on a later pass.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while chain.stack.state(&w.withdrawal_id).await? != "BROADCAST" {
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "never broadcast");
        broadcaster.tick(64, 8).await;
    }
    Ok(Broadcast {
        op: w.withdrawal_id.parse()?,
        id: w.withdrawal_id,
        chain,
    })
}

/// The hold's status and the account's (available, held), as the owner reads them.
async fn ledger(stack: &Stack, tenant: &Tenant, op: uuid::Uuid) -> anyhow::Result<String> {
    let (status,): (String,) = sqlx::query_as("SELECT status FROM ledger_holds WHERE op_id = $1")
        .bind(op)
        .fetch_one(stack.admin.pool())
        .await?;
    let (available, held) = stack.balance(tenant.id, "treasury", "ETH").await?;
    Ok(format!("{status}|{available}|{held}"))
}

/// Runs `sql` with the operation and tenant bound as $1 and $2; the error, if any, is kept.
async fn run(pool: &PgPool, sql: &str, b: &Broadcast) -> Result<(), sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(b.op)
        .bind(b.chain.acme.id.as_uuid())
        .execute(pool)
        .await
        .map(|_| ())
}

/// An invented proof: a transaction and block the chain never had.
const INVENTED: &str = "($2, $1, '0x1111111111111111111111111111111111111111111111111111111111111111', \
     7, '0x2222222222222222222222222222222222222222222222222222222222222222'";

/// The moves and the release the reconciler's login may attempt.
const MOVE_TO_UNKNOWN: &str = "UPDATE withdrawal_ops SET state = 'UNKNOWN', last_actor = 'reconciler', \
     version = version + 1 WHERE op_id = $1 AND tenant_id = $2 AND state = 'BROADCAST'";
const MOVE_TO_VERIFIED: &str = "UPDATE withdrawal_ops SET state = 'VERIFIED_NOT_SENT', \
     last_actor = 'reconciler', version = version + 1 WHERE op_id = $1 AND tenant_id = $2 \
     AND state = 'UNKNOWN'";
const RELEASE: &str = "SELECT opledger_resolve_hold($2, $1, 'RELEASE')";
const RELEASE_BATCH: &str =
    "SELECT opledger_resolve_holds($2, ARRAY[$1, $1], ARRAY['RELEASE', 'RELEASE'])";

#[derive(Debug, Clone, Copy)]
enum Forgery {
    /// Only moves and release calls.
    None,
    /// Also a proposal naming an invented transaction and block.
    Proposal,
    /// Also the witness's attestation, inserted with its own login.
    Attestation,
}

/// The compromised reconciler login alone: the moves its actor may make, a proposal of its own
/// invention, an attestation it may not write, and the release in both forms.
async fn reconciler_login_alone(forgery: Forgery) -> anyhow::Result<Outcome> {
    let b = broadcast().await?;
    let (stack, acme) = (&b.chain.stack, &b.chain.acme);
    let before = ledger(stack, acme, b.op).await?;
    let login = stack.db.pool_as(ServiceRole::Reconciler).await?;
    run(&login, MOVE_TO_UNKNOWN, &b).await?;
    match forgery {
        Forgery::None => {}
        Forgery::Proposal => {
            let propose = format!(
                "INSERT INTO release_proposals (tenant_id, op_id, tx_hash, block_number, \
                 block_hash, principal, principal_id) VALUES {INVENTED}, 'reconciler', 'x')"
            );
            run(&login, &propose, &b).await?;
        }
        Forgery::Attestation => {
            let propose = format!(
                "INSERT INTO release_proposals (tenant_id, op_id, tx_hash, block_number, \
                 block_hash, principal, principal_id) VALUES {INVENTED}, 'reconciler', 'x')"
            );
            run(&login, &propose, &b).await?;
            let attest = format!(
                "INSERT INTO release_attestations (tenant_id, op_id, tx_hash, block_number, \
                 block_hash, witness_id) VALUES {INVENTED}, 'witness')"
            );
            let refused = run(&login, &attest, &b).await;
            anyhow::ensure!(
                denied(&refused),
                "the reconciler's login wrote an attestation: {refused:?}"
            );
        }
    }
    release_in_one_transaction(&login, &b).await?;
    let after = ledger(stack, acme, b.op).await?;
    if after != before {
        return Ok(Outcome::Released);
    }
    anyhow::ensure!(after.starts_with("OPEN|"), "hold {after}");
    anyhow::ensure!(stack.state(&b.id).await? == "UNKNOWN", "the state moved");
    Ok(Outcome::Refused)
}

/// The attacker's best try with the reconciler's login: in one transaction, the move to
/// VERIFIED_NOT_SENT and the release in both forms. Without the witness no hold moves, and the
/// database refuses to commit a VERIFIED_NOT_SENT whose hold is not released (a "not sent"
/// verdict no witness backed). Fails the scenario if the commit goes through.
async fn release_in_one_transaction(login: &PgPool, b: &Broadcast) -> anyhow::Result<()> {
    let mut tx = login.begin().await?;
    for sql in [MOVE_TO_VERIFIED, RELEASE, RELEASE_BATCH] {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .bind(b.op)
            .bind(b.chain.acme.id.as_uuid())
            .execute(&mut *tx)
            .await?;
    }
    let committed = tx.commit().await;
    anyhow::ensure!(
        matches!(&committed, Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501")),
        "VERIFIED_NOT_SENT committed with an unreleased hold: {committed:?}"
    );
    Ok(())
}

/// True when the database refused for lack of privilege.
fn denied(result: &Result<(), sqlx::Error>) -> bool {
    matches!(result, Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501"))
}

/// The compromised witness login alone: an attestation with no proposal behind it, a proposal
/// it may not write, a state move and the release it may not call.
async fn witness_login_alone() -> anyhow::Result<Outcome> {
    let b = broadcast().await?;
    let (stack, acme) = (&b.chain.stack, &b.chain.acme);
    let before = ledger(stack, acme, b.op).await?;
    let login = stack.db.pool_as(ServiceRole::Witness).await?;
    let attest = format!(
        "INSERT INTO release_attestations (tenant_id, op_id, tx_hash, block_number, block_hash, \
         witness_id) VALUES {INVENTED}, 'witness')"
    );
    let orphan = run(&login, &attest, &b).await;
    anyhow::ensure!(
        matches!(&orphan, Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23503")),
        "an attestation without a proposal was accepted: {orphan:?}"
    );
    let propose = format!(
        "INSERT INTO release_proposals (tenant_id, op_id, tx_hash, block_number, block_hash, \
         principal, principal_id) VALUES {INVENTED}, 'reconciler', 'x')"
    );
    for sql in [propose.as_str(), MOVE_TO_UNKNOWN, RELEASE, RELEASE_BATCH] {
        let refused = run(&login, sql, &b).await;
        anyhow::ensure!(
            denied(&refused),
            "the witness's login ran {sql}: {refused:?}"
        );
    }
    let after = ledger(stack, acme, b.op).await?;
    if after != before || stack.state(&b.id).await? != "BROADCAST" {
        return Ok(Outcome::Released);
    }
    Ok(Outcome::Refused)
}

/// The reconciler's login proposes, with invented evidence, the release of a withdrawal whose
/// transfer is on chain; the real witness reads the chain and refuses for good; the hold stays.
async fn contradicted_proposal() -> anyhow::Result<Outcome> {
    let b = broadcast().await?;
    let (stack, acme) = (&b.chain.stack, &b.chain.acme);
    let before = ledger(stack, acme, b.op).await?;
    let login = stack.db.pool_as(ServiceRole::Reconciler).await?;
    run(&login, MOVE_TO_UNKNOWN, &b).await?;
    let propose = format!(
        "INSERT INTO release_proposals (tenant_id, op_id, tx_hash, block_number, block_hash, \
         principal, principal_id) VALUES {INVENTED}, 'reconciler', 'x')"
    );
    run(&login, &propose, &b).await?;
    // The transfer is final by the time the witness reads.
    b.chain
        .node
        .mine(opledger_tests::chain::CONFIRMATIONS)
        .await?;
    let witness = witness(stack, &[&b.chain.node.rpc_url()], 1).await?;
    let outcomes = witness.tick(64).await;
    anyhow::ensure!(
        outcomes
            == [opledger_witness::Outcome::Refused(
                "WITNESS_EVIDENCE_CONTRADICTS"
            )],
        "the witness answered {outcomes:?}"
    );
    // Refused for good: not examined again, and counted in the witness's lag.
    anyhow::ensure!(witness.tick(64).await.is_empty(), "examined again");
    anyhow::ensure!(
        stack.admin.oldest_unwitnessed_secs().await?.is_some(),
        "the refused proposal is not in the witness's lag"
    );
    release_in_one_transaction(&login, &b).await?;
    if ledger(stack, acme, b.op).await? != before {
        return Ok(Outcome::Released);
    }
    Ok(Outcome::Refused)
}
