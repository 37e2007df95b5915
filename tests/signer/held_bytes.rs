//! Signed bytes leave the signer only once released (issue 25, finding 7). Adversaries: a caller
//! of the signer (the broadcaster's or the reconciler's token) asking for an attempt the
//! signed-bytes gate holds back, and each worker service's database login reading the bytes
//! itself. While the gate holds an attempt back, the answer names it (number, hash, nonce) and
//! carries no bytes, and no worker login can read them; once it is released, the same calls and
//! reads give exactly the stored bytes.
//!
//! An attempt is held back here in two ways the signer meets for real: its release write fails
//! after the acknowledged signing commit (the test takes the signer's right to write releases
//! away, so neither the sweep nor a later call can release it while that lasts), or its release
//! was lost (`hold_back_release`) while the sweep's probe holds its release row (a session of the
//! test holds the row lock, as a probe waiting for a missing standby does).

use opledger_domain::ids::OperationId;
use opledger_evm::signer::decode;
use opledger_proto::v1::{AttemptKind, SignReplacementRequest, SignResponse, SignedAttempt};
use opledger_store::{Store, StoreConfig};
use opledger_testkit::ServiceRole;
use opledger_tests::signer::{
    BROADCASTER_TOKEN, InProcessSigner, RECONCILER_TOKEN, approve, client, hold_back_release,
};
use opledger_tests::{ALICE, Stack, Tenant, authed};
use sqlx::PgPool;

/// The worker services' logins: none may read held-back bytes.
const WORKERS: [ServiceRole; 5] = [
    ServiceRole::Operations,
    ServiceRole::Approvals,
    ServiceRole::Broadcaster,
    ServiceRole::Reconciler,
    ServiceRole::Inbox,
];

/// Takes the signer's right to write releases away (or gives it back): its release after an
/// acknowledged commit fails, and so does every probe, until given back.
async fn releases_writable(admin: &PgPool, writable: bool) -> anyhow::Result<()> {
    let sql = if writable {
        "GRANT UPDATE (probed_at, released_at) ON attempt_releases TO opledger_signer"
    } else {
        "REVOKE UPDATE (probed_at, released_at) ON attempt_releases FROM opledger_signer"
    };
    sqlx::query(sql).execute(admin).await?;
    Ok(())
}

/// Attempt `attempt` of `op` as stored: bytes, hash, and whether it is released.
async fn stored(admin: &PgPool, op: uuid::Uuid, attempt: u32) -> anyhow::Result<Stored> {
    let (raw, hash, released): (Vec<u8>, String, bool) = sqlx::query_as(
        "SELECT a.raw_tx, a.tx_hash, r.released_at IS NOT NULL FROM tx_attempts a \
         JOIN attempt_releases r USING (tenant_id, op_id, attempt) \
         WHERE a.op_id = $1 AND a.attempt = $2",
    )
    .bind(op)
    .bind(i32::try_from(attempt)?)
    .fetch_one(admin)
    .await?;
    Ok(Stored {
        raw,
        hash,
        released,
    })
}

#[derive(Debug)]
struct Stored {
    raw: Vec<u8>,
    hash: String,
    released: bool,
}

/// The answer's attempt, checked to name `stored` (number, hash) without its bytes.
fn held_answer(answer: SignResponse, number: u32, stored: &Stored) -> anyhow::Result<()> {
    let a: SignedAttempt = answer
        .attempt
        .ok_or_else(|| anyhow::anyhow!("no attempt"))?;
    anyhow::ensure!(!stored.released, "the attempt is held back");
    anyhow::ensure!(
        a.raw_transaction.is_empty(),
        "held-back bytes were handed out"
    );
    anyhow::ensure!(
        a.attempt == number && a.tx_hash == stored.hash && !a.from_address.is_empty(),
        "the held-back attempt is named: {a:?}"
    );
    Ok(())
}

/// The answer's attempt, checked to carry exactly `stored`'s bytes.
fn released_answer(answer: SignResponse, number: u32, stored: &Stored) -> anyhow::Result<()> {
    let a = answer
        .attempt
        .ok_or_else(|| anyhow::anyhow!("no attempt"))?;
    anyhow::ensure!(stored.released, "the attempt is released");
    anyhow::ensure!(
        a.attempt == number && a.raw_transaction == stored.raw,
        "exactly the stored bytes"
    );
    anyhow::ensure!(format!("{:#x}", decode(&a.raw_transaction)?.hash) == stored.hash);
    Ok(())
}

/// A tenant with an approved withdrawal and a signer for it.
async fn approved(stack: &Stack) -> anyhow::Result<(Tenant, String, InProcessSigner)> {
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    Ok((acme, w.withdrawal_id, signer))
}

fn sign_as(
    token: &str,
    tenant: &Tenant,
    id: &str,
) -> tonic::Request<opledger_proto::v1::SignWithdrawalRequest> {
    authed(
        token,
        opledger_proto::v1::SignWithdrawalRequest {
            tenant_id: tenant.id.to_string(),
            withdrawal_id: id.to_owned(),
        },
    )
}

fn replace_as(
    token: &str,
    tenant: &Tenant,
    id: &str,
    kind: AttemptKind,
) -> tonic::Request<SignReplacementRequest> {
    authed(
        token,
        SignReplacementRequest {
            tenant_id: tenant.id.to_string(),
            withdrawal_id: id.to_owned(),
            kind: kind as i32,
        },
    )
}

#[tokio::test]
async fn broadcaster_caller_asking_sign_withdrawal_for_held_back_bytes_gets_none_until_release()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    let admin = stack.db.admin_pool().await?;
    let op: uuid::Uuid = id.parse()?;
    let mut calls = client(signer.addr).await?;
    releases_writable(&admin, false).await?;

    // Signed and persisted; its release failed: the answer names it, without bytes.
    let first = calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?
        .into_inner();
    anyhow::ensure!(!first.already_signed);
    held_answer(first, 1, &stored(&admin, op, 1).await?)?;
    // Asked again: still held back (the signer's probe cannot be written either).
    let again = calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?
        .into_inner();
    anyhow::ensure!(again.already_signed);
    held_answer(again, 1, &stored(&admin, op, 1).await?)?;

    // Releases work again: the next call releases it (a probe first) and answers its bytes.
    releases_writable(&admin, true).await?;
    let released = calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?
        .into_inner();
    anyhow::ensure!(released.already_signed);
    released_answer(released, 1, &stored(&admin, op, 1).await?)?;
    stack.assert_invariants().await
}

#[tokio::test]
async fn caller_asking_for_a_lost_release_gets_no_bytes_while_the_sweep_holds_its_probe()
-> anyhow::Result<()> {
    use sqlx::Connection as _;
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    let admin = stack.db.admin_pool().await?;
    let op: uuid::Uuid = id.parse()?;
    let mut calls = client(signer.addr).await?;
    calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?;
    anyhow::ensure!(stored(&admin, op, 1).await?.released);

    // The release was lost, and a probe of it waits (for a standby that is not there).
    let mut owner = sqlx::PgConnection::connect(&stack.db.url).await?;
    hold_back_release(&mut owner, op).await?;
    let mut probe = owner.begin().await?;
    sqlx::query("SELECT 1 FROM attempt_releases WHERE op_id = $1 FOR UPDATE")
        .bind(op)
        .execute(&mut *probe)
        .await?;
    let held = calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?
        .into_inner();
    anyhow::ensure!(held.already_signed);
    held_answer(held, 1, &stored(&admin, op, 1).await?)?;

    // The probe's session goes away: the call probes and releases it itself, then answers bytes.
    probe.rollback().await?;
    let released = calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?
        .into_inner();
    released_answer(released, 1, &stored(&admin, op, 1).await?)?;
    Ok(())
}

#[tokio::test]
async fn callers_asking_sign_replacement_get_no_bytes_of_a_held_back_replacement()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    let admin = stack.db.admin_pool().await?;
    let op: uuid::Uuid = id.parse()?;
    let mut calls = client(signer.addr).await?;
    calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?;
    let set_state = |state: &'static str| {
        let admin = admin.clone();
        async move {
            sqlx::query(
                "UPDATE withdrawal_ops SET state = $2, version = version + 1 WHERE op_id = $1",
            )
            .bind(op)
            .bind(state)
            .execute(&admin)
            .await
        }
    };
    set_state("BROADCAST").await?;
    releases_writable(&admin, false).await?;

    // The broadcaster's fee bump and the reconciler's cancel: persisted, their releases failed.
    let bump = calls
        .sign_replacement(replace_as(
            BROADCASTER_TOKEN,
            &acme,
            &id,
            AttemptKind::FeeBump,
        ))
        .await?
        .into_inner();
    held_answer(bump, 2, &stored(&admin, op, 2).await?)?;
    set_state("UNKNOWN").await?;
    // The signer itself still reads the held-back bump's bytes: it replaces it by content.
    let cancel = calls
        .sign_replacement(replace_as(
            RECONCILER_TOKEN,
            &acme,
            &id,
            AttemptKind::Cancel,
        ))
        .await?
        .into_inner();
    held_answer(cancel, 3, &stored(&admin, op, 3).await?)?;

    // Releases work again: a new replacement is answered with its bytes, and asking for the
    // withdrawal releases nothing it should not (its latest attempt, released by that call).
    releases_writable(&admin, true).await?;
    let again = calls
        .sign_replacement(replace_as(
            RECONCILER_TOKEN,
            &acme,
            &id,
            AttemptKind::Cancel,
        ))
        .await?
        .into_inner();
    released_answer(again, 4, &stored(&admin, op, 4).await?)?;
    let latest = calls
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?
        .into_inner();
    released_answer(latest, 4, &stored(&admin, op, 4).await?)?;
    Ok(())
}

#[tokio::test]
async fn worker_logins_reading_raw_tx_are_refused_and_see_only_released_bytes() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let (acme, held_id, signer) = approved(&stack).await?;
    let admin = stack.db.admin_pool().await?;
    let other = stack.withdraw(&acme, "2000", ALICE).await?;
    approve(&stack, &acme, &other).await?;
    let mut calls = client(signer.addr).await?;
    for id in [&held_id, &other.withdrawal_id] {
        calls
            .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, id))
            .await?;
    }
    // No sweep may release it behind the test's back from here on.
    drop(calls);
    drop(signer);
    let (held, released): (uuid::Uuid, uuid::Uuid) =
        (held_id.parse()?, other.withdrawal_id.parse()?);
    let mut owner = admin.acquire().await?;
    hold_back_release(&mut owner, held).await?;
    drop(owner);
    let (held_row, released_row) = (
        stored(&admin, held, 1).await?,
        stored(&admin, released, 1).await?,
    );
    anyhow::ensure!(!held_row.released && released_row.released);

    for role in WORKERS {
        let pool = stack.db.pool_as(role).await?;
        for sql in [
            "SELECT raw_tx FROM tx_attempts WHERE op_id = $1",
            "SELECT * FROM tx_attempts WHERE op_id = $1",
            "SELECT t::text FROM tx_attempts t WHERE op_id = $1",
            "SELECT 1 FROM tx_attempts WHERE op_id = $1 AND raw_tx IS NOT NULL",
        ] {
            let read: sqlx::Result<Vec<sqlx::postgres::PgRow>> =
                sqlx::query(sql).bind(held).fetch_all(&pool).await;
            let code = read.as_ref().err().and_then(|e| {
                e.as_database_error()
                    .and_then(|d| d.code().map(|c| c.into_owned()))
            });
            anyhow::ensure!(
                code.as_deref() == Some("42501"),
                "{role:?} ran {sql}: {:?}",
                read.map(|rows| rows.len())
            );
        }
        // Everything but the bytes stays readable: a held-back attempt exists, with its hash.
        let (hash, nonce): (String, i64) =
            sqlx::query_as("SELECT tx_hash, nonce FROM tx_attempts WHERE op_id = $1")
                .bind(held)
                .fetch_one(&pool)
                .await?;
        anyhow::ensure!(hash == held_row.hash && nonce == 0, "{role:?}");
        // Through the view: the held-back attempt without bytes, the released one with them.
        let rows: Vec<(uuid::Uuid, Option<Vec<u8>>, bool, String)> = sqlx::query_as(
            "SELECT op_id, raw_tx, released, tx_hash FROM released_attempts \
             WHERE op_id = ANY($1) ORDER BY nonce",
        )
        .bind(vec![held, released])
        .fetch_all(&pool)
        .await?;
        anyhow::ensure!(
            rows == vec![
                (held, None, false, held_row.hash.clone()),
                (
                    released,
                    Some(released_row.raw.clone()),
                    true,
                    released_row.hash.clone()
                ),
            ],
            "{role:?} read through released_attempts: {rows:?}"
        );
        pool.close().await;
    }
    // The signer keeps its own reads.
    let signer_pool = stack.db.pool_as(ServiceRole::Signer).await?;
    let (raw,): (Vec<u8>,) = sqlx::query_as("SELECT raw_tx FROM tx_attempts WHERE op_id = $1")
        .bind(held)
        .fetch_one(&signer_pool)
        .await?;
    anyhow::ensure!(raw == held_row.raw, "the signer reads the held-back bytes");
    Ok(())
}

#[tokio::test]
async fn worker_store_reads_name_held_back_attempts_without_their_bytes() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, id, signer) = approved(&stack).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_as(BROADCASTER_TOKEN, &acme, &id))
        .await?;
    drop(signer);
    let op: uuid::Uuid = id.parse()?;
    let admin = stack.db.admin_pool().await?;
    let released = stored(&admin, op, 1).await?;
    let key = (acme.id, OperationId::from_uuid(op));
    let connect = |role: ServiceRole| {
        let url = stack.db.url_as(role);
        async move {
            Store::connect(&url, StoreConfig::default())
                .await
                .map_err(|e| anyhow::anyhow!("{role:?}: {}", e.log_safe()))
        }
    };

    for role in [ServiceRole::Broadcaster, ServiceRole::Reconciler] {
        let store = connect(role).await?;
        let read = store
            .attempts(key.0, key.1)
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        anyhow::ensure!(
            read.len() == 1 && read[0].released && read[0].signed.raw_tx == released.raw,
            "{role:?} reads released bytes"
        );
        let refused = store.signed_attempts(key.0, key.1).await;
        anyhow::ensure!(
            refused.is_err(),
            "{role:?} read every attempt's bytes through the signer's query"
        );
    }

    let mut owner = admin.acquire().await?;
    hold_back_release(&mut owner, op).await?;
    drop(owner);
    for role in [ServiceRole::Broadcaster, ServiceRole::Reconciler] {
        let store = connect(role).await?;
        let read = store
            .attempts(key.0, key.1)
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        anyhow::ensure!(
            read.len() == 1
                && !read[0].released
                && read[0].signed.raw_tx.is_empty()
                && read[0].signed.tx_hash == released.hash
                && read[0].signed.nonce == 0,
            "{role:?}: the held-back attempt is named without its bytes"
        );
        // What the watcher judges leaves it out until it is released.
        let judged = store
            .attempts_of(&[key])
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        anyhow::ensure!(
            judged.get(&key).is_none_or(Vec::is_empty),
            "{role:?}: a held-back attempt is never judged by content"
        );
    }
    Ok(())
}
