//! Throwaway certificate authorities and certificates for the TLS tests.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate and its private key, PEM.
#[derive(Debug)]
pub struct Pem {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
}

/// A self-signed CA.
pub fn ca() -> anyhow::Result<CertifiedIssuer<'static, KeyPair>> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

/// A certificate for `name` issued by `ca`.
pub fn leaf(name: &str, ca: &CertifiedIssuer<'static, KeyPair>) -> anyhow::Result<Pem> {
    let key = KeyPair::generate()?;
    let cert = CertificateParams::new(vec![name.to_owned()])?.signed_by(&key, ca)?;
    Ok(Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A fresh folder for PEM files.
pub fn dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("opledger-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// A TLS-terminating proxy on 127.0.0.1 in front of `upstream` (a plain TCP service, a node's
/// JSON-RPC port say), presenting `server`; stops when dropped.
#[derive(Debug)]
pub struct TlsProxy {
    /// Its address.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsProxy {
    /// Starts the proxy.
    pub async fn start(upstream: SocketAddr, server: &Pem) -> anyhow::Result<TlsProxy> {
        let certs = CertificateDer::pem_slice_iter(server.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes())?;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if let Ok(mut node) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut node).await;
                    }
                });
            }
        });
        Ok(TlsProxy { addr, task })
    }
}
