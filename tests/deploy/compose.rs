//! Compose stack checks: references, images, start order, healthchecks, tracing and locked-down
//! containers.

use crate::common::{SERVICES, assert_none, str_at, strings};
use crate::compose_file::{
    compose, compose_config_secret, compose_dir, compose_secret_file, environment, interpolate,
};
use crate::dockerfile::{dockerfile, dockerfile_stages};
use crate::health::expected_health_service;
use serde_json::Value;
use std::collections::BTreeSet;

#[test]
fn compose_services_reference_only_defined_secrets_volumes_networks_and_services() {
    let compose = compose();
    let services = compose["services"].as_object().expect("services");
    let defined = |key: &str| -> BTreeSet<String> {
        compose[key]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let (secrets, volumes, networks) =
        (defined("secrets"), defined("volumes"), defined("networks"));
    let mut problems = Vec::new();
    for secret in &secrets {
        let file = compose_secret_file(&compose, secret);
        if !file.is_file() {
            problems.push(format!(
                "secret {secret}: {} does not exist",
                file.display()
            ));
        }
    }
    for (name, service) in services {
        for secret in strings(&service["secrets"]) {
            if !secrets.contains(&secret) {
                problems.push(format!("{name}: secret {secret} is not defined"));
            }
        }
        for network in strings(&service["networks"]) {
            if !networks.contains(&network) {
                problems.push(format!("{name}: network {network} is not defined"));
            }
        }
        for volume in strings(&service["volumes"]) {
            let source = volume.split(':').next().unwrap_or_default();
            if source.starts_with('.') || source.starts_with('/') {
                let path = compose_dir().join(interpolate(source).unwrap_or_default());
                if !path.exists() {
                    problems.push(format!(
                        "{name}: bind mount {} does not exist",
                        path.display()
                    ));
                }
            } else if !volumes.contains(source) {
                problems.push(format!("{name}: volume {source} is not defined"));
            }
        }
        let depends: Vec<String> = match &service["depends_on"] {
            Value::Object(o) => o.keys().cloned().collect(),
            other => strings(other),
        };
        for dependency in depends {
            if !services.contains_key(&dependency) {
                problems.push(format!("{name}: depends on unknown service {dependency}"));
            }
        }
    }
    assert_none(problems, "compose references nothing that exists");
}

#[test]
fn compose_builds_from_existing_dockerfile_targets_and_pins_every_other_image() {
    let compose = compose();
    let stages: BTreeSet<String> = dockerfile().into_iter().map(|s| s.name).collect();
    let mut problems = Vec::new();
    for (name, service) in compose["services"].as_object().expect("services") {
        let image = str_at(service, "/image").unwrap_or_default();
        if let Some(build) = service.get("build") {
            let context = compose_dir().join(str_at(build, "/context").unwrap_or("."));
            let dockerfile = context.join(str_at(build, "/dockerfile").unwrap_or("Dockerfile"));
            if !dockerfile.is_file() {
                problems.push(format!("{name}: {} does not exist", dockerfile.display()));
            }
            if let Some(target) = str_at(build, "/target") {
                let targets: BTreeSet<String> = dockerfile_stages(&dockerfile)
                    .into_iter()
                    .map(|s| s.name)
                    .collect();
                if !targets.contains(target) {
                    problems.push(format!(
                        "{name}: {} has no stage {target}",
                        dockerfile.display()
                    ));
                }
                if dockerfile.ends_with("deploy/docker/Dockerfile") && !stages.contains(target) {
                    problems.push(format!("{name}: unknown target {target}"));
                }
            }
        } else {
            let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or_default();
            if tag.is_empty() || tag == "latest" {
                problems.push(format!("{name}: image {image} is not pinned to a version"));
            }
        }
    }
    assert_none(problems, "compose images");
}

#[test]
fn compose_waits_only_on_services_that_report_health_or_finish() {
    let compose = compose();
    let services = compose["services"].as_object().expect("services");
    let mut problems = Vec::new();
    for (name, service) in services {
        let Some(depends) = service["depends_on"].as_object() else {
            continue;
        };
        for (dependency, condition) in depends {
            let target = &services[dependency];
            match str_at(condition, "/condition") {
                Some("service_healthy") if target.get("healthcheck").is_none() => {
                    problems.push(format!(
                        "{name}: waits for {dependency} to be healthy, which has no healthcheck"
                    ));
                }
                Some("service_completed_successfully")
                    if str_at(target, "/restart") != Some("no") =>
                {
                    problems.push(format!(
                        "{name}: waits for {dependency} to finish, which restarts"
                    ));
                }
                _ => {}
            }
        }
    }
    assert_none(problems, "compose waits that never end");
}

#[test]
fn compose_runs_migrations_before_any_service_starts() {
    let compose = compose();
    let migrate = &compose["services"]["migrate"];
    assert_eq!(strings(&migrate["command"]), ["migrate"]);
    assert!(
        str_at(migrate, "/image").is_some_and(|i| i.starts_with("opledger/admin")),
        "{migrate}"
    );
    assert_eq!(
        str_at(migrate, "/depends_on/postgres/condition"),
        Some("service_healthy")
    );
    assert_eq!(
        str_at(&compose, "/services/provision/depends_on/migrate/condition"),
        Some("service_completed_successfully")
    );
    for service in SERVICES {
        assert_eq!(
            str_at(
                &compose["services"][service.name],
                "/depends_on/provision/condition"
            ),
            Some("service_completed_successfully"),
            "{} starts after migrate and provision",
            service.name
        );
    }
}

#[test]
fn compose_gives_every_service_a_grpc_healthcheck_tracing_and_a_locked_down_container() {
    let compose = compose();
    let mut problems = Vec::new();
    for service in SERVICES {
        let s = &compose["services"][service.name];
        let env = environment(s);
        let name = service.name;
        let listen = env
            .get(&format!("{}LISTEN", service.prefix()))
            .cloned()
            .unwrap_or_default();
        if listen != format!("0.0.0.0:{}", service.grpc) {
            problems.push(format!(
                "{name}: LISTEN is {listen:?}, not 0.0.0.0:{}",
                service.grpc
            ));
        }
        let test = strings(&s["healthcheck"]["test"]);
        let expected_name = expected_health_service(name);
        if !test.iter().any(|a| a.ends_with("/grpc_health_probe"))
            || !test.contains(&format!("-addr=127.0.0.1:{}", service.grpc))
            || !test.contains(&format!("-service={expected_name}"))
        {
            problems.push(format!(
                "{name}: healthcheck {test:?} does not probe {expected_name} on {}",
                service.grpc
            ));
        }
        if !strings(&s["volumes"])
            .iter()
            .any(|v| v.starts_with("grpc-health-probe:") && v.ends_with(":ro"))
        {
            problems.push(format!(
                "{name}: the health probe volume is not mounted read-only"
            ));
        }
        if env.get("OTEL_EXPORTER_OTLP_ENDPOINT").map(String::as_str) != Some("http://jaeger:4317")
        {
            problems.push(format!(
                "{name}: OTEL_EXPORTER_OTLP_ENDPOINT is not http://jaeger:4317"
            ));
        }
        if env.get("OTEL_SERVICE_NAME") != Some(&format!("opledger-{name}")) {
            problems.push(format!("{name}: OTEL_SERVICE_NAME is not opledger-{name}"));
        }
        if s["read_only"] != Value::Bool(true) || strings(&s["cap_drop"]) != ["ALL"] {
            problems.push(format!("{name}: not read_only with cap_drop [ALL]"));
        }
        match compose_config_secret(&compose, &service) {
            Some(secret) if strings(&s["secrets"]).contains(&secret) => {}
            other => problems.push(format!(
                "{name}: its config file {other:?} is not one of its secrets"
            )),
        }
    }
    // The signer reaches only its internal network.
    assert_eq!(
        strings(&compose["services"]["signer"]["networks"]),
        ["signer"]
    );
    assert_eq!(compose["networks"]["signer"]["internal"], Value::Bool(true));
    assert_none(problems, "compose services");
}
