//! The signer's network isolation in Kubernetes: who may reach it, and what it may reach.

use crate::common::{array_at, assert_none, deploy, files_under, str_at, strings, yaml_docs};
use crate::kustomize::{Manifest, all_k8s_resources, k8s, render};
use serde_json::Value;
use std::collections::BTreeSet;

/// NetworkPolicies (resources and patches, and deploy/signer's standalone one) that apply to the
/// signer's namespace.
fn signer_network_policies() -> Vec<Manifest> {
    let mut policies: Vec<Manifest> = all_k8s_resources()
        .into_iter()
        .filter(|m| m.kind() == "NetworkPolicy")
        .collect();
    for k in files_under(&k8s(), &["kustomization.yaml"]) {
        policies.extend(
            render(k.parent().expect("dir"))
                .patches
                .into_iter()
                .filter(|m| m.kind() == "NetworkPolicy"),
        );
    }
    let standalone = deploy().join("signer/networkpolicy.yaml");
    policies.extend(yaml_docs(&standalone).into_iter().map(|doc| {
        Manifest {
            path: standalone.clone(),
            namespace: str_at(&doc, "/metadata/namespace")
                .unwrap_or_default()
                .to_owned(),
            doc,
        }
    }));
    policies.retain(|p| p.namespace == "opledger-signer");
    policies
}

fn ports(rule: &Value) -> BTreeSet<(String, u64)> {
    array_at(rule, "/ports")
        .iter()
        .map(|p| {
            (
                str_at(p, "/protocol").unwrap_or("TCP").to_owned(),
                p["port"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn the_signers_network_policies_admit_only_broadcaster_and_reconciler_on_50053() {
    let mut problems = Vec::new();
    let callers = ["opledger-broadcaster", "opledger-reconciler"];
    let policies = signer_network_policies();
    assert!(policies.len() >= 3, "{} signer policies", policies.len());
    for p in &policies {
        for rule in array_at(&p.doc, "/spec/ingress") {
            if ports(rule) != BTreeSet::from([("TCP".to_owned(), 15053)]) {
                problems.push(format!("{}: ingress on {:?}", p.at(), ports(rule)));
            }
            let from = array_at(rule, "/from");
            if from.is_empty() {
                problems.push(format!("{}: ingress from anywhere", p.at()));
            }
            for peer in from {
                let ns_ok = str_at(
                    peer,
                    "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                ) == Some("opledger");
                let pod = str_at(peer, "/podSelector/matchLabels/app.kubernetes.io~1name");
                let only_labels = peer.as_object().is_some_and(|o| o.len() == 2)
                    && peer
                        .pointer("/podSelector/matchLabels")
                        .and_then(Value::as_object)
                        .is_some_and(|m| m.len() == 1);
                if !ns_ok || !pod.is_some_and(|n| callers.contains(&n)) || !only_labels {
                    problems.push(format!("{}: ingress peer {peer} is not the broadcaster or reconciler of namespace opledger", p.at()));
                }
            }
        }
    }
    // The Kubernetes policy admits both callers: the reconciler signs cancel replacements.
    let main = policies
        .iter()
        .find(|p| p.name() == "opledger-signer" && p.path.starts_with(k8s().join("signer")))
        .expect("k8s/signer policy");
    let admitted: BTreeSet<&str> = array_at(&main.doc, "/spec/ingress")
        .iter()
        .flat_map(|r| array_at(r, "/from"))
        .filter_map(|peer| str_at(peer, "/podSelector/matchLabels/app.kubernetes.io~1name"))
        .collect();
    assert_eq!(
        admitted,
        BTreeSet::from(callers),
        "k8s/signer admits both callers"
    );
    assert_eq!(
        strings(&main.doc["spec"]["policyTypes"]),
        ["Ingress", "Egress"]
    );
    assert_none(problems, "signer ingress wider than its callers on 15053");
}

#[test]
fn the_signers_network_policies_allow_egress_only_to_postgresql_and_dns() {
    let mut problems = Vec::new();
    let postgres = BTreeSet::from([("TCP".to_owned(), 5432)]);
    let dns = [("UDP".to_owned(), 53), ("TCP".to_owned(), 53)];
    let policies = signer_network_policies();
    for p in &policies {
        for rule in array_at(&p.doc, "/spec/egress") {
            let ports = ports(rule);
            let is_dns = !ports.is_empty() && ports.iter().all(|p| dns.contains(p));
            if ports != postgres && !is_dns {
                problems.push(format!("{}: egress on {ports:?}", p.at()));
            }
            if is_dns
                && !array_at(rule, "/to").iter().all(|peer| {
                    str_at(
                        peer,
                        "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                    ) == Some("kube-system")
                })
            {
                problems.push(format!("{}: DNS egress beyond kube-system", p.at()));
            }
        }
        let types = strings(&p.doc["spec"]["policyTypes"]);
        if p.doc.pointer("/spec/podSelector").is_some() && !types.contains(&"Egress".to_owned()) {
            problems.push(format!(
                "{}: egress not restricted (policyTypes {types:?})",
                p.at()
            ));
        }
    }
    // The dev overlay narrows PostgreSQL to its own database pod.
    let dev = policies
        .iter()
        .find(|p| p.path.starts_with(k8s().join("overlays/dev")))
        .expect("dev egress patch");
    let rules = array_at(&dev.doc, "/spec/egress");
    let to_postgres = rules
        .iter()
        .find(|r| ports(r) == postgres)
        .expect("a PostgreSQL rule");
    assert!(
        array_at(to_postgres, "/to").iter().all(|peer| str_at(
            peer,
            "/podSelector/matchLabels/app.kubernetes.io~1name"
        ) == Some("postgres")),
        "dev: PostgreSQL egress goes to the postgres pod only: {to_postgres}"
    );
    assert!(
        rules
            .iter()
            .any(|r| ports(r).contains(&("UDP".to_owned(), 53))),
        "dev keeps DNS"
    );
    assert_none(problems, "signer egress beyond PostgreSQL and DNS");
}
