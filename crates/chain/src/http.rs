//! The one HTTP client every chain connection is built on (submissions and evidence reads).

use std::path::Path;
use std::time::Duration;

/// Installs ring as the process's rustls crypto provider. reqwest's TLS needs one before any
/// client is built (in every process that links this crate, whichever crate builds the client);
/// installing it again is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why the HTTP client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The header at this position has an invalid name or value.
    #[error("header {0} has an invalid name or value")]
    Header(usize),
    /// The CA file could not be read.
    #[error("the CA file could not be read: {0}")]
    ReadCa(std::io::Error),
    /// The HTTP client refused the settings (an unparsable CA certificate, say).
    #[error("the HTTP client refused its settings")]
    Client(reqwest::Error),
}

/// rustls with ring; the CA in `ca_file` alone trusted when set (the system's roots otherwise);
/// `headers` sent with every call, marked sensitive so the client never shows their values;
/// `timeout` on connect and on every call; no redirect (a redirected POST would carry the headers,
/// a provider's key, to another host) and no retry (one call is one request).
pub fn client<K: AsRef<str>, V: AsRef<str>>(
    timeout: Duration,
    ca_file: Option<&Path>,
    headers: impl IntoIterator<Item = (K, V)>,
) -> Result<reqwest::Client, ClientError> {
    let mut map = reqwest::header::HeaderMap::new();
    for (index, (name, value)) in headers.into_iter().enumerate() {
        let name = reqwest::header::HeaderName::from_bytes(name.as_ref().as_bytes())
            .map_err(|_| ClientError::Header(index))?;
        let mut value = reqwest::header::HeaderValue::from_str(value.as_ref())
            .map_err(|_| ClientError::Header(index))?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .default_headers(map);
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(ClientError::ReadCa)?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(ClientError::Client)?;
        builder = builder.tls_certs_only(certs);
    }
    builder.build().map_err(ClientError::Client)
}
