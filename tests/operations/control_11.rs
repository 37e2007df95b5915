//! Control 11: legitimate later operations are not suppressed.

use opledger_proto::v1::{CreateWithdrawalRequest, RiskFlag};
use opledger_tests::{ALICE, BOB, Stack, authed, new_key, payload};

#[tokio::test]
async fn control_11_same_destination_and_amount_with_distinct_keys_both_execute()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "2000").await?;
    let mut client = stack.client().await?;
    let mut create = async |amount: &str, to: &str| -> anyhow::Result<_> {
        Ok(client
            .create_withdrawal(authed(
                &acme.client,
                CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(payload(amount, to)),
                },
            ))
            .await?
            .into_inner())
    };
    let first = create("250", ALICE).await?;
    let second = create("250", ALICE).await?;
    let other_amount = create("251", ALICE).await?;
    let other_destination = create("250", BOB).await?;

    let flags = |r: &opledger_proto::v1::CreateWithdrawalResponse| {
        r.withdrawal
            .as_ref()
            .map(|w| w.risk_flags.clone())
            .unwrap_or_default()
    };
    assert!(
        !first.replayed && !second.replayed,
        "two keys are two intents"
    );
    assert_ne!(
        first.withdrawal.as_ref().map(|w| &w.withdrawal_id),
        second.withdrawal.as_ref().map(|w| &w.withdrawal_id)
    );
    assert!(flags(&first).is_empty());
    assert_eq!(
        flags(&second),
        vec![RiskFlag::SameDestinationAndAmount as i32]
    );
    assert!(
        flags(&other_amount).is_empty(),
        "a different amount is not the same payment"
    );
    assert!(
        flags(&other_destination).is_empty(),
        "a different destination is not the same payment"
    );

    // Both same-destination withdrawals hold funds: nothing was merged or dropped.
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 4);
    assert_eq!(stack.count("ledger_holds", acme.id).await?, 4);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (999, 1001)
    );
    stack.assert_invariants().await
}
