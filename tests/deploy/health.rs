//! gRPC health: the health service name each service reports, as the probes ask for it and as
//! the services register it.

use crate::common::{SERVICES, assert_none};
use crate::kustomize::{deployment, dev_overlay};
use serde_json::Value;

/// The gRPC health service name each service reports (checked against the services' own
/// constants by `the_health_service_names_are_the_ones_the_services_register`).
pub(crate) fn expected_health_service(service: &str) -> &'static str {
    match service {
        "operations" => "opledger.v1.OperationsService",
        "approvals" => "opledger.v1.ApprovalsService",
        "signer" => "opledger.v1.SignerService",
        "broadcaster" => "opledger.v1.Broadcaster",
        "reconciler" => "opledger.v1.OperatorService",
        "inbox" => "opledger.v1.InboxService",
        "witness" => "opledger.witness",
        "custodian" => "opledger.custodian",
        other => panic!("unknown service {other}"),
    }
}

#[test]
fn every_grpc_probe_asks_for_the_health_service_its_service_reports() {
    let dev = dev_overlay();
    let mut problems = Vec::new();
    for service in SERVICES {
        let d = deployment(&dev.resources, &format!("opledger-{}", service.name));
        for probe in ["readinessProbe", "livenessProbe"] {
            let asked = d.containers()[0]
                .pointer(&format!("/{probe}/grpc/service"))
                .and_then(Value::as_str);
            if asked != Some(expected_health_service(service.name)) {
                problems.push(format!("{}: {probe} asks for {asked:?}", d.at()));
            }
        }
    }
    assert_none(
        problems,
        "probes asking for a health service nobody reports",
    );
}

#[test]
fn the_health_service_names_are_the_ones_the_services_register() {
    for (service, registered) in [
        ("operations", opledger_operations::SERVICE_NAME),
        ("approvals", opledger_approvals::SERVICE_NAME),
        ("signer", opledger_signer::SERVICE_NAME),
        ("broadcaster", opledger_broadcaster::SERVICE_NAME),
        ("reconciler", opledger_reconciler::SERVICE_NAME),
        ("inbox", opledger_inbox::SERVICE_NAME),
        ("witness", opledger_witness::SERVICE_NAME),
        ("custodian", opledger_custodian_executor::SERVICE_NAME),
    ] {
        assert_eq!(expected_health_service(service), registered, "{service}");
    }
}
