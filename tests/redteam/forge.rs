//! The forgery scenarios.

use opledger_domain::Amount;
use opledger_domain::approval::{Decision, KeyKind, RegisteredKey, SigningKey, TrustStatement};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{
    AccountName, AssetCode, Destination, NetworkId, PayloadHash, WithdrawalPayload,
};
use opledger_domain::policy::ApprovalRule;
use opledger_testkit::{ServiceRole, trust};
use opledger_tests::signer::{
    BROADCASTER_TOKEN, HOT_WALLET, InProcessSigner, RECONCILER_TOKEN, approve, attempts, client,
    sign_request,
};
use opledger_tests::{ALICE, BOB, Stack, Tenant, reason};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::future::Future;
use std::pin::Pin;

/// What the attack achieved.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Refused: nothing signed, released or credited; state and hold unchanged (a signer
    /// refusal also recorded its security event).
    Refused,
    /// Something was signed.
    Signed,
    /// A hold was released (or a balance moved) by the attack.
    Released,
    /// An account was credited by the attack.
    Credited,
}

pub(crate) type Scenario = Pin<Box<dyn Future<Output = anyhow::Result<Outcome>> + Send>>;

/// Every scenario, named after its adversary.
pub fn scenarios() -> Vec<(&'static str, Scenario)> {
    vec![
        (
            "forged_approved_row_with_operations_login_is_refused_by_the_database",
            Box::pin(forged_operation(ServiceRole::Operations)),
        ),
        (
            "forged_approved_row_with_approvals_login_is_refused_by_the_database",
            Box::pin(forged_operation(ServiceRole::Approvals)),
        ),
        (
            "forged_approved_row_with_broadcaster_login_is_refused_by_the_database",
            Box::pin(forged_operation(ServiceRole::Broadcaster)),
        ),
        (
            "forged_approved_row_with_reconciler_login_is_refused_by_the_database",
            Box::pin(forged_operation(ServiceRole::Reconciler)),
        ),
        (
            "forged_approved_row_with_inbox_login_is_refused_by_the_database",
            Box::pin(forged_operation(ServiceRole::Inbox)),
        ),
        (
            "unsigned_approval_row_with_approvals_login_is_never_signed",
            Box::pin(forged_row(Approval::Unsigned)),
        ),
        (
            "approval_row_signed_by_attacker_key_with_approvals_login_is_never_signed",
            Box::pin(forged_row(Approval::AttackerKey)),
        ),
        (
            "approval_copied_from_another_operation_with_approvals_login_is_never_signed",
            Box::pin(forged_row(Approval::CopiedFromAnotherOperation)),
        ),
        (
            "approval_copied_from_another_tenant_with_approvals_login_is_never_signed",
            Box::pin(forged_row(Approval::CopiedFromAnotherTenant)),
        ),
        (
            "superuser_changing_destination_and_hashes_of_an_approved_withdrawal_is_never_signed",
            Box::pin(superuser_changes_destination()),
        ),
        (
            "superuser_trust_statement_with_lower_quorum_signed_by_attacker_is_never_signed",
            Box::pin(superuser_trust_statement(Forged::LowerQuorum)),
        ),
        (
            "superuser_registry_adding_attacker_key_is_never_signed",
            Box::pin(superuser_trust_statement(Forged::AttackerKeyAdded)),
        ),
        (
            "superuser_rollback_to_a_trust_statement_before_a_revocation_is_never_signed",
            Box::pin(rollback(false)),
        ),
        (
            "superuser_rollback_seen_only_by_a_restarted_signer_is_never_signed",
            Box::pin(rollback(true)),
        ),
        (
            "one_approver_key_twice_against_a_two_approver_policy_is_never_signed",
            Box::pin(one_key_twice()),
        ),
        (
            "approvals_login_forgery_reaches_no_transfer_on_a_real_node",
            Box::pin(forgery_on_a_real_node()),
        ),
        (
            "broadcaster_token_asking_a_cancel_of_a_healthy_withdrawal_is_never_signed",
            Box::pin(scoped_caller(Caller::BroadcasterCancels)),
        ),
        (
            "reconciler_token_asking_a_fee_bump_is_never_signed",
            Box::pin(scoped_caller(Caller::ReconcilerBumps)),
        ),
        (
            "reconciler_token_asking_a_signature_is_never_signed",
            Box::pin(scoped_caller(Caller::ReconcilerSigns)),
        ),
        (
            "broadcaster_token_fee_bump_above_the_fee_cap_is_never_signed",
            Box::pin(bump_above_fee_cap()),
        ),
        (
            "temporary_transition_rules_with_approvals_login_release_no_hold",
            Box::pin(shadowed_transition_rules()),
        ),
        (
            "temporary_holds_table_with_operations_login_creates_no_unheld_withdrawal",
            Box::pin(shadowed_holds()),
        ),
        (
            "direct_balance_raise_with_operations_login_is_refused_by_the_database",
            Box::pin(balance_raise(ServiceRole::Operations)),
        ),
        (
            "direct_balance_raise_with_approvals_login_is_refused_by_the_database",
            Box::pin(balance_raise(ServiceRole::Approvals)),
        ),
        (
            "direct_balance_raise_with_broadcaster_login_is_refused_by_the_database",
            Box::pin(balance_raise(ServiceRole::Broadcaster)),
        ),
        (
            "direct_balance_raise_with_reconciler_login_is_refused_by_the_database",
            Box::pin(balance_raise(ServiceRole::Reconciler)),
        ),
        (
            "direct_balance_raise_with_inbox_login_is_refused_by_the_database",
            Box::pin(balance_raise(ServiceRole::Inbox)),
        ),
    ]
}

enum Approval {
    Unsigned,
    AttackerKey,
    CopiedFromAnotherOperation,
    CopiedFromAnotherTenant,
}

enum Forged {
    LowerQuorum,
    AttackerKeyAdded,
}

fn attacker_key() -> SigningKey {
    SigningKey::from_bytes(&Sha256::digest(b"opledger red team attacker key").into())
}

/// A tenant with a funded treasury and the default trust statement (one approver).
async fn world(name: &str) -> anyhow::Result<(Stack, Tenant)> {
    let stack = Stack::start().await?;
    let tenant = stack.tenant(name).await?;
    stack.fund(&tenant, "treasury", "ETH", "1000000000").await?;
    Ok((stack, tenant))
}

fn payload(tenant: TenantId, amount: u128, to: &str) -> anyhow::Result<WithdrawalPayload> {
    Ok(WithdrawalPayload {
        tenant_id: tenant,
        source_account: AccountName::parse("treasury")?,
        asset: AssetCode::parse("ETH")?,
        network: NetworkId::parse("anvil")?,
        destination: Destination::parse(to)?,
        memo: None,
        amount: Amount::new(amount),
        fee_cap: Amount::new(1_000_000_000_000_000),
        policy_version: 1,
    })
}

/// INSERTs an APPROVED operation and its payload directly, as `pool`'s role: no hold, no create.
async fn insert_approved(pool: &PgPool, p: &WithdrawalPayload) -> anyhow::Result<OperationId> {
    let op = OperationId::new();
    let key_hash: [u8; 32] = Sha256::digest(op.to_string()).into();
    sqlx::query(
        "INSERT INTO withdrawal_ops (tenant_id, op_id, idempotency_key_hash, payload_hash, state) \
         VALUES ($1, $2, $3, $4, 'APPROVED')",
    )
    .bind(p.tenant_id.as_uuid())
    .bind(op.as_uuid())
    .bind(key_hash.as_slice())
    .bind(p.hash().as_bytes().as_slice())
    .execute(pool)
    .await?;
    sqlx::query(
        "INSERT INTO withdrawal_payloads (tenant_id, op_id, source_account, asset, network, \
           destination, memo, amount, fee_cap, policy_version) \
         VALUES ($1, $2, $3, $4, $5, $6, NULL, $7::numeric, $8::numeric, $9)",
    )
    .bind(p.tenant_id.as_uuid())
    .bind(op.as_uuid())
    .bind(p.source_account.as_str())
    .bind(p.asset.as_str())
    .bind(p.network.as_str())
    .bind(p.destination.as_str())
    .bind(p.amount.to_string())
    .bind(p.fee_cap.to_string())
    .bind(i64::from(p.policy_version))
    .execute(pool)
    .await?;
    Ok(op)
}

struct Row<'a> {
    tenant: TenantId,
    op: OperationId,
    hash: PayloadHash,
    key_id: Option<String>,
    version: Option<i64>,
    signature: Option<&'a [u8]>,
}

async fn insert_approval(pool: &PgPool, row: Row<'_>) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO approvals (tenant_id, op_id, approver_id, payload_hash, approver_key_id, \
           decision, policy_version, signature) VALUES ($1, $2, 'attacker', $3, $4, 'APPROVE', $5, $6)",
    )
    .bind(row.tenant.as_uuid())
    .bind(row.op.as_uuid())
    .bind(row.hash.as_bytes().as_slice())
    .bind(row.key_id)
    .bind(row.version)
    .bind(row.signature)
    .execute(pool)
    .await?;
    Ok(())
}

/// Inserts an approval row carrying `key`'s real signature of the statement for `op` and `hash`
/// under `version`, as `pool`'s role.
async fn insert_signed_approval(
    pool: &PgPool,
    tenant: TenantId,
    op: OperationId,
    hash: PayloadHash,
    key: &SigningKey,
    version: i64,
) -> anyhow::Result<()> {
    let policy_version = u64::try_from(version)?;
    let (_, sig) = trust::signed_decision(tenant, op, hash, Decision::Approve, key, policy_version);
    insert_approval(
        pool,
        Row {
            tenant,
            op,
            hash,
            key_id: Some(trust::key_id(key).to_hex()),
            version: Some(version),
            signature: Some(&sig),
        },
    )
    .await
}

/// The operation moved to APPROVED by the superuser (whom no database check stops).
async fn force_approved(stack: &Stack, op: OperationId) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE withdrawal_ops SET state = 'APPROVED', version = version + 1 WHERE op_id = $1",
    )
    .bind(op.as_uuid())
    .execute(stack.admin.pool())
    .await?;
    Ok(())
}

/// The stored decision of an honest approval: (key id, version, signature).
async fn stored_approval(stack: &Stack, op: &str) -> anyhow::Result<(String, i64, Vec<u8>)> {
    Ok(sqlx::query_as(
        "SELECT approver_key_id, policy_version, signature FROM approvals WHERE op_id = $1",
    )
    .bind(op.parse::<uuid::Uuid>()?)
    .fetch_one(stack.admin.pool())
    .await?)
}

/// Asks the signer to sign `op` (twice: a retry changes nothing) and checks what a refusal must
/// leave behind: the first answer is the refusal, which ends the operation (FAILED_TERMINAL owned
/// by security, hold kept); the retry finds it no longer signable.
pub(crate) async fn attempt_signing(
    stack: &Stack,
    signer: &InProcessSigner,
    tenant: TenantId,
    op: OperationId,
    want_event: &str,
) -> anyhow::Result<Outcome> {
    let want_reason = "APPROVALS_NOT_VERIFIED";
    let mut c = client(signer.addr).await?;
    let events_before = security_events(stack, tenant, want_event).await?;
    for call in 0..2 {
        let want_reason = if call == 0 {
            want_reason
        } else {
            "NOT_SIGNABLE"
        };
        match c
            .sign_withdrawal(sign_request(tenant, &op.to_string()))
            .await
        {
            Ok(_) => return Ok(Outcome::Signed),
            Err(e) => {
                anyhow::ensure!(
                    e.code() == tonic::Code::FailedPrecondition && reason(&e) == want_reason,
                    "unexpected refusal {:?} {}",
                    e.code(),
                    reason(&e)
                );
                anyhow::ensure!(
                    !e.message().contains(BOB) && !e.message().contains(ALICE),
                    "an address leaked into the error"
                );
            }
        }
    }
    anyhow::ensure!(
        attempts(stack, &op.to_string()).await? == 0,
        "an attempt exists"
    );
    let (nonces,): (i64,) = sqlx::query_as("SELECT count(*) FROM signer_nonces")
        .fetch_one(stack.admin.pool())
        .await?;
    anyhow::ensure!(nonces == 0, "a nonce was taken");
    anyhow::ensure!(
        security_events(stack, tenant, want_event).await? == events_before + 1,
        "the refusal is a {want_event} security event"
    );
    let (state, hold, owner, code): (String, String, Option<String>, Option<String>) =
        sqlx::query_as(
            "SELECT o.state, h.status, e.owner, e.reason_code FROM withdrawal_ops o \
             JOIN ledger_holds h USING (tenant_id, op_id) \
             LEFT JOIN escalations e USING (tenant_id, op_id) WHERE o.op_id = $1",
        )
        .bind(op.as_uuid())
        .fetch_one(stack.admin.pool())
        .await?;
    anyhow::ensure!(
        state == "FAILED_TERMINAL" && hold == "OPEN",
        "state {state}, hold {hold}: a refused withdrawal ends FAILED_TERMINAL with its hold"
    );
    anyhow::ensure!(
        owner.as_deref() == Some("security") && code.as_deref() == Some("APPROVALS_NOT_VERIFIED"),
        "the refused withdrawal is owned by security ({owner:?}, {code:?})"
    );
    Ok(Outcome::Refused)
}

async fn security_events(stack: &Stack, tenant: TenantId, kind: &str) -> anyhow::Result<i64> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM security_events WHERE tenant_id = $1 AND kind = $2")
            .bind(tenant.as_uuid())
            .bind(kind)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(n)
}

/// Adversary: an attacker holding the approvals service's database login (the only role that
/// may write approval rows and approve) writes an approval row for a pending withdrawal and moves
/// it to APPROVED itself.
async fn forged_row(approval: Approval) -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let app = stack.db.pool_as(ServiceRole::Approvals).await?;
    let w = stack.withdraw(&acme, "5000000", BOB).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let hash = PayloadHash::from_hex(&w.payload_hash)?;
    match approval {
        Approval::Unsigned => {
            insert_approval(
                &app,
                Row {
                    tenant: acme.id,
                    op,
                    hash,
                    key_id: None,
                    version: None,
                    signature: None,
                },
            )
            .await?
        }
        Approval::AttackerKey => {
            let key = attacker_key();
            insert_signed_approval(&app, acme.id, op, hash, &key, 1).await?
        }
        Approval::CopiedFromAnotherOperation | Approval::CopiedFromAnotherTenant => {
            let source_tenant = match approval {
                Approval::CopiedFromAnotherTenant => stack.tenant("globex").await?,
                _ => acme.clone(),
            };
            if source_tenant.id != acme.id {
                stack
                    .fund(&source_tenant, "treasury", "ETH", "1000000")
                    .await?;
            }
            let honest = stack.withdraw(&source_tenant, "1000", ALICE).await?;
            approve(&stack, &source_tenant, &honest).await?;
            let (key_id, version, sig) = stored_approval(&stack, &honest.withdrawal_id).await?;
            insert_approval(
                &app,
                Row {
                    tenant: acme.id,
                    op,
                    hash,
                    key_id: Some(key_id),
                    version: Some(version),
                    signature: Some(&sig),
                },
            )
            .await?
        }
    }
    approve_directly(&app, op).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    attempt_signing(&stack, &signer, acme.id, op, "SIGNER_APPROVAL_INVALID").await
}

/// REQUESTED -> APPROVED written directly, as the approvals role may (its own actor).
async fn approve_directly(pool: &PgPool, op: OperationId) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE withdrawal_ops SET state = 'APPROVED', last_actor = 'approvals', \
         version = version + 1 WHERE op_id = $1",
    )
    .bind(op.as_uuid())
    .execute(pool)
    .await?;
    Ok(())
}

/// Adversary: any one service's database login inserts a consistent APPROVED operation and its
/// payload (an address of their choice), needing no hold: the database refuses.
async fn forged_operation(role: ServiceRole) -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let pool = stack.db.pool_as(role).await?;
    let p = payload(acme.id, 5_000_000, BOB)?;
    if insert_approved(&pool, &p).await.is_ok() {
        return Ok(Outcome::Signed);
    }
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM withdrawal_ops WHERE tenant_id = $1")
        .bind(acme.id.as_uuid())
        .fetch_one(stack.admin.pool())
        .await?;
    anyhow::ensure!(n == 0, "an operation was written");
    Ok(Outcome::Refused)
}

/// Adversary: a database superuser rewrites an approved withdrawal's destination, payload hash
/// and approval hash with triggers disabled: nothing an approver signed binds the new content.
async fn superuser_changes_destination() -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let forged = payload(acme.id, 1000, BOB)?.hash();
    let admin = stack.db.admin_pool().await?;
    let mut tx = admin.begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    let id: uuid::Uuid = w.withdrawal_id.parse()?;
    for sql in [
        "UPDATE withdrawal_payloads SET destination = $2 WHERE op_id = $1",
        "UPDATE withdrawal_ops SET payload_hash = $3 WHERE op_id = $1",
        "UPDATE approvals SET payload_hash = $3 WHERE op_id = $1",
    ] {
        sqlx::query(sql)
            .bind(id)
            .bind(BOB)
            .bind(forged.as_bytes().as_slice())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    attempt_signing(
        &stack,
        &signer,
        acme.id,
        OperationId::from_uuid(id),
        "SIGNER_APPROVAL_INVALID",
    )
    .await
}

/// Inserts a trust statement row directly (the owner role is the only one with INSERT).
async fn insert_trust(
    stack: &Stack,
    tenant: TenantId,
    bytes: &[u8],
    sig: &[u8],
    version: i64,
) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO trust_statements (tenant_id, version, statement, signature) VALUES ($1, $2, $3, $4)",
    )
    .bind(tenant.as_uuid())
    .bind(version)
    .bind(bytes)
    .bind(sig)
    .execute(stack.admin.pool())
    .await?;
    Ok(())
}

/// Adversary: a database superuser publishes a trust statement of their own (a lower quorum, or
/// their key in the registry), signed by a key the signer does not pin.
async fn superuser_trust_statement(forged: Forged) -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let attacker = attacker_key();
    let mut parts = trust::default_parts(acme.id);
    let eth = AssetCode::parse("ETH")?;
    // The honest v2 needs two approvers for everything.
    parts.rules = vec![(
        eth.clone(),
        ApprovalRule {
            min_amount: Amount::ZERO,
            required_approvals: 2,
        },
    )];
    trust::publish(&stack.admin, acme.id, 2, parts).await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    let mut forged_parts = trust::default_parts(acme.id);
    if matches!(forged, Forged::AttackerKeyAdded) {
        forged_parts.keys.push(RegisteredKey::new(
            attacker.verifying_key(),
            KeyKind::Approver,
        ));
    }
    let statement =
        TrustStatement::new(acme.id, 3, forged_parts).map_err(|e| anyhow::anyhow!("{e}"))?;
    insert_trust(
        &stack,
        acme.id,
        &statement.canonical_bytes(),
        &statement.sign(&attacker).to_bytes(),
        3,
    )
    .await?;
    // One approval (key 0, or the attacker's key), counted by the forged v3, and the operation
    // forced to APPROVED by the superuser.
    let approver = match forged {
        Forged::LowerQuorum => trust::approver_key(acme.id, 0),
        Forged::AttackerKeyAdded => attacker,
    };
    let op: OperationId = w.withdrawal_id.parse()?;
    let hash = PayloadHash::from_hex(&w.payload_hash)?;
    insert_signed_approval(stack.admin.pool(), acme.id, op, hash, &approver, 3).await?;
    force_approved(&stack, op).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    attempt_signing(
        &stack,
        &signer,
        acme.id,
        op,
        "SIGNER_TRUST_STATEMENT_INVALID",
    )
    .await
}

/// Adversary: a database superuser deletes the newest trust statement (which revoked approver
/// key 1), so that an approval by the revoked key counts under the older one.
async fn rollback(restart: bool) -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let revoked = trust::approver_key(acme.id, 1);
    let mut v2 = trust::default_parts(acme.id);
    v2.keys.retain(|k| k.key_id != trust::key_id(&revoked));
    v2.revoked = vec![trust::key_id(&revoked)];
    trust::publish(&stack.admin, acme.id, 2, v2).await?;
    // An honest withdrawal signed under v2: the signer accepts (and records) version 2.
    let honest = stack.withdraw(&acme, "1000", ALICE).await?;
    stack
        .approvals()
        .await?
        .approve_withdrawal(opledger_tests::authed(
            &acme.approver,
            opledger_tests::approval_under(acme.id, &honest, &trust::approver_key(acme.id, 0), 2),
        ))
        .await?;
    let mut signer = InProcessSigner::start(&stack.db, acme.id).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &honest.withdrawal_id))
        .await?;
    // The forgery: v2 deleted, an approval by the revoked key under v1.
    let w = stack.withdraw(&acme, "1000", BOB).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let hash = PayloadHash::from_hex(&w.payload_hash)?;
    let admin = stack.db.admin_pool().await?;
    let mut tx = admin.begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM trust_statements WHERE tenant_id = $1 AND version = 2")
        .bind(acme.id.as_uuid())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    insert_signed_approval(stack.admin.pool(), acme.id, op, hash, &revoked, 1).await?;
    force_approved(&stack, op).await?;
    if restart {
        drop(signer);
        signer = InProcessSigner::start(&stack.db, acme.id).await?;
    }
    // The honest withdrawal's attempt and nonce exist; the forgery must add neither.
    let mut c = client(signer.addr).await?;
    let err = c
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .err();
    let Some(err) = err else {
        return Ok(Outcome::Signed);
    };
    anyhow::ensure!(
        reason(&err) == "APPROVALS_NOT_VERIFIED",
        "reason {}",
        reason(&err)
    );
    anyhow::ensure!(
        attempts(&stack, &w.withdrawal_id).await? == 0,
        "an attempt exists"
    );
    let (rollbacks,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM security_events WHERE tenant_id = $1 \
         AND kind = 'SIGNER_TRUST_STATEMENT_ROLLBACK'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    anyhow::ensure!(rollbacks >= 1, "the rollback is a security event");
    Ok(Outcome::Refused)
}

/// Adversary: one approver (one key) tries to meet a two-approver policy alone, through two API
/// keys and a second approval row written with the application login.
async fn one_key_twice() -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let mut parts = trust::default_parts(acme.id);
    parts.rules = vec![(
        AssetCode::parse("ETH")?,
        ApprovalRule {
            min_amount: Amount::ZERO,
            required_approvals: 2,
        },
    )];
    trust::publish(&stack.admin, acme.id, 2, parts).await?;
    let w = stack.withdraw(&acme, "1000", BOB).await?;
    let key = trust::approver_key(acme.id, 0);
    let second_api_key = stack
        .key(&acme, opledger_store::keys::Role::Approver)
        .await?;
    let mut approvals = stack.approvals().await?;
    for api_key in [&acme.approver, &second_api_key] {
        let _ = approvals
            .approve_withdrawal(opledger_tests::authed(
                api_key,
                opledger_tests::approval_under(acme.id, &w, &key, 2),
            ))
            .await;
    }
    let op: OperationId = w.withdrawal_id.parse()?;
    let (key_id, version, sig) = stored_approval(&stack, &w.withdrawal_id).await?;
    let app = stack.db.pool_as(ServiceRole::Approvals).await?;
    // The unique index refuses a second row for the same key; a row under another API key id
    // with the same key id is refused by it too, so the attacker writes the state instead.
    let _ = insert_approval(
        &app,
        Row {
            tenant: acme.id,
            op,
            hash: PayloadHash::from_hex(&w.payload_hash)?,
            key_id: Some(key_id),
            version: Some(version),
            signature: Some(&sig),
        },
    )
    .await;
    approve_directly(&app, op).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    attempt_signing(
        &stack,
        &signer,
        acme.id,
        op,
        "SIGNER_APPROVALS_INSUFFICIENT",
    )
    .await
}

/// The same set-up without a forgery is signed: the refusals above are not a broken signer.
pub async fn honest_withdrawal_is_signed() -> anyhow::Result<()> {
    let (stack, acme) = world("acme").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let signed = client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?
        .into_inner();
    assert!(signed.attempt.is_some());
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 1);
    Ok(())
}

enum Caller {
    BroadcasterCancels,
    ReconcilerBumps,
    ReconcilerSigns,
}

/// A withdrawal signed honestly and moved to BROADCAST (its first attempt made old enough for
/// any window), as the adversary finds it.
async fn healthy_broadcast(
    stack: &Stack,
    acme: &Tenant,
    signer: &InProcessSigner,
    fee_cap: Option<&str>,
) -> anyhow::Result<OperationId> {
    let w = match fee_cap {
        None => stack.withdraw(acme, "1000", ALICE).await?,
        Some(cap) => {
            let mut p = opledger_tests::payload("1000", ALICE);
            p.fee_cap = cap.to_owned();
            stack
                .client()
                .await?
                .create_withdrawal(opledger_tests::authed(
                    &acme.client,
                    opledger_proto::v1::CreateWithdrawalRequest {
                        idempotency_key: opledger_tests::new_key(),
                        payload: Some(p),
                    },
                ))
                .await?
                .into_inner()
                .withdrawal
                .ok_or_else(|| anyhow::anyhow!("no withdrawal"))?
        }
    };
    approve(stack, acme, &w).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let admin = stack.db.admin_pool().await?;
    let mut tx = admin.begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE tx_attempts SET created_at = now() - interval '1 hour' WHERE op_id = $1")
        .bind(op.as_uuid())
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE withdrawal_ops SET state = 'BROADCAST', version = version + 1 WHERE op_id = $1",
    )
    .bind(op.as_uuid())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(op)
}

/// Adversary: one worker host's signer token (the broadcaster's or the reconciler's) used for
/// what that caller may not do.
async fn scoped_caller(which: Caller) -> anyhow::Result<Outcome> {
    use opledger_proto::v1 as pb;
    let (stack, acme) = world("acme").await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut c = client(signer.addr).await?;
    let events = security_events(&stack, acme.id, "SIGNER_CALLER_NOT_ALLOWED").await?;
    let (op, before, answer) = match which {
        Caller::ReconcilerSigns => {
            let w = stack.withdraw(&acme, "1000", BOB).await?;
            approve(&stack, &acme, &w).await?;
            let answer = c
                .sign_withdrawal(opledger_tests::authed(
                    RECONCILER_TOKEN,
                    pb::SignWithdrawalRequest {
                        tenant_id: acme.id.to_string(),
                        withdrawal_id: w.withdrawal_id.clone(),
                    },
                ))
                .await
                .map(drop);
            (w.withdrawal_id.parse()?, 0, answer)
        }
        Caller::BroadcasterCancels | Caller::ReconcilerBumps => {
            let op = healthy_broadcast(&stack, &acme, &signer, None).await?;
            let (token, kind) = match which {
                Caller::BroadcasterCancels => (BROADCASTER_TOKEN, pb::AttemptKind::Cancel),
                _ => (RECONCILER_TOKEN, pb::AttemptKind::FeeBump),
            };
            let answer = c
                .sign_replacement(opledger_tests::authed(
                    token,
                    pb::SignReplacementRequest {
                        tenant_id: acme.id.to_string(),
                        withdrawal_id: op.to_string(),
                        kind: kind as i32,
                    },
                ))
                .await
                .map(drop);
            (op, 1, answer)
        }
    };
    let Err(err) = answer else {
        return Ok(Outcome::Signed);
    };
    anyhow::ensure!(
        err.code() == tonic::Code::PermissionDenied && reason(&err) == "CALLER_NOT_ALLOWED",
        "unexpected refusal {:?} {}",
        err.code(),
        reason(&err)
    );
    anyhow::ensure!(
        attempts(&stack, &op.to_string()).await? == before,
        "an attempt was added"
    );
    anyhow::ensure!(
        security_events(&stack, acme.id, "SIGNER_CALLER_NOT_ALLOWED").await? == events + 1,
        "the refusal is a security event"
    );
    Ok(Outcome::Refused)
}

/// Adversary: the broadcaster's token asks for a fee bump the payload's fee cap does not allow
/// (the cap covers exactly the original's maximum fee).
async fn bump_above_fee_cap() -> anyhow::Result<Outcome> {
    use opledger_proto::v1 as pb;
    let (stack, acme) = world("acme").await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    // 21000 gas at the test network's 2 gwei: the original fits, any bump does not.
    let op = healthy_broadcast(&stack, &acme, &signer, Some("42000000000000")).await?;
    let answer = client(signer.addr)
        .await?
        .sign_replacement(opledger_tests::authed(
            BROADCASTER_TOKEN,
            pb::SignReplacementRequest {
                tenant_id: acme.id.to_string(),
                withdrawal_id: op.to_string(),
                kind: pb::AttemptKind::FeeBump as i32,
            },
        ))
        .await;
    let Err(err) = answer else {
        return Ok(Outcome::Signed);
    };
    anyhow::ensure!(
        reason(&err) == "FEE_CAP_EXCEEDED",
        "reason {}",
        reason(&err)
    );
    anyhow::ensure!(
        attempts(&stack, &op.to_string()).await? == 1,
        "an attempt was added"
    );
    Ok(Outcome::Refused)
}

/// Adversary: one service's database login raises an account's available balance directly, or
/// credits it outside the credit function.
async fn balance_raise(role: ServiceRole) -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let pool = stack.db.pool_as(role).await?;
    let before: (String,) =
        sqlx::query_as("SELECT available::text FROM ledger_accounts WHERE tenant_id = $1")
            .bind(acme.id.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    for sql in [
        "UPDATE ledger_accounts SET available = available + 1000000000 WHERE tenant_id = $1",
        "INSERT INTO ledger_accounts (tenant_id, account, asset, available) \
         VALUES ($1, 'attacker', 'ETH', 1000000000)",
    ] {
        if sqlx::query(sql)
            .bind(acme.id.as_uuid())
            .execute(&pool)
            .await
            .is_ok()
        {
            return Ok(Outcome::Credited);
        }
    }
    let after: (String,) =
        sqlx::query_as("SELECT available::text FROM ledger_accounts WHERE tenant_id = $1")
            .bind(acme.id.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    if before != after {
        return Ok(Outcome::Credited);
    }
    Ok(Outcome::Refused)
}

/// Adversary: the approvals service's database login forges an approval and approves, while a
/// real broadcaster runs against a real anvil node: the node sees no transaction at all.
async fn forgery_on_a_real_node() -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let app = stack.db.pool_as(ServiceRole::Approvals).await?;
    let w = stack.withdraw(&acme, "5000000", BOB).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let hash = PayloadHash::from_hex(&w.payload_hash)?;
    let key = attacker_key();
    insert_signed_approval(&app, acme.id, op, hash, &key, 1).await?;
    approve_directly(&app, op).await?;
    let node = opledger_testkit::Anvil::start().await?;
    let bob_before = node.balance(BOB).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let cfg = opledger_tests::chain::broadcaster_config(&stack, &signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(
        &cfg,
        opledger_store::Store::connect(
            &cfg.base.database_url.0,
            opledger_store::StoreConfig::default(),
        )
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?
        .broadcaster(),
    )?;
    // At least five passes, and on until the signer's refusal is recorded: under load a pass can
    // end before its signing call does.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    for pass in 0.. {
        broadcaster.tick(64, 8).await;
        node.mine(1).await?;
        let refused = security_events(&stack, acme.id, "SIGNER_APPROVAL_INVALID").await? >= 1;
        if pass >= 4 && (refused || tokio::time::Instant::now() > deadline) {
            break;
        }
    }
    if node.nonce(HOT_WALLET, "latest").await? != 0 || node.balance(BOB).await? != bob_before {
        return Ok(Outcome::Signed);
    }
    anyhow::ensure!(
        attempts(&stack, &w.withdrawal_id).await? == 0,
        "an attempt exists"
    );
    anyhow::ensure!(
        security_events(&stack, acme.id, "SIGNER_APPROVAL_INVALID").await? >= 1,
        "the refusal is a security event"
    );
    Ok(Outcome::Refused)
}

/// Adversary: the approvals login shadows the transition table with a temporary table of the
/// same name (temporary tables come first in a session's search path) that allows BROADCAST ->
/// REJECTED, then releases the hold of a withdrawal whose transfer is out.
async fn shadowed_transition_rules() -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let w = stack.withdraw(&acme, "1000", BOB).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    sqlx::query(
        "UPDATE withdrawal_ops SET state = 'BROADCAST', version = version + 1 WHERE op_id = $1",
    )
    .bind(op.as_uuid())
    .execute(stack.admin.pool())
    .await?;
    let pool = stack.db.pool_as(ServiceRole::Approvals).await?;
    let mut conn = pool.acquire().await?;
    let _ = sqlx::query(
        "CREATE TEMP TABLE opledger_transition_rules \
         (from_state text, to_state text, actor text, hold_effect text)",
    )
    .execute(&mut *conn)
    .await;
    let _ = sqlx::query(
        "INSERT INTO opledger_transition_rules VALUES ('BROADCAST', 'REJECTED', 'approvals', 'RELEASE')",
    )
    .execute(&mut *conn)
    .await;
    let moved = sqlx::query(
        "UPDATE withdrawal_ops SET state = 'REJECTED', last_actor = 'approvals', \
         version = version + 1 WHERE op_id = $1",
    )
    .bind(op.as_uuid())
    .execute(&mut *conn)
    .await;
    let released: Result<(Option<bool>,), _> =
        sqlx::query_as("SELECT opledger_resolve_hold($1, $2, 'RELEASE')")
            .bind(acme.id.as_uuid())
            .bind(op.as_uuid())
            .fetch_one(&mut *conn)
            .await;
    let (status,): (String,) = sqlx::query_as("SELECT status FROM ledger_holds WHERE op_id = $1")
        .bind(op.as_uuid())
        .fetch_one(stack.admin.pool())
        .await?;
    if moved.is_ok() || matches!(released, Ok((Some(true),))) || status != "OPEN" {
        return Ok(Outcome::Signed);
    }
    Ok(Outcome::Refused)
}

/// Adversary: the operations login shadows `ledger_holds` with a temporary table holding a fake
/// hold, so that the commit-time check sees one, and creates a withdrawal without a real hold.
async fn shadowed_holds() -> anyhow::Result<Outcome> {
    let (stack, acme) = world("acme").await?;
    let pool = stack.db.pool_as(ServiceRole::Operations).await?;
    let p = payload(acme.id, 5_000_000_000, BOB)?;
    let op = OperationId::new();
    let mut tx = pool.begin().await?;
    let _ = sqlx::query(
        "CREATE TEMP TABLE ledger_holds (tenant_id uuid, op_id uuid, account text, asset text, \
         amount numeric) ON COMMIT DROP",
    )
    .execute(&mut *tx)
    .await;
    let _ = sqlx::query("INSERT INTO ledger_holds VALUES ($1, $2, 'treasury', 'ETH', 5000000000)")
        .bind(acme.id.as_uuid())
        .bind(op.as_uuid())
        .execute(&mut *tx)
        .await;
    let key_hash: [u8; 32] = Sha256::digest(op.to_string()).into();
    let inserted = sqlx::query(
        "WITH o AS (INSERT INTO public.withdrawal_ops (tenant_id, op_id, idempotency_key_hash, \
           payload_hash, state) VALUES ($1, $2, $3, $4, 'REQUESTED') RETURNING tenant_id, op_id) \
         INSERT INTO public.withdrawal_payloads (tenant_id, op_id, source_account, asset, network, \
           destination, amount, fee_cap, policy_version) \
         SELECT tenant_id, op_id, 'treasury', 'ETH', 'anvil', $5, 5000000000, 1, 1 FROM o",
    )
    .bind(acme.id.as_uuid())
    .bind(op.as_uuid())
    .bind(key_hash.as_slice())
    .bind(p.hash().as_bytes().as_slice())
    .bind(BOB)
    .execute(&mut *tx)
    .await;
    let committed = inserted.is_ok() && tx.commit().await.is_ok();
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM withdrawal_ops WHERE op_id = $1")
        .bind(op.as_uuid())
        .fetch_one(stack.admin.pool())
        .await?;
    if committed || n != 0 {
        return Ok(Outcome::Signed);
    }
    Ok(Outcome::Refused)
}
