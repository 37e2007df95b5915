//! Listing withdrawals: pages, state filter, tokens bound to the query.

use opledger_proto::v1::{CreateWithdrawalRequest, ListWithdrawalsRequest, WithdrawalState};
use opledger_tests::{ALICE, Stack, authed, new_key, payload, reason};

#[tokio::test]
async fn pages_cover_every_withdrawal_once_newest_first() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let mut created = Vec::new();
    for i in 1..=7 {
        let r = client
            .create_withdrawal(authed(
                &acme.client,
                CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(payload(&i.to_string(), ALICE)),
                },
            ))
            .await?
            .into_inner();
        created.push(r.withdrawal.expect("w").withdrawal_id);
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_withdrawals(authed(
                &acme.client,
                ListWithdrawalsRequest {
                    page_size: 3,
                    page_token: token.clone(),
                    states: vec![WithdrawalState::Requested as i32],
                },
            ))
            .await?
            .into_inner();
        assert!(page.withdrawals.len() <= 3);
        seen.extend(page.withdrawals.into_iter().map(|w| w.withdrawal_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    created.reverse();
    assert_eq!(seen, created);

    let none = client
        .list_withdrawals(authed(
            &acme.client,
            ListWithdrawalsRequest {
                states: vec![WithdrawalState::Confirmed as i32],
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    assert!(none.withdrawals.is_empty());

    // A token from one filter is refused for another.
    let first = client
        .list_withdrawals(authed(
            &acme.client,
            ListWithdrawalsRequest {
                page_size: 2,
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let err = client
        .list_withdrawals(authed(
            &acme.client,
            ListWithdrawalsRequest {
                page_size: 2,
                page_token: first.next_page_token,
                states: vec![WithdrawalState::Requested as i32],
            },
        ))
        .await
        .expect_err("token of another query");
    assert_eq!(reason(&err), "INVALID_PAGE_TOKEN");
    let err = client
        .list_withdrawals(authed(
            &acme.client,
            ListWithdrawalsRequest {
                states: vec![0],
                ..Default::default()
            },
        ))
        .await
        .expect_err("unspecified state");
    assert_eq!(reason(&err), "INVALID_FIELD");
    Ok(())
}
