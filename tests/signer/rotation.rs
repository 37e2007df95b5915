//! Wallet rotation and replacements: every fee bump and cancel comes from the original attempt's
//! sender at its nonce, whichever wallet is the tenant's current one. A replacement signed by the
//! new wallet at the old wallet's nonce could not replace the original (both could be mined:
//! paid twice), and its inclusion would prove nothing about the original.

use opledger_evm::signer::decode;
use opledger_evm::{Address, U256};
use opledger_proto::v1::{AttemptKind, SignReplacementRequest, SignedAttempt, Withdrawal};
use opledger_store::wallets::{Registration, RetireAfter, WalletStatus};
use opledger_tests::signer::{
    CALLER_TOKEN, HOT_WALLET, InProcessSigner, NETWORK, ROTATED_WALLET, TestWallets, approve,
    attempts, client, sign_request,
};
use opledger_tests::{ALICE, BOB, Stack, Tenant, authed, reason};

fn replace(tenant: &str, op: &str, kind: AttemptKind) -> tonic::Request<SignReplacementRequest> {
    authed(
        CALLER_TOKEN,
        SignReplacementRequest {
            tenant_id: tenant.to_owned(),
            withdrawal_id: op.to_owned(),
            kind: kind as i32,
        },
    )
}

/// Tenant `acme` (funded) with a withdrawal of 500 to ALICE signed by its old wallet
/// ([`HOT_WALLET`]) through a signer since stopped: the withdrawal and its original attempt.
async fn signed_by_the_old_wallet(
    stack: &Stack,
) -> anyhow::Result<(Tenant, Withdrawal, SignedAttempt)> {
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(stack, &acme, &w).await?;
    let before = InProcessSigner::start(&stack.db, acme.id).await?;
    let original = client(before.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?
        .into_inner()
        .attempt
        .ok_or_else(|| anyhow::anyhow!("no original"))?;
    Ok((acme, w, original))
}

async fn registry(stack: &Stack) -> anyhow::Result<Vec<(String, String)>> {
    Ok(
        sqlx::query_as("SELECT sender, status FROM signer_wallets ORDER BY status, sender")
            .fetch_all(stack.admin.pool())
            .await?,
    )
}

#[tokio::test]
async fn after_a_rotation_replacements_come_from_the_original_sender_and_new_withdrawals_from_the_new_wallet()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    // In flight at nonce 0 of the old wallet.
    let (acme, old, original) = signed_by_the_old_wallet(&stack).await?;
    let tenant = acme.id.to_string();
    // Rotation: the new wallet is active, the old one retiring.
    let signer =
        InProcessSigner::start_with_wallets(&stack.db, acme.id, TestWallets::Rotated(true)).await?;
    assert_eq!(
        registry(&stack).await?,
        vec![
            (ROTATED_WALLET.to_owned(), "ACTIVE".to_owned()),
            (HOT_WALLET.to_owned(), "RETIRING".to_owned()),
        ],
        "the registry shows the rotation"
    );
    let mut c = client(signer.addr).await?;
    stack.force_state(&old.withdrawal_id, "BROADCAST").await?;
    let bump = c
        .sign_replacement(replace(&tenant, &old.withdrawal_id, AttemptKind::FeeBump))
        .await?
        .into_inner()
        .attempt
        .expect("bump");
    let decoded = decode(&bump.raw_transaction)?;
    assert_eq!(
        (decoded.from, decoded.nonce),
        (HOT_WALLET.parse::<Address>()?, original.nonce),
        "the bump comes from the original's sender at its nonce"
    );
    assert_eq!(bump.from_address, HOT_WALLET);
    stack.force_state(&old.withdrawal_id, "UNKNOWN").await?;
    let cancel = c
        .sign_replacement(replace(&tenant, &old.withdrawal_id, AttemptKind::Cancel))
        .await?
        .into_inner()
        .attempt
        .expect("cancel");
    let decoded = decode(&cancel.raw_transaction)?;
    let hot: Address = HOT_WALLET.parse()?;
    assert_eq!(
        (decoded.from, decoded.to, decoded.value, decoded.nonce),
        (hot, hot, U256::ZERO, original.nonce),
        "the cancel is the original sender's self-transfer of 0 at its nonce"
    );
    // A new withdrawal is signed by the new wallet, from its own first nonce.
    let new = stack.withdraw(&acme, "700", ALICE).await?;
    approve(&stack, &acme, &new).await?;
    let fresh = c
        .sign_withdrawal(sign_request(acme.id, &new.withdrawal_id))
        .await?
        .into_inner()
        .attempt
        .expect("new");
    assert_eq!(
        (fresh.from_address.as_str(), fresh.nonce),
        (ROTATED_WALLET, 0)
    );
    Ok(())
}

#[tokio::test]
async fn a_replacement_whose_sender_key_is_gone_is_refused_not_signed_by_the_new_wallet()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w, _) = signed_by_the_old_wallet(&stack).await?;
    // The old wallet was removed too early: only the new one is held.
    let signer =
        InProcessSigner::start_with_wallets(&stack.db, acme.id, TestWallets::Rotated(false))
            .await?;
    let mut c = client(signer.addr).await?;
    for (state, kind) in [
        ("BROADCAST", AttemptKind::FeeBump),
        ("UNKNOWN", AttemptKind::Cancel),
    ] {
        stack.force_state(&w.withdrawal_id, state).await?;
        let err = c
            .sign_replacement(replace(&acme.id.to_string(), &w.withdrawal_id, kind))
            .await
            .expect_err("no key of the original sender");
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert_eq!(reason(&err), "NO_KEY_FOR_SENDER");
    }
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        1,
        "nothing signed"
    );
    Ok(())
}

#[tokio::test]
async fn a_fee_bump_of_a_cancel_is_stored_as_a_cancel() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut c = client(signer.addr).await?;
    let tenant = acme.id.to_string();
    c.sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?;
    stack.force_state(&w.withdrawal_id, "UNKNOWN").await?;
    let cancel = c
        .sign_replacement(replace(&tenant, &w.withdrawal_id, AttemptKind::Cancel))
        .await?
        .into_inner()
        .attempt
        .expect("cancel");
    // An operator sent it back to BROADCAST; the broadcaster asks for a fee bump of the latest.
    stack.force_state(&w.withdrawal_id, "BROADCAST").await?;
    let bumped = c
        .sign_replacement(replace(&tenant, &w.withdrawal_id, AttemptKind::FeeBump))
        .await?
        .into_inner()
        .attempt
        .expect("bump");
    assert_eq!(
        bumped.kind,
        AttemptKind::Cancel as i32,
        "stored as what it is"
    );
    let (prev, now) = (
        decode(&cancel.raw_transaction)?,
        decode(&bumped.raw_transaction)?,
    );
    let hot: Address = HOT_WALLET.parse()?;
    assert_eq!(
        (now.to, now.value, now.nonce),
        (hot, U256::ZERO, prev.nonce)
    );
    assert!(
        now.max_fee_per_gas > prev.max_fee_per_gas,
        "a real replacement"
    );
    let (kinds,): (Vec<String>,) =
        sqlx::query_as("SELECT array_agg(kind ORDER BY attempt) FROM tx_attempts WHERE op_id = $1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(kinds, ["ORIGINAL", "CANCEL", "CANCEL"]);
    Ok(())
}

#[tokio::test]
async fn an_attempt_row_whose_content_contradicts_its_kind_is_never_replaced() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut c = client(signer.addr).await?;
    let tenant = acme.id.to_string();
    c.sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?;
    stack.force_state(&w.withdrawal_id, "UNKNOWN").await?;
    c.sign_replacement(replace(&tenant, &w.withdrawal_id, AttemptKind::Cancel))
        .await?;
    // A superuser relabels the cancel as a fee bump (a transfer), bypassing the row's triggers.
    stack
        .relabel_attempt(&w.withdrawal_id, 2, "FEE_BUMP")
        .await?;
    stack.force_state(&w.withdrawal_id, "BROADCAST").await?;
    let err = c
        .sign_replacement(replace(&tenant, &w.withdrawal_id, AttemptKind::FeeBump))
        .await
        .expect_err("the relabelled row is not what it says");
    assert_eq!(reason(&err), "ATTEMPT_MISMATCH");
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        2,
        "nothing signed"
    );
    let (events,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM security_events WHERE kind = 'SIGNER_ATTEMPT_MISMATCH'",
    )
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(events, 1);
    Ok(())
}

#[tokio::test]
async fn the_database_refuses_a_replacement_from_another_sender() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?;
    // The signer's own login writes a second attempt from another account at the same nonce.
    let pool = stack
        .db
        .pool_as(opledger_testkit::ServiceRole::Signer)
        .await?;
    let refused = sqlx::query(
        "INSERT INTO tx_attempts (tenant_id, op_id, attempt, kind, network, chain_id, sender, \
           nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, max_priority_fee_per_gas) \
         SELECT tenant_id, op_id, 2, 'FEE_BUMP', network, chain_id, $2, nonce, \
           '0x' || repeat('ab', 32), raw_tx, gas_limit, max_fee_per_gas, max_priority_fee_per_gas \
         FROM tx_attempts WHERE op_id = $1 AND attempt = 1",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .bind(ROTATED_WALLET)
    .execute(&pool)
    .await
    .expect_err("another sender");
    let code = refused
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned());
    assert_eq!(code.as_deref(), Some("23514"), "check_violation: {refused}");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 1);
    Ok(())
}

#[tokio::test]
async fn a_rotation_while_a_withdrawal_is_in_flight_leaves_one_payable_transaction_each()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "1000000000000000000")
        .await?;
    let node = opledger_testkit::Anvil::start().await?;
    node.set_automine(false).await?;
    let before = node.balance(BOB).await?;
    let tenant = acme.id.to_string();
    // In flight from the old wallet at its nonce 0, pending on the node.
    let old = stack.withdraw(&acme, "1000000000000000", BOB).await?;
    approve(&stack, &acme, &old).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let original = client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &old.withdrawal_id))
        .await?
        .into_inner()
        .attempt
        .expect("original");
    node.send_raw_transaction(&original.raw_transaction).await?;
    drop(signer);
    // Rotated: the old wallet retiring, the new one active.
    let signer =
        InProcessSigner::start_with_wallets(&stack.db, acme.id, TestWallets::Rotated(true)).await?;
    let mut c = client(signer.addr).await?;
    stack.force_state(&old.withdrawal_id, "BROADCAST").await?;
    let bump = c
        .sign_replacement(replace(&tenant, &old.withdrawal_id, AttemptKind::FeeBump))
        .await?
        .into_inner()
        .attempt
        .expect("bump");
    // The bump replaces the original in the pool (same sender, same nonce, higher fees).
    node.send_raw_transaction(&bump.raw_transaction).await?;
    let new = stack.withdraw(&acme, "2000000000000000", BOB).await?;
    approve(&stack, &acme, &new).await?;
    let fresh = c
        .sign_withdrawal(sign_request(acme.id, &new.withdrawal_id))
        .await?
        .into_inner()
        .attempt
        .expect("new");
    node.send_raw_transaction(&fresh.raw_transaction).await?;
    node.mine(1).await?;
    assert_eq!(
        node.balance(BOB).await? - before,
        3_000_000_000_000_000,
        "each withdrawal paid exactly once"
    );
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 1);
    assert_eq!(node.nonce(ROTATED_WALLET, "latest").await?, 1);
    // Nothing stored can pay again: every signed byte string is now unminable.
    for raw in [
        &original.raw_transaction,
        &bump.raw_transaction,
        &fresh.raw_transaction,
    ] {
        let _ = node.send_raw_transaction(raw).await;
    }
    node.mine(2).await?;
    assert_eq!(
        node.balance(BOB).await? - before,
        3_000_000_000_000_000,
        "no second payable transaction"
    );
    Ok(())
}

/// What another signer's start does at a rotation: the new wallet registered ACTIVE, demoting the
/// old one to RETIRING.
async fn rotate(stack: &Stack, tenant: opledger_domain::ids::TenantId) -> anyhow::Result<()> {
    stack
        .admin
        .register_wallets(&[Registration {
            tenant_id: tenant,
            network: NETWORK.to_owned(),
            sender: ROTATED_WALLET.to_owned(),
            status: WalletStatus::Active,
        }])
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))
}

#[tokio::test]
async fn a_signer_with_an_outdated_configuration_cannot_start_a_withdrawal_from_a_rotated_out_wallet()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    // Still running with the old configuration (a rolling restart), while another signer's start
    // rotated the wallet out.
    let outdated = InProcessSigner::start(&stack.db, acme.id).await?;
    rotate(&stack, acme.id).await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let err = client(outdated.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .expect_err("the old wallet is not active");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&err), "WALLET_NOT_ACTIVE");
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        0,
        "nothing signed"
    );
    // The claim is given back at once: a signer holding the active wallet signs it.
    assert_eq!(stack.state(&w.withdrawal_id).await?, "APPROVED");
    let current =
        InProcessSigner::start_with_wallets(&stack.db, acme.id, TestWallets::Rotated(true)).await?;
    let signed = client(current.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?
        .into_inner()
        .attempt
        .expect("signed");
    assert_eq!(signed.from_address, ROTATED_WALLET);
    // Restarted with that configuration, it does not start: a start never undoes a rotation.
    drop(outdated);
    let err = InProcessSigner::start(&stack.db, acme.id)
        .await
        .expect_err("a configuration from before the rotation");
    assert!(err.to_string().contains("rotated out"), "{err}");
    let (active,): (String,) = sqlx::query_as(
        "SELECT sender FROM signer_wallets \
         WHERE tenant_id = $1 AND network = $2 AND status = 'ACTIVE'",
    )
    .bind(acme.id.as_uuid())
    .bind(NETWORK)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(active, ROTATED_WALLET, "the rotation stands");
    Ok(())
}

#[tokio::test]
async fn a_retiring_wallet_retires_only_when_nothing_it_signed_is_in_flight_or_within_the_reorganization_window()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w, _) = signed_by_the_old_wallet(&stack).await?;
    rotate(&stack, acme.id).await?;
    let grace = std::time::Duration::from_secs(3600);
    let store = &stack.admin;
    // Every condition on the rows other services write, with no minimum quiet time; the quiet
    // time (read from the signer's own attempts) is checked last.
    let no_quiet_time = RetireAfter {
        grace,
        quiet: std::time::Duration::ZERO,
    };
    let check = |grace| {
        store.retire_wallet(
            acme.id,
            NETWORK,
            HOT_WALLET,
            RetireAfter {
                grace,
                ..no_quiet_time
            },
        )
    };
    // Every state in which a replacement may still be needed keeps it.
    for state in ["SIGNED", "BROADCAST", "UNKNOWN", "FAILED_TERMINAL"] {
        stack.force_state(&w.withdrawal_id, state).await?;
        assert_eq!(
            store
                .in_flight_of_sender(acme.id, NETWORK, HOT_WALLET, grace)
                .await?,
            1,
            "{state}"
        );
        assert!(!check(grace).await?, "{state}");
    }
    // Confirmed just now: the watcher may still reopen it after a reorganization.
    stack.force_state(&w.withdrawal_id, "CONFIRMED").await?;
    sqlx::query(
        "UPDATE withdrawal_ops SET updated_at = now(), version = version + 1 WHERE op_id = $1",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .execute(&stack.db.admin_pool().await?)
    .await?;
    assert!(!check(grace).await?, "confirmed within the grace");
    // Another tenant's or network's wallet of the same address is not this one.
    let other = stack.tenant("globex").await?;
    assert!(
        !store
            .retire_wallet(other.id, NETWORK, HOT_WALLET, no_quiet_time)
            .await?
    );
    assert_eq!(registry(&stack).await?.len(), 3);
    // Confirmed longer ago than the grace, included in block 10.
    let op: uuid::Uuid = w.withdrawal_id.parse()?;
    sqlx::query(
        "UPDATE withdrawal_ops SET updated_at = now() - interval '2 hours', version = version + 1 \
         WHERE op_id = $1",
    )
    .bind(op)
    .execute(&stack.db.admin_pool().await?)
    .await?;
    sqlx::query(
        "INSERT INTO inclusions (tenant_id, op_id, tx_hash, block_number, block_hash) \
         VALUES ($1, $2, $3, 10, $4)",
    )
    .bind(acme.id.as_uuid())
    .bind(op)
    .bind(format!("0x{:064x}", 1))
    .bind(format!("0x{:064x}", 0xb10c))
    .execute(stack.admin.pool())
    .await?;
    // No watcher has recorded a reorganization floor on the network yet, then one below the
    // inclusion (a watcher stopped, or still within its window): the watcher may still reopen it.
    assert!(!check(grace).await?, "no reorganization floor yet");
    store.record_reorg_floor(NETWORK, 9).await?;
    assert!(!check(grace).await?, "included above the watcher's floor");
    // At or below the floor: the watcher no longer looks at it. Still kept while the wallet
    // signed anything less than the quiet time ago (its original, seconds ago)...
    store.record_reorg_floor(NETWORK, 10).await?;
    let quiet = RetireAfter {
        grace,
        quiet: std::time::Duration::from_secs(3600),
    };
    assert!(
        !store
            .retire_wallet(acme.id, NETWORK, HOT_WALLET, quiet)
            .await?,
        "signed within the quiet time"
    );
    // ...then retired, once, and for good.
    assert!(check(grace).await?);
    let (status,): (String,) =
        sqlx::query_as("SELECT status FROM signer_wallets WHERE tenant_id = $1 AND sender = $2")
            .bind(acme.id.as_uuid())
            .bind(HOT_WALLET)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(status, "RETIRED");
    assert!(
        check(grace).await?,
        "an answer lost and asked again: still retired"
    );
    // An ACTIVE wallet never retires.
    assert!(
        !store
            .retire_wallet(acme.id, NETWORK, ROTATED_WALLET, no_quiet_time)
            .await?
    );
    Ok(())
}
