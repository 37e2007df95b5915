//! The configuration reference, `docs/configuration.md`, is generated from the typed
//! configurations themselves: every key of every service's `Config`, its default (from
//! `Config::default()`), its environment variable and its meaning (the field's doc comment in
//! `services/<service>/src/config.rs`). This test regenerates it and fails when the document
//! differs, so the reference cannot drift from the code. `OPLEDGER_BLESS=1` rewrites the file.

use serde::Serialize;
use std::path::PathBuf;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// `(field, doc)` of each field of `pub struct Config` in a config.rs source, in order.
fn fields(source: &str) -> Vec<(String, String)> {
    fields_of(source, "pub struct Config {")
}

/// `(field, doc)` of each field of the struct that `header` opens, in order.
fn fields_of(source: &str, header: &str) -> Vec<(String, String)> {
    let Some(start) = source.find(header) else {
        return Vec::new();
    };
    let body = &source[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    let mut out = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    for line in body.lines().skip(1) {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim().to_owned());
        } else if let Some(rest) = line.strip_prefix("pub ") {
            if let Some((name, _)) = rest.split_once(':') {
                out.push((name.trim().to_owned(), doc.join(" ")));
            }
            doc.clear();
        } else if !line.starts_with("#[") {
            doc.clear();
        }
    }
    out
}

fn render_default(value: Option<&toml::Value>, secret: bool) -> String {
    match value {
        None => "(none)".to_owned(),
        Some(toml::Value::String(s)) if s.is_empty() => {
            if secret {
                "(required, secret)".to_owned()
            } else {
                "(required)".to_owned()
            }
        }
        Some(toml::Value::String(s)) => format!("`{s}`"),
        Some(toml::Value::Table(t)) if t.is_empty() => "(none)".to_owned(),
        Some(toml::Value::Array(a)) if a.is_empty() => "(none)".to_owned(),
        Some(toml::Value::Table(_)) => "(a table, see the meaning)".to_owned(),
        Some(other) => format!("`{other}`"),
    }
}

fn section<T: Serialize + Default>(service: &str, note: &str) -> anyhow::Result<String> {
    let upper = service.to_ascii_uppercase();
    let source = std::fs::read_to_string(repo(&format!("services/{service}/src/config.rs")))?;
    let defaults = toml::Value::try_from(T::default())?;
    let defaults = defaults.as_table().cloned().unwrap_or_default();
    let mut out = format!(
        "## {service}\n\nFile: the TOML named by `OPLEDGER_{upper}_CONFIG`; environment: \
         `OPLEDGER_{upper}_<KEY>`.{note}\n\n| key | default | meaning |\n|---|---|---|\n"
    );
    let fields = fields(&source);
    anyhow::ensure!(!fields.is_empty(), "no Config fields found for {service}");
    for (name, doc) in &fields {
        let secret = matches!(name.as_str(), "database_url" | "signer_token" | "body_keys");
        out.push_str(&format!(
            "| `{name}` | {} | {} |\n",
            render_default(defaults.get(name), secret),
            doc.replace('|', "\\|")
        ));
    }
    // Every serialized key is documented (a field the parser missed would be a silent gap).
    for key in defaults.keys() {
        anyhow::ensure!(
            fields.iter().any(|(n, _)| n == key),
            "{service}: key {key} has no documented field"
        );
    }
    out.push('\n');
    Ok(out)
}

/// The `[listener]` table every service shares.
fn listener_section() -> anyhow::Result<String> {
    let source = std::fs::read_to_string(repo("crates/grpc/src/config.rs"))?;
    let defaults = toml::Value::try_from(opledger_grpc::config::ListenerConfig::default())?;
    let defaults = defaults.as_table().cloned().unwrap_or_default();
    let fields = fields_of(&source, "pub struct ListenerConfig {");
    anyhow::ensure!(!fields.is_empty(), "no ListenerConfig fields found");
    let mut out = String::from(
        "## listener (every service)\n\nThe `[listener]` table of every service's file, or \
         `OPLEDGER_<SERVICE>_LISTENER='{idle_timeout_ms = 40000, max_connections = 512}'` in the \
         environment (an inline table; the keys not named keep their defaults). It applies to \
         each listener of the service: gRPC, the inbox's webhook ingress, metrics.\n\n\
         | key | default | meaning |\n|---|---|---|\n",
    );
    for (name, doc) in &fields {
        out.push_str(&format!(
            "| `{name}` | {} | {} |\n",
            render_default(defaults.get(name), false),
            doc.replace('|', "\\|")
        ));
    }
    for key in defaults.keys() {
        anyhow::ensure!(
            fields.iter().any(|(n, _)| n == key),
            "listener: key {key} has no documented field"
        );
    }
    out.push('\n');
    Ok(out)
}

/// The `[evidence.<network>]` table of every chain-facing service (`opledger_chain`'s
/// `NetworkEvidence`).
fn evidence_section() -> anyhow::Result<String> {
    let source = std::fs::read_to_string(repo("crates/chain/src/evidence/settings.rs"))?;
    let fields = fields_of(&source, "pub struct NetworkEvidence {");
    anyhow::ensure!(!fields.is_empty(), "no NetworkEvidence fields found");
    // The keys with a default: what a table naming only the required ones reads as.
    let minimal: opledger_chain::NetworkEvidence = toml::from_str("urls = []\nquorum = 0\n")?;
    let defaults = toml::Value::try_from(minimal)?;
    let defaults = defaults.as_table().cloned().unwrap_or_default();
    let mut out = String::from(
        "## evidence (broadcaster, reconciler, witness)\n\nThe keys of each `[evidence.<network>]` \
         table, or of each network's inline table in `OPLEDGER_<SERVICE>_EVIDENCE='{mainnet = \
         {urls = [...], quorum = 2, finalized = true}}'`.\n\n\
         | key | default | meaning |\n|---|---|---|\n",
    );
    for (name, doc) in &fields {
        let default = match name.as_str() {
            "urls" | "quorum" => "(required)".to_owned(),
            _ => render_default(defaults.get(name), false),
        };
        out.push_str(&format!(
            "| `{name}` | {default} | {} |\n",
            doc.replace('|', "\\|")
        ));
    }
    for key in defaults.keys() {
        anyhow::ensure!(
            fields.iter().any(|(n, _)| n == key),
            "evidence: key {key} has no documented field"
        );
    }
    out.push('\n');
    Ok(out)
}

fn reference() -> anyhow::Result<String> {
    let mut doc = String::from(
        "# Configuration reference\n\n\
         Generated from the typed configurations (`services/<service>/src/config.rs`) by \
         `tests/config`, which fails when this file differs from the code: regenerate it with \
         `OPLEDGER_BLESS=1 cargo test -p opledger-tests --test config`.\n\n\
         Each service reads its defaults, then the TOML file named by `OPLEDGER_<SERVICE>_CONFIG` \
         (if set), then `OPLEDGER_<SERVICE>_<KEY>` environment variables, and refuses unknown \
         keys. Secrets (database URLs, tokens, keys) are never printed in logs or errors. \
         Tracing is configured by the standard `OTEL_*` variables (README, Distributed tracing).\n\n",
    );
    doc.push_str(&section::<opledger_operations::Config>("operations", "")?);
    doc.push_str(&section::<opledger_approvals::Config>("approvals", "")?);
    doc.push_str(&section::<opledger_signer::Config>(
        "signer",
        " Tables `[networks.<id>]`, `[[wallets]]` and `[tls]` are described with a complete, \
         tested example in `deploy/signer/signer.example.toml`.",
    )?);
    doc.push_str(&section::<opledger_broadcaster::Config>("broadcaster", "")?);
    doc.push_str(&section::<opledger_reconciler::Config>("reconciler", "")?);
    doc.push_str(&section::<opledger_inbox::Config>("inbox", "")?);
    doc.push_str(&section::<opledger_witness::Config>("witness", "")?);
    doc.push_str(&listener_section()?);
    doc.push_str(&evidence_section()?);
    Ok(doc)
}

#[test]
fn the_configuration_reference_is_generated_from_the_typed_configuration() -> anyhow::Result<()> {
    let expected = reference()?;
    let path = repo("docs/configuration.md");
    if std::env::var_os("OPLEDGER_BLESS").is_some() {
        std::fs::write(&path, &expected)?;
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "docs/configuration.md differs from the typed configuration; regenerate it with \
         OPLEDGER_BLESS=1 cargo test -p opledger-tests --test config"
    );
    Ok(())
}

#[test]
fn the_field_parser_reads_docs_and_names() {
    let source = "pub struct Config {\n    /// Address.\n    /// More.\n    pub listen: SocketAddr,\n    #[serde(default)]\n    /// Map.\n    pub rpc: BTreeMap<String, String>,\n}\n";
    assert_eq!(
        fields(source),
        vec![
            ("listen".to_owned(), "Address. More.".to_owned()),
            ("rpc".to_owned(), "Map.".to_owned())
        ]
    );
}

mod evidence;
mod start;
