//! The pipeline benchmark's clients: concurrent callers creating withdrawals over the operations
//! API and approving them over the approvals API, paced to an offered rate when asked.

use opledger_domain::ids::OperationId;
use opledger_domain::payload::PayloadHash;
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;

use super::options::NETWORK;
use super::setup::random_address;
use super::types::{Clients, Driven, Sender};

/// `clients` concurrent clients creating (over the operations API, client key) and then approving
/// (over the approvals API, approver key) `n` withdrawals; paced to `rate` creates/s when > 0.
pub(super) async fn drive(
    clients: Clients,
    senders: Arc<Vec<Sender>>,
    n: usize,
    concurrency: usize,
    rate: f64,
) -> anyhow::Result<Driven> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for c in 0..concurrency.min(n) {
        let mut operations =
            OperationsServiceClient::new(clients.operations[c % clients.operations.len()].clone());
        let mut approvals =
            ApprovalsServiceClient::new(clients.approvals[c % clients.approvals.len()].clone());
        let (senders, next) = (senders.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let (mut sent, mut errors, mut first_error) = (Vec::new(), 0_usize, None);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                if rate > 0.0 {
                    tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate))
                        .await;
                }
                let sender = &senders[i % senders.len()];
                let at = epoch_now();
                match one(&mut operations, &mut approvals, sender).await {
                    Ok(op_id) => sent.push((op_id, at)),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (sent, errors, first_error)
        }));
    }
    let (mut sent, mut errors, mut first_error) = (Vec::with_capacity(n), 0, None);
    for task in tasks {
        let (s, e, f) = task.await?;
        sent.extend(s);
        errors += e;
        first_error = first_error.or(f);
    }
    Ok((sent, errors, first_error))
}

/// One withdrawal created and approved; its id.
async fn one(
    operations: &mut OperationsServiceClient<Channel>,
    approvals: &mut ApprovalsServiceClient<Channel>,
    sender: &Sender,
) -> Result<uuid::Uuid, String> {
    let request = pb::CreateWithdrawalRequest {
        idempotency_key: uuid::Uuid::new_v4().to_string(),
        payload: Some(pb::WithdrawalPayload {
            source_account: "treasury".into(),
            asset: "ETH".into(),
            network: NETWORK.into(),
            destination: format!("{:#x}", random_address()),
            memo: None,
            amount: "100".into(),
            fee_cap: "1000000000000000".into(),
            policy_version: 1,
        }),
    };
    let created = operations
        .create_withdrawal(authed(&sender.client, request))
        .await
        .map_err(|s| format!("create: {}", status_text(&s)))?
        .into_inner()
        .withdrawal
        .ok_or_else(|| "create: no withdrawal in the response".to_owned())?;
    let op_id = created
        .withdrawal_id
        .parse::<uuid::Uuid>()
        .map_err(|_| "create: the withdrawal id is not a uuid".to_owned())?;
    let payload_hash = PayloadHash::from_hex(&created.payload_hash)
        .map_err(|_| "create: the payload hash is not 32 bytes of hex".to_owned())?;
    let shown = opledger_grpc::convert::risk_flags_from_wire("risk_flags", &created.risk_flags)
        .map_err(|e| format!("create: {}", e.message()))?;
    let (statement, signature) = sender
        .trust
        .approval(OperationId::from_uuid(op_id), payload_hash, shown)
        .map_err(|e| format!("approve: {e}"))?;
    let approved = approvals
        .approve_withdrawal(authed(
            &sender.approver,
            pb::ApproveWithdrawalRequest {
                withdrawal_id: created.withdrawal_id,
                acknowledged_risk_flags: created.risk_flags,
                approval_statement: statement.canonical_bytes(),
                signature,
            },
        ))
        .await
        .map_err(|s| format!("approve: {}", status_text(&s)))?
        .into_inner();
    if approved.state != pb::WithdrawalState::Approved as i32 {
        return Err(format!(
            "approve: state {} after one approval",
            approved.state
        ));
    }
    Ok(op_id)
}

fn authed<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(value) = format!("Bearer {token}").parse() {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn status_text(status: &tonic::Status) -> String {
    let reason = opledger_grpc::status::reason_of(status).unwrap_or_default();
    format!("{:?} {reason}", status.code())
}
