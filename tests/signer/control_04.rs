//! Control 4: an atomic claim by a conditional update in the database. 64 concurrent signing
//! calls on one approved operation: one claim, one signature, one nonce.

use futures::future::join_all;
use opledger_tests::signer::{InProcessSigner, approve, attempts, client, sign_request};
use opledger_tests::{ALICE, Stack, reason};

#[tokio::test]
async fn control_04_sixty_four_concurrent_sign_calls_make_one_signature() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    // Two signer instances, as a deployment with a standby would have.
    let (a, b) = (
        InProcessSigner::start(&stack.db, acme.id).await?,
        InProcessSigner::start(&stack.db, acme.id).await?,
    );
    let (ca, cb) = (client(a.addr).await?, client(b.addr).await?);
    let calls = (0..64).map(|i| {
        let mut c = if i % 2 == 0 { ca.clone() } else { cb.clone() };
        let request = sign_request(acme.id, &w.withdrawal_id);
        async move { c.sign_withdrawal(request).await }
    });
    let results = join_all(calls).await;
    let hashes: std::collections::HashSet<String> = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .filter_map(|r| r.get_ref().attempt.as_ref().map(|a| a.tx_hash.clone()))
        .collect();
    let fresh = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| !r.get_ref().already_signed))
        .count();
    let conflicts = results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .inspect(|e| {
            assert_eq!(
                (e.code(), reason(e).as_str()),
                (tonic::Code::Aborted, "NOT_SIGNABLE"),
                "{e:?}"
            )
        })
        .count();
    assert_eq!(fresh, 1, "exactly one call signed");
    assert_eq!(
        hashes.len(),
        1,
        "every success returned the one stored artifact"
    );
    assert_eq!(
        fresh
            + conflicts
            + results
                .iter()
                .filter(|r| r.as_ref().is_ok_and(|r| r.get_ref().already_signed))
                .count(),
        64
    );
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        1,
        "one signature persisted"
    );
    let (claims,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM operation_transitions WHERE tenant_id = $1 AND to_state = 'SIGNING'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(claims, 1, "one claim");
    let (next,): (i64,) = sqlx::query_as("SELECT next_nonce FROM signer_nonces")
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!(next, 1, "one nonce consumed");
    stack.assert_invariants().await
}
