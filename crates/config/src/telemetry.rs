//! Where a service's spans are exported (`[telemetry]`; the same keys on every service).

use crate::ConfigError;
use serde::{Deserialize, Serialize};

/// Span export over OpenTelemetry's OTLP/gRPC (`[telemetry]`, the same keys on every service).
/// A key that is set wins over the standard `OTEL_*` variable it replaces; a key left unset
/// leaves that variable in charge, so a deployment configured only by `OTEL_*` behaves as before.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// OTLP/gRPC collector the spans are exported to (`http://collector:4317`, or `https://`).
    /// Unset: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` decides (unless
    /// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`), and with neither no span leaves
    /// the process. Headers, timeout and sampling still come from the `OTEL_*` variables.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans. Unset: `OTEL_SERVICE_NAME`, or the binary's name
    /// (`opledger-signer`, ...).
    pub service_name: Option<String>,
}

impl TelemetryConfig {
    /// Refuses an endpoint that is not an `http://` or `https://` address with a host, and a
    /// service name that is empty, longer than 255 bytes or holds control characters.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(endpoint) = &self.otlp_endpoint {
            let host = endpoint
                .strip_prefix("http://")
                .or_else(|| endpoint.strip_prefix("https://"));
            let usable = host.is_some_and(|rest| {
                !rest.is_empty()
                    && !rest.starts_with('/')
                    && !rest.chars().any(|c| c.is_whitespace() || c.is_control())
            });
            if !usable {
                return Err(ConfigError::Invalid {
                    field: "telemetry.otlp_endpoint",
                    problem: "must be an http:// or https:// address with a host",
                });
            }
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
            "https://otel.example.com",
            "http://127.0.0.1:4317/",
        ] {
            assert!(with(Some(good), None).validate().is_ok(), "{good}");
        }
        for bad in [
            "collector:4317",
            "grpc://collector:4317",
            "http://",
            "https:///x",
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
