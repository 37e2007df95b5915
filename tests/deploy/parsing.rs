//! Everything parses: every YAML and JSON file under `deploy/`.

use crate::common::{deploy, files_under, json_file, yaml_docs};

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
