//! One withdrawal is one trace: created through the operations service with a caller's
//! `traceparent`, approved without one, signed by the signer on the broadcaster's call, submitted,
//! examined by the reconciler and confirmed by the chain watcher. Every span of the five services
//! carries the caller's trace id, in the right parent/child order, and no sensitive value is
//! exported or logged.

use crate::collector::{Span, harness};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opledger_proto::v1 as pb;
use opledger_tests::chain::{Chain, broadcaster_config, reconciler_config};
use opledger_tests::signer::{CALLER_TOKEN, HOT_WALLET, NETWORK, approve};
use opledger_tests::{authed, new_key, payload};
use std::collections::BTreeSet;
use std::time::Duration;

const DESTINATION: &str = "0x8626F6940E2eb28930eFb4CeF49B2d1F2C9C1199";

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// The one span named `name` in `spans` whose `key` attribute is `value` (or any, when empty).
fn one<'s>(spans: &'s [Span], name: &str, key: &str, value: &str) -> anyhow::Result<&'s Span> {
    let found: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == name && (key.is_empty() || s.attr(key) == value))
        .collect();
    anyhow::ensure!(
        found.len() == 1,
        "expected one span {name} ({key}={value}), found {}: {:#?}",
        found.len(),
        spans
            .iter()
            .map(|s| (&s.name, &s.attributes))
            .collect::<Vec<_>>()
    );
    Ok(found[0])
}

/// The trace below `parent`, one span a line: `service: name`, children indented, by start.
fn tree(spans: &[Span], parent: &str, depth: usize) -> String {
    let mut children: Vec<&Span> = spans.iter().filter(|s| s.parent == parent).collect();
    children.sort_by_key(|s| s.start);
    children
        .iter()
        .map(|s| {
            format!(
                "{:indent$}{}: {} [{:?}]\n{}",
                "",
                s.attributes
                    .get("opledger.service")
                    .map_or("-", String::as_str),
                s.name,
                s.kind,
                tree(spans, &s.span_id, depth + 1),
                indent = depth * 2
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_withdrawal_is_one_trace_across_the_five_services() -> anyhow::Result<()> {
    let harness = harness()?;
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &node.rpc_url()),
        stack.admin.broadcaster(),
    )?;
    let watcher = opledger_broadcaster::watcher(
        &broadcaster_config(&stack, &signer, &node.rpc_url()),
        stack.admin.broadcaster(),
    )?;
    let mut reconciler_cfg = reconciler_config(&stack, &signer, &node.rpc_url());
    // Never final for the reconciler, so it examines and leaves the confirmation to the watcher.
    if let Some(evidence) = reconciler_cfg.chain.evidence.get_mut(NETWORK) {
        evidence.confirmations = Some(1_000);
    }
    reconciler_cfg.cancel_after_secs = 3_600;
    let reconciler = opledger_reconciler::reconciler(&reconciler_cfg, stack.admin.reconciler())?;

    // The caller starts the trace and sends it with the create call.
    let (trace_id, caller_span) = (random_hex(16), random_hex(8));
    let idempotency_key = new_key();
    let memo = format!("invoice {}", random_hex(6));
    // A memo cannot be carried by a transfer on this network: that create is refused (and its
    // memo must appear in no span or log either); the withdrawal is created without one.
    let mut with_memo = payload("1500000000000000", DESTINATION);
    with_memo.memo = Some(memo.clone());
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
        .expect_err("a memo on a network without memos");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let body = payload("1500000000000000", DESTINATION);
    let mut request = authed(
        &acme.client,
        pb::CreateWithdrawalRequest {
            idempotency_key: idempotency_key.clone(),
            payload: Some(body),
        },
    );
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{caller_span}-01").parse()?,
    );
    let w = stack
        .client()
        .await?
        .create_withdrawal(request)
        .await?
        .into_inner()
        .withdrawal
        .ok_or_else(|| anyhow::anyhow!("no withdrawal"))?;
    let (stored,): (Option<String>,) =
        sqlx::query_as("SELECT trace_context FROM withdrawal_ops WHERE op_id = $1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    let stored = stored.ok_or_else(|| anyhow::anyhow!("no trace context stored"))?;
    assert!(
        stored.starts_with(&format!("00-{trace_id}-")),
        "stored {stored}"
    );

    // The approver's client sends no trace context: the approval joins the withdrawal's trace.
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1, "signed and submitted");
    let (tx_hash, raw): (String, Vec<u8>) =
        sqlx::query_as("SELECT tx_hash, raw_tx FROM tx_attempts WHERE op_id = $1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    node.wait_receipt(&tx_hash, Duration::from_secs(10)).await?;
    let findings = reconciler.tick(0, 64).await;
    assert_eq!(findings, [opledger_reconciler::Finding::Waiting]);
    node.mine(opledger_tests::chain::CONFIRMATIONS - 1).await?;
    let pass = watcher.tick(256).await;
    assert_eq!(pass.confirmed, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "CONFIRMED");

    harness.flush().await;
    let all = harness.received.spans();
    let spans: Vec<Span> = all
        .iter()
        .filter(|s| s.trace_id == trace_id)
        .cloned()
        .collect();

    eprintln!("{}", tree(&spans, &caller_span, 0));

    // One trace id across the five services.
    let services: BTreeSet<&str> = spans.iter().map(|s| s.attr("opledger.service")).collect();
    for service in [
        "operations",
        "approvals",
        "signer",
        "broadcaster",
        "reconciler",
    ] {
        assert!(
            services.contains(service),
            "no {service} span in the trace: {services:?}"
        );
    }
    assert!(spans.iter().all(|s| s.resource_service == "opledger-tests"));

    // The parent/child order.
    let create = one(
        &spans,
        "opledger.v1.OperationsService/CreateWithdrawal",
        "",
        "",
    )?;
    assert_eq!(
        create.parent, caller_span,
        "the caller's span is the parent"
    );
    assert_eq!(create.kind, SpanKind::Server);
    assert_eq!(create.attr("rpc.system"), "grpc");
    assert_eq!(create.attr("rpc.service"), "opledger.v1.OperationsService");
    assert_eq!(create.attr("rpc.method"), "CreateWithdrawal");
    assert_eq!(create.attr("rpc.grpc.status_code"), "0");
    let handler = one(&spans, "create_withdrawal", "", "")?;
    assert_eq!(handler.parent, create.span_id);
    assert_eq!(handler.attr("op_id"), w.withdrawal_id);
    assert!(
        handler.events.iter().any(|e| e == "withdrawal accepted"),
        "log lines are span events: {:?}",
        handler.events
    );
    assert!(
        stored.contains(&handler.span_id),
        "the stored context is the create handler's span"
    );
    let approval = one(
        &spans,
        "opledger.v1.ApprovalsService/ApproveWithdrawal",
        "",
        "",
    )?;
    assert_eq!(
        approval.parent, handler.span_id,
        "approval under the create"
    );
    assert_eq!(approval.kind, SpanKind::Server);
    let step = one(&spans, "broadcaster.handle", "op_id", &w.withdrawal_id)?;
    assert_eq!(
        step.parent, handler.span_id,
        "broadcast step under the create"
    );
    assert_eq!(step.attr("from_state"), "APPROVED");
    assert_eq!(step.attr("outcome"), "accepted");
    // Client and server spans share the name; they differ by kind.
    let client: Vec<&Span> = spans
        .iter()
        .filter(|s| {
            s.name == "opledger.v1.SignerService/SignWithdrawal" && s.kind == SpanKind::Client
        })
        .collect();
    let server: Vec<&Span> = spans
        .iter()
        .filter(|s| {
            s.name == "opledger.v1.SignerService/SignWithdrawal" && s.kind == SpanKind::Server
        })
        .collect();
    assert_eq!((client.len(), server.len()), (1, 1));
    assert_eq!(
        client[0].parent, step.span_id,
        "the broadcaster calls the signer"
    );
    assert_eq!(
        server[0].parent, client[0].span_id,
        "traceparent crossed gRPC"
    );
    assert_eq!(server[0].attr("opledger.service"), "signer");
    assert_eq!(server[0].attr("rpc.grpc.status_code"), "0");
    let examined = one(&spans, "reconciler.examine", "op_id", &w.withdrawal_id)?;
    assert_eq!(examined.parent, handler.span_id);
    assert_eq!(examined.attr("finding"), "Waiting");
    let confirmed = one(
        &spans,
        "watcher.record_inclusion",
        "op_id",
        &w.withdrawal_id,
    )?;
    assert_eq!(confirmed.parent, handler.span_id);
    assert_eq!(confirmed.attr("to_state"), "CONFIRMED");
    assert_eq!(confirmed.attr("opledger.service"), "broadcaster");
    // In the order the steps happened.
    let starts = [
        create.start,
        approval.start,
        step.start,
        server[0].start,
        examined.start,
        confirmed.start,
    ];
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "steps out of order: {starts:?}"
    );

    // Nothing sensitive in any exported name, attribute, event, link or resource, nor in a log.
    let exported = harness.received.everything().to_lowercase();
    let logged = harness.logs.text().to_lowercase();
    let raw_hex = hex::encode(&raw);
    let secrets = [
        idempotency_key.as_str(),
        DESTINATION,
        DESTINATION.trim_start_matches("0x"),
        memo.as_str(),
        tx_hash.as_str(),
        tx_hash.trim_start_matches("0x"),
        raw_hex.as_str(),
        acme.client.as_str(),
        acme.approver.as_str(),
        acme.operator.as_str(),
        CALLER_TOKEN,
        HOT_WALLET,
        opledger_testkit::DEV_KEYS[0].1.trim_start_matches("0x"),
    ];
    for secret in secrets {
        let secret = secret.to_lowercase();
        assert!(!exported.contains(&secret), "exported: {secret}");
        assert!(!logged.contains(&secret), "logged: {secret}");
    }

    // The log lines of the steps carry the trace and span ids of the span they were logged in.
    let lines = harness.logs.lines()?;
    let in_trace: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["trace_id"] == trace_id.as_str())
        .collect();
    for message in [
        "withdrawal accepted",
        "approval recorded",
        "submitted",
        "inclusion recorded",
    ] {
        let line = in_trace
            .iter()
            .find(|l| l["fields"]["message"] == message)
            .ok_or_else(|| anyhow::anyhow!("no log line {message:?} in the trace"))?;
        let span_id = line["span_id"].as_str().unwrap_or_default();
        assert!(
            spans.iter().any(|s| s.span_id == span_id),
            "{message}: span {span_id} not exported"
        );
    }
    assert_eq!(
        in_trace
            .iter()
            .find(|l| l["fields"]["message"] == "withdrawal accepted")
            .map(|l| l["span_id"].clone()),
        Some(serde_json::Value::from(handler.span_id.clone()))
    );
    stack.assert_invariants().await
}
