//! Where a service's spans are exported (`[telemetry]`; the same keys on every service).

use crate::ConfigError;
use serde::{Deserialize, Serialize};

/// Span export over OpenTelemetry's OTLP/gRPC (`[telemetry]`, the same keys on every service).
/// A key that is set wins over the standard `OTEL_*` variable it replaces; a key left unset
/// leaves that variable in charge, so a deployment configured only by `OTEL_*` behaves as before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// OTLP/gRPC collector the spans are exported to: `http://host:port` (`http://collector:4317`;
    /// spans are sent without TLS, so point it at a collector agent on the same host or network;
    /// no credentials in the URL). Unset: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` decides (unless `OTEL_TRACES_EXPORTER=none`), and with neither
    /// no span leaves the process. `OTEL_SDK_DISABLED=true` turns export off either way. Headers,
    /// timeout and sampling still come from the `OTEL_*` variables.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans. Unset: `OTEL_SERVICE_NAME`, or the binary's name
    /// (`opledger-signer`, ...).
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// Refuses an endpoint that is not `http://host[:port][/path]` (no user or password in it;
    /// the exporter is built without TLS), and a service name that is empty, longer than 255
    /// bytes or holds control characters.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self
            .otlp_endpoint
            .as_deref()
            .is_some_and(|e| !usable_endpoint(e))
        {
            return Err(ConfigError::Invalid {
                field: "telemetry.otlp_endpoint",
                problem: "must be http://host[:port] (no credentials; spans are sent without TLS: \
                          use a collector agent on the same host or network)",
            });
        }
        let bad_name = |name: &String| {
            name.trim().is_empty() || name.len() > 255 || name.chars().any(char::is_control)
        };
        if self.service_name.as_ref().is_some_and(bad_name) {
            return Err(ConfigError::Invalid {
                field: "telemetry.service_name",
                problem: "must be 1 to 255 bytes without control characters",
            });
        }
        Ok(())
    }
}

/// `http://` then a host (a name, an IPv4 address or a bracketed IPv6 address), an optional
/// numeric port, an optional path, and nothing else: no credentials, no spaces.
fn usable_endpoint(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return false,
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    !host.is_empty() && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_keys_are_valid_and_set_keys_are_checked() {
        assert!(TelemetryConfig::default().validate().is_ok());
        let with = |endpoint: Option<&str>, name: Option<&str>| TelemetryConfig {
            otlp_endpoint: endpoint.map(str::to_owned),
            service_name: name.map(str::to_owned),
        };
        for good in [
            "http://collector:4317",
            "http://otel.example.com",
            "http://127.0.0.1:4317/",
            "http://[::1]:4317",
        ] {
            assert!(with(Some(good), None).validate().is_ok(), "{good}");
        }
        for bad in [
            "collector:4317",
            "grpc://collector:4317",
            "https://otel.example.com",
            "http://",
            "http:///x",
            "http://:4317",
            "http://@/",
            "http://user:token@collector:4317",
            "http://collector:port",
            "http://[::1",
            "http://a b",
        ] {
            assert!(
                matches!(
                    with(Some(bad), None).validate(),
                    Err(ConfigError::Invalid {
                        field: "telemetry.otlp_endpoint",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        assert!(with(None, Some("payments-signer")).validate().is_ok());
        let long = "n".repeat(256);
        for bad in ["", "  ", "a\nb", long.as_str()] {
            assert!(
                matches!(
                    with(None, Some(bad)).validate(),
                    Err(ConfigError::Invalid {
                        field: "telemetry.service_name",
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }
}
