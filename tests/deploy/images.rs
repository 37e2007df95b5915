//! Images: the Dockerfile's stages per service, the signer's minimal image, the anvil image,
//! the build context and CA bundles.

use crate::common::{assert_none, binary, deploy, json_file, read, repo, str_at};
use crate::compose_file::compose;
use crate::dockerfile::{dockerfile, effective_user};
use serde_json::Value;
use std::collections::BTreeSet;

const TARGETS: [&str; 9] = [
    "operations",
    "approvals",
    "signer",
    "broadcaster",
    "reconciler",
    "inbox",
    "witness",
    "custodian",
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
            != Some(format!("/usr/local/bin/{}", binary(target)).as_str())
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
        let package = binary(target);
        if !packages.contains(package.as_str()) {
            problems.push(format!("cargo build does not build {package}"));
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

#[test]
fn only_the_chain_facing_images_carry_a_ca_bundle() {
    const BUNDLE: &str =
        "--from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt";
    for stage in dockerfile() {
        let copies = stage
            .with("COPY")
            .any(|c| c.contains("ca-certificates.crt"));
        // The custodian executor also calls its providers' https:// APIs.
        let chain_facing =
            ["broadcaster", "reconciler", "witness", "custodian"].contains(&stage.name.as_str());
        if chain_facing {
            assert!(
                stage.with("COPY").any(|c| c == BUNDLE),
                "{} verifies https:// servers and needs the CA bundle",
                stage.name
            );
        } else {
            assert!(!copies, "{} has no use for a CA bundle", stage.name);
        }
    }
}
