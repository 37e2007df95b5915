//! Secrets and signer configurations: the files the compose signer is given, example wallets
//! and their tenants, pinned administrator keys, the dev keystore, development-only markers.

use crate::common::{assert_none, deploy, files_under, read, strings};
use crate::compose_file::{compose, compose_dir, compose_secret_file};
use crate::kustomize::{file_name, k8s};
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
