//! Throwaway certificate authorities and certificates for the TLS tests.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::path::{Path, PathBuf};

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
