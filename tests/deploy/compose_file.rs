//! Compose: the compose file, its `${VAR:-default}` interpolation, service environments and
//! secrets.

use crate::common::{Service, deploy, str_at, yaml_doc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub(crate) fn compose_dir() -> PathBuf {
    deploy().join("compose")
}

pub(crate) fn compose() -> Value {
    yaml_doc(&compose_dir().join("compose.yaml"))
}

/// Resolves compose interpolation the way an unset environment does: `${VAR:-default}` and
/// `${VAR-default}` give the default, `$$` a dollar; `${VAR}` without a default is an error.
pub(crate) fn interpolate(text: &str) -> Result<String, String> {
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
pub(crate) fn environment(service: &Value) -> BTreeMap<String, String> {
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
pub(crate) fn compose_secret_file(compose: &Value, secret: &str) -> PathBuf {
    let file = str_at(compose, &format!("/secrets/{secret}/file"))
        .unwrap_or_else(|| panic!("compose secret {secret} has no file"));
    compose_dir().join(interpolate(file).expect("secret path"))
}

/// `OPLEDGER_<SERVICE>_CONFIG=/run/secrets/<name>`: the compose secret holding its TOML.
pub(crate) fn compose_config_secret(compose: &Value, service: &Service) -> Option<String> {
    let env = environment(&compose["services"][service.name]);
    env.get(&format!("{}CONFIG", service.prefix()))
        .and_then(|p| p.strip_prefix("/run/secrets/"))
        .map(str::to_owned)
}
