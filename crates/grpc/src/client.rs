//! Channels to other opledger services (the signer's callers use them), in clear on a private
//! segment or over TLS, mutual when the caller has a certificate.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use zeroize::Zeroizing;

/// TLS towards a gRPC server: the CA that issued the server's certificate and, for mutual TLS,
/// this caller's certificate and key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}
