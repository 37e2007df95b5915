//! Group commit of one sender's signatures: many ready claims share one transaction (one nonce
//! lock, one durable commit), each still gets exactly its own transaction with a nonce of an
//! unbroken sequence, and a batch that cannot be kept whole keeps nothing.

use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;
use opledger_evm::signer::decode;
use opledger_evm::{Address, U256};
use opledger_store::signing::{AttemptKind, NewAttempt, Sender, SignClaim};
use opledger_store::{Store, StoreConfig};
use opledger_tests::signer::{
    HOT_WALLET, InProcessSigner, NETWORK, approve, client, sign_request, signer_url,
};
use opledger_tests::{ALICE, Stack};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

#[tokio::test]
async fn concurrent_signatures_of_one_sender_share_commits_and_each_gets_its_own_nonce()
-> anyhow::Result<()> {
    const N: u64 = 48;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    // Distinct amounts, so each signed transaction can be matched to its own withdrawal.
    let mut amounts = BTreeMap::new();
    for i in 0..N {
        let w = stack
            .withdraw(&acme, &(1000 + i).to_string(), ALICE)
            .await?;
        approve(&stack, &acme, &w).await?;
        amounts.insert(w.withdrawal_id.clone(), 1000 + i);
    }
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let calls = amounts.keys().map(|id| {
        let id = id.clone();
        let addr = signer.addr;
        let tenant = acme.id;
        tokio::spawn(async move {
            let mut client = client(addr).await?;
            let signed = client
                .sign_withdrawal(sign_request(tenant, &id))
                .await?
                .into_inner();
            anyhow::Ok((id, signed))
        })
    });
    let mut nonces = BTreeSet::new();
    for call in futures::future::join_all(calls).await {
        let (id, signed) = call??;
        assert!(!signed.already_signed, "each call signs its own withdrawal");
        let decoded = decode(&signed.attempt.expect("attempt").raw_transaction)?;
        assert_eq!(decoded.value, U256::from(amounts[&id]), "its own amount");
        assert_eq!(decoded.to, ALICE.parse::<Address>()?);
        assert!(
            nonces.insert(decoded.nonce),
            "nonce {} twice",
            decoded.nonce
        );
    }
    assert_eq!(nonces, (0..N).collect(), "one unbroken nonce sequence");

    let pool = stack.admin.pool();
    let (attempts, operations): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT op_id) FROM tx_attempts WHERE tenant_id = $1",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(pool)
    .await?;
    assert_eq!((attempts, operations), (N as i64, N as i64));
    let (next,): (i64,) =
        sqlx::query_as("SELECT next_nonce FROM signer_nonces WHERE network = $1 AND sender = $2")
            .bind(NETWORK)
            .bind(HOT_WALLET)
            .fetch_one(pool)
            .await?;
    assert_eq!(next, N as i64);
    // now() is the transaction's start: SIGNED moves that share it were committed together.
    let (signed, commits): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT created_at) FROM operation_transitions \
         WHERE tenant_id = $1 AND to_state = 'SIGNED'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(pool)
    .await?;
    assert_eq!(signed, N as i64);
    assert!(
        commits < signed,
        "{signed} signatures in {commits} commits: none was shared"
    );
    stack.assert_invariants().await?;
    Ok(())
}

#[tokio::test]
async fn a_batch_with_a_lost_claim_keeps_nothing_and_uses_no_nonce() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let store = Store::connect(&signer_url(&stack.db).await?, StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    let mut ops = Vec::new();
    for _ in 0..3 {
        let w = stack.withdraw(&acme, "500", ALICE).await?;
        approve(&stack, &acme, &w).await?;
        let op: OperationId = w.withdrawal_id.parse()?;
        let hash = stack
            .admin
            .get_withdrawal(acme.id, op)
            .await?
            .expect("stored")
            .payload_hash;
        store
            .claim_for_signing(acme.id, op, "owner-a", hash, Duration::from_secs(30))
            .await?;
        ops.push(op);
    }
    // The second claim's lease has run out (another signer may reclaim it at any moment).
    sqlx::query("UPDATE withdrawal_ops SET lease_expires_at = now() - interval '1 second', version = version + 1 WHERE op_id = $1")
        .bind(ops[1].as_uuid())
        .execute(stack.admin.pool())
        .await?;
    let sender = Sender {
        network: NETWORK,
        address: HOT_WALLET,
        initial_nonce: 0,
    };
    let claims: Vec<_> = ops
        .iter()
        .map(|op| SignClaim {
            tenant_id: acme.id,
            op_id: *op,
            owner: "owner-a",
        })
        .collect();
    let kept = store
        .persist_signed_batch(&sender, &claims, |i, nonce| {
            Ok::<_, std::convert::Infallible>(fake_attempt(i, nonce))
        })
        .await?;
    assert!(kept.is_none(), "a batch with a lost claim is not kept");
    assert_nothing_signed(&stack, acme.id, &ops).await?;

    // Without the lost claim the batch is kept: consecutive nonces from the first, in order.
    let held = [claims[0], claims[2]];
    let kept = store
        .persist_signed_batch(&sender, &held, |i, nonce| {
            Ok::<_, std::convert::Infallible>(fake_attempt(i, nonce))
        })
        .await?
        .expect("kept");
    let nonces: Vec<u64> = kept.iter().map(|a| a.signed.nonce).collect();
    assert_eq!(nonces, vec![0, 1]);
    for op in [ops[0], ops[2]] {
        let state = stack
            .admin
            .get_withdrawal(acme.id, op)
            .await?
            .expect("op")
            .state;
        assert_eq!(state, OperationState::Signed);
    }
    let state = stack
        .admin
        .get_withdrawal(acme.id, ops[1])
        .await?
        .expect("op")
        .state;
    assert_eq!(
        state,
        OperationState::Signing,
        "the lost claim is untouched"
    );
    Ok(())
}

/// Nothing of the batch was kept: no attempt, no nonce row, every operation still SIGNING.
async fn assert_nothing_signed(
    stack: &Stack,
    tenant: TenantId,
    ops: &[OperationId],
) -> anyhow::Result<()> {
    let (attempts,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM tx_attempts WHERE tenant_id = $1")
            .bind(tenant.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    let (nonce_rows,): (i64,) = sqlx::query_as("SELECT count(*) FROM signer_nonces")
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!((attempts, nonce_rows), (0, 0));
    for op in ops {
        let state = stack
            .admin
            .get_withdrawal(tenant, *op)
            .await?
            .expect("op")
            .state;
        assert_eq!(state, OperationState::Signing);
    }
    Ok(())
}

/// A well-formed attempt record (the store checks sender, nonce and kind, not the signature).
fn fake_attempt(i: usize, nonce: u64) -> NewAttempt {
    NewAttempt {
        kind: AttemptKind::Original,
        chain_id: 31337,
        sender: HOT_WALLET.to_owned(),
        nonce,
        tx_hash: format!("0x{:064x}", 0xba7c_0000_u64 + i as u64 + nonce * 1000),
        raw_tx: vec![0x02, i as u8],
        gas_limit: 21_000,
        max_fee_per_gas: 2_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
    }
}
