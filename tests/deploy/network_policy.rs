//! Network isolation in Kubernetes: who may reach the signer and what it may reach, and what the
//! custodian executor may reach.

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

/// What one egress rule of the custodian executor's policy allows.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Egress {
    /// PostgreSQL (TCP 5432), to the peers given (none: any address).
    Postgres(Vec<String>),
    /// HTTPS (TCP 443) to public addresses only: the providers' APIs and evidence endpoints.
    PublicHttps,
    /// DNS to kube-system's resolver.
    Dns,
    /// The dev overlay's anvil (TCP 8545), its evidence endpoint.
    DevAnvil,
}

/// The address ranges an HTTPS rule must leave out: the cluster's and the cloud's own.
const PRIVATE_RANGES: [&str; 5] = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "100.64.0.0/10",
];

fn pod_names(rule: &Value) -> Vec<String> {
    array_at(rule, "/to")
        .iter()
        .filter_map(|peer| str_at(peer, "/podSelector/matchLabels/app.kubernetes.io~1name"))
        .map(str::to_owned)
        .collect()
}

/// Each egress rule of `policy` as one [`Egress`], or the problem it is.
fn custodian_egress(policy: &Manifest) -> Result<Vec<Egress>, Vec<String>> {
    let (mut allowed, mut problems) = (Vec::new(), Vec::new());
    let tcp = |port| BTreeSet::from([("TCP".to_owned(), port)]);
    for rule in array_at(&policy.doc, "/spec/egress") {
        let ports = ports(rule);
        let dns = [("UDP".to_owned(), 53), ("TCP".to_owned(), 53)];
        let to_kube_dns = !array_at(rule, "/to").is_empty()
            && array_at(rule, "/to").iter().all(|peer| {
                str_at(
                    peer,
                    "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                ) == Some("kube-system")
            });
        let public_only = !array_at(rule, "/to").is_empty()
            && array_at(rule, "/to").iter().all(|peer| {
                let except = strings(&peer["ipBlock"]["except"]);
                str_at(peer, "/ipBlock/cidr") == Some("0.0.0.0/0")
                    && PRIVATE_RANGES
                        .iter()
                        .all(|r| except.contains(&(*r).to_owned()))
            });
        if ports == tcp(5432) {
            allowed.push(Egress::Postgres(pod_names(rule)));
        } else if ports == tcp(443) && public_only {
            allowed.push(Egress::PublicHttps);
        } else if !ports.is_empty() && ports.iter().all(|p| dns.contains(p)) && to_kube_dns {
            allowed.push(Egress::Dns);
        } else if ports == tcp(8545) && pod_names(rule) == ["anvil"] {
            allowed.push(Egress::DevAnvil);
        } else {
            problems.push(format!("{}: egress {rule}", policy.at()));
        }
    }
    allowed.sort();
    if problems.is_empty() {
        Ok(allowed)
    } else {
        Err(problems)
    }
}

#[test]
fn the_custodian_executor_reaches_only_postgresql_its_providers_https_evidence_and_dns() {
    let base = render(&k8s().join("base"));
    let policy = base
        .resources
        .iter()
        .find(|m| m.kind() == "NetworkPolicy" && m.name() == "opledger-custodian")
        .expect("the custodian executor's NetworkPolicy");
    let mut problems = Vec::new();
    let pods = str_at(
        &policy.doc,
        "/spec/podSelector/matchLabels/app.kubernetes.io~1name",
    );
    let deployment = crate::kustomize::deployment(&base.resources, "opledger-custodian");
    let labelled = str_at(
        &deployment.doc,
        "/spec/template/metadata/labels/app.kubernetes.io~1name",
    );
    if pods.is_none() || pods != labelled {
        problems.push(format!(
            "{}: selects {pods:?}, its pods are {labelled:?}",
            policy.at()
        ));
    }
    if !strings(&policy.doc["spec"]["policyTypes"]).contains(&"Egress".to_owned()) {
        problems.push(format!("{}: egress is not restricted", policy.at()));
    }
    match custodian_egress(policy) {
        Ok(rules) => assert_eq!(
            rules,
            [
                Egress::Postgres(Vec::new()),
                Egress::PublicHttps,
                Egress::Dns
            ],
            "base: PostgreSQL, public HTTPS and DNS"
        ),
        Err(found) => problems.extend(found),
    }
    // The dev overlay: its PostgreSQL pod, its anvil (the evidence endpoint) and DNS; no
    // provider there, so no HTTPS.
    let dev = render(&k8s().join("overlays/dev"));
    let patch = dev
        .patches
        .iter()
        .find(|m| m.kind() == "NetworkPolicy" && m.name() == "opledger-custodian")
        .expect("the dev overlay's custodian egress patch");
    assert_eq!(patch.namespace, "opledger", "{}", patch.at());
    match custodian_egress(patch) {
        Ok(rules) => assert_eq!(
            rules,
            [
                Egress::Postgres(vec!["postgres".to_owned()]),
                Egress::Dns,
                Egress::DevAnvil
            ],
            "dev: its PostgreSQL pod, anvil and DNS"
        ),
        Err(found) => problems.extend(found),
    }
    assert_none(problems, "custodian executor egress");
}
