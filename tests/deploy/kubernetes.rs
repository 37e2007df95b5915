//! Kubernetes checks: kustomizations, the dev overlay, probes, pod security, resources,
//! Services, the signer's mounts, and where the workloads' images come from.

use crate::common::{
    SERVICES, array_at, assert_none, deploy, files_under, read, str_at, strings, yaml_doc,
};
use crate::dockerfile::dockerfile;
use crate::kustomize::{
    Generated, Manifest, all_k8s_resources, deployment, dev_overlay, k8s, workloads,
};
use crate::settings::dev_overlay_settings;
use serde_json::Value;
use std::collections::BTreeSet;

#[test]
fn every_kustomization_names_files_that_exist() {
    let mut problems = Vec::new();
    let kustomizations = files_under(&k8s(), &["kustomization.yaml"]);
    assert!(kustomizations.len() >= 3, "{kustomizations:?}");
    for path in kustomizations {
        let dir = path.parent().expect("directory");
        let k = yaml_doc(&path);
        let mut check = |entry: &str, what: &str| {
            let target = dir.join(entry);
            let ok = if target.is_dir() {
                target.join("kustomization.yaml").is_file()
            } else {
                target.is_file()
            };
            if !ok {
                problems.push(format!("{}: {what} {entry} does not exist", path.display()));
            }
        };
        for resource in strings(&k["resources"]) {
            check(&resource, "resource");
        }
        for patch in array_at(&k, "/patches") {
            if let Some(p) = str_at(patch, "/path") {
                check(p, "patch");
            }
        }
        for field in ["configMapGenerator", "secretGenerator"] {
            for generator in array_at(&k, &format!("/{field}")) {
                for file in strings(&generator["files"]) {
                    check(
                        file.split_once('=').map_or(file.as_str(), |(_, p)| p),
                        "generator file",
                    );
                }
                for env in strings(&generator["envs"]) {
                    check(&env, "generator env file");
                }
            }
        }
    }
    assert_none(problems, "kustomizations name missing files");
}

#[test]
fn the_dev_overlay_composes_the_base_and_the_signer_namespace() {
    let dev = dev_overlay();
    for service in SERVICES {
        let d = deployment(&dev.resources, &format!("opledger-{}", service.name));
        let ns = if service.name == "signer" {
            "opledger-signer"
        } else {
            "opledger"
        };
        assert_eq!(d.namespace, ns, "{}", d.at());
    }
    let jobs: Vec<&str> = dev
        .resources
        .iter()
        .filter(|m| m.kind() == "Job")
        .map(Manifest::name)
        .collect();
    assert!(
        jobs.contains(&"opledger-migrate"),
        "no migrate Job: {jobs:?}"
    );
    let migrate = dev
        .resources
        .iter()
        .find(|m| m.name() == "opledger-migrate")
        .expect("migrate");
    let container = migrate.containers()[0];
    assert!(
        str_at(container, "/image").is_some_and(|i| i.starts_with("opledger/admin"))
            && strings(&container["args"]) == ["migrate"],
        "the migrate Job runs `opledger-admin migrate`: {container}"
    );
}

#[test]
fn every_deployment_has_grpc_readiness_and_liveness_probes_on_a_port_it_declares() {
    let mut problems = Vec::new();
    let resources = all_k8s_resources();
    let deployments: Vec<&Manifest> = resources
        .iter()
        .filter(|m| m.kind() == "Deployment")
        .collect();
    assert!(
        deployments.len() >= SERVICES.len(),
        "{} Deployments",
        deployments.len()
    );
    for d in deployments {
        for container in d.containers() {
            let ports: BTreeSet<u64> = array_at(container, "/ports")
                .iter()
                .filter_map(|p| p["containerPort"].as_u64())
                .collect();
            for probe in ["readinessProbe", "livenessProbe"] {
                match container
                    .pointer(&format!("/{probe}/grpc/port"))
                    .and_then(Value::as_u64)
                {
                    Some(port) if ports.contains(&port) => {}
                    Some(port) => {
                        problems.push(format!("{}: {probe} on undeclared port {port}", d.at()))
                    }
                    None => problems.push(format!(
                        "{}: {probe} is not a gRPC probe with a numeric port",
                        d.at()
                    )),
                }
            }
        }
    }
    assert_none(problems, "Deployments without gRPC probes");
}

#[test]
fn every_service_deployment_probes_its_own_grpc_port() {
    let dev = dev_overlay();
    for service in SERVICES {
        let d = deployment(&dev.resources, &format!("opledger-{}", service.name));
        let c = d.containers()[0];
        assert_eq!(
            c.pointer("/readinessProbe/grpc/port")
                .and_then(Value::as_u64),
            Some(u64::from(service.grpc)),
            "{}",
            d.at()
        );
    }
}

#[test]
fn every_container_runs_as_non_root_with_a_read_only_root_and_no_capabilities() {
    let mut problems = Vec::new();
    let resources = all_k8s_resources();
    let mut count = 0;
    for w in workloads(&resources) {
        let pod = w.pod_spec().expect("pod spec");
        for container in w.containers() {
            count += 1;
            let name = str_at(container, "/name").unwrap_or_default();
            let at = format!("{} container {name}", w.at());
            let setting = |key: &str| {
                container
                    .pointer(&format!("/securityContext/{key}"))
                    .or_else(|| pod.pointer(&format!("/securityContext/{key}")))
            };
            if setting("runAsNonRoot") != Some(&Value::Bool(true)) {
                problems.push(format!("{at}: runAsNonRoot is not true"));
            }
            if setting("runAsUser").and_then(Value::as_u64).unwrap_or(0) == 0 {
                problems.push(format!("{at}: no numeric non-zero runAsUser"));
            }
            if container.pointer("/securityContext/readOnlyRootFilesystem")
                != Some(&Value::Bool(true))
            {
                problems.push(format!("{at}: readOnlyRootFilesystem is not true"));
            }
            if container.pointer("/securityContext/allowPrivilegeEscalation")
                != Some(&Value::Bool(false))
            {
                problems.push(format!("{at}: allowPrivilegeEscalation is not false"));
            }
            if !strings(&container["securityContext"]["capabilities"]["drop"])
                .contains(&"ALL".to_owned())
            {
                problems.push(format!("{at}: capabilities do not drop ALL"));
            }
            if !array_at(container, "/securityContext/capabilities/add").is_empty() {
                problems.push(format!("{at}: adds capabilities"));
            }
            if setting("seccompProfile/type").and_then(Value::as_str) != Some("RuntimeDefault") {
                problems.push(format!("{at}: seccompProfile is not RuntimeDefault"));
            }
        }
    }
    assert!(count >= 9, "{count} containers");
    assert_none(
        problems,
        "containers that could run as root or write their image",
    );
}

#[test]
fn every_container_declares_cpu_and_memory_requests_and_limits() {
    let mut problems = Vec::new();
    for w in workloads(&all_k8s_resources()) {
        for container in w.containers() {
            for bound in ["requests", "limits"] {
                for resource in ["cpu", "memory"] {
                    if container
                        .pointer(&format!("/resources/{bound}/{resource}"))
                        .is_none()
                    {
                        problems.push(format!("{}: no {bound}.{resource}", w.at()));
                    }
                }
            }
        }
    }
    assert_none(problems, "containers without resource bounds");
}

#[test]
fn every_pod_disables_service_links_because_services_refuse_unknown_settings() {
    // A Service named opledger-broadcaster would inject OPLEDGER_BROADCASTER_SERVICE_HOST (and
    // _PORT...) into pods of its namespace; the broadcaster reads every OPLEDGER_BROADCASTER_*
    // variable and refuses to start on one it does not know.
    let mut problems = Vec::new();
    for w in workloads(&all_k8s_resources()) {
        if w.pod_spec().and_then(|p| p.get("enableServiceLinks")) != Some(&Value::Bool(false)) {
            problems.push(w.at());
        }
    }
    assert_none(problems, "pods with service links");
}

#[test]
fn every_kubernetes_service_targets_ports_its_pods_declare() {
    let mut problems = Vec::new();
    let resources = all_k8s_resources();
    for service in resources.iter().filter(|m| m.kind() == "Service") {
        let selector = service
            .doc
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .expect("selector");
        let pods: Vec<&Manifest> = workloads(&resources)
            .filter(|w| w.namespace == service.namespace)
            .filter(|w| {
                selector.iter().all(|(k, v)| {
                    w.doc.pointer(&format!(
                        "/spec/template/metadata/labels/{}",
                        k.replace('/', "~1")
                    )) == Some(v)
                })
            })
            .collect();
        if pods.is_empty() {
            problems.push(format!("{}: selects no workload", service.at()));
        }
        for port in array_at(&service.doc, "/spec/ports") {
            let declared = pods
                .iter()
                .flat_map(|w| w.containers())
                .flat_map(|c| array_at(c, "/ports"))
                .any(|p| match &port["targetPort"] {
                    Value::String(name) => p["name"].as_str() == Some(name),
                    Value::Number(n) => p["containerPort"].as_u64() == n.as_u64(),
                    _ => p["containerPort"] == port["port"],
                });
            if !declared {
                problems.push(format!(
                    "{}: targetPort {} is not declared by its pods",
                    service.at(),
                    port["targetPort"]
                ));
            }
        }
    }
    assert_none(problems, "Services pointing nowhere");
}

#[test]
fn the_dev_overlay_defines_every_secret_config_map_and_key_its_pods_use() {
    let dev = dev_overlay();
    let mut problems = Vec::new();
    for w in workloads(&dev.resources) {
        let ns = &w.namespace;
        let mut need = |map: &Generated, kind: &str, name: Option<&str>, key: Option<&str>| {
            let Some(name) = name else { return };
            match map.get(&(ns.clone(), name.to_owned())) {
                None => problems.push(format!("{}: {kind} {ns}/{name} is not defined", w.at())),
                Some(data) => {
                    if let Some(key) = key.filter(|k| !data.contains_key(*k)) {
                        problems.push(format!("{}: {kind} {ns}/{name} has no key {key}", w.at()));
                    }
                }
            }
        };
        for container in w.containers() {
            for source in array_at(container, "/envFrom") {
                need(
                    &dev.config_maps,
                    "ConfigMap",
                    str_at(source, "/configMapRef/name"),
                    None,
                );
                need(
                    &dev.secrets,
                    "Secret",
                    str_at(source, "/secretRef/name"),
                    None,
                );
            }
            for var in array_at(container, "/env") {
                need(
                    &dev.secrets,
                    "Secret",
                    str_at(var, "/valueFrom/secretKeyRef/name"),
                    str_at(var, "/valueFrom/secretKeyRef/key"),
                );
                need(
                    &dev.config_maps,
                    "ConfigMap",
                    str_at(var, "/valueFrom/configMapKeyRef/name"),
                    str_at(var, "/valueFrom/configMapKeyRef/key"),
                );
            }
        }
        for volume in array_at(w.pod_spec().expect("pod"), "/volumes") {
            need(
                &dev.secrets,
                "Secret",
                str_at(volume, "/secret/secretName"),
                None,
            );
            need(
                &dev.config_maps,
                "ConfigMap",
                str_at(volume, "/configMap/name"),
                None,
            );
        }
    }
    assert_none(problems, "references the dev overlay does not satisfy");
}

#[test]
fn the_dev_provision_job_uses_the_signers_own_database_url() {
    // A pod reads Secrets of its own namespace only, so the Job gets a copy of the signer's URL.
    let dev = dev_overlay();
    let secret = |ns: &str, name: &str, key: &str| {
        dev.secrets
            .get(&(ns.to_owned(), name.to_owned()))
            .and_then(|d| d.get(key))
            .cloned()
            .unwrap_or_else(|| panic!("{ns}/{name}:{key}"))
    };
    assert_eq!(
        secret("opledger", "opledger-dev-provision", "signer_database_url"),
        secret("opledger-signer", "opledger-signer-db", "database_url"),
    );
}

#[test]
fn the_signer_mounts_its_keystore_read_only_from_a_secret_and_runs_its_own_image() {
    let dev = dev_overlay();
    let signer = deployment(&dev.resources, "opledger-signer");
    assert_eq!(signer.namespace, "opledger-signer");
    let pod = signer.pod_spec().expect("pod");
    let container = signer.containers()[0];
    assert!(
        str_at(container, "/image").is_some_and(|i| i.starts_with("opledger/signer:")),
        "{container}"
    );
    assert_eq!(
        pod["automountServiceAccountToken"],
        Value::Bool(false),
        "no API token in the signer"
    );
    let mount = |path: &str| {
        array_at(container, "/volumeMounts")
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))
    };
    for (path, secret) in [
        ("/keys", "opledger-signer-keystore"),
        ("/run/secrets/opledger", "opledger-signer-passphrases"),
    ] {
        let m = mount(path);
        assert_eq!(m["readOnly"], Value::Bool(true), "{path} is read-only");
        let volume = array_at(pod, "/volumes")
            .iter()
            .find(|v| v["name"] == m["name"])
            .expect("volume");
        assert_eq!(
            str_at(volume, "/secret/secretName"),
            Some(secret),
            "{path} comes from a Secret"
        );
    }
    let database = array_at(container, "/env")
        .iter()
        .find(|v| v["name"] == "OPLEDGER_SIGNER_DATABASE_URL")
        .expect("signer database url");
    assert_eq!(
        str_at(database, "/valueFrom/secretKeyRef/name"),
        Some("opledger-signer-db"),
        "its own database role"
    );
    // Its wallets name keystores on the key mount and passphrase files on the passphrase mount.
    let settings = dev_overlay_settings()
        .into_iter()
        .find(|(s, _)| s.name == "signer")
        .expect("signer")
        .1;
    let wallets = settings
        .get("wallets")
        .and_then(toml::Value::as_array)
        .expect("wallets");
    assert!(!wallets.is_empty(), "the dev signer has a wallet");
    for wallet in wallets {
        assert!(
            wallet
                .get("keystore")
                .and_then(toml::Value::as_str)
                .is_some_and(|p| p.starts_with("/keys/")),
            "{wallet}"
        );
        assert!(
            wallet
                .get("passphrase_file")
                .and_then(toml::Value::as_str)
                .is_some_and(|p| p.starts_with("/run/secrets/opledger/")),
            "{wallet}"
        );
    }
}

#[test]
fn every_kubernetes_image_is_built_by_a_dockerfile_target_or_pinned() {
    let stages: BTreeSet<String> = dockerfile().into_iter().map(|s| s.name).collect();
    let anvil = read(&deploy().join("docker/anvil.Dockerfile"));
    let mut problems = Vec::new();
    for w in workloads(&all_k8s_resources()) {
        for c in w.containers() {
            let image = str_at(c, "/image").unwrap_or_default();
            let (repository, tag) = image.rsplit_once(':').unwrap_or((image, ""));
            let built = match repository.strip_prefix("opledger/") {
                Some("anvil") => anvil.contains(&format!("opledger/anvil:{tag}")),
                Some(target) => stages.contains(target),
                None => false,
            };
            if !built && (tag.is_empty() || tag == "latest") {
                problems.push(format!(
                    "{}: image {image} is neither built here nor pinned",
                    w.at()
                ));
            }
            if repository.starts_with("opledger/") && !built {
                problems.push(format!("{}: no Dockerfile target builds {image}", w.at()));
            }
        }
    }
    assert_none(problems, "images nobody builds");
}
