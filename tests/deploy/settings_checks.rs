//! Settings: every variable and file key names a real setting, and the settings load with each
//! service's own configuration type.

use crate::common::{SERVICES, Service, assert_none};
use crate::kustomize::{k8s, render};
use crate::settings::{
    compose_settings, dev_overlay_settings, effective_settings, unknown_settings,
};
use std::fs;

#[test]
fn compose_sets_only_settings_the_services_define() {
    let mut problems = Vec::new();
    for (service, settings) in compose_settings() {
        problems.extend(unknown_settings(&service, &settings));
        for required in ["listen", "database_url"] {
            if !settings.contains_key(required) {
                problems.push(format!("{}: {required} is not set", service.name));
            }
        }
        let metrics = format!("0.0.0.0:{}", service.metrics);
        if settings.get("metrics_listen").and_then(toml::Value::as_str) != Some(metrics.as_str()) {
            problems.push(format!("{}: metrics_listen is not {metrics}", service.name));
        }
    }
    assert_none(problems, "compose settings");
}

#[test]
fn the_dev_overlay_sets_only_settings_the_services_define() {
    let mut problems = Vec::new();
    for (service, settings) in dev_overlay_settings() {
        problems.extend(unknown_settings(&service, &settings));
        let listen = settings
            .get("listen")
            .and_then(toml::Value::as_str)
            .unwrap_or_default();
        if listen != format!("0.0.0.0:{}", service.grpc) {
            problems.push(format!("{}: listen is {listen:?}", service.name));
        }
    }
    assert_none(problems, "dev overlay settings");
}

#[test]
fn the_base_config_maps_set_only_settings_the_services_define() {
    let base = render(&k8s().join("base"));
    let mut problems = Vec::new();
    for ((_, name), data) in &base.config_maps {
        let service = SERVICES
            .iter()
            .find(|s| name == &format!("opledger-{}", s.name))
            .unwrap_or_else(|| panic!("config map {name}"));
        problems.extend(unknown_settings(
            service,
            &effective_settings(service, None, data),
        ));
    }
    assert_none(problems, "base settings");
}

/// Loads `settings` with the service's own `Config::load`: defaults, the file, validation.
fn load_with_service_type(service: &Service, settings: &toml::Table) -> Result<(), String> {
    let file = std::env::temp_dir().join(format!(
        "opledger-deploy-test-{}-{}-{:?}.toml",
        std::process::id(),
        service.name,
        std::thread::current().id()
    ));
    fs::write(&file, toml::to_string(settings).expect("TOML")).expect("write settings");
    let path = Some(file.as_path());
    let loaded = match service.name {
        "operations" => opledger_operations::Config::load(path).map(drop),
        "approvals" => opledger_approvals::Config::load(path).map(drop),
        "signer" => opledger_signer::Config::load(path).map(drop),
        "broadcaster" => opledger_broadcaster::Config::load(path).map(drop),
        "reconciler" => opledger_reconciler::Config::load(path).map(drop),
        "inbox" => opledger_inbox::Config::load(path).map(drop),
        "witness" => opledger_witness::Config::load(path).map(drop),
        "custodian" => opledger_custodian_executor::Config::load(path).map(drop),
        other => panic!("unknown service {other}"),
    };
    let _ = fs::remove_file(&file);
    loaded.map_err(|e| e.to_string())
}

#[test]
fn compose_settings_load_with_each_services_own_configuration_type() {
    let mut problems = Vec::new();
    for (service, settings) in compose_settings() {
        if let Err(e) = load_with_service_type(&service, &settings) {
            problems.push(format!("{}: {e}", service.name));
        }
    }
    assert_none(problems, "compose configurations the services refuse");
}

#[test]
fn dev_overlay_settings_load_with_each_services_own_configuration_type() {
    let mut problems = Vec::new();
    for (service, settings) in dev_overlay_settings() {
        if let Err(e) = load_with_service_type(&service, &settings) {
            problems.push(format!("{}: {e}", service.name));
        }
    }
    assert_none(problems, "dev overlay configurations the services refuse");
}
