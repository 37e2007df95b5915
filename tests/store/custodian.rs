//! The database's rules for withdrawals a custodian executes (migration 32), each played by the
//! login that would break it: the custodian executor's login moves only custodian withdrawals and
//! the signer's only local ones; a request is stored only for a custodian withdrawal its executor
//! holds in SIGNING, bound to its payload hash, and never changes; a hold whose request exists is
//! released only on the witness's attestation of the executor's proposed terminal record without
//! a transaction (`opledger_release_witnessed` agrees with
//! `opledger_domain::custodian::release_allowed` at every step), never while any record named a
//! transaction.

use opledger_domain::custodian::{ProviderStatus, Record, StoredRecord, release_allowed};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState};
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::ServiceRole;
use opledger_tests::signer::approve;
use opledger_tests::{ALICE, Stack, Tenant};
use sqlx::PgPool;

/// An APPROVED withdrawal of `tenant`; executed by a custodian when `custodian`.
async fn approved(
    stack: &Stack,
    tenant: &Tenant,
    amount: &str,
    custodian: bool,
) -> anyhow::Result<uuid::Uuid> {
    let w = stack.withdraw(tenant, amount, ALICE).await?;
    let op: uuid::Uuid = w.withdrawal_id.parse()?;
    if custodian {
        // As the operations service does at create for a routed tenant and network (the owner
        // may; no service may change it afterwards).
        sqlx::query(
            "UPDATE withdrawal_ops SET executor = 'custodian', version = version + 1 \
             WHERE op_id = $1",
        )
        .bind(op)
        .execute(stack.admin.pool())
        .await?;
    }
    approve(stack, tenant, &w).await?;
    Ok(op)
}

/// A state change by a service login, as a compromised host would issue it.
async fn move_as(
    pool: &PgPool,
    op: uuid::Uuid,
    from: &str,
    to: &str,
    actor: &str,
) -> Result<u64, sqlx::Error> {
    sqlx::query(
        "UPDATE withdrawal_ops SET state = $3, last_actor = $4, last_actor_id = 'test', \
         last_reason = 'test', version = version + 1, updated_at = now() \
         WHERE op_id = $1 AND state = $2",
    )
    .bind(op)
    .bind(from)
    .bind(to)
    .bind(actor)
    .execute(pool)
    .await
    .map(|done| done.rows_affected())
}

fn refused(result: &Result<u64, sqlx::Error>) -> bool {
    match result {
        Err(sqlx::Error::Database(e)) => e.code().as_deref() == Some("42501"),
        _ => false,
    }
}

/// Inserts the request of `op` as the custodian's login, with the payload hash given (the
/// stored one when `None`).
async fn store_request(
    pool: &PgPool,
    op: uuid::Uuid,
    payload_hash: Option<[u8; 32]>,
) -> Result<u64, sqlx::Error> {
    sqlx::query(
        "INSERT INTO custodian_requests (tenant_id, op_id, account, profile, body, body_sha256, \
           payload_hash, executor_id) \
         SELECT tenant_id, op_id, 'fireblocks-main', 'lookup_by_reference', '{}'::bytea, \
           sha256('{}'::bytea), coalesce($2, payload_hash), 'test' \
         FROM withdrawal_ops WHERE op_id = $1",
    )
    .bind(op)
    .bind(payload_hash.map(|h| h.to_vec()))
    .execute(pool)
    .await
    .map(|done| done.rows_affected())
}

#[tokio::test]
async fn each_executors_login_moves_only_its_own_withdrawals() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let local = approved(&stack, &acme, "1000", false).await?;
    let custodian = approved(&stack, &acme, "2000", true).await?;
    let custodian_login = stack.db.pool_as(ServiceRole::Custodian).await?;
    let signer_login = stack.db.pool_as(ServiceRole::Signer).await?;
    let broadcaster_login = stack.db.pool_as(ServiceRole::Broadcaster).await?;

    // The custodian's login cannot take (or stall) a withdrawal the signer executes...
    let taken = move_as(&custodian_login, local, "APPROVED", "SIGNING", "custodian").await;
    assert!(refused(&taken), "{taken:?}");
    // ...nor the signer's or the broadcaster's a custodian's.
    let taken = move_as(&signer_login, custodian, "APPROVED", "SIGNING", "signer").await;
    assert!(refused(&taken), "{taken:?}");
    let taken = move_as(
        &broadcaster_login,
        custodian,
        "APPROVED",
        "SIGNING",
        "signer",
    )
    .await;
    assert!(refused(&taken), "{taken:?}");
    // Its own: claimed.
    assert_eq!(
        move_as(
            &custodian_login,
            custodian,
            "APPROVED",
            "SIGNING",
            "custodian"
        )
        .await?,
        1
    );
    // No service may change who executes a withdrawal.
    for role in ServiceRole::ALL {
        let pool = stack.db.pool_as(role).await?;
        let changed =
            sqlx::query("UPDATE withdrawal_ops SET executor = 'custodian' WHERE op_id = $1")
                .bind(local)
                .execute(&pool)
                .await;
        assert!(changed.is_err(), "{role:?} changed the executor");
    }
    Ok(())
}

#[tokio::test]
async fn a_request_is_stored_once_for_its_custodian_withdrawal_in_signing_with_its_hash()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let local = approved(&stack, &acme, "1000", false).await?;
    let custodian = approved(&stack, &acme, "2000", true).await?;
    let login = stack.db.pool_as(ServiceRole::Custodian).await?;

    // Not claimed yet (APPROVED): refused.
    assert!(store_request(&login, custodian, None).await.is_err());
    move_as(&login, custodian, "APPROVED", "SIGNING", "custodian").await?;
    // Another payload's hash: refused.
    assert!(
        store_request(&login, custodian, Some([7; 32]))
            .await
            .is_err()
    );
    // A body whose hash is not its SHA-256: refused.
    let forged = sqlx::query(
        "INSERT INTO custodian_requests (tenant_id, op_id, account, profile, body, body_sha256, \
           payload_hash, executor_id) \
         SELECT tenant_id, op_id, 'fireblocks-main', 'lookup_by_reference', '{}'::bytea, \
           sha256('{\"amount\":\"9\"}'::bytea), payload_hash, 'test' \
         FROM withdrawal_ops WHERE op_id = $1",
    )
    .bind(custodian)
    .execute(&login)
    .await;
    assert!(forged.is_err());
    // The local withdrawal's: refused even by the owner's rules (not a custodian's).
    assert!(store_request(&login, local, None).await.is_err());
    // The right one, once: the reference is the operation id, so a second request is impossible.
    assert_eq!(store_request(&login, custodian, None).await?, 1);
    assert!(store_request(&login, custodian, None).await.is_err());
    // Never changed, never deleted.
    for sql in [
        "UPDATE custodian_requests SET body = '{\"x\":1}'::bytea WHERE op_id = $1",
        "DELETE FROM custodian_requests WHERE op_id = $1",
    ] {
        let changed = sqlx::query(sql).bind(custodian).execute(&login).await;
        assert!(changed.is_err(), "{sql}");
    }
    Ok(())
}

async fn database_allows(stack: &Stack, op: uuid::Uuid) -> anyhow::Result<bool> {
    let (witnessed,): (bool,) = sqlx::query_as(
        "SELECT opledger_release_witnessed(tenant_id, op_id) FROM withdrawal_ops WHERE op_id = $1",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?;
    Ok(witnessed)
}

/// Appends a record of the provider's as the custodian's login; returns its id.
async fn record(
    login: &PgPool,
    op: uuid::Uuid,
    status: ProviderStatus,
    hash: Option<u8>,
) -> anyhow::Result<i64> {
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO custodian_records (tenant_id, op_id, status, tx_hash, answer_sha256, \
           executor_id) \
         SELECT tenant_id, op_id, $2, $3, sha256('answer'::bytea), 'test' \
         FROM withdrawal_ops WHERE op_id = $1 RETURNING record_id",
    )
    .bind(op)
    .bind(status.as_str())
    .bind(hash.map(|b| format!("0x{}", hex::encode([b; 32]))))
    .fetch_one(login)
    .await?;
    Ok(id)
}

async fn propose(login: &PgPool, op: uuid::Uuid, record_id: i64) -> Result<u64, sqlx::Error> {
    sqlx::query(
        "INSERT INTO custodian_release_proposals (tenant_id, op_id, record_id, executor_id) \
         SELECT tenant_id, op_id, $2, 'test' FROM withdrawal_ops WHERE op_id = $1",
    )
    .bind(op)
    .bind(record_id)
    .execute(login)
    .await
    .map(|done| done.rows_affected())
}

async fn attest(
    login: &PgPool,
    op: uuid::Uuid,
    record_id: i64,
    status: ProviderStatus,
) -> Result<u64, sqlx::Error> {
    sqlx::query(
        "INSERT INTO custodian_release_attestations \
           (tenant_id, op_id, record_id, status, answer_sha256, witness_id) \
         SELECT tenant_id, op_id, $2, $3, sha256('witness'::bytea), 'test' \
         FROM withdrawal_ops WHERE op_id = $1",
    )
    .bind(op)
    .bind(record_id)
    .bind(status.as_str())
    .execute(login)
    .await
    .map(|done| done.rows_affected())
}

/// The custodian's login releasing `op` (UNKNOWN -> VERIFIED_NOT_SENT) through the one
/// transition function.
async fn release(stack: &Stack, tenant: TenantId, op: uuid::Uuid) -> anyhow::Result<bool> {
    let store = Store::connect(&stack.url(ServiceRole::Custodian), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    let request = TransitionRequest::new(
        tenant,
        OperationId::from_uuid(op),
        OperationState::Unknown,
        OperationState::VerifiedNotSent,
        Actor::Custodian,
        "test",
        "custodian record terminal without a transaction",
    );
    match store.transition(&request).await {
        Ok(_) => Ok(true),
        Err(e) => {
            eprintln!("release refused: {}", e.log_safe());
            Ok(false)
        }
    }
}

#[tokio::test]
async fn the_database_custodian_release_rule_is_the_domain_rule_and_needs_two_logins()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let op = approved(&stack, &acme, "2000", true).await?;
    let executor = stack.db.pool_as(ServiceRole::Custodian).await?;
    let witness = stack.db.pool_as(ServiceRole::Witness).await?;
    let reconciler = stack.db.pool_as(ServiceRole::Reconciler).await?;
    move_as(&executor, op, "APPROVED", "SIGNING", "custodian").await?;
    store_request(&executor, op, None).await?;
    move_as(&executor, op, "SIGNING", "SIGNED", "custodian").await?;
    move_as(&executor, op, "SIGNED", "UNKNOWN", "custodian").await?;

    let mut records: Vec<StoredRecord> = Vec::new();
    let (mut proposed, mut attested) = (Vec::new(), Vec::new());
    let stored = |record_id, status, hash: Option<u8>| StoredRecord {
        record_id,
        record: Record {
            status,
            tx_hash: hash.map(|b| [b; 32]),
        },
        replaced: false,
    };
    // A request sent and no record: never released.
    assert!(!database_allows(&stack, op).await?);
    assert!(!release_allowed(&records, &proposed, &attested));

    // In flight, then rejected without a hash.
    let pending = record(&executor, op, ProviderStatus::PendingAuthorization, None).await?;
    records.push(stored(pending, ProviderStatus::PendingAuthorization, None));
    let rejected = record(&executor, op, ProviderStatus::Rejected, None).await?;
    records.push(stored(rejected, ProviderStatus::Rejected, None));
    // Only the executor's login proposes, only the witness's attests.
    assert!(propose(&witness, op, rejected).await.is_err());
    assert!(propose(&reconciler, op, rejected).await.is_err());
    assert_eq!(propose(&executor, op, rejected).await?, 1);
    proposed.push(rejected);
    assert_eq!(
        database_allows(&stack, op).await?,
        release_allowed(&records, &proposed, &attested)
    );
    assert!(
        !release(&stack, acme.id, op).await?,
        "released on one login's word"
    );
    for login in [&executor, &reconciler] {
        let forged = attest(login, op, rejected, ProviderStatus::Rejected).await;
        assert!(forged.is_err(), "a non-witness login attested");
    }
    // An attestation of another status does not stand for this record.
    assert_eq!(
        attest(&witness, op, rejected, ProviderStatus::Blocked).await?,
        1
    );
    attested.push((rejected, ProviderStatus::Blocked));
    assert_eq!(
        database_allows(&stack, op).await?,
        release_allowed(&records, &proposed, &attested)
    );
    assert!(!database_allows(&stack, op).await?);

    // A later record naming a transaction: never released again, attestation or not.
    let second = approved(&stack, &acme, "3000", true).await?;
    move_as(&executor, second, "APPROVED", "SIGNING", "custodian").await?;
    store_request(&executor, second, None).await?;
    move_as(&executor, second, "SIGNING", "SIGNED", "custodian").await?;
    move_as(&executor, second, "SIGNED", "UNKNOWN", "custodian").await?;
    let seen = record(&executor, second, ProviderStatus::Broadcasting, Some(9)).await?;
    let failed = record(&executor, second, ProviderStatus::Failed, None).await?;
    propose(&executor, second, failed).await?;
    attest(&witness, second, failed, ProviderStatus::Failed).await?;
    let second_records = [
        stored(seen, ProviderStatus::Broadcasting, Some(9)),
        stored(failed, ProviderStatus::Failed, None),
    ];
    assert!(!release_allowed(
        &second_records,
        &[failed],
        &[(failed, ProviderStatus::Failed)]
    ));
    assert!(!database_allows(&stack, second).await?);
    assert!(!release(&stack, acme.id, second).await?);

    // The witness's own lookup agrees with the proposed record: released, by the transition.
    let agreed = record(&executor, op, ProviderStatus::Rejected, None).await?;
    records.push(stored(agreed, ProviderStatus::Rejected, None));
    propose(&executor, op, agreed).await?;
    proposed.push(agreed);
    attest(&witness, op, agreed, ProviderStatus::Rejected).await?;
    attested.push((agreed, ProviderStatus::Rejected));
    assert!(release_allowed(&records, &proposed, &attested));
    assert!(database_allows(&stack, op).await?);
    assert!(release(&stack, acme.id, op).await?);
    let (state, hold): (String, String) = sqlx::query_as(
        "SELECT o.state, h.status FROM withdrawal_ops o JOIN ledger_holds h USING (tenant_id, op_id) \
         WHERE o.op_id = $1",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(
        (state.as_str(), hold.as_str()),
        ("VERIFIED_NOT_SENT", "RELEASED")
    );
    Ok(())
}
