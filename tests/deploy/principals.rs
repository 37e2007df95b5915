//! Two principals: the reconciler proposes, the witness attests; no login or network lets one
//! act as the other.

use crate::common::{SERVICES, Service, array_at, assert_none, read, str_at, strings};
use crate::compose_file::{compose, compose_config_secret, compose_dir};
use crate::kustomize::{deployment, dev_overlay, k8s};
use crate::settings::{compose_settings, container_env, dev_overlay_settings};
use std::collections::{BTreeMap, BTreeSet};

/// The user of a `postgres://user:password@host/db` URL.
fn url_user(url: &str) -> &str {
    url.strip_prefix("postgres://")
        .and_then(|rest| rest.split_once('@'))
        .and_then(|(credentials, _)| credentials.split(':').next())
        .unwrap_or_default()
}

#[test]
fn no_two_services_share_a_database_login_so_no_login_is_both_proposer_and_witness() {
    // A release needs a proposal and an attestation, each insertable only by its own group role
    // (opledger_reconciler, opledger_witness): a login shared by the reconciler and the witness,
    // or granted both groups, would be both principals at once.
    let mut problems = Vec::new();
    for (at, settings) in [
        ("compose", compose_settings()),
        ("k8s dev overlay", dev_overlay_settings()),
    ] {
        let mut users: BTreeMap<String, &str> = BTreeMap::new();
        for (service, table) in &settings {
            let url = table
                .get("database_url")
                .and_then(toml::Value::as_str)
                .unwrap_or_default();
            let user = url_user(url);
            if user.is_empty() {
                problems.push(format!("{at}: {} has no database login", service.name));
            } else if let Some(other) = users.insert(user.to_owned(), service.name) {
                problems.push(format!(
                    "{at}: {} and {other} share the login {user}",
                    service.name
                ));
            }
        }
    }
    // compose: each service's login comes from its own config secret, granted its own group.
    let compose = compose();
    let given = strings(&compose["services"]["provision"]["secrets"]);
    let script = read(&compose_dir().join("provision.sh"));
    let looped: Vec<&str> = script
        .lines()
        .find_map(|l| l.strip_prefix("for service in "))
        .and_then(|l| l.strip_suffix("; do"))
        .expect("the compose login loop")
        .split_whitespace()
        .collect();
    assert!(
        script.contains("login_role \"/run/secrets/${service}_config\" \"opledger_${service}\""),
        "compose grants each login its own service's group"
    );
    for service in SERVICES {
        let name = service.name;
        let secret = format!("{name}_config");
        if compose_config_secret(&compose, &service).as_deref() != Some(secret.as_str())
            || !given.contains(&secret)
        {
            problems.push(format!(
                "compose: provision does not read {name}'s {secret}"
            ));
        }
        let granted = if name == "signer" {
            script.contains("login_role /run/secrets/signer_config opledger_signer\n")
        } else {
            looped.contains(&name)
        };
        if !granted {
            problems.push(format!(
                "compose: {name}'s login is not granted opledger_{name}"
            ));
        }
    }
    // k8s dev overlay: the provision Job grants each URL the Job is given its own group, and
    // each is the URL its service runs with.
    let dev = dev_overlay();
    let job = dev
        .resources
        .iter()
        .find(|m| m.kind() == "Job" && m.name() == "opledger-dev-provision")
        .expect("the dev provision Job");
    let job_env = container_env(&dev, job, job.containers()[0]);
    let script = read(&k8s().join("overlays/dev/provision.sh"));
    let grants: Vec<&str> = script
        .lines()
        .filter(|l| l.starts_with("login_role \"$"))
        .collect();
    for (service, settings) in dev_overlay_settings() {
        let name = service.name;
        let variable = format!("{}_DATABASE_URL", name.to_uppercase());
        let expected = format!("login_role \"${variable}\" opledger_{name}");
        let mine: Vec<&&str> = grants
            .iter()
            .filter(|l| l.contains(&format!("\"${variable}\"")))
            .collect();
        if mine != [&expected.as_str()] {
            problems.push(format!("k8s: {mine:?} is not `{expected}`"));
        }
        if job_env.get(&variable).map(String::as_str)
            != settings.get("database_url").and_then(toml::Value::as_str)
        {
            problems.push(format!(
                "k8s: the provision Job's {variable} is not the URL {name} runs with"
            ));
        }
    }
    assert_none(problems, "database logins");
}

#[test]
fn the_witness_reads_its_own_evidence_apart_from_the_reconciler_and_cannot_reach_the_signer() {
    let mut problems = Vec::new();
    let networks = |settings: &[(Service, toml::Table)], name: &str| -> BTreeSet<String> {
        settings
            .iter()
            .find(|(s, _)| s.name == name)
            .and_then(|(_, t)| t.get("evidence"))
            .and_then(toml::Value::as_table)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    };
    // A proposal on a network the witness has no endpoints for is never attested.
    for (at, settings) in [
        ("compose", compose_settings()),
        ("k8s dev overlay", dev_overlay_settings()),
    ] {
        let reconciler = networks(&settings, "reconciler");
        let witness = networks(&settings, "witness");
        if reconciler.is_empty() || !reconciler.is_subset(&witness) {
            problems.push(format!(
                "{at}: the witness reads {witness:?}, the reconciler releases on {reconciler:?}"
            ));
        }
    }
    // compose: not on the signer's segment.
    let compose = compose();
    if strings(&compose["services"]["witness"]["networks"]).contains(&"signer".to_owned()) {
        problems.push("compose: the witness is on the signer's network".to_owned());
    }
    // k8s: kept off the reconciler's node, with credentials of its own only.
    let dev = dev_overlay();
    let witness = deployment(&dev.resources, "opledger-witness");
    let pod = witness.pod_spec().expect("pod");
    let apart = ["preferred", "required"]
        .iter()
        .flat_map(|kind| {
            array_at(
                pod,
                &format!("/affinity/podAntiAffinity/{kind}DuringSchedulingIgnoredDuringExecution"),
            )
        })
        .map(|entry| entry.get("podAffinityTerm").unwrap_or(entry))
        .any(|term| {
            str_at(term, "/topologyKey") == Some("kubernetes.io/hostname")
                && str_at(term, "/labelSelector/matchLabels/app.kubernetes.io~1name")
                    == Some("opledger-reconciler")
        });
    if !apart {
        problems.push(format!(
            "{}: no anti-affinity to the reconciler's node",
            witness.at()
        ));
    }
    for container in witness.containers() {
        for var in array_at(container, "/env") {
            if let Some(secret) = str_at(var, "/valueFrom/secretKeyRef/name")
                && secret != "opledger-witness-secrets"
            {
                problems.push(format!("{}: reads the Secret {secret}", witness.at()));
            }
        }
        if !array_at(container, "/envFrom")
            .iter()
            .all(|source| source.get("secretRef").is_none())
        {
            problems.push(format!("{}: takes a whole Secret", witness.at()));
        }
    }
    assert_none(problems, "the witness's independence");
}
