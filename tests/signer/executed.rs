//! Approved equals executed, field by field: real withdrawals (native ETH and an ERC-20 token)
//! are created, approved with the approver's own key and signed by the real signer; the stored
//! `raw_tx` of each is decoded independently and every payload field the approver signed for
//! (through the payload hash) is compared with what the transaction does, with the signer's
//! network configuration supplying chain id, token address, gas limits and fees. No memo is
//! carried: the network's transfers cannot carry one, so a memo is refused at create, and the
//! calldata holds exactly the transfer and nothing else. The bytes then do exactly that on a
//! real node.

use opledger_domain::ids::TenantId;
use opledger_evm::signer::decode;
use opledger_evm::{Address, U256};
use opledger_proto::v1 as pb;
use opledger_testkit::{Anvil, deploy_test_token, token_balance};
use opledger_tests::signer::{
    CHAIN_ID, HOT_WALLET, InProcessSigner, NETWORK, TOKEN, approve, client, network, sign_request,
};
use opledger_tests::{Stack, authed, new_key, payload, reason};
use std::time::Duration;

/// The ERC-20 `transfer(address,uint256)` selector.
const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];

/// Exactly the calldata of `transfer(to, amount)`: selector, the address left-padded to 32 bytes,
/// the amount as a 32-byte big-endian word. Encoded here by hand, not by the signer's code.
fn transfer_calldata(to: &Address, amount: u128) -> Vec<u8> {
    let mut data = TRANSFER_SELECTOR.to_vec();
    data.extend_from_slice(&[0_u8; 12]);
    data.extend_from_slice(to.as_slice());
    data.extend_from_slice(&[0_u8; 16]);
    data.extend_from_slice(&amount.to_be_bytes());
    data
}

/// One withdrawal as the approver saw it and as the signer executed it.
struct Executed {
    approved: pb::WithdrawalPayload,
    withdrawal: pb::Withdrawal,
    raw: Vec<u8>,
}

async fn create(
    stack: &Stack,
    tenant: &opledger_tests::Tenant,
    body: pb::WithdrawalPayload,
) -> anyhow::Result<pb::Withdrawal> {
    stack
        .client()
        .await?
        .create_withdrawal(authed(
            &tenant.client,
            pb::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(body),
            },
        ))
        .await?
        .into_inner()
        .withdrawal
        .ok_or_else(|| anyhow::anyhow!("no withdrawal in the response"))
}

/// The payload hash of the approval decisions stored for the withdrawal (each names one).
async fn approved_hashes(stack: &Stack, withdrawal_id: &str) -> anyhow::Result<Vec<String>> {
    let rows: Vec<(Vec<u8>,)> = sqlx::query_as(
        "SELECT payload_hash FROM approvals WHERE op_id = $1 AND decision = 'APPROVE'",
    )
    .bind(withdrawal_id.parse::<uuid::Uuid>()?)
    .fetch_all(stack.admin.pool())
    .await?;
    Ok(rows.into_iter().map(|(h,)| hex::encode(h)).collect())
}

/// Compares every field of the approved payload with what the signed bytes do.
fn assert_executed_as_approved(
    tenant: TenantId,
    e: &Executed,
    nonce: u64,
    approved_hashes: &[String],
) -> anyhow::Result<()> {
    let net = network();
    let id = &e.withdrawal.withdrawal_id;
    // What the approver signed for: the hash of exactly these fields, for this tenant.
    let domain = opledger_grpc::convert::payload(tenant, Some(e.approved.clone()))
        .map_err(|s| anyhow::anyhow!("approved payload: {}", s.message()))?;
    assert_eq!(domain.hash().to_hex(), e.withdrawal.payload_hash, "{id}");
    assert_eq!(
        approved_hashes,
        std::slice::from_ref(&e.withdrawal.payload_hash),
        "{id}: every approval names this hash"
    );
    assert_eq!(
        e.withdrawal.payload.as_ref(),
        Some(&e.approved),
        "{id}: stored payload is the approved one"
    );

    let tx = decode(&e.raw)?;
    // network -> chain id (the signer's configuration for the payload's network).
    assert_eq!(e.approved.network, NETWORK, "{id}");
    assert_eq!(tx.chain_id, net.chain_id, "{id}: chain id");
    assert_eq!(tx.chain_id, CHAIN_ID, "{id}: chain id");
    // source account -> the tenant's hot wallet on that network, at its next nonce.
    assert_eq!(tx.from, HOT_WALLET.parse::<Address>()?, "{id}: sender");
    assert_eq!(tx.nonce, nonce, "{id}: nonce");
    let destination: Address = e.approved.destination.parse()?;
    let amount: u128 = e.approved.amount.parse()?;
    // asset -> native value or the configured token contract; destination and amount exact.
    if e.approved.asset == net.native_asset {
        assert_eq!(tx.to, destination, "{id}: recipient");
        assert_eq!(tx.value, U256::from(amount), "{id}: amount");
        assert!(
            tx.input.is_empty(),
            "{id}: a native transfer has no calldata"
        );
        assert_eq!(tx.gas_limit, net.gas_limit_native, "{id}: gas limit");
    } else {
        let token = net
            .tokens
            .get(&e.approved.asset)
            .ok_or_else(|| anyhow::anyhow!("{id}: asset not configured"))?;
        assert_eq!(tx.to, token.parse::<Address>()?, "{id}: token contract");
        assert_eq!(tx.value, U256::ZERO, "{id}: no native value with a token");
        assert_eq!(
            tx.input.to_vec(),
            transfer_calldata(&destination, amount),
            "{id}: calldata is exactly transfer(recipient, amount)"
        );
        assert_eq!(tx.gas_limit, net.gas_limit_erc20, "{id}: gas limit");
    }
    // fee cap -> the configured fees, and the most the transfer can spend fits the cap.
    assert_eq!(
        tx.max_fee_per_gas, net.max_fee_per_gas.0,
        "{id}: max fee per gas"
    );
    assert_eq!(
        tx.max_priority_fee_per_gas, net.max_priority_fee_per_gas.0,
        "{id}: priority fee per gas"
    );
    let fee_cap: u128 = e.approved.fee_cap.parse()?;
    assert!(
        u128::from(tx.gas_limit) * tx.max_fee_per_gas <= fee_cap,
        "{id}: the fee the transfer may spend fits the approved fee cap"
    );
    // memo -> none was approved, and none is carried: nothing beyond the transfer itself.
    assert_eq!(e.approved.memo, None, "{id}");
    let expected_input = if e.approved.asset == net.native_asset {
        0
    } else {
        4 + 32 + 32
    };
    assert_eq!(tx.input.len(), expected_input, "{id}: no extra calldata");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_bytes_execute_every_approved_payload_field_and_carry_no_memo() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    stack
        .fund(&acme, "treasury", "USDC", "1000000000000")
        .await?;
    let node = Anvil::start().await?;
    // The hot wallet deploys the token (its nonce 0), so its address is the configured one.
    let token = deploy_test_token(&node, 1_000_000_000_000).await?;
    assert_eq!(token, TOKEN, "the signer's configured token address");
    let signer = InProcessSigner::start_at_nonce(&stack.db, acme.id, 1).await?;
    let mut signer_client = client(signer.addr).await?;

    // A memo cannot be carried by this network's transfers: refused at create, nothing held.
    let mut with_memo = payload("1000", "0x1000000000000000000000000000000000000001");
    with_memo.memo = Some("invoice 7731".into());
    let refused = stack
        .client()
        .await?
        .create_withdrawal(authed(
            &acme.client,
            pb::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(with_memo),
            },
        ))
        .await
        .expect_err("a memo on an EVM network is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert_eq!(reason(&refused), "INVALID_FIELD");
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 0);

    // Native and token withdrawals with distinct amounts, destinations and fee caps.
    let mut cases = Vec::new();
    for (i, (asset, amount, to)) in [
        (
            "ETH",
            "1234567890000000",
            "0x1000000000000000000000000000000000000001",
        ),
        (
            "USDC",
            "2500000",
            "0x2000000000000000000000000000000000000002",
        ),
        ("ETH", "1", "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"),
        (
            "USDC",
            "999999999",
            "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
        ),
        (
            "ETH",
            "700000000000000000",
            "0x4000000000000000000000000000000000000004",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut body = payload(amount, to);
        body.asset = asset.into();
        // Fee caps from just enough for the ERC-20 gas limit at the configured fee upwards.
        body.fee_cap = (200_000_000_000_000_u128 + 1_000_000_007 * i as u128).to_string();
        let withdrawal = create(&stack, &acme, body.clone()).await?;
        approve(&stack, &acme, &withdrawal).await?;
        cases.push((body, withdrawal));
    }

    let mut executed = Vec::new();
    for (approved, withdrawal) in cases {
        let signed = signer_client
            .sign_withdrawal(sign_request(acme.id, &withdrawal.withdrawal_id))
            .await?
            .into_inner();
        let answered = signed
            .attempt
            .ok_or_else(|| anyhow::anyhow!("no attempt"))?;
        let (raw, tx_hash, nonce, sender): (Vec<u8>, String, i64, String) = sqlx::query_as(
            "SELECT raw_tx, tx_hash, nonce, sender FROM tx_attempts WHERE op_id = $1 AND attempt = 1",
        )
        .bind(withdrawal.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(stack.admin.pool())
        .await?;
        // The stored bytes are the answered bytes, and the stored columns say what they say.
        assert_eq!(answered.raw_transaction, raw);
        let tx = decode(&raw)?;
        assert_eq!(format!("{:#x}", tx.hash), tx_hash);
        assert_eq!(answered.tx_hash, tx_hash);
        assert_eq!(i64::try_from(tx.nonce)?, nonce);
        assert_eq!(sender, HOT_WALLET);
        executed.push(Executed {
            approved,
            withdrawal,
            raw,
        });
    }
    for (n, e) in executed.iter().enumerate() {
        let hashes = approved_hashes(&stack, &e.withdrawal.withdrawal_id).await?;
        // Nonce 0 deployed the token; the withdrawals take 1, 2, ... in signing order.
        assert_executed_as_approved(acme.id, e, 1 + n as u64, &hashes)?;
    }

    // On a real node these exact bytes move exactly the approved amounts to the approved
    // destinations, in the approved asset, and nothing else.
    let mut before = Vec::new();
    for e in &executed {
        let holder = &e.approved.destination;
        before.push(if e.approved.asset == "ETH" {
            node.balance(holder).await?
        } else {
            token_balance(&node, TOKEN, holder).await?
        });
    }
    for e in &executed {
        let hash = node
            .send_raw_transaction(&e.raw)
            .await
            .map_err(|err| anyhow::anyhow!("{err}"))?;
        let receipt = node.wait_receipt(&hash, Duration::from_secs(20)).await?;
        assert_eq!(receipt["status"], "0x1", "{hash}");
    }
    for (e, before) in executed.iter().zip(before) {
        let holder = &e.approved.destination;
        let after = if e.approved.asset == "ETH" {
            node.balance(holder).await?
        } else {
            token_balance(&node, TOKEN, holder).await?
        };
        assert_eq!(
            after - before,
            e.approved.amount.parse::<u128>()?,
            "{} received exactly the approved amount",
            e.withdrawal.withdrawal_id
        );
    }
    assert_eq!(
        node.nonce(HOT_WALLET, "latest").await?,
        1 + executed.len() as u64,
        "one transaction per withdrawal after the deployment"
    );
    stack.assert_invariants().await
}
