//! Control 1: tenant-scoped durable operation identity.

use opledger_proto::v1::{CreateWithdrawalRequest, GetWithdrawalRequest, ListWithdrawalsRequest};
use opledger_tests::{ALICE, BOB, Stack, authed, new_key, payload, reason};

#[tokio::test]
async fn control_01_two_tenants_same_key_never_see_each_other() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let globex = stack.tenant("globex").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    stack.fund(&globex, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let key = new_key();

    let a = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: key.clone(),
                payload: Some(payload("100", ALICE)),
            },
        ))
        .await?
        .into_inner();
    // Same key, different payload, other tenant: a new, independent operation, not a replay of
    // acme's and not a key-reuse refusal.
    let g = client
        .create_withdrawal(authed(
            &globex.client,
            CreateWithdrawalRequest {
                idempotency_key: key.clone(),
                payload: Some(payload("7", BOB)),
            },
        ))
        .await?
        .into_inner();
    assert!(
        !a.replayed && !g.replayed,
        "each tenant's first use of the key creates"
    );
    let (a, g) = (
        a.withdrawal.expect("acme op"),
        g.withdrawal.expect("globex op"),
    );
    assert_ne!(a.withdrawal_id, g.withdrawal_id);
    assert_eq!(g.payload.as_ref().map(|p| p.amount.as_str()), Some("7"));
    assert_eq!(
        g.payload.as_ref().map(|p| p.destination.as_str()),
        Some(BOB)
    );

    // Replays stay within the tenant: each gets back exactly what it originally received.
    let a2 = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: key.clone(),
                payload: Some(payload("100", ALICE)),
            },
        ))
        .await?
        .into_inner();
    assert!(a2.replayed);
    assert_eq!(
        a2.withdrawal.map(|w| w.withdrawal_id),
        Some(a.withdrawal_id.clone())
    );

    // Neither tenant can read the other's operation, by id or by listing.
    let err = client
        .get_withdrawal(authed(
            &globex.client,
            GetWithdrawalRequest {
                withdrawal_id: a.withdrawal_id.clone(),
            },
        ))
        .await
        .expect_err("globex must not see acme's operation");
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(reason(&err), "NOT_FOUND");
    assert!(!err.message().contains(&a.withdrawal_id));
    let listed = client
        .list_withdrawals(authed(&globex.client, ListWithdrawalsRequest::default()))
        .await?
        .into_inner();
    let ids: Vec<_> = listed
        .withdrawals
        .iter()
        .map(|w| w.withdrawal_id.clone())
        .collect();
    assert_eq!(ids, vec![g.withdrawal_id.clone()]);

    // Balances moved for each tenant independently.
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 1);
    assert_eq!(stack.count("withdrawal_ops", globex.id).await?, 1);
    assert_eq!(stack.count("ledger_holds", acme.id).await?, 1);
    assert_eq!(stack.count("ledger_holds", globex.id).await?, 1);
    stack.assert_invariants().await
}
