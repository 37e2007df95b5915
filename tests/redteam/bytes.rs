//! Held-back signed bytes (issue 25, finding 7): the signed-bytes gate holds an attempt back until
//! the signer saw its commit acknowledged by the synchronous standby; bytes handed out before that
//! could be broadcast, then lost in a failover with their nonce signed again: paid twice. Each
//! scenario plays one adversary after those bytes: a caller of the signer (the broadcaster's or
//! the reconciler's token) asking for them, or a worker service's database login reading them. A
//! scenario is [`Outcome::Refused`] when the adversary got no byte of a held-back attempt (and the
//! attempt was still named: number and hash), [`Outcome::Signed`] when it got them.
//!
//! Attempts are held back as the signer meets them for real: a release write that fails after the
//! acknowledged signing commit (the signer's right to write releases taken away for the scenario,
//! so neither its sweep nor a later call can release it meanwhile), or a lost release
//! (`hold_back_release`) whose probe is waiting (its release row locked by another session).

use super::forge::Outcome;
use opledger_proto::v1::{
    AttemptKind, SignReplacementRequest, SignResponse, SignWithdrawalRequest,
};
use opledger_testkit::ServiceRole;
use opledger_tests::signer::{
    BROADCASTER_TOKEN, InProcessSigner, RECONCILER_TOKEN, approve, client, hold_back_release,
};
use opledger_tests::{ALICE, Stack, Tenant, authed};
use sqlx::PgPool;
use std::future::Future;
use std::pin::Pin;

type Scenario = Pin<Box<dyn Future<Output = anyhow::Result<Outcome>> + Send>>;

/// Every scenario, named after its adversary.
pub fn scenarios() -> Vec<(&'static str, Scenario)> {
    vec![
        (
            "broadcaster_caller_asking_sign_withdrawal_for_held_back_bytes_is_refused",
            Box::pin(caller_asks_sign_withdrawal()),
        ),
        (
            "broadcaster_caller_asking_for_a_lost_release_while_its_probe_waits_is_refused",
            Box::pin(caller_asks_while_probe_waits()),
        ),
        (
            "reconciler_caller_asking_sign_replacement_for_held_back_cancel_bytes_is_refused",
            Box::pin(caller_asks_sign_replacement()),
        ),
        (
            "operations_login_reading_held_back_bytes_is_refused",
            Box::pin(login_reads(ServiceRole::Operations)),
        ),
        (
            "approvals_login_reading_held_back_bytes_is_refused",
            Box::pin(login_reads(ServiceRole::Approvals)),
        ),
        (
            "broadcaster_login_reading_held_back_bytes_is_refused",
            Box::pin(login_reads(ServiceRole::Broadcaster)),
        ),
        (
            "reconciler_login_reading_held_back_bytes_is_refused",
            Box::pin(login_reads(ServiceRole::Reconciler)),
        ),
        (
            "inbox_login_reading_held_back_bytes_is_refused",
            Box::pin(login_reads(ServiceRole::Inbox)),
        ),
    ]
}

/// A tenant with an approved withdrawal (its id) and a signer for it.
async fn approved(stack: &Stack) -> anyhow::Result<(Tenant, String, InProcessSigner)> {
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    Ok((acme, w.withdrawal_id, signer))
}

/// Takes the signer's right to write releases away: its release after an acknowledged commit
/// fails, and so does every probe, for as long as the scenario runs.
async fn releases_fail(admin: &PgPool) -> anyhow::Result<()> {
    sqlx::query("REVOKE UPDATE (probed_at, released_at) ON attempt_releases FROM opledger_signer")
        .execute(admin)
        .await?;
    Ok(())
}

/// Attempt `number` of `op` as stored: its hash, and whether it is released.
async fn stored(admin: &PgPool, op: uuid::Uuid, number: u32) -> anyhow::Result<(String, bool)> {
    Ok(sqlx::query_as(
        "SELECT a.tx_hash, r.released_at IS NOT NULL FROM tx_attempts a \
         JOIN attempt_releases r USING (tenant_id, op_id, attempt) \
         WHERE a.op_id = $1 AND a.attempt = $2",
    )
    .bind(op)
    .bind(i32::try_from(number)?)
    .fetch_one(admin)
    .await?)
}

/// The outcome of an answer about attempt `number` of `op`, which must still be held back:
/// Signed when it carries bytes; an error when it does not name that attempt.
async fn judge(
    admin: &PgPool,
    op: uuid::Uuid,
    number: u32,
    answer: SignResponse,
) -> anyhow::Result<Outcome> {
    let attempt = answer
        .attempt
        .ok_or_else(|| anyhow::anyhow!("no attempt named"))?;
    let (hash, released) = stored(admin, op, number).await?;
    anyhow::ensure!(
        !released,
        "the attempt was released: the scenario proves nothing"
    );
    anyhow::ensure!(
        attempt.attempt == number && attempt.tx_hash == hash,
        "the held-back attempt is not named"
    );
    Ok(if attempt.raw_transaction.is_empty() {
        Outcome::Refused
    } else {
        Outcome::Signed
    })
}

fn sign_request(token: &str, tenant: &Tenant, id: &str) -> tonic::Request<SignWithdrawalRequest> {
    authed(
        token,
        SignWithdrawalRequest {
            tenant_id: tenant.id.to_string(),
            withdrawal_id: id.to_owned(),
        },
    )
}

/// The broadcaster's token asks SignWithdrawal for an attempt whose release failed, when it is
/// signed and again afterwards.
async fn caller_asks_sign_withdrawal() -> anyhow::Result<Outcome> {
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    let admin = stack.db.admin_pool().await?;
    let op: uuid::Uuid = id.parse()?;
    releases_fail(&admin).await?;
    let mut calls = client(signer.addr).await?;
    let mut outcome = Outcome::Refused;
    for _ in 0..2 {
        let answer = calls
            .sign_withdrawal(sign_request(BROADCASTER_TOKEN, &acme, &id))
            .await?
            .into_inner();
        if judge(&admin, op, 1, answer).await? == Outcome::Signed {
            outcome = Outcome::Signed;
        }
    }
    Ok(outcome)
}

/// The broadcaster's token asks SignWithdrawal for an attempt whose release was lost while the
/// sweep's probe of it waits (its release row locked).
async fn caller_asks_while_probe_waits() -> anyhow::Result<Outcome> {
    use sqlx::Connection as _;
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    let admin = stack.db.admin_pool().await?;
    let op: uuid::Uuid = id.parse()?;
    let mut calls = client(signer.addr).await?;
    calls
        .sign_withdrawal(sign_request(BROADCASTER_TOKEN, &acme, &id))
        .await?;
    let mut owner = sqlx::PgConnection::connect(&stack.db.url).await?;
    hold_back_release(&mut owner, op).await?;
    let mut probe = owner.begin().await?;
    sqlx::query("SELECT 1 FROM attempt_releases WHERE op_id = $1 FOR UPDATE")
        .bind(op)
        .execute(&mut *probe)
        .await?;
    let answer = calls
        .sign_withdrawal(sign_request(BROADCASTER_TOKEN, &acme, &id))
        .await?
        .into_inner();
    let outcome = judge(&admin, op, 1, answer).await;
    probe.rollback().await?;
    outcome
}

/// The reconciler's token asks SignReplacement for a cancel whose release fails.
async fn caller_asks_sign_replacement() -> anyhow::Result<Outcome> {
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    let admin = stack.db.admin_pool().await?;
    let op: uuid::Uuid = id.parse()?;
    let mut calls = client(signer.addr).await?;
    calls
        .sign_withdrawal(sign_request(BROADCASTER_TOKEN, &acme, &id))
        .await?;
    sqlx::query(
        "UPDATE withdrawal_ops SET state = 'UNKNOWN', version = version + 1 WHERE op_id = $1",
    )
    .bind(op)
    .execute(&admin)
    .await?;
    releases_fail(&admin).await?;
    let answer = calls
        .sign_replacement(authed(
            RECONCILER_TOKEN,
            SignReplacementRequest {
                tenant_id: acme.id.to_string(),
                withdrawal_id: id.clone(),
                kind: AttemptKind::Cancel as i32,
            },
        ))
        .await?
        .into_inner();
    judge(&admin, op, 2, answer).await
}

/// A worker's login reads a held-back attempt's bytes: directly (every way of naming the column)
/// and through `released_attempts`.
async fn login_reads(role: ServiceRole) -> anyhow::Result<Outcome> {
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(BROADCASTER_TOKEN, &acme, &id))
        .await?;
    // No sweep may release it behind the scenario's back from here on.
    drop(signer);
    let op: uuid::Uuid = id.parse()?;
    let admin = stack.db.admin_pool().await?;
    hold_back_release(&mut *admin.acquire().await?, op).await?;
    let (hash, released) = stored(&admin, op, 1).await?;
    anyhow::ensure!(!released, "held back");

    let pool = stack.db.pool_as(role).await?;
    let mut outcome = Outcome::Refused;
    for sql in [
        "SELECT raw_tx FROM tx_attempts WHERE op_id = $1",
        "SELECT * FROM tx_attempts WHERE op_id = $1",
        "SELECT t::text FROM tx_attempts t WHERE op_id = $1",
        "SELECT 1 FROM tx_attempts WHERE op_id = $1 AND raw_tx IS NOT NULL",
    ] {
        let read: sqlx::Result<Vec<sqlx::postgres::PgRow>> =
            sqlx::query(sql).bind(op).fetch_all(&pool).await;
        match read {
            Ok(_) => outcome = Outcome::Signed,
            Err(e) => {
                let code = e.as_database_error().and_then(|d| d.code());
                anyhow::ensure!(
                    code.as_deref() == Some("42501"),
                    "{sql}: refused, but not for want of privilege: {e}"
                );
            }
        }
    }
    // Through the view: named (hash, nonce), never with its bytes.
    let (raw, named, nonce): (Option<Vec<u8>>, String, i64) = sqlx::query_as(
        "SELECT raw_tx, tx_hash, nonce FROM released_attempts WHERE op_id = $1 AND attempt = 1",
    )
    .bind(op)
    .fetch_one(&pool)
    .await?;
    anyhow::ensure!(
        named == hash && nonce == 0,
        "the held-back attempt is named"
    );
    if raw.is_some() {
        outcome = Outcome::Signed;
    }
    pool.close().await;
    Ok(outcome)
}
