//! Service settings: the setting names each service defines, and the effective settings the
//! compose stack and the dev overlay give each service (TOML file overlaid by variables).

use crate::common::{SERVICES, Service, array_at, read, str_at};
use crate::compose_file::{compose, compose_config_secret, compose_secret_file, environment};
use crate::kustomize::{Generated, Manifest, Rendered, deployment, dev_overlay};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The top-level setting names of a service, read from its `Config` type's JSON schema: its
/// fields, with the flattened sections (`base`, `signer`, `chain`) as the keys the loader reads.
fn config_fields(service: &Service) -> BTreeSet<String> {
    match service.name {
        "operations" => schema_keys::<opledger_operations::Config>(),
        "approvals" => schema_keys::<opledger_approvals::Config>(),
        "signer" => schema_keys::<opledger_signer::Config>(),
        "broadcaster" => schema_keys::<opledger_broadcaster::Config>(),
        "reconciler" => schema_keys::<opledger_reconciler::Config>(),
        "inbox" => schema_keys::<opledger_inbox::Config>(),
        "witness" => schema_keys::<opledger_witness::Config>(),
        "custodian" => schema_keys::<opledger_custodian_executor::Config>(),
        other => panic!("no configuration type known for service {other}"),
    }
}

/// The top-level keys of `T`'s JSON schema.
fn schema_keys<T: schemars::JsonSchema>() -> BTreeSet<String> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).expect("a schema serializes");
    let keys: BTreeSet<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    assert!(
        !keys.is_empty(),
        "{}: the schema lists no keys",
        std::any::type_name::<T>()
    );
    keys
}

/// A variable's value as the services' configuration loader (figment) reads it: TOML-like
/// arrays, tables, numbers and booleans; anything else is a string.
fn env_value(text: &str) -> toml::Value {
    match format!("v = {text}").parse::<toml::Table>() {
        Ok(mut table) => table.remove("v").expect("the key just written"),
        Err(_) => toml::Value::String(text.to_owned()),
    }
}

/// One service's effective settings: its TOML file overlaid by its `OPLEDGER_<SERVICE>_*`
/// variables (the file variable itself excluded), as the loader layers them.
pub(crate) fn effective_settings(
    service: &Service,
    file: Option<&str>,
    env: &BTreeMap<String, String>,
) -> toml::Table {
    let mut table = match file {
        Some(text) => text.parse::<toml::Table>().expect("service TOML parses"),
        None => toml::Table::new(),
    };
    let prefix = service.prefix();
    for (key, value) in env {
        if let Some(field) = key.strip_prefix(&prefix)
            && field != "CONFIG"
        {
            table.insert(field.to_lowercase(), env_value(value));
        }
    }
    table
}

/// Settings a service does not define; it would refuse to start (`deny_unknown_fields`).
pub(crate) fn unknown_settings(service: &Service, settings: &toml::Table) -> Vec<String> {
    let fields = config_fields(service);
    settings
        .keys()
        .filter(|k| !fields.contains(*k))
        .map(|k| {
            format!(
                "{}: no setting `{k}` in {}::Config",
                service.name,
                service.binary().replace('-', "_")
            )
        })
        .collect()
}

/// The compose stack's settings of each service.
pub(crate) fn compose_settings() -> Vec<(Service, toml::Table)> {
    let compose = compose();
    SERVICES
        .iter()
        .map(|service| {
            let env = environment(&compose["services"][service.name]);
            let file = compose_config_secret(&compose, service)
                .map(|secret| read(&compose_secret_file(&compose, &secret)));
            (*service, effective_settings(service, file.as_deref(), &env))
        })
        .collect()
}

/// The dev overlay's settings of each service: its container's variables (ConfigMaps, Secrets,
/// the pod name for fieldRefs) and the file its `_CONFIG` variable names in a mounted ConfigMap.
pub(crate) fn dev_overlay_settings() -> Vec<(Service, toml::Table)> {
    let dev = dev_overlay();
    SERVICES
        .iter()
        .map(|service| {
            let workload = deployment(&dev.resources, &format!("opledger-{}", service.name));
            let container = workload.containers()[0];
            let env = container_env(&dev, workload, container);
            let file = env
                .get(&format!("{}CONFIG", service.prefix()))
                .map(|path| mounted_file(&dev, workload, container, path));
            (*service, effective_settings(service, file.as_deref(), &env))
        })
        .collect()
}

pub(crate) fn container_env(
    dev: &Rendered,
    workload: &Manifest,
    container: &Value,
) -> BTreeMap<String, String> {
    let ns = &workload.namespace;
    let lookup = |map: &Generated, name: &str| {
        map.get(&(ns.clone(), name.to_owned()))
            .cloned()
            .unwrap_or_else(|| panic!("{}: {name} is not defined", workload.at()))
    };
    let mut env = BTreeMap::new();
    for source in array_at(container, "/envFrom") {
        if let Some(name) = str_at(source, "/configMapRef/name") {
            env.extend(lookup(&dev.config_maps, name));
        }
        if let Some(name) = str_at(source, "/secretRef/name") {
            env.extend(lookup(&dev.secrets, name));
        }
    }
    for var in array_at(container, "/env") {
        let name = str_at(var, "/name").expect("env name").to_owned();
        let value = if let Some(v) = str_at(var, "/value") {
            v.to_owned()
        } else if let Some(r) = var.pointer("/valueFrom/secretKeyRef") {
            let data = lookup(&dev.secrets, str_at(r, "/name").expect("secret name"));
            data.get(str_at(r, "/key").expect("key"))
                .cloned()
                .unwrap_or_default()
        } else if let Some(r) = var.pointer("/valueFrom/configMapKeyRef") {
            let data = lookup(
                &dev.config_maps,
                str_at(r, "/name").expect("config map name"),
            );
            data.get(str_at(r, "/key").expect("key"))
                .cloned()
                .unwrap_or_default()
        } else {
            // fieldRef: the pod name, as the workloads use it
            format!("{}-0", workload.name())
        };
        env.insert(name, value);
    }
    env
}

fn mounted_file(dev: &Rendered, workload: &Manifest, container: &Value, path: &str) -> String {
    let pod = workload.pod_spec().expect("pod spec");
    for mount in array_at(container, "/volumeMounts") {
        let dir = str_at(mount, "/mountPath").unwrap_or_default();
        let Some(file) = path.strip_prefix(dir).map(|f| f.trim_start_matches('/')) else {
            continue;
        };
        let volume = array_at(pod, "/volumes")
            .iter()
            .find(|v| v["name"] == mount["name"])
            .expect("mounted volume");
        if let Some(name) = str_at(volume, "/configMap/name") {
            let key = (workload.namespace.clone(), name.to_owned());
            if let Some(text) = dev.config_maps.get(&key).and_then(|d| d.get(file)) {
                return text.clone();
            }
        }
    }
    panic!("{}: {path} is not in a mounted ConfigMap", workload.at())
}
