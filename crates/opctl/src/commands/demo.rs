//! `demo`: one withdrawal end to end (create, approve, watch to CONFIRMED) under one trace id that
//! opctl chooses and sends as a W3C `traceparent`, so the services' spans join it.

use super::{approvals, watch, withdrawals};
use crate::cli::{ApproveArgs, CreateArgs, DemoArgs, WatchArgs};
use crate::client::Session;
use crate::error::{Done, Failure};
use crate::output::Output;

/// A fresh W3C trace context: version 00, random trace and parent ids, sampled.
fn traceparent() -> (String, String) {
    let trace = uuid::Uuid::new_v4().simple().to_string();
    let parent = &uuid::Uuid::new_v4().simple().to_string()[..16];
    (format!("00-{trace}-{parent}-01"), trace)
}

pub async fn demo(session: Session, out: &Output, args: &DemoArgs) -> Result<Done, Failure> {
    let (header, trace_id) = traceparent();
    let client = session.with_traceparent(&header)?;
    let approver = client.with_key(&args.approver_key)?;
    // Checked before anything is created: a demo without a usable signing key would leave a
    // REQUESTED withdrawal (and its hold) behind.
    approvals::signing_key(&args.signing)?;
    out.note(&format!("trace id {trace_id}"));
    // A few wei of jitter: the same destination and amount twice within the risk window would
    // (rightly) be flagged for an explicit acknowledgement.
    let jitter = uuid::Uuid::new_v4().as_u128() % 1_000;
    let created = withdrawals::create_withdrawal(
        &client,
        out,
        &CreateArgs {
            account: args.account.clone(),
            asset: args.asset.clone(),
            network: args.network.clone(),
            to: args.to.clone(),
            amount: (args.amount + jitter).to_string(),
            fee_cap: args.fee_cap.clone(),
            memo: None,
            policy_version: 1,
            idempotency_key: None,
        },
    )
    .await?;
    approvals::approve(
        &approver,
        out,
        &ApproveArgs {
            id: created.clone(),
            ack_risk: false,
            payload_hash: None,
            signing: args.signing.clone(),
        },
    )
    .await?;
    let done = watch::watch(
        &client,
        out,
        &WatchArgs {
            id: created,
            interval_ms: 250,
            until_timeout: Some(args.until_timeout),
        },
    )
    .await?;
    out.note(&format!(
        "trace id {trace_id} (one trace across the services when they export OTLP)"
    ));
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traceparent_is_w3c_version_00_sampled_with_the_printed_trace_id() {
        let (header, trace) = traceparent();
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!((parts[0], parts[3]), ("00", "01"));
        assert_eq!(parts[1], trace);
        assert_eq!((parts[1].len(), parts[2].len()), (32, 16));
        assert!(header.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()));
    }
}
