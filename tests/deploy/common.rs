//! Shared by every check: the eight services and their ports, reading files under the repository,
//! YAML (merge keys applied) and JSON as `serde_json::Value`s, and reporting every problem at once.

use serde::Deserialize as _;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// The eight services: compose service name, Kubernetes workload name `opledger-<name>`, image and
/// Dockerfile target `<name>`, settings `OPLEDGER_<NAME>_*`, their ports, and their binary and
/// package ([`binary`]).
pub(crate) const SERVICES: [Service; 8] = [
    service("operations", 15051, 9101),
    service("approvals", 15052, 9102),
    service("signer", 15053, 9103),
    service("broadcaster", 15054, 9104),
    service("reconciler", 15055, 9105),
    service("inbox", 15056, 9106),
    service("witness", 15057, 9107),
    service("custodian", 15058, 9108),
];

/// The binary (and Cargo package) of a Dockerfile target or service: `opledger-<name>`, but for
/// the custodian executor, whose name says what it is beside the `opledger-custodian` library.
pub(crate) fn binary(target: &str) -> String {
    match target {
        "custodian" => "opledger-custodian-executor".to_owned(),
        other => format!("opledger-{other}"),
    }
}

const fn service(name: &'static str, grpc: u16, metrics: u16) -> Service {
    Service {
        name,
        grpc,
        metrics,
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Service {
    pub(crate) name: &'static str,
    pub(crate) grpc: u16,
    pub(crate) metrics: u16,
}

impl Service {
    pub(crate) fn prefix(&self) -> String {
        format!("OPLEDGER_{}_", self.name.to_uppercase())
    }

    pub(crate) fn binary(&self) -> String {
        binary(self.name)
    }
}

pub(crate) fn repo() -> PathBuf {
    canonical(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// Without `..`: files reached through different kustomizations compare equal.
pub(crate) fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(crate) fn deploy() -> PathBuf {
    repo().join("deploy")
}

pub(crate) fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Files under `dir` whose names end with one of `suffixes`, sorted.
pub(crate) fn files_under(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
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
pub(crate) fn yaml_docs(path: &Path) -> Vec<Value> {
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

pub(crate) fn yaml_doc(path: &Path) -> Value {
    let mut docs = yaml_docs(path);
    assert_eq!(docs.len(), 1, "{}: one document expected", path.display());
    docs.remove(0)
}

pub(crate) fn json_file(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The strings of a JSON array (empty when absent).
pub(crate) fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

pub(crate) fn array_at<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Fails with every problem found, one per line.
pub(crate) fn assert_none(problems: Vec<String>, what: &str) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}
