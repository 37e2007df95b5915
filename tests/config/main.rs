//! The configuration reference, `docs/configuration.md`, is generated from the typed
//! configurations themselves: every key of every service's `Config`, its default (from
//! `Config::default()`), its environment variable and its meaning (the field's doc comment, read
//! from the type's JSON schema, `schemars`). This test regenerates it and fails when the document
//! differs, so the reference cannot drift from the code. `OPLEDGER_BLESS=1` rewrites the file.

use schemars::JsonSchema;
use serde::Serialize;
use std::path::PathBuf;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// `(key, doc)` of each top-level key of `T`, in the order its default serializes (the fields'
/// order, flattened sections such as `base`, `signer` and `chain` in place, each key as the loader
/// reads it), the doc being the field's doc comment as `T`'s JSON schema carries it.
fn fields<T: JsonSchema + Serialize>(value: &T) -> Vec<(String, String)> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    let properties = schema.get("properties").and_then(|p| p.as_object());
    let doc = |name: &str| {
        let text = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("description"))
            .and_then(|d| d.as_str())
            .unwrap_or_default();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    keys_in_order(value)
        .into_iter()
        .map(|name| {
            let doc = doc(&name);
            (name, doc)
        })
        .collect()
}

/// The top-level keys of `value` serialized, in the order they are written.
fn keys_in_order<T: Serialize>(value: &T) -> Vec<String> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<serde::de::IgnoredAny>()?;
                keys.push(key);
            }
            Ok(keys)
        }
    }
    let text = serde_json::to_string(value).unwrap_or_default();
    let mut deserializer = serde_json::Deserializer::from_str(&text);
    serde::Deserializer::deserialize_map(&mut deserializer, Keys).unwrap_or_default()
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

fn section<T: Serialize + Default + JsonSchema>(
    service: &str,
    note: &str,
) -> anyhow::Result<String> {
    let upper = service.to_ascii_uppercase();
    let defaults = toml::Value::try_from(T::default())?;
    let defaults = defaults.as_table().cloned().unwrap_or_default();
    let mut out = format!(
        "## {service}\n\nFile: the TOML named by `OPLEDGER_{upper}_CONFIG`; environment: \
         `OPLEDGER_{upper}_<KEY>`.{note}\n\n| key | default | meaning |\n|---|---|---|\n"
    );
    let fields = fields(&T::default());
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
    let defaults = toml::Value::try_from(opledger_config::ListenerConfig::default())?;
    let defaults = defaults.as_table().cloned().unwrap_or_default();
    let fields = fields(&opledger_config::ListenerConfig::default());
    anyhow::ensure!(!fields.is_empty(), "no ListenerConfig fields found");
    let mut out = String::from(
        "## listener (every service)\n\nThe `[listener]` table of every service's file, or \
         `OPLEDGER_<SERVICE>_LISTENER='{idle_timeout_ms = 40000, max_connections = 512}'` in the \
         environment (an inline table; the keys not named keep their defaults), or one key: \
         `OPLEDGER_<SERVICE>_LISTENER__MAX_CONNECTIONS=512`. It applies to \
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

fn telemetry_section() -> String {
    let fields = fields(&opledger_config::TelemetryConfig::default());
    let mut out = String::from(
        "## telemetry (every service)\n\nThe `[telemetry]` table of every service's file, or one \
         key in the environment: `OPLEDGER_<SERVICE>_TELEMETRY__OTLP_ENDPOINT=http://collector:4317`. \
         A key that is set wins over the `OTEL_*` variable it replaces; unset, that variable \
         decides.\n\n| key | default | meaning |\n|---|---|---|\n",
    );
    for (name, doc) in &fields {
        out.push_str(&format!(
            "| `{name}` | (none) | {} |\n",
            doc.replace('|', "\\|")
        ));
    }
    out.push('\n');
    out
}

/// The `[evidence.<network>]` table of every chain-facing service (`opledger_chain`'s
/// `NetworkEvidence`).
fn evidence_section() -> anyhow::Result<String> {
    // The keys with a default: what a table naming only the required ones reads as.
    let minimal: opledger_chain::NetworkEvidence =
        toml::from_str("urls = []\nchain_id = 0\nquorum = 0\n")?;
    let fields = fields(&minimal);
    anyhow::ensure!(!fields.is_empty(), "no NetworkEvidence fields found");
    let defaults = toml::Value::try_from(minimal)?;
    let defaults = defaults.as_table().cloned().unwrap_or_default();
    let mut out = String::from(
        "## evidence (broadcaster, reconciler, witness)\n\nThe keys of each `[evidence.<network>]` \
         table, or of each network's inline table in `OPLEDGER_<SERVICE>_EVIDENCE='{mainnet = \
         {urls = [...], chain_id = 1, quorum = 2, finalized = true}}'`.\n\n\
         | key | default | meaning |\n|---|---|---|\n",
    );
    for (name, doc) in &fields {
        let default = match name.as_str() {
            "urls" | "chain_id" | "quorum" => "(required)".to_owned(),
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
         Generated from the typed configurations (their JSON schemas: each key and its doc \
         comment, flattened sections such as the base every service shares included) by \
         `tests/config`, which fails when this file differs from the code: regenerate it with \
         `OPLEDGER_BLESS=1 cargo test -p opledger-tests --test config`.\n\n\
         Each service reads its defaults, then the TOML file named by `OPLEDGER_<SERVICE>_CONFIG` \
         (if set), then `OPLEDGER_<SERVICE>_<KEY>` environment variables (a key of a table \
         with `__`: `OPLEDGER_INBOX_LISTENER__MAX_CONNECTIONS=512`), and refuses unknown \
         keys. Secrets (database URLs, tokens, keys) are never printed in logs or errors. \
         Span export is configured by the `[telemetry]` keys every service has, or, where \
         they are unset, by the standard `OTEL_*` variables (README, Distributed tracing).\n\n",
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
    doc.push_str(&section::<opledger_custodian_executor::Config>(
        "custodian",
        " Each `[[accounts]]` entry's `[accounts.provider]` table takes the keys of its profile \
         (`crates/custodian/src/config.rs`, `docs/custodians.md`).",
    )?);
    doc.push_str(&listener_section()?);
    doc.push_str(&telemetry_section());
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
fn the_schema_lists_flattened_keys_with_their_docs() {
    let keys = fields(&opledger_approvals::Config::default());
    let names: Vec<&str> = keys.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "listen",
            "metrics_listen",
            "listener",
            "database_url",
            "db_max_connections",
            "db_acquire_timeout_secs",
            "telemetry",
            "auth_cache_ttl_secs"
        ]
    );
    assert!(
        keys.iter().all(|(_, doc)| !doc.is_empty()),
        "every key is documented: {keys:?}"
    );
}

mod evidence;
mod start;

#[test]
fn a_fee_is_read_once_as_an_amount_of_wei_and_anything_else_is_refused_naming_it() {
    let network = |fee: &str| {
        toml::from_str::<opledger_signer::config::NetworkConfig>(&format!(
            "chain_id = 31337\nnative_asset = \"ETH\"\ngas_limit_native = 21000\n\
             gas_limit_erc20 = 65000\nmax_fee_per_gas = {fee}\n\
             max_priority_fee_per_gas = \"1000000000\"\nfee_bump_percent = 25\n\
             cancel_max_fee_per_gas = \"20000000000\"\n"
        ))
    };
    let read = network("\"2000000000\"").map(|n| n.max_fee_per_gas);
    assert_eq!(read.ok(), Some(opledger_config::Wei(2_000_000_000)));
    for bad in [
        "\"2 gwei\"",
        "\"-1\"",
        "\"\"",
        "2000000000",
        "\"0x77359400\"",
    ] {
        let refused = network(bad).map(|_| ()).map_err(|e| e.to_string());
        let message = refused.err().unwrap_or_default();
        assert!(
            message.contains("max_fee_per_gas"),
            "{bad}: the error names the key: {message}"
        );
    }
}
