//! Secrets and signer configurations: the files the compose signer and custodian executor are
//! given, the custodian executor's provider credentials as files, example wallets and their
//! tenants, pinned administrator keys, the dev keystore, development-only markers.

use crate::common::{array_at, assert_none, deploy, files_under, read, str_at, strings};
use crate::compose_file::{compose, compose_dir, compose_secret_file, environment};
use crate::kustomize::{deployment, dev_overlay, file_name, k8s};
use std::collections::BTreeSet;
use std::path::PathBuf;

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

/// Whether a variable's name says it carries a credential.
fn credential_variable(name: &str) -> bool {
    ["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSPHRASE"]
        .iter()
        .any(|word| name.contains(word))
}

#[test]
fn the_custodian_executors_provider_credentials_are_files_never_variables() {
    let mut problems = Vec::new();
    // compose: its config file names only files it is given as secrets, the provider's API key
    // and secret among them, and no variable of its carries a credential.
    let compose = compose();
    let custodian = &compose["services"]["custodian"];
    let given = strings(&custodian["secrets"]);
    let text = read(&compose_secret_file(&compose, "custodian_config"));
    for path in text.split('"').filter(|s| s.starts_with("/run/secrets/")) {
        if !given.contains(&path.trim_start_matches("/run/secrets/").to_owned()) {
            problems.push(format!(
                "custodian.toml names {path}, not one of its secrets"
            ));
        }
    }
    for secret in ["custodian_api_key", "custodian_api_secret"] {
        if !given.contains(&secret.to_owned()) {
            problems.push(format!("compose: the executor is not given {secret}"));
        }
    }
    for name in environment(custodian).keys() {
        if credential_variable(name) {
            problems.push(format!(
                "compose: the executor's {name} is a credential in a variable"
            ));
        }
    }
    // Kubernetes: the provider credentials are the files of one Secret, mounted read-only; the
    // only value taken from a Secret into a variable is its database URL.
    let dev = dev_overlay();
    let executor = deployment(&dev.resources, "opledger-custodian");
    let pod = executor.pod_spec().expect("pod");
    let container = executor.containers()[0];
    let mount = array_at(container, "/volumeMounts")
        .iter()
        .find(|m| m["mountPath"] == "/run/secrets/opledger-custodian");
    let volume = mount.and_then(|m| {
        array_at(pod, "/volumes")
            .iter()
            .find(|v| v["name"] == m["name"])
    });
    if mount.is_none_or(|m| m["readOnly"] != serde_json::Value::Bool(true))
        || volume.and_then(|v| str_at(v, "/secret/secretName"))
            != Some("opledger-custodian-provider")
    {
        problems.push(format!(
            "{}: the provider credentials are not the Secret opledger-custodian-provider, \
             mounted read-only at /run/secrets/opledger-custodian",
            executor.at()
        ));
    }
    for var in array_at(container, "/env") {
        let name = str_at(var, "/name").unwrap_or_default();
        let from_secret = var.pointer("/valueFrom/secretKeyRef").is_some();
        if (from_secret && name != "OPLEDGER_CUSTODIAN_DATABASE_URL")
            || (credential_variable(name) && var.get("value").is_some())
        {
            problems.push(format!("{}: {name} carries a credential", executor.at()));
        }
    }
    if array_at(container, "/envFrom")
        .iter()
        .any(|source| source.get("secretRef").is_some())
    {
        problems.push(format!(
            "{}: takes a whole Secret as variables",
            executor.at()
        ));
    }
    assert_none(problems, "the custodian executor's credentials");
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
