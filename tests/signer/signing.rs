//! What the signer produces: exact, recoverable bytes a real node accepts; one nonce per
//! operation; idempotent calls; fee caps; persisted replacements; authenticated callers only.

use opledger_evm::signer::decode;
use opledger_evm::{Address, U256};
use opledger_proto::v1::{AttemptKind, SignReplacementRequest};
use opledger_testkit::Anvil;
use opledger_tests::signer::{
    CALLER_TOKEN, CHAIN_ID, HOT_WALLET, InProcessSigner, TOKEN, TestWallets, approve, attempts,
    client, sign_request,
};
use opledger_tests::{ALICE, BOB, Stack, authed, new_key, payload, reason};
use std::time::Duration;

#[tokio::test]
async fn signed_bytes_are_exact_recover_to_the_hot_wallet_and_a_real_node_accepts_them()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    let w = stack.withdraw(&acme, "1234567890000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    let first = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?
        .into_inner();
    assert!(!first.already_signed);
    let attempt = first.attempt.expect("attempt");
    let decoded = decode(&attempt.raw_transaction)?;
    assert_eq!(decoded.to, BOB.parse::<Address>()?);
    assert_eq!(decoded.value, U256::from(1_234_567_890_000_000_u128));
    assert!(decoded.input.is_empty());
    assert_eq!((decoded.nonce, decoded.chain_id), (0, CHAIN_ID));
    assert_eq!(decoded.from, HOT_WALLET.parse::<Address>()?);
    assert_eq!(format!("{:#x}", decoded.hash), attempt.tx_hash);
    assert!(
        u128::from(decoded.gas_limit) * decoded.max_fee_per_gas <= 1_000_000_000_000_000,
        "within the fee cap"
    );

    // Calling again returns the stored artifact, byte for byte; nothing new is signed.
    let again = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?
        .into_inner();
    assert!(again.already_signed);
    assert_eq!(
        again.attempt.map(|a| a.raw_transaction),
        Some(attempt.raw_transaction.clone())
    );
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 1);

    // A real node accepts exactly these bytes and pays BOB the amount.
    let node = Anvil::start().await?;
    let before = node.balance(BOB).await?;
    let hash = node
        .send_raw_transaction(&attempt.raw_transaction)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(hash.to_lowercase(), attempt.tx_hash);
    let receipt = node.wait_receipt(&hash, Duration::from_secs(10)).await?;
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(node.balance(BOB).await? - before, 1_234_567_890_000_000);
    // The operation is SIGNED and references its first attempt; the hold is untouched.
    let (state, reference): (String, Option<String>) =
        sqlx::query_as("SELECT state, signed_tx_ref FROM withdrawal_ops WHERE op_id = $1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(
        (state.as_str(), reference.as_deref()),
        ("SIGNED", Some(attempt.tx_hash.as_str()))
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn operations_get_consecutive_nonces_and_tokens_are_erc20_transfers() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    stack.fund(&acme, "treasury", "USDC", "1000000").await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    let mut nonces = Vec::new();
    for (asset, to) in [("ETH", ALICE), ("USDC", BOB), ("ETH", ALICE)] {
        let mut p = payload("500", to);
        p.asset = asset.into();
        let mut ops = stack.client().await?;
        let w = ops
            .create_withdrawal(authed(
                &acme.client,
                opledger_proto::v1::CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(p),
                },
            ))
            .await?
            .into_inner()
            .withdrawal
            .expect("w");
        approve(&stack, &acme, &w).await?;
        let signed = client
            .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
            .await?
            .into_inner();
        let decoded = decode(&signed.attempt.expect("attempt").raw_transaction)?;
        nonces.push(decoded.nonce);
        if asset == "USDC" {
            assert_eq!(
                decoded.to,
                TOKEN.parse::<Address>()?,
                "a token transfer calls the token contract"
            );
            assert_eq!(decoded.value, U256::ZERO);
            let request = decoded.transfer_request().expect("transfer");
            assert_eq!(
                request.kind,
                opledger_evm::tx::TransferKind::Erc20 {
                    token: TOKEN.parse()?,
                    amount: U256::from(500)
                }
            );
            assert_eq!(request.to, BOB.parse::<Address>()?);
        }
    }
    assert_eq!(nonces, vec![0, 1, 2]);
    Ok(())
}

#[tokio::test]
async fn a_fee_cap_below_the_network_fee_is_refused_nothing_signed_and_it_ends_with_an_owner()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let mut p = payload("500", ALICE);
    p.fee_cap = "1000".into();
    let mut ops = stack.client().await?;
    let w = ops
        .create_withdrawal(authed(
            &acme.client,
            opledger_proto::v1::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(p),
            },
        ))
        .await?
        .into_inner()
        .withdrawal
        .expect("w");
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    let err = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .expect_err("cap");
    assert_eq!(reason(&err), "FEE_CAP_EXCEEDED");
    // Nothing here can execute it within its cap: it ends for the payments team, hold kept.
    let (state, owner, code) = stack.ending(&w.withdrawal_id).await?;
    assert_eq!(
        (state.as_str(), owner.as_str(), code.as_str()),
        ("FAILED_TERMINAL", "payments-operations", "FEE_CAP_EXCEEDED")
    );
    let err = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .expect_err("ended");
    assert_eq!(reason(&err), "NOT_SIGNABLE");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_withdrawal_whose_wallet_is_not_held_ends_for_operations_not_security()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    // A signer registered the tenant's wallet, so the withdrawal is accepted at create...
    drop(InProcessSigner::start(&stack.db, acme.id).await?);
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    // ...and the signer that serves it no longer holds it (its entry removed).
    let signer = InProcessSigner::start_with_wallets(&stack.db, acme.id, TestWallets::None).await?;
    let mut client = client(signer.addr).await?;
    let err = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .expect_err("no wallet");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    // A configuration fault, not tampering: it ends for the payments team with its reason, hold
    // kept, no security event, nothing signed, and it is not retried.
    let (state, owner, code) = stack.ending(&w.withdrawal_id).await?;
    assert_eq!(
        (state.as_str(), owner.as_str(), code.as_str()),
        (
            "FAILED_TERMINAL",
            "payments-operations",
            "SIGNER_NOT_CONFIGURED"
        )
    );
    let (events,): (i64,) = sqlx::query_as("SELECT count(*) FROM security_events")
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!(events, 0);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (1_000_000 - 500, 500),
        "hold kept"
    );
    let err = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .expect_err("ended");
    assert_eq!(reason(&err), "NOT_SIGNABLE");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 0);
    Ok(())
}

#[tokio::test]
async fn replacements_keep_the_nonce_and_are_persisted_before_they_are_returned()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    let replace = |kind: AttemptKind| {
        authed(
            CALLER_TOKEN,
            SignReplacementRequest {
                tenant_id: acme.id.to_string(),
                withdrawal_id: w.withdrawal_id.clone(),
                kind: kind as i32,
            },
        )
    };
    // Nothing to replace before the original exists: an APPROVED withdrawal is not bumpable.
    let err = client
        .sign_replacement(replace(AttemptKind::FeeBump))
        .await
        .expect_err("unsigned");
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    assert_eq!(reason(&err), "CALLER_NOT_ALLOWED");
    // Fee bumps are for BROADCAST withdrawals, cancels for UNKNOWN ones (admin SQL moves it).
    let admin = stack.db.admin_pool().await?;
    let op: uuid::Uuid = w.withdrawal_id.parse()?;
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
    let original = decode(
        &client
            .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
            .await?
            .into_inner()
            .attempt
            .expect("a")
            .raw_transaction,
    )?;
    set_state("BROADCAST").await?;
    let bump = client
        .sign_replacement(replace(AttemptKind::FeeBump))
        .await?
        .into_inner()
        .attempt
        .expect("bump");
    assert_eq!((bump.attempt, bump.kind), (2, AttemptKind::FeeBump as i32));
    let bumped = decode(&bump.raw_transaction)?;
    assert_eq!(
        (bumped.nonce, bumped.to, bumped.value),
        (original.nonce, original.to, original.value)
    );
    assert!(bumped.max_fee_per_gas >= original.max_fee_per_gas * 125 / 100);
    set_state("UNKNOWN").await?;
    let cancel = client
        .sign_replacement(replace(AttemptKind::Cancel))
        .await?
        .into_inner()
        .attempt
        .expect("cancel");
    let cancelled = decode(&cancel.raw_transaction)?;
    assert_eq!(
        (cancel.attempt, cancelled.nonce, cancelled.value),
        (3, original.nonce, U256::ZERO)
    );
    assert_eq!(
        cancelled.to,
        HOT_WALLET.parse::<Address>()?,
        "a cancel is a self-transfer"
    );
    assert!(
        cancelled.max_fee_per_gas > bumped.max_fee_per_gas,
        "it outbids the attempt it replaces"
    );
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 3);
    // Bumps stop at the payload's fee cap (1e15 wei / 21000 gas).
    set_state("BROADCAST").await?;
    let mut refused = false;
    for _ in 0..40 {
        if let Err(e) = client.sign_replacement(replace(AttemptKind::FeeBump)).await {
            assert_eq!(reason(&e), "FEE_CAP_EXCEEDED");
            refused = true;
            break;
        }
    }
    assert!(refused, "fee bumps are bounded by the fee cap");
    let (max_fee,): (String,) = sqlx::query_as(
        "SELECT max(gas_limit * max_fee_per_gas)::text FROM tx_attempts WHERE op_id = $1 AND kind = 'FEE_BUMP'",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .fetch_one(stack.admin.pool())
    .await?;
    assert!(max_fee.parse::<u128>()? <= 1_000_000_000_000_000);
    Ok(())
}

#[tokio::test]
async fn callers_without_the_signer_token_are_refused() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    // A tenant's own API key is not a signer caller token.
    let request = opledger_proto::v1::SignWithdrawalRequest {
        tenant_id: acme.id.to_string(),
        withdrawal_id: w.withdrawal_id.clone(),
    };
    for token in [acme.client.as_str(), "nope"] {
        let err = client
            .sign_withdrawal(authed(token, request.clone()))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
    }
    let err = client
        .sign_withdrawal(tonic::Request::new(request))
        .await
        .expect_err("refused");
    assert_eq!(reason(&err), "CREDENTIALS_MISSING");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 0);
    Ok(())
}
