//! The signer's scoped callers: capabilities per caller, and the workers' own tokens.

use crate::common::{Service, assert_none, deploy, read};
use crate::settings::{compose_settings, dev_overlay_settings};
use std::collections::BTreeSet;

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
