//! Channels to other opledger services (the signer's callers use them), in clear on a private
//! segment or over TLS, mutual when the caller has a certificate.

use opledger_domain::ids::{OperationId, TenantId};
use opledger_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use zeroize::Zeroizing;

/// TLS towards a gRPC server: the CA that issued the server's certificate and, for mutual TLS,
/// this caller's certificate and key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientTls {
    /// PEM certificate of the CA that issued the server's certificate: the only root trusted.
    pub ca: PathBuf,
    /// PEM certificate chain of this caller, for mutual TLS (with `key`).
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// PEM private key of this caller, for mutual TLS (with `cert`).
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// Name the server's certificate must carry; the URL's host when absent.
    #[serde(default)]
    pub domain: Option<String>,
}

/// Why a channel could not be set up. Nothing here carries key material.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL cannot be parsed.
    #[error("{field} is not a valid URL")]
    Url {
        /// Which setting.
        field: &'static str,
    },
    /// The URL's scheme and the TLS settings disagree, or half an identity is configured.
    #[error("{field}: {problem}")]
    Mismatch {
        /// Which setting.
        field: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
    /// A TLS file could not be read.
    #[error("cannot read the tls {what} file: {source}")]
    Read {
        /// Which file.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The caller token cannot be sent in an HTTP header.
    #[error("{field} must be printable ASCII")]
    Token {
        /// Which setting.
        field: &'static str,
    },
    /// tonic refused the TLS settings.
    #[error("tls settings refused: {0}")]
    Tls(#[from] tonic::transport::Error),
}

/// A lazily connecting channel to `url` (the setting named `field`): `http://` in clear without
/// `tls`, `https://` with it. Files are read now, so a bad path fails at start, not at first use.
pub fn channel(
    field: &'static str,
    url: &str,
    tls: Option<&ClientTls>,
) -> Result<Channel, ClientError> {
    let endpoint = Channel::from_shared(url.to_owned()).map_err(|_| ClientError::Url { field })?;
    let https = url.starts_with("https://");
    let endpoint = match (tls, https) {
        (None, false) => endpoint,
        (Some(tls), true) => endpoint.tls_config(tls_config(field, tls)?)?,
        (None, true) => {
            return Err(ClientError::Mismatch {
                field,
                problem: "is https:// but no tls settings (ca) are configured",
            });
        }
        (Some(_), false) => {
            return Err(ClientError::Mismatch {
                field,
                problem: "must be https:// when tls settings are configured",
            });
        }
    };
    Ok(endpoint.connect_lazy())
}

fn tls_config(field: &'static str, tls: &ClientTls) -> Result<ClientTlsConfig, ClientError> {
    let mut config =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("ca", &tls.ca)?));
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            let key = Zeroizing::new(read("key", key)?);
            config = config.identity(Identity::from_pem(read("cert", cert)?, key.as_slice()));
        }
        (None, None) => {}
        _ => {
            return Err(ClientError::Mismatch {
                field,
                problem: "tls cert and key must be set together",
            });
        }
    }
    if let Some(domain) = &tls.domain {
        config = config.domain_name(domain.clone());
    }
    Ok(config)
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|source| ClientError::Read { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scheme_and_tls_settings_must_agree() {
        let tls = ClientTls {
            ca: PathBuf::from("/nonexistent/ca.pem"),
            cert: None,
            key: None,
            domain: None,
        };
        assert!(channel("signer_url", "http://127.0.0.1:1", None).is_ok());
        assert!(matches!(
            channel("signer_url", "https://127.0.0.1:1", None),
            Err(ClientError::Mismatch { .. })
        ));
        assert!(matches!(
            channel("signer_url", "http://127.0.0.1:1", Some(&tls)),
            Err(ClientError::Mismatch { .. })
        ));
        assert!(matches!(
            channel("signer_url", "https://127.0.0.1:1", Some(&tls)),
            Err(ClientError::Read { what: "ca", .. })
        ));
        assert!(matches!(
            channel("signer_url", "not a url", None),
            Err(ClientError::Url { .. })
        ));
    }

    #[tokio::test]
    async fn half_an_identity_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("opledger-client-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "not checked until a handshake")?;
        let tls = ClientTls {
            ca,
            cert: Some(dir.join("caller.pem")),
            key: None,
            domain: None,
        };
        let refused = channel("signer_url", "https://127.0.0.1:1", Some(&tls));
        std::fs::remove_dir_all(&dir)?;
        assert!(matches!(refused, Err(ClientError::Mismatch { .. })));
        Ok(())
    }

    #[tokio::test]
    async fn a_token_that_cannot_be_sent_is_refused_at_configuration_and_at_start() {
        for bad in [
            "line\nbreak",
            "cr\rhere",
            "tab\there",
            "two words",
            "caf\u{e9}",
            "nul\0",
        ] {
            let link = SignerLink {
                signer_token: opledger_config::Secret(format!("secret-{bad}")),
                ..SignerLink::default()
            };
            let refused = link.validate().map_err(|e| e.to_string());
            assert_eq!(
                refused,
                Err(
                    "configuration: signer_token must be printable ASCII (it is sent as a bearer token)"
                        .into()
                ),
                "{bad:?}"
            );
            let started = link.client().map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(started, Err("signer_token must be printable ASCII".into()));
        }
        let empty = SignerLink::default().validate().map_err(|e| e.to_string());
        assert_eq!(empty, Err("configuration: signer_token is required".into()));
        let good = SignerLink {
            signer_token: opledger_config::Secret("printable-token_0123".into()),
            ..SignerLink::default()
        };
        assert!(good.validate().is_ok());
        assert!(good.client().is_ok());
    }
}

/// How a caller reaches the signer (flattened into the broadcaster's and the reconciler's
/// configurations: the keys stay top-level).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignerLink {
    /// The signer's gRPC URL.
    pub signer_url: String,
    /// The caller token the signer expects (`OPLEDGER_<SERVICE>_SIGNER_TOKEN`).
    pub signer_token: opledger_config::Secret,
    /// TLS towards the signer (`[signer_tls]`: `ca`, and `cert` + `key` for mutual TLS, optional
    /// `domain`); `signer_url` must then be `https://`. Absent: plain HTTP/2 on a private segment.
    #[serde(default)]
    pub signer_tls: Option<ClientTls>,
}

impl Default for SignerLink {
    /// The signer's default loopback address, no token (required), no TLS.
    fn default() -> SignerLink {
        SignerLink {
            signer_url: "http://127.0.0.1:15053".to_owned(),
            signer_token: opledger_config::Secret::default(),
            signer_tls: None,
        }
    }
}

impl SignerLink {
    /// Refuses a missing token, and one that cannot be sent in an HTTP header.
    pub fn validate(&self) -> Result<(), opledger_config::ConfigError> {
        let problem = if self.signer_token.0.is_empty() {
            "is required"
        } else if bearer(&self.signer_token).is_err() {
            "must be printable ASCII (it is sent as a bearer token)"
        } else {
            return Ok(());
        };
        Err(opledger_config::ConfigError::Invalid {
            field: "signer_token",
            problem,
        })
    }

    /// The signer client these settings give: traced, its channel connecting lazily, the caller
    /// token attached to every call.
    pub fn client(&self) -> Result<SignerClient, ClientError> {
        let channel = channel("signer_url", &self.signer_url, self.signer_tls.as_ref())?;
        SignerClient::new(
            opledger_telemetry::grpc::traced(channel),
            &self.signer_token,
        )
    }
}

/// The `authorization` value carrying `token`: printable ASCII without spaces only (an HTTP
/// header would also take tabs and bytes above 0x7f, which a proxy may rewrite or drop).
fn bearer(token: &opledger_config::Secret) -> Result<MetadataValue<Ascii>, ClientError> {
    if !token.0.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ClientError::Token {
            field: "signer_token",
        });
    }
    let value = Zeroizing::new(format!("Bearer {}", token.0));
    value.parse().map_err(|_| ClientError::Token {
        field: "signer_token",
    })
}

/// Attaches the caller's bearer token to every call.
#[derive(Clone)]
struct BearerToken(MetadataValue<Ascii>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

type Signer = pb::signer_service_client::SignerServiceClient<
    InterceptedService<opledger_telemetry::grpc::TracedChannel, BearerToken>,
>;

/// The signer's gRPC API as its callers (broadcaster, reconciler) use it: traced, with their
/// caller token on every call. Cloning is cheap (one channel).
#[derive(Debug, Clone)]
pub struct SignerClient {
    inner: Signer,
}

impl SignerClient {
    /// A client over `channel` sending `token`; a token that cannot be sent in a header is refused
    /// here, never silently left out.
    pub fn new(
        channel: opledger_telemetry::grpc::TracedChannel,
        token: &opledger_config::Secret,
    ) -> Result<SignerClient, ClientError> {
        let interceptor = BearerToken(bearer(token)?);
        Ok(SignerClient {
            inner: pb::signer_service_client::SignerServiceClient::with_interceptor(
                channel,
                interceptor,
            ),
        })
    }

    /// Asks the signer to sign the withdrawal (idempotent: a signed one answers its attempt).
    pub async fn sign(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<pb::SignResponse, tonic::Status> {
        let request = pb::SignWithdrawalRequest {
            tenant_id: tenant_id.to_string(),
            withdrawal_id: op_id.to_string(),
        };
        let response = self.inner.clone().sign_withdrawal(request).await?;
        Ok(response.into_inner())
    }

    /// Asks the signer for a replacement of `kind` (fee bump or cancel) at the same nonce.
    pub async fn replace(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        kind: pb::AttemptKind,
    ) -> Result<pb::SignResponse, tonic::Status> {
        let request = pb::SignReplacementRequest {
            tenant_id: tenant_id.to_string(),
            withdrawal_id: op_id.to_string(),
            kind: kind as i32,
        };
        let response = self.inner.clone().sign_replacement(request).await?;
        Ok(response.into_inner())
    }
}
