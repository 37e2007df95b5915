//! Creating withdrawals: replay, concurrency, insufficient funds, key validation.

use futures::future::join_all;
use opledger_proto::v1::{CreateWithdrawalRequest, WithdrawalState};
use opledger_tests::{ALICE, Stack, authed, new_key, payload, reason};

#[tokio::test]
async fn replay_returns_the_same_operation_marked_replayed() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let request = CreateWithdrawalRequest {
        idempotency_key: new_key(),
        payload: Some(payload("100", ALICE)),
    };
    let first = client
        .create_withdrawal(authed(&acme.client, request.clone()))
        .await?
        .into_inner();
    let again = client
        .create_withdrawal(authed(&acme.client, request))
        .await?
        .into_inner();
    assert!(!first.replayed);
    assert!(again.replayed);
    assert_eq!(first.withdrawal, again.withdrawal);
    let w = first.withdrawal.expect("withdrawal");
    assert_eq!(w.state, WithdrawalState::Requested as i32);
    assert_eq!(w.payload_hash.len(), 64);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    stack.assert_invariants().await
}

#[tokio::test]
async fn sixty_four_concurrent_identical_creates_make_one_operation_and_one_hold()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let request = CreateWithdrawalRequest {
        idempotency_key: new_key(),
        payload: Some(payload("100", ALICE)),
    };
    let calls = (0..64).map(|_| {
        let request = request.clone();
        let token = acme.client.clone();
        let addr = stack.addr;
        async move {
            let mut client =
                opledger_proto::v1::operations_service_client::OperationsServiceClient::connect(
                    format!("http://{addr}"),
                )
                .await?;
            anyhow::Ok(
                client
                    .create_withdrawal(authed(&token, request))
                    .await?
                    .into_inner(),
            )
        }
    });
    let results: Vec<_> = join_all(calls)
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let ids: std::collections::HashSet<_> = results
        .iter()
        .map(|r| r.withdrawal.as_ref().map(|w| w.withdrawal_id.clone()))
        .collect();
    assert_eq!(ids.len(), 1, "every caller gets the one operation");
    assert_eq!(
        results.iter().filter(|r| !r.replayed).count(),
        1,
        "exactly one caller created it"
    );
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 1);
    assert_eq!(stack.count("ledger_holds", acme.id).await?, 1);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    stack.assert_invariants().await
}

#[tokio::test]
async fn insufficient_funds_is_refused_and_stores_nothing() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "99").await?;
    let mut client = stack.client().await?;
    let key = new_key();
    let err = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: key.clone(),
                payload: Some(payload("100", ALICE)),
            },
        ))
        .await
        .expect_err("100 > 99");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&err), "INSUFFICIENT_FUNDS");
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 0);
    assert_eq!(stack.count("ledger_holds", acme.id).await?, 0);
    assert_eq!(stack.count("operation_transitions", acme.id).await?, 0);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (99, 0));
    // Nothing was stored, so the same key is free for the intent once funds arrive.
    stack.fund(&acme, "treasury", "ETH", "1").await?;
    let created = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: key,
                payload: Some(payload("100", ALICE)),
            },
        ))
        .await?
        .into_inner();
    assert!(!created.replayed);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (0, 100));
    // An account that does not exist has no funds either.
    let mut other = payload("1", ALICE);
    other.source_account = "nosuch".to_owned();
    let err = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(other),
            },
        ))
        .await
        .expect_err("no account");
    assert_eq!(reason(&err), "INSUFFICIENT_FUNDS");
    stack.assert_invariants().await
}

#[tokio::test]
async fn bad_keys_and_payloads_get_typed_errors_and_change_nothing() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let cases = [
        ("", payload("1", ALICE), "IDEMPOTENCY_KEY_MISSING"),
        ("short", payload("1", ALICE), "IDEMPOTENCY_KEY_INVALID"),
        (
            "jane.doe.customer@example.com",
            payload("1", ALICE),
            "IDEMPOTENCY_KEY_INVALID",
        ),
        (
            "withdraw-0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
            payload("1", ALICE),
            "IDEMPOTENCY_KEY_INVALID",
        ),
        (
            "aaaaaaaaaaaaaaaaaaaaaaaa",
            payload("1", ALICE),
            "IDEMPOTENCY_KEY_INVALID",
        ),
        (
            "4111111111111111111",
            payload("1", ALICE),
            "IDEMPOTENCY_KEY_INVALID",
        ),
    ];
    for (key, p, expected) in cases {
        let err = client
            .create_withdrawal(authed(
                &acme.client,
                CreateWithdrawalRequest {
                    idempotency_key: key.to_owned(),
                    payload: Some(p),
                },
            ))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{expected}");
        assert_eq!(reason(&err), expected);
        if key.len() >= 8 {
            assert!(
                !err.message().contains(key),
                "the key never appears in the error"
            );
        }
    }
    let mut bad_fields = Vec::new();
    let mut p = payload("01", ALICE);
    bad_fields.push((p.clone(), "payload.amount"));
    p = payload("0", ALICE);
    bad_fields.push((p.clone(), "payload.amount"));
    p = payload("1.5", ALICE);
    bad_fields.push((p.clone(), "payload.amount"));
    p = payload("1", "0x1234");
    bad_fields.push((p.clone(), "payload.destination"));
    p = payload("1", ALICE);
    p.memo = Some(String::new());
    bad_fields.push((p.clone(), "payload.memo"));
    p = payload("1", ALICE);
    p.fee_cap = "-1".to_owned();
    bad_fields.push((p.clone(), "payload.fee_cap"));
    p = payload("1", ALICE);
    p.asset = "eth".to_owned();
    bad_fields.push((p.clone(), "payload.asset"));
    for (p, field) in bad_fields {
        let err = client
            .create_withdrawal(authed(
                &acme.client,
                CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(p),
                },
            ))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert_eq!(reason(&err), "INVALID_FIELD");
        use tonic_types::StatusExt;
        let info = err
            .get_error_details()
            .error_info()
            .cloned()
            .expect("error info");
        assert_eq!(info.metadata.get("field").map(String::as_str), Some(field));
    }
    let err = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: None,
            },
        ))
        .await
        .expect_err("no payload");
    assert_eq!(reason(&err), "INVALID_FIELD");
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 0);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (1000, 0));
    Ok(())
}
