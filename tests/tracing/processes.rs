//! The real service processes, one configured by the standard `OTEL_*` variables only, the other
//! by its `[telemetry]` keys only (with an `OTEL_SERVICE_NAME` those keys must win over): the
//! operations and approvals binaries export to the collector under their own `service.name`, the approval
//! (called without a trace context) joins the create's trace through the context stored with the
//! operation, each process flushes its spans when stopped with SIGTERM, and each log line inside a
//! traced span carries its trace and span ids.

use crate::collector::harness;
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_testkit::{ChildService, free_port, wait_for_tcp};
use opledger_tests::{ALICE, Stack, authed, new_key, payload};
use std::net::SocketAddr;
use std::time::Duration;

/// How a process is told where its spans go.
enum Export {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_SERVICE_NAME`.
    OtelVariables,
    /// `[telemetry] otlp_endpoint` and `service_name` (as `{prefix}TELEMETRY__*` variables),
    /// beside an `OTEL_EXPORTER_OTLP_ENDPOINT` and an `OTEL_SERVICE_NAME` they win over.
    TelemetryKeys,
}

async fn start(
    stack: &Stack,
    name: &str,
    role: opledger_testkit::ServiceRole,
    prefix: &str,
    (endpoint, export): (&str, Export),
) -> anyhow::Result<(ChildService, u16)> {
    let port = free_port();
    let mut env = vec![
        (format!("{prefix}DATABASE_URL"), stack.url(role)),
        (format!("{prefix}LISTEN"), format!("127.0.0.1:{port}")),
        (format!("{prefix}METRICS_LISTEN"), "127.0.0.1:0".to_owned()),
        (
            "OTEL_TRACES_SAMPLER".to_owned(),
            "parentbased_always_on".to_owned(),
        ),
        ("RUST_LOG".to_owned(), "info".to_owned()),
    ];
    match export {
        Export::OtelVariables => env.extend([
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
                endpoint.to_owned(),
            ),
            ("OTEL_SERVICE_NAME".to_owned(), format!("test-{name}")),
        ]),
        Export::TelemetryKeys => env.extend([
            (
                format!("{prefix}TELEMETRY__OTLP_ENDPOINT"),
                endpoint.to_owned(),
            ),
            (
                format!("{prefix}TELEMETRY__SERVICE_NAME"),
                format!("test-{name}"),
            ),
            // Both lose to the keys: spans sent there would be lost, and the name is not this.
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
                "http://127.0.0.1:9".to_owned(),
            ),
            ("OTEL_SERVICE_NAME".to_owned(), "not-this-name".to_owned()),
        ]),
    }
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let child = ChildService::spawn(&format!("opledger-{name}"), &env)?;
    wait_for_tcp(
        SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(20),
    )
    .await?;
    Ok((child, port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_processes_export_one_trace_configured_by_otel_variables_or_telemetry_keys()
-> anyhow::Result<()> {
    let harness = harness()?;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let (mut operations, ops_port) = start(
        &stack,
        "operations",
        opledger_testkit::ServiceRole::Operations,
        "OPLEDGER_OPERATIONS_",
        (&harness.endpoint, Export::OtelVariables),
    )
    .await?;
    let (mut approvals, approvals_port) = start(
        &stack,
        "approvals",
        opledger_testkit::ServiceRole::Approvals,
        "OPLEDGER_APPROVALS_",
        (&harness.endpoint, Export::TelemetryKeys),
    )
    .await?;

    let trace_id = format!("{:032x}", rand::random::<u128>());
    let key = new_key();
    let mut request = authed(
        &acme.client,
        pb::CreateWithdrawalRequest {
            idempotency_key: key.clone(),
            payload: Some(payload("100", ALICE)),
        },
    );
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{:016x}-01", rand::random::<u64>() | 1).parse()?,
    );
    let w = OperationsServiceClient::connect(format!("http://127.0.0.1:{ops_port}"))
        .await?
        .create_withdrawal(request)
        .await?
        .into_inner()
        .withdrawal
        .ok_or_else(|| anyhow::anyhow!("no withdrawal"))?;
    let done = ApprovalsServiceClient::connect(format!("http://127.0.0.1:{approvals_port}"))
        .await?
        .approve_withdrawal(authed(
            &acme.approver,
            opledger_tests::approval(acme.id, &w, 0),
        ))
        .await?
        .into_inner();
    assert_eq!(done.state, pb::WithdrawalState::Approved as i32);

    // Stopped gracefully, each process flushes what its batch exporter still holds.
    for child in [&mut operations, &mut approvals] {
        child.terminate()?;
        let status = child.wait_exit(Duration::from_secs(20));
        assert!(
            status.is_some_and(|s| s.success()),
            "{} stopped",
            child.name()
        );
    }
    let spans: Vec<_> = harness
        .received
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == trace_id)
        .collect();
    let create = spans
        .iter()
        .find(|s| s.name == "create_withdrawal")
        .ok_or_else(|| anyhow::anyhow!("no create span from the operations process"))?;
    assert_eq!(create.resource_service, "test-operations");
    let approve = spans
        .iter()
        .find(|s| s.name == "opledger.v1.ApprovalsService/ApproveWithdrawal")
        .ok_or_else(|| anyhow::anyhow!("the approval is not in the create's trace"))?;
    assert_eq!(approve.resource_service, "test-approvals");
    assert_eq!(
        approve.parent, create.span_id,
        "parented on the stored context"
    );

    // The processes' JSON log lines inside those spans carry the ids.
    for (child, span) in [(&operations, create), (&approvals, approve)] {
        let log = child.log_tail(10_000);
        let traced = log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["trace_id"] == trace_id.as_str())
            .ok_or_else(|| {
                anyhow::anyhow!("no log line of {} in the trace: {log}", child.name())
            })?;
        assert_eq!(traced["span_id"], span.span_id.as_str());
        assert!(!log.contains(&key) && !log.to_lowercase().contains(ALICE));
    }
    let exported = harness.received.everything().to_lowercase();
    assert!(!exported.contains(&key) && !exported.contains(ALICE));
    Ok(())
}
