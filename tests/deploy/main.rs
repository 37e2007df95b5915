//! The deployment artifacts under `deploy/`, checked as data: no Docker, no Kubernetes, no
//! network, no database. A manifest that would fail at deploy time, or quietly weaken what the
//! deployment promises (non-root, read-only, the signer's closed network, real settings only,
//! dashboards on real metrics), fails here instead.
//!
//! `docker compose config` and `kubectl kustomize` are not needed: the few kustomize and compose
//! rules the artifacts rely on (generators, namespaces, `${VAR:-default}`, YAML merge keys) are
//! modelled below.

use serde::Deserialize as _;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The seven services: compose service name, Kubernetes workload name `opledger-<name>`, image and
/// Dockerfile target `<name>`, settings `OPLEDGER_<NAME>_*`, and their ports.
const SERVICES: [Service; 7] = [
    service("operations", 15051, 9101),
    service("approvals", 15052, 9102),
    service("signer", 15053, 9103),
    service("broadcaster", 15054, 9104),
    service("reconciler", 15055, 9105),
    service("inbox", 15056, 9106),
    service("witness", 15057, 9107),
];

const fn service(name: &'static str, grpc: u16, metrics: u16) -> Service {
    Service {
        name,
        grpc,
        metrics,
    }
}

#[derive(Debug, Clone, Copy)]
struct Service {
    name: &'static str,
    grpc: u16,
    metrics: u16,
}

impl Service {
    fn prefix(&self) -> String {
        format!("OPLEDGER_{}_", self.name.to_uppercase())
    }
}

/// Every metric the suite exports, by kind. Dashboards may query these and nothing else;
/// `every_allow_listed_metric_is_exported_by_the_source` keeps the list honest.
const METRICS: &[(&str, MetricKind)] = &[
    // crates/store/src/metrics.rs, served by the reconciler
    ("opledger_operations", MetricKind::Gauge),
    ("opledger_oldest_unresolved_seconds", MetricKind::Gauge),
    ("opledger_oldest_waiting_seconds", MetricKind::Gauge),
    ("opledger_escalations", MetricKind::Gauge),
    ("opledger_open_escalations", MetricKind::Gauge),
    ("opledger_reopened_releases", MetricKind::Gauge),
    // the broadcaster
    ("opledger_submissions_total", MetricKind::Counter),
    // every gRPC service
    ("opledger_grpc_requests_total", MetricKind::Counter),
    (
        "opledger_grpc_request_duration_seconds",
        MetricKind::Histogram,
    ),
    // the inbox
    ("opledger_inbox_requests_total", MetricKind::Counter),
    ("opledger_inbox_quarantined_total", MetricKind::Counter),
    ("opledger_inbox_unhandled_total", MetricKind::Counter),
    ("opledger_inbox_pending", MetricKind::Gauge),
    ("opledger_inbox_parked", MetricKind::Gauge),
    ("opledger_inbox_dead_letters", MetricKind::Gauge),
    ("opledger_inbox_open_quarantines", MetricKind::Gauge),
    ("opledger_inbox_open_unhandled", MetricKind::Gauge),
    (
        "opledger_inbox_oldest_unresolved_seconds",
        MetricKind::Gauge,
    ),
    // the witness (services/witness/src/metrics.rs)
    (
        "opledger_witness_oldest_unwitnessed_seconds",
        MetricKind::Gauge,
    ),
    ("opledger_witness_examined_total", MetricKind::Counter),
    (
        "opledger_witness_oldest_unwitnessed_credit_seconds",
        MetricKind::Gauge,
    ),
    (
        "opledger_witness_credits_examined_total",
        MetricKind::Counter,
    ),
    // every service that reads chain evidence (crates/chain/src/evidence/settings.rs)
    ("opledger_evidence_no_verdict_total", MetricKind::Counter),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

// ---------------------------------------------------------------------------------------------
// Files

fn repo() -> PathBuf {
    canonical(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// Without `..`: files reached through different kustomizations compare equal.
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn deploy() -> PathBuf {
    repo().join("deploy")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Files under `dir` whose names end with one of `suffixes`, sorted.
fn files_under(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if suffixes.iter().any(|s| path.to_string_lossy().ends_with(s)) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Every document of a YAML file, with merge keys (`<<: *anchor`) applied, as JSON values.
fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = read(path);
    let mut docs = Vec::new();
    for document in serde_norway::Deserializer::from_str(&text) {
        let mut value = serde_norway::Value::deserialize(document)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        value
            .apply_merge()
            .unwrap_or_else(|e| panic!("{}: merge keys: {e}", path.display()));
        if !value.is_null() {
            docs.push(
                serde_json::to_value(&value).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            );
        }
    }
    docs
}

fn yaml_doc(path: &Path) -> Value {
    let mut docs = yaml_docs(path);
    assert_eq!(docs.len(), 1, "{}: one document expected", path.display());
    docs.remove(0)
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The strings of a JSON array (empty when absent).
fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn array_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Fails with every problem found, one per line.
fn assert_none(problems: Vec<String>, what: &str) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

// ---------------------------------------------------------------------------------------------
// Kubernetes: kustomizations rendered just far enough to check them

const WORKLOAD_KINDS: [&str; 3] = ["Deployment", "StatefulSet", "Job"];

/// A manifest with the namespace it ends up in.
#[derive(Debug, Clone)]
struct Manifest {
    path: PathBuf,
    namespace: String,
    doc: Value,
}

impl Manifest {
    fn kind(&self) -> &str {
        str_at(&self.doc, "/kind").unwrap_or_default()
    }

    fn name(&self) -> &str {
        str_at(&self.doc, "/metadata/name").unwrap_or_default()
    }

    fn pod_spec(&self) -> Option<&Value> {
        WORKLOAD_KINDS
            .contains(&self.kind())
            .then(|| self.doc.pointer("/spec/template/spec"))
            .flatten()
    }

    fn containers(&self) -> Vec<&Value> {
        let Some(pod) = self.pod_spec() else {
            return Vec::new();
        };
        ["/containers", "/initContainers"]
            .iter()
            .flat_map(|p| array_at(pod, p))
            .collect()
    }

    fn at(&self) -> String {
        format!(
            "{} {}/{} ({})",
            self.kind(),
            self.namespace,
            self.name(),
            self.path.display()
        )
    }
}

/// Generated ConfigMaps or Secrets: (namespace, name) -> data.
type Generated = BTreeMap<(String, String), BTreeMap<String, String>>;

/// What a kustomization directory renders to: its resources, its generated ConfigMaps and
/// Secrets (namespace, name -> data), and its patch files.
#[derive(Debug, Default)]
struct Rendered {
    resources: Vec<Manifest>,
    config_maps: Generated,
    secrets: Generated,
    patches: Vec<Manifest>,
}

fn kustomization(dir: &Path) -> Value {
    yaml_doc(&dir.join("kustomization.yaml"))
}

/// Renders `dir` the way kustomize does for what these artifacts use: resources (files and
/// kustomization directories), `namespace`, generators with create/merge/replace, patch files.
fn render(dir: &Path) -> Rendered {
    let k = kustomization(dir);
    let namespace = str_at(&k, "/namespace").map(str::to_owned);
    let mut out = Rendered::default();
    for resource in strings(&k["resources"]) {
        let path = canonical(&dir.join(&resource));
        if path.is_dir() {
            let sub = render(&path);
            out.resources.extend(sub.resources);
            out.config_maps.extend(sub.config_maps);
            out.secrets.extend(sub.secrets);
            out.patches.extend(sub.patches);
        } else {
            for doc in yaml_docs(&path) {
                let ns = str_at(&doc, "/metadata/namespace").map(str::to_owned);
                out.resources.push(Manifest {
                    path: path.clone(),
                    namespace: namespace.clone().or(ns).unwrap_or_default(),
                    doc,
                });
            }
        }
    }
    // The namespace transformer moves everything below this kustomization, bases included.
    if let Some(ns) = &namespace {
        for m in &mut out.resources {
            m.namespace = ns.clone();
        }
        out.config_maps = rename_namespace(out.config_maps, ns);
        out.secrets = rename_namespace(out.secrets, ns);
    }
    for (field, target) in [
        ("configMapGenerator", &mut out.config_maps),
        ("secretGenerator", &mut out.secrets),
    ] {
        for generator in array_at(&k, &format!("/{field}")) {
            let name = str_at(generator, "/name")
                .expect("generator name")
                .to_owned();
            let ns = str_at(generator, "/namespace")
                .map(str::to_owned)
                .or_else(|| namespace.clone())
                .unwrap_or_default();
            let data = generator_data(dir, generator);
            let key = (ns, name);
            match str_at(generator, "/behavior").unwrap_or("create") {
                "merge" => target
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("{}: merge into unknown {key:?}", dir.display()))
                    .extend(data),
                "replace" => {
                    assert!(
                        target.contains_key(&key),
                        "{}: replace of unknown {key:?}",
                        dir.display()
                    );
                    target.insert(key, data);
                }
                _ => {
                    assert!(
                        !target.contains_key(&key),
                        "{}: {key:?} generated twice",
                        dir.display()
                    );
                    target.insert(key, data);
                }
            }
        }
    }
    for patch in array_at(&k, "/patches") {
        if let Some(file) = str_at(patch, "/path") {
            let path = canonical(&dir.join(file));
            for doc in yaml_docs(&path) {
                let ns = str_at(&doc, "/metadata/namespace")
                    .unwrap_or_default()
                    .to_owned();
                out.patches.push(Manifest {
                    path: path.clone(),
                    namespace: ns,
                    doc,
                });
            }
        }
    }
    out
}

fn rename_namespace(map: Generated, ns: &str) -> Generated {
    map.into_iter()
        .map(|((_, name), data)| ((ns.to_owned(), name), data))
        .collect()
}

/// The data of one generator: `literals` (KEY=VALUE), `files` (name = file name, or KEY=path)
/// and `envs` (KEY=VALUE lines, `#` comments).
fn generator_data(dir: &Path, generator: &Value) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    for literal in strings(&generator["literals"]) {
        let (key, value) = literal.split_once('=').expect("literal KEY=VALUE");
        data.insert(key.to_owned(), value.to_owned());
    }
    for file in strings(&generator["files"]) {
        let (key, path) = match file.split_once('=') {
            Some((key, path)) => (key.to_owned(), path.to_owned()),
            None => (file_name(&file), file.clone()),
        };
        data.insert(key, read(&dir.join(path)));
    }
    for env in strings(&generator["envs"]) {
        data.extend(env_file(&dir.join(env)));
    }
    data
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn env_file(path: &Path) -> BTreeMap<String, String> {
    read(path)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("{}: not KEY=VALUE: {l}", path.display()));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn k8s() -> PathBuf {
    deploy().join("k8s")
}

fn dev_overlay() -> Rendered {
    render(&k8s().join("overlays/dev"))
}

/// Every manifest the Kubernetes kustomizations can produce: each directory rendered on its own
/// (so a base is checked even where no overlay uses it), deduplicated by file and name.
fn all_k8s_resources() -> Vec<Manifest> {
    let mut seen = BTreeSet::new();
    let mut all = Vec::new();
    for k in files_under(&k8s(), &["kustomization.yaml"]) {
        let dir = k.parent().expect("kustomization directory");
        for m in render(dir).resources {
            if seen.insert((m.path.clone(), m.kind().to_owned(), m.name().to_owned())) {
                all.push(m);
            }
        }
    }
    all
}

fn workloads(resources: &[Manifest]) -> impl Iterator<Item = &Manifest> {
    resources
        .iter()
        .filter(|m| WORKLOAD_KINDS.contains(&m.kind()))
}

fn deployment<'a>(resources: &'a [Manifest], name: &str) -> &'a Manifest {
    resources
        .iter()
        .find(|m| m.kind() == "Deployment" && m.name() == name)
        .unwrap_or_else(|| panic!("no Deployment {name}"))
}

// ---------------------------------------------------------------------------------------------
// Compose

fn compose_dir() -> PathBuf {
    deploy().join("compose")
}

fn compose() -> Value {
    yaml_doc(&compose_dir().join("compose.yaml"))
}

/// Resolves compose interpolation the way an unset environment does: `${VAR:-default}` and
/// `${VAR-default}` give the default, `$$` a dollar; `${VAR}` without a default is an error.
fn interpolate(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(after) = rest.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(inner) = rest.strip_prefix('{') {
            let end = inner
                .find('}')
                .ok_or_else(|| format!("unclosed ${{ in {text}"))?;
            let expr = &inner[..end];
            let default = expr
                .split_once(":-")
                .or_else(|| expr.split_once('-'))
                .map(|(_, d)| d)
                .ok_or_else(|| format!("{text}: ${{{expr}}} has no default"))?;
            out.push_str(default);
            rest = &inner[end + 1..];
        } else {
            return Err(format!("{text}: bare $ (write $$ or ${{VAR:-default}})"));
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A compose service's environment as a map (compose accepts a map or KEY=VALUE strings).
fn environment(service: &Value) -> BTreeMap<String, String> {
    match &service["environment"] {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), v)
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|s| s.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// The host file behind a compose secret.
fn compose_secret_file(compose: &Value, secret: &str) -> PathBuf {
    let file = str_at(compose, &format!("/secrets/{secret}/file"))
        .unwrap_or_else(|| panic!("compose secret {secret} has no file"));
    compose_dir().join(interpolate(file).expect("secret path"))
}

/// `OPLEDGER_<SERVICE>_CONFIG=/run/secrets/<name>`: the compose secret holding its TOML.
fn compose_config_secret(compose: &Value, service: &Service) -> Option<String> {
    let env = environment(&compose["services"][service.name]);
    env.get(&format!("{}CONFIG", service.prefix()))
        .and_then(|p| p.strip_prefix("/run/secrets/"))
        .map(str::to_owned)
}

// ---------------------------------------------------------------------------------------------
// Service settings

/// The top-level setting names of a service: the fields of `pub struct Config` in its config.rs.
fn config_fields(service: &Service) -> BTreeSet<String> {
    let path = repo().join(format!("services/{}/src/config.rs", service.name));
    let text = read(&path);
    let start = text
        .find("pub struct Config {")
        .unwrap_or_else(|| panic!("{}: no `pub struct Config`", path.display()));
    let body = &text[start + "pub struct Config {".len()..];
    let body = &body[..body.find("\n}").expect("end of struct Config")];
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .collect()
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
fn effective_settings(
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
fn unknown_settings(service: &Service, settings: &toml::Table) -> Vec<String> {
    let fields = config_fields(service);
    settings
        .keys()
        .filter(|k| !fields.contains(*k))
        .map(|k| {
            format!(
                "{}: no setting `{k}` in services/{}/src/config.rs",
                service.name, service.name
            )
        })
        .collect()
}

/// The compose stack's settings of each service.
fn compose_settings() -> Vec<(Service, toml::Table)> {
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
fn dev_overlay_settings() -> Vec<(Service, toml::Table)> {
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

fn container_env(
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

// ---------------------------------------------------------------------------------------------
// Dockerfile

#[derive(Debug)]
struct Stage {
    name: String,
    from: String,
    /// Instructions, continuation lines joined, comments dropped.
    instructions: Vec<String>,
}

impl Stage {
    fn with(&self, keyword: &str) -> impl Iterator<Item = &str> {
        let prefix = format!("{keyword} ");
        self.instructions
            .iter()
            .filter_map(move |i| i.strip_prefix(prefix.as_str()))
    }
}

fn dockerfile_stages(path: &Path) -> Vec<Stage> {
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    let mut stages: Vec<Stage> = Vec::new();
    let mut joined = String::new();
    let mut instructions = Vec::new();
    for line in read(path).lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && joined.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                joined.push_str(part);
                joined.push(' ');
            }
            None => {
                joined.push_str(trimmed);
                instructions.push(std::mem::take(&mut joined));
            }
        }
    }
    for instruction in instructions {
        if let Some(rest) = instruction.strip_prefix("FROM ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let mut from = words[0].to_owned();
            for (k, v) in &args {
                from = from.replace(&format!("${{{k}}}"), v);
            }
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => (*name).to_owned(),
                _ => String::new(),
            };
            stages.push(Stage {
                name,
                from,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push(instruction);
        } else if let Some((k, v)) = instruction
            .strip_prefix("ARG ")
            .and_then(|a| a.split_once('='))
        {
            args.insert(k.to_owned(), v.to_owned());
        }
    }
    stages
}

fn dockerfile() -> Vec<Stage> {
    dockerfile_stages(&deploy().join("docker/Dockerfile"))
}

/// The user a stage runs as: its last USER, else its parent stage's.
fn effective_user(stages: &[Stage], stage: &Stage) -> Option<String> {
    if let Some(user) = stage.with("USER").last() {
        return Some(user.trim().to_owned());
    }
    let parent = stages.iter().find(|s| s.name == stage.from)?;
    effective_user(stages, parent)
}

// ---------------------------------------------------------------------------------------------
// PromQL

/// PromQL operators and modifiers that look like names.
const PROMQL_WORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];
/// Aggregations, which may be followed by `by (...)` instead of their argument.
const AGGREGATIONS: &[&str] = &[
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "topk", "bottomk",
];

/// Metric names a PromQL expression selects (label matchers, ranges, strings, grouping clauses
/// and function names removed).
fn promql_metrics(expr: &str) -> BTreeSet<String> {
    // Blank out {...}, [...] and "...".
    let mut plain = String::new();
    let mut closing: Option<char> = None;
    for c in expr.chars() {
        match closing {
            Some(end) if c == end => closing = None,
            Some(_) => {}
            None => match c {
                '{' => closing = Some('}'),
                '[' => closing = Some(']'),
                '"' => closing = Some('"'),
                _ => plain.push(c),
            },
        }
    }
    let chars: Vec<char> = plain.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let mut skip_group = false;
    while i < chars.len() {
        let c = chars[i];
        if !(c.is_ascii_alphabetic() || c == '_' || c == ':') {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
        {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
        if [
            "by",
            "without",
            "on",
            "ignoring",
            "group_left",
            "group_right",
        ]
        .contains(&word.as_str())
        {
            skip_group = next == Some('(');
            continue;
        }
        if skip_group {
            // Inside `by (...)`: labels, not metrics.
            if let Some(close) = chars[i..].iter().position(|c| *c == ')') {
                i += close + 1;
            }
            skip_group = false;
            continue;
        }
        let keyword =
            PROMQL_WORDS.contains(&word.as_str()) || AGGREGATIONS.contains(&word.as_str());
        if next != Some('(') && !keyword {
            names.insert(word);
        }
    }
    names
}

/// The metric of a Grafana `label_values(metric, label)` variable query, if it is one.
fn label_values_metric(query: &str) -> Option<BTreeSet<String>> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let selector = inner.rsplit_once(',').map_or(inner, |(s, _)| s);
    Some(promql_metrics(selector))
}

fn allowed_metric(name: &str) -> bool {
    METRICS.iter().any(|(metric, kind)| match kind {
        MetricKind::Histogram => ["_bucket", "_sum", "_count"]
            .iter()
            .any(|suffix| name.strip_suffix(suffix) == Some(metric)),
        _ => name == *metric,
    })
}

/// Every panel of a dashboard, rows' nested panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in array_at(dashboard, "/panels") {
        out.push(panel);
        out.extend(array_at(panel, "/panels"));
    }
    out
}

fn dashboard() -> Value {
    json_file(&deploy().join("grafana/opledger.json"))
}

// =============================================================================================
// Everything parses

#[test]
fn every_yaml_file_under_deploy_parses() {
    let files = files_under(&deploy(), &[".yaml", ".yml"]);
    assert!(
        files.len() >= 20,
        "expected the deployment YAML, found {files:?}"
    );
    let documents: usize = files.iter().map(|f| yaml_docs(f).len()).sum();
    assert!(
        documents >= files.len(),
        "{documents} documents in {} files",
        files.len()
    );
}

#[test]
fn every_json_file_under_deploy_parses() {
    let files = files_under(&deploy(), &[".json"]);
    assert!(
        files.iter().any(|f| f.ends_with("grafana/opledger.json")),
        "{files:?}"
    );
    for file in files {
        json_file(&file);
    }
}

// =============================================================================================
// Kubernetes

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

// =============================================================================================
// Compose

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

/// The gRPC health service name each service reports (checked against the services' own
/// constants by `the_health_service_names_are_the_ones_the_services_register`).
fn expected_health_service(service: &str) -> &'static str {
    match service {
        "operations" => "opledger.v1.OperationsService",
        "approvals" => "opledger.v1.ApprovalsService",
        "signer" => "opledger.v1.SignerService",
        "broadcaster" => "opledger.v1.Broadcaster",
        "reconciler" => "opledger.v1.OperatorService",
        "inbox" => "opledger.v1.InboxService",
        "witness" => "opledger.witness",
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
fn the_compose_signer_reads_only_files_it_is_given() {
    let compose = compose();
    let signer = &compose["services"]["signer"];
    let given = strings(&signer["secrets"]);
    let text = read(&compose_secret_file(&compose, "signer_config"));
    let mut problems = Vec::new();
    for path in text.split('"').filter(|s| s.starts_with("/run/secrets/")) {
        let secret = path.trim_start_matches("/run/secrets/");
        if !given.contains(&secret.to_owned()) {
            problems.push(format!(
                "signer.toml names {path}, which is not one of the signer's secrets"
            ));
        }
    }
    assert_none(problems, "compose signer files");
}

#[test]
fn the_example_wallets_belong_to_the_tenant_the_provisioning_creates() {
    for (toml_path, script) in [
        (
            compose_dir().join("secrets.example/signer.toml"),
            compose_dir().join("provision.sh"),
        ),
        (
            k8s().join("overlays/dev/signer.toml"),
            k8s().join("overlays/dev/provision.sh"),
        ),
    ] {
        let config: toml::Table = read(&toml_path).parse().expect("signer TOML");
        let script = read(&script);
        for wallet in config["wallets"].as_array().expect("wallets") {
            let tenant = wallet["tenant_id"].as_str().expect("tenant_id");
            assert!(
                script.contains(&format!("'{tenant}'")),
                "{}: tenant {tenant} is not provisioned",
                toml_path.display()
            );
        }
    }
}

/// Every signer configuration under deploy/ (the example, compose's, the Kubernetes ones).
fn signer_configs() -> Vec<PathBuf> {
    vec![
        deploy().join("signer/signer.example.toml"),
        compose_dir().join("secrets.example/signer.toml"),
        k8s().join("overlays/dev/signer.toml"),
        k8s().join("signer/signer.toml"),
    ]
}

#[test]
fn every_signer_config_pins_a_valid_administrator_key_for_each_wallets_tenant() {
    let mut problems = Vec::new();
    let mut pinned_somewhere = 0;
    for path in signer_configs() {
        let at = path.display().to_string();
        let config: toml::Table = read(&path).parse().expect("signer TOML");
        let roots = config
            .get("trust_roots")
            .and_then(toml::Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut tenants = BTreeSet::new();
        for root in &roots {
            pinned_somewhere += 1;
            let tenant = root.get("tenant_id").and_then(toml::Value::as_str);
            match tenant {
                Some(t) if uuid::Uuid::parse_str(t).is_ok() => {
                    tenants.insert(t.to_owned());
                }
                _ => problems.push(format!("{at}: a trust root without a tenant UUID")),
            }
            let keys = root
                .get("admin_public_keys")
                .and_then(toml::Value::as_array)
                .cloned()
                .unwrap_or_default();
            if keys.is_empty() {
                problems.push(format!("{at}: a trust root pins no administrator key"));
            }
            for key in keys {
                let valid = key
                    .as_str()
                    .and_then(|k| hex::decode(k).ok())
                    .is_some_and(|b| opledger_domain::approval::verifying_key(&b).is_ok());
                if !valid {
                    problems.push(format!("{at}: {key} is not an Ed25519 public key (64 hex)"));
                }
            }
            if root
                .get("min_version")
                .and_then(toml::Value::as_integer)
                .unwrap_or(0)
                < 1
            {
                problems.push(format!("{at}: min_version must be at least 1"));
            }
        }
        let wallets = config
            .get("wallets")
            .and_then(toml::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for wallet in wallets {
            let tenant = wallet
                .get("tenant_id")
                .and_then(toml::Value::as_str)
                .unwrap_or("");
            if !tenants.contains(tenant) {
                problems.push(format!(
                    "{at}: wallet tenant {tenant} has no [[trust_roots]]"
                ));
            }
        }
        let text = read(&path);
        if !roots.is_empty() && !text.contains("opledger-admin trust") {
            problems.push(format!(
                "{at}: the trust root does not say how it is made (opledger-admin trust ...)"
            ));
        }
    }
    assert!(
        pinned_somewhere >= 3,
        "the example, compose and dev overlay pin trust roots"
    );
    assert_none(problems, "signer trust roots");
}

#[test]
fn the_dev_keystore_copies_are_identical() {
    for file in ["hot-wallet.json", "hot-wallet.pass"] {
        assert_eq!(
            read(&compose_dir().join("secrets.example").join(file)),
            read(&k8s().join("overlays/dev").join(file)),
            "{file} differs between compose and the dev overlay"
        );
    }
}

#[test]
fn every_example_secret_is_marked_for_development_only() {
    let mut problems = Vec::new();
    for file in files_under(&compose_dir().join("secrets.example"), &[""]) {
        let text = read(&file);
        let name = file_name(&file.to_string_lossy());
        let marked = text.to_lowercase().contains("dev-only")
            || text.contains("DEVELOPMENT ONLY")
            || text.contains("Development-only")
            // The keystore is JSON (no comments): its address is anvil's published dev account.
            || (name == "hot-wallet.json" && text.contains("f39fd6e51aad88f6f4ce6ab8827279cfffb92266"));
        if !marked {
            problems.push(file.display().to_string());
        }
    }
    assert_none(
        problems,
        "example secrets not marked as development placeholders",
    );
}

// =============================================================================================
// Settings: every variable and file key names a real setting

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

// =============================================================================================
// Prometheus and Grafana

#[test]
fn prometheus_scrapes_every_services_metrics_port_and_loads_the_alert_rules() {
    let dir = deploy().join("prometheus");
    let config = yaml_doc(&dir.join("prometheus.yml"));
    let targets: BTreeSet<String> = array_at(&config, "/scrape_configs")
        .iter()
        .flat_map(|job| array_at(job, "/static_configs"))
        .flat_map(|s| strings(&s["targets"]))
        .collect();
    let expected: BTreeSet<String> = SERVICES
        .iter()
        .map(|s| format!("{}:{}", s.name, s.metrics))
        .collect();
    assert_eq!(targets, expected);
    let rules = strings(&config["rule_files"]);
    assert!(rules.contains(&"alerts.yml".to_owned()), "{rules:?}");
    for rule in rules {
        assert!(dir.join(&rule).is_file(), "{rule}");
    }
    // compose mounts this folder where the command looks for the file.
    let compose = compose();
    let prometheus = &compose["services"]["prometheus"];
    assert!(
        strings(&prometheus["volumes"]).contains(&"../prometheus:/etc/prometheus:ro".to_owned())
    );
    assert!(
        strings(&prometheus["command"])
            .contains(&"--config.file=/etc/prometheus/prometheus.yml".to_owned())
    );
}

/// GitHub's anchor of a Markdown heading: lowercase, punctuation but `-` and `_` dropped, spaces
/// as `-`.
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every alerting rule of `deploy/prometheus/alerts.yml`.
fn alert_rules() -> Vec<Value> {
    let rules = yaml_doc(&deploy().join("prometheus/alerts.yml"));
    array_at(&rules, "/groups")
        .iter()
        .flat_map(|group| array_at(group, "/rules"))
        .filter(|rule| rule.get("alert").is_some())
        .cloned()
        .collect()
}

#[test]
fn every_alert_reads_exported_metrics_names_its_owner_and_links_a_runbook_section() {
    let runbook = read(&repo().join("docs/runbook.md"));
    let sections: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(heading_anchor)
        .collect();
    let rules = alert_rules();
    assert!(rules.len() >= 9, "{} alerts", rules.len());
    let mut problems = Vec::new();
    let mut read_metrics = BTreeSet::new();
    for rule in &rules {
        let name = str_at(rule, "/alert").unwrap_or_default();
        let expr = str_at(rule, "/expr").unwrap_or_default();
        let metrics = promql_metrics(expr);
        if metrics.is_empty() {
            problems.push(format!("{name}: {expr:?} selects no metric"));
        }
        for m in metrics {
            if !allowed_metric(&m) {
                problems.push(format!("{name}: {m} is not exported by the suite"));
            }
            read_metrics.insert(m);
        }
        if !matches!(str_at(rule, "/labels/severity"), Some("page" | "ticket")) {
            problems.push(format!("{name}: severity is neither page nor ticket"));
        }
        if str_at(rule, "/labels/owner").is_none_or(str::is_empty) {
            problems.push(format!("{name}: no owner label"));
        }
        match str_at(rule, "/annotations/runbook_url")
            .and_then(|url| url.strip_prefix("docs/runbook.md#"))
        {
            Some(anchor) if sections.contains(anchor) => {}
            other => problems.push(format!(
                "{name}: runbook_url {other:?} is no section of docs/runbook.md"
            )),
        }
    }
    // The witness's lag and refusals are alerts: an unattested release keeps its hold silently
    // otherwise, an unattested credit stays unspendable, and a refused one is a security event.
    for needed in [
        "opledger_witness_oldest_unwitnessed_seconds",
        "opledger_witness_examined_total",
        "opledger_witness_oldest_unwitnessed_credit_seconds",
        "opledger_witness_credits_examined_total",
    ] {
        if !read_metrics.contains(needed) {
            problems.push(format!("no alert reads {needed}"));
        }
    }
    assert_none(problems, "alert rules");
}

#[test]
fn every_alert_fires_in_a_promtool_case() {
    // promtool runs these cases (tests/reconciler/alerts.rs); a rule no case sees firing could
    // be one that never fires.
    let cases = yaml_doc(&deploy().join("prometheus/alerts.test.yml"));
    let fired: BTreeSet<&str> = array_at(&cases, "/tests")
        .iter()
        .flat_map(|case| array_at(case, "/alert_rule_test"))
        .filter(|check| !array_at(check, "/exp_alerts").is_empty())
        .filter_map(|check| str_at(check, "/alertname"))
        .collect();
    let rules = alert_rules();
    let missing: Vec<String> = rules
        .iter()
        .filter_map(|rule| str_at(rule, "/alert"))
        .filter(|name| !fired.contains(name))
        .map(str::to_owned)
        .collect();
    assert_none(missing, "alerts no case of alerts.test.yml sees firing");
}

#[test]
fn every_dashboard_query_names_only_metrics_the_suite_exports() {
    let dashboard = dashboard();
    let mut problems = Vec::new();
    let mut queried = BTreeSet::new();
    for panel in panels(&dashboard) {
        let title = str_at(panel, "/title").unwrap_or_default();
        for target in array_at(panel, "/targets") {
            let expr = str_at(target, "/expr").unwrap_or_default();
            let metrics = promql_metrics(expr);
            if metrics.is_empty() {
                problems.push(format!("{title}: {expr:?} selects no metric"));
            }
            for m in metrics {
                if !allowed_metric(&m) {
                    problems.push(format!("{title}: {m} is not exported by the suite"));
                }
                queried.insert(m);
            }
        }
    }
    for variable in array_at(&dashboard, "/templating/list") {
        let query = str_at(variable, "/query/query")
            .or_else(|| str_at(variable, "/query"))
            .unwrap_or_default();
        if let Some(metrics) = label_values_metric(query) {
            problems.extend(
                metrics
                    .into_iter()
                    .filter(|m| !allowed_metric(m))
                    .map(|m| format!("variable: {m}")),
            );
        }
    }
    // The panels the deployment promises.
    for needed in [
        "opledger_operations",
        "opledger_oldest_unresolved_seconds",
        "opledger_oldest_waiting_seconds",
        "opledger_escalations",
        "opledger_submissions_total",
        "opledger_grpc_requests_total",
        "opledger_grpc_request_duration_seconds_bucket",
        "opledger_inbox_requests_total",
        "opledger_inbox_quarantined_total",
        "opledger_inbox_unhandled_total",
        "opledger_inbox_dead_letters",
        "opledger_inbox_oldest_unresolved_seconds",
        "opledger_witness_oldest_unwitnessed_seconds",
        "opledger_witness_examined_total",
        "opledger_witness_oldest_unwitnessed_credit_seconds",
        "opledger_witness_credits_examined_total",
    ] {
        if !queried.contains(needed) {
            problems.push(format!("no panel shows {needed}"));
        }
    }
    assert_none(problems, "dashboard queries");
}

#[test]
fn counters_are_shown_as_rates_not_raw_totals() {
    let mut problems = Vec::new();
    for panel in panels(&dashboard()) {
        for target in array_at(panel, "/targets") {
            let expr = str_at(target, "/expr").unwrap_or_default();
            for m in promql_metrics(expr) {
                let counter = METRICS
                    .iter()
                    .any(|(n, k)| *n == m && *k == MetricKind::Counter)
                    || m.ends_with("_bucket");
                if counter && !(expr.contains("rate(") || expr.contains("increase(")) {
                    problems.push(format!(
                        "{}: {m} is a counter shown raw",
                        str_at(panel, "/title").unwrap_or_default()
                    ));
                }
            }
        }
    }
    assert_none(problems, "raw counters");
}

#[test]
fn the_dashboard_takes_its_prometheus_datasource_from_a_variable() {
    let dashboard = dashboard();
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion"
    );
    assert!(
        str_at(&dashboard, "/uid").is_some_and(|u| !u.is_empty()),
        "a stable uid"
    );
    let variable = array_at(&dashboard, "/templating/list")
        .iter()
        .find(|v| v["type"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(str_at(variable, "/query"), Some("prometheus"));
    let reference = format!("${{{}}}", str_at(variable, "/name").expect("name"));
    let mut ids = BTreeSet::new();
    let mut problems = Vec::new();
    for panel in panels(&dashboard) {
        let title = str_at(panel, "/title").unwrap_or_default();
        if !ids.insert(
            panel["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("{title}: no id")),
        ) {
            problems.push(format!("{title}: duplicate id"));
        }
        if panel.get("gridPos").is_none() {
            problems.push(format!("{title}: no gridPos"));
        }
        if panel["type"] == "row" {
            continue;
        }
        for ds in std::iter::once(&panel["datasource"])
            .chain(array_at(panel, "/targets").iter().map(|t| &t["datasource"]))
        {
            if str_at(ds, "/uid") != Some(reference.as_str())
                || str_at(ds, "/type") != Some("prometheus")
            {
                problems.push(format!("{title}: datasource {ds} is not {reference}"));
            }
        }
    }
    assert_none(problems, "dashboard datasources");
}

#[test]
fn grafana_provisions_the_dashboard_compose_mounts_and_the_compose_prometheus() {
    let provisioning = deploy().join("grafana/provisioning");
    let compose = compose();
    let grafana = &compose["services"]["grafana"];
    let volumes = strings(&grafana["volumes"]);
    assert!(
        volumes.contains(&"../grafana/provisioning:/etc/grafana/provisioning:ro".to_owned()),
        "{volumes:?}"
    );
    let mounted = volumes
        .iter()
        .find_map(|v| v.strip_prefix("../grafana/opledger.json:"))
        .and_then(|v| v.strip_suffix(":ro"))
        .expect("the dashboard is mounted");
    let providers = yaml_doc(&provisioning.join("dashboards/opledger.yaml"));
    let path = str_at(&providers, "/providers/0/options/path").expect("provider path");
    assert_eq!(
        Path::new(mounted).parent(),
        Some(Path::new(path)),
        "the provider reads where compose mounts"
    );
    let datasources = yaml_doc(&provisioning.join("datasources/prometheus.yaml"));
    let source = &array_at(&datasources, "/datasources")[0];
    assert_eq!(str_at(source, "/type"), Some("prometheus"));
    assert_eq!(str_at(source, "/url"), Some("http://prometheus:9090"));
    assert!(compose["services"].get("prometheus").is_some());
}

// =============================================================================================
// Images

const TARGETS: [&str; 8] = [
    "operations",
    "approvals",
    "signer",
    "broadcaster",
    "reconciler",
    "inbox",
    "witness",
    "admin",
];

#[test]
fn the_dockerfile_has_a_non_root_stage_per_service_running_its_binary() {
    let stages = dockerfile();
    let mut problems = Vec::new();
    for target in TARGETS {
        let Some(stage) = stages.iter().find(|s| s.name == target) else {
            problems.push(format!("no stage {target}"));
            continue;
        };
        match effective_user(&stages, stage) {
            Some(user)
                if user
                    .split(':')
                    .all(|id| id.parse::<u32>().is_ok_and(|id| id > 0)) => {}
            other => problems.push(format!(
                "{target}: runs as {other:?}, not a numeric non-root user"
            )),
        }
        let entrypoint = stage.with("ENTRYPOINT").last().unwrap_or_default();
        let argv: Vec<String> = serde_json::from_str(entrypoint).unwrap_or_default();
        if argv.first().map(String::as_str)
            != Some(format!("/usr/local/bin/opledger-{target}").as_str())
        {
            problems.push(format!(
                "{target}: ENTRYPOINT {entrypoint} is not its binary"
            ));
        }
    }
    let build = stages
        .iter()
        .find(|s| s.name == "build")
        .expect("build stage");
    let cargo = build
        .with("RUN")
        .find(|r| r.contains("cargo build"))
        .expect("cargo build");
    for flag in ["--release", "--locked"] {
        if !cargo.contains(flag) {
            problems.push(format!("cargo build without {flag}"));
        }
    }
    // Named packages only: with the tests crate in the build, failpoints would be compiled in.
    if cargo.contains("--workspace") || cargo.contains("--all") {
        problems.push("cargo build builds the whole workspace".to_owned());
    }
    let words: Vec<&str> = cargo.split_whitespace().collect();
    let packages: BTreeSet<&str> = words
        .windows(2)
        .filter(|w| w[0] == "-p")
        .map(|w| w[1])
        .collect();
    for target in TARGETS {
        if !packages.contains(format!("opledger-{target}").as_str()) {
            problems.push(format!("cargo build does not build opledger-{target}"));
        }
    }
    assert_none(problems, "Dockerfile");
}

#[test]
fn the_signer_image_holds_nothing_but_its_binary_and_libc() {
    let stages = dockerfile();
    let signer = stages
        .iter()
        .find(|s| s.name == "signer")
        .expect("signer stage");
    assert_eq!(
        signer.from, "scratch",
        "no base image: no shell, no package manager"
    );
    assert_eq!(signer.with("RUN").count(), 0);
    let copies: Vec<&str> = signer.with("COPY").collect();
    assert_eq!(
        copies,
        ["--from=build /out/signer-root/ /"],
        "one copy of the prepared root"
    );
    let build = stages
        .iter()
        .find(|s| s.name == "build")
        .expect("build stage");
    let root = build
        .with("RUN")
        .find(|r| r.contains("/out/signer-root"))
        .expect("signer root");
    assert!(
        root.contains("cp /out/bin/opledger-signer /out/signer-root/usr/local/bin/"),
        "{root}"
    );
    assert!(
        root.contains("ldd /out/bin/opledger-signer"),
        "only the libraries the signer links: {root}"
    );
    assert!(
        !root.contains("opledger-admin") && !root.contains("ca-certificates"),
        "{root}"
    );
}

#[test]
fn no_service_image_installs_packages() {
    // ca-certificates included: PostgreSQL TLS uses bundled roots; the chain clients' roots are
    // copied from the build image (see the next test).
    let mut problems = Vec::new();
    for stage in dockerfile() {
        let service_or_base = TARGETS.contains(&stage.name.as_str()) || stage.name == "runtime";
        if service_or_base
            && stage
                .with("RUN")
                .any(|r| r.contains("apt-get") || r.contains("apk "))
        {
            problems.push(stage.name);
        }
    }
    assert_none(problems, "stages that install packages");
}

#[test]
fn the_anvil_image_installs_the_version_the_tests_pin() {
    let package: Value = json_file(&repo().join("tools/anvil/package.json"));
    let version = str_at(&package, "/dependencies/@foundry-rs~1anvil").expect("pinned anvil");
    let dockerfile = read(&deploy().join("docker/anvil.Dockerfile"));
    assert!(
        dockerfile.contains("COPY tools/anvil/package.json tools/anvil/package-lock.json"),
        "installs from the lock file"
    );
    assert!(
        dockerfile.contains("npm ci --ignore-scripts"),
        "exactly the locked packages"
    );
    assert!(
        dockerfile.contains(&format!("anvil Version: {version}")),
        "checks the installed version {version}"
    );
    for flag in [
        "--host\", \"0.0.0.0",
        "--chain-id\", \"31337",
        "--block-time\", \"1",
    ] {
        assert!(dockerfile.contains(flag), "anvil flag {flag}");
    }
    let compose = compose();
    assert_eq!(
        str_at(&compose, "/services/anvil/image"),
        Some(format!("opledger/anvil:{version}").as_str())
    );
}

#[test]
fn the_dockerignore_keeps_build_outputs_and_local_data_out_of_the_context() {
    let ignore = read(&deploy().join("docker/dockerignore"));
    let lines: BTreeSet<&str> = ignore.lines().map(str::trim).collect();
    for needed in ["target/", ".data/", "**/node_modules/", ".git"] {
        assert!(lines.contains(needed), "dockerignore lacks {needed}");
    }
}

// =============================================================================================
// Metric names in the source

#[test]
fn every_allow_listed_metric_is_exported_by_the_source() {
    let mut sources = String::new();
    for dir in ["services", "crates"] {
        for file in files_under(&repo().join(dir), &[".rs"]) {
            sources.push_str(&read(&file));
        }
    }
    let missing: Vec<String> = METRICS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| {
            !sources.contains(&format!("# TYPE {name} "))
                && !sources.contains(&format!("\"{name}\""))
        })
        .map(str::to_owned)
        .collect();
    assert_none(
        missing,
        "allow-listed metrics no source exports (as `# TYPE <name> ` or \"<name>\")",
    );
}

// =============================================================================================
// With the services' own types

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
    ] {
        assert_eq!(expected_health_service(service), registered, "{service}");
    }
}

#[test]
fn the_dev_keystore_opens_with_its_passphrase_as_anvils_first_account() {
    use opledger_evm::signer::{KeyProvider, LocalKey};
    let dir = compose_dir().join("secrets.example");
    let passphrase = read(&dir.join("hot-wallet.pass"));
    let key = LocalKey::from_keystore_file(
        &dir.join("hot-wallet.json"),
        passphrase.trim_end().as_bytes(),
    )
    .expect("the dev keystore opens with its passphrase");
    assert_eq!(
        key.address().to_string().to_lowercase(),
        "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
        "anvil's first dev account, which anvil funds"
    );
}

#[test]
fn only_the_chain_facing_images_carry_a_ca_bundle() {
    const BUNDLE: &str =
        "--from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt";
    for stage in dockerfile() {
        let copies = stage
            .with("COPY")
            .any(|c| c.contains("ca-certificates.crt"));
        let chain_facing = ["broadcaster", "reconciler", "witness"].contains(&stage.name.as_str());
        if chain_facing {
            assert!(
                stage.with("COPY").any(|c| c == BUNDLE),
                "{} verifies https:// nodes and needs the CA bundle",
                stage.name
            );
        } else {
            assert!(!copies, "{} has no use for a CA bundle", stage.name);
        }
    }
}

// =============================================================================================
// The signer's scoped callers

/// The capabilities of each `[[callers]]` entry of a signer's settings, by name.
fn signer_callers(settings: &toml::Table) -> Vec<(String, String, BTreeSet<String>)> {
    settings
        .get("callers")
        .and_then(toml::Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let text = |key: &str| {
                c.get(key)
                    .and_then(toml::Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let capabilities = c
                .get("capabilities")
                .and_then(toml::Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            (text("name"), text("token_sha256"), capabilities)
        })
        .collect()
}

/// Every signer configuration under deploy/ with its effective settings.
fn every_signer_settings() -> Vec<(String, toml::Table)> {
    let signer = |settings: Vec<(Service, toml::Table)>| {
        settings
            .into_iter()
            .find(|(s, _)| s.name == "signer")
            .map(|(_, t)| t)
            .expect("a signer")
    };
    let file = |path: &str| {
        read(&deploy().join(path))
            .parse::<toml::Table>()
            .expect("signer TOML parses")
    };
    vec![
        ("compose".to_owned(), signer(compose_settings())),
        ("k8s dev overlay".to_owned(), signer(dev_overlay_settings())),
        (
            "signer/signer.example.toml".to_owned(),
            file("signer/signer.example.toml"),
        ),
        (
            "k8s/signer/signer.toml".to_owned(),
            file("k8s/signer/signer.toml"),
        ),
        (
            "k8s/overlays/dev/signer.toml".to_owned(),
            file("k8s/overlays/dev/signer.toml"),
        ),
    ]
}

#[test]
fn no_signer_caller_may_both_cancel_and_fee_bump_or_both_sign_and_cancel() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (at, settings) in every_signer_settings() {
        for (name, _, capabilities) in signer_callers(&settings) {
            checked += 1;
            for (a, b) in [("cancel", "fee_bump"), ("sign_withdrawal", "cancel")] {
                if capabilities.contains(a) && capabilities.contains(b) {
                    problems.push(format!("{at}: caller {name} holds both {a} and {b}"));
                }
            }
        }
    }
    assert!(
        checked >= 6,
        "the deploy signer configurations name their callers"
    );
    assert_none(problems, "signer callers holding conflicting capabilities");
}

#[test]
fn the_broadcaster_and_the_reconciler_present_their_own_scoped_signer_tokens() {
    use sha2::{Digest, Sha256};
    let mut problems = Vec::new();
    for (at, settings) in [
        ("compose", compose_settings()),
        ("k8s dev overlay", dev_overlay_settings()),
    ] {
        let find = |name: &str| {
            settings
                .iter()
                .find(|(s, _)| s.name == name)
                .map(|(_, t)| t.clone())
                .expect("service settings")
        };
        let callers = signer_callers(&find("signer"));
        let mut tokens = BTreeSet::new();
        for (worker, allowed) in [
            ("broadcaster", &["sign_withdrawal", "fee_bump"][..]),
            ("reconciler", &["cancel"][..]),
        ] {
            let Some(token) = find(worker)
                .get("signer_token")
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
            else {
                problems.push(format!("{at}: {worker} has no signer_token"));
                continue;
            };
            tokens.insert(token.clone());
            let digest = hex::encode(Sha256::digest(token.as_bytes()));
            match callers.iter().find(|(_, sha, _)| *sha == digest) {
                None => problems.push(format!("{at}: the signer does not know {worker}'s token")),
                Some((name, _, caps)) => {
                    let allowed: BTreeSet<String> =
                        allowed.iter().map(|c| (*c).to_owned()).collect();
                    if name != worker || *caps != allowed {
                        problems.push(format!(
                            "{at}: {worker}'s token is caller {name} with {caps:?}, not {allowed:?}"
                        ));
                    }
                }
            }
        }
        if tokens.len() != 2 {
            problems.push(format!(
                "{at}: the broadcaster and the reconciler share a token"
            ));
        }
    }
    assert_none(problems, "signer tokens beyond their worker's moves");
}

// =============================================================================================
// The dev stack

#[test]
fn the_dev_stack_builds_starts_stops_and_lists_every_service_each_with_its_own_login() {
    let dev = read(&repo().join("scripts/dev.sh"));
    let lines: Vec<&str> = dev.lines().collect();
    let summary = dev
        .split("<<EOF2")
        .nth(1)
        .and_then(|rest| rest.split("\nEOF2").next())
        .expect("the printed summary");
    let logins = lines
        .iter()
        .find(|l| l.trim_start().starts_with("FOREACH service IN ARRAY"))
        .expect("the loop creating the services' logins");
    let mut problems = Vec::new();
    for service in SERVICES {
        let name = service.name;
        if !dev.contains(&format!("-p opledger-{name} ")) {
            problems.push(format!("{name}: not built"));
        }
        // Started in the background and remembered: Ctrl-C, or any service exiting, stops it.
        let start = format!("\"$bin/opledger-{name}\" &");
        match lines.iter().position(|l| l.contains(&start)) {
            Some(i) if lines.get(i + 1).map(|l| l.trim()) == Some("pids+=(\"$!\")") => {}
            Some(_) => problems.push(format!("{name}: started but not stopped with the stack")),
            None => problems.push(format!("{name}: not started")),
        }
        if !dev.contains(&format!("127.0.0.1:{}", service.grpc)) {
            problems.push(format!("{name}: not on its port {}", service.grpc));
        }
        if !summary
            .lines()
            .any(|l| l.starts_with(&format!("  {name} ")))
        {
            problems.push(format!("{name}: not listed in the printed summary"));
        }
        // Its own login, a member of its own service's group role only.
        let own_login = if name == "signer" {
            dev.contains("CREATE ROLE opledger_dev_signer LOGIN PASSWORD '${app_password}' IN ROLE opledger_signer;")
        } else {
            logins.contains(&format!("'{name}'"))
                && dev.contains(
                    "'opledger_dev_' || service, '${app_password}', 'opledger_' || service",
                )
        };
        if !own_login {
            problems.push(format!("{name}: no login of its own in opledger_{name}"));
        }
    }
    assert_none(problems, "scripts/dev.sh");
}

// =============================================================================================
// Two principals: the reconciler proposes, the witness attests

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
