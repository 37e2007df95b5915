//! The RSA keys of the tests, made fresh by `openssl` the first time a test asks for them (once
//! per test binary), so that no private key is ever committed.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::Context;

/// The keys of this test process (2048-bit RSA, PKCS#8 PEM; SPKI PEM for the public key).
#[derive(Debug)]
pub struct Keys {
    /// Signs our Fireblocks API requests; the double is configured with its public key.
    pub api_client: String,
    /// The public key of [`Keys::api_client`].
    pub api_client_pub: String,
    /// Another client's key, which the double does not know.
    pub api_other: String,
    /// The double's webhook signing keys: the first signs, the others wait for rotations.
    pub webhook: [String; 3],
    /// The key the double signs forged webhooks with.
    pub webhook_forger: String,
}

/// The keys, generated on the first call (which blocks for the few `openssl` runs it takes).
pub fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys::generate().expect("generating the test keys with openssl"))
}

impl Keys {
    fn generate() -> anyhow::Result<Keys> {
        let api_client = private_key()?;
        Ok(Keys {
            api_client_pub: openssl(&["pkey", "-pubout"], &api_client)?,
            api_client,
            api_other: private_key()?,
            webhook: [private_key()?, private_key()?, private_key()?],
            webhook_forger: private_key()?,
        })
    }
}

/// A fresh 2048-bit RSA private key, PKCS#8 PEM.
fn private_key() -> anyhow::Result<String> {
    openssl(
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ],
        "",
    )
}

/// What `openssl args` writes to its standard output with `input` on its standard input.
fn openssl(args: &[&str], input: &str) -> anyhow::Result<String> {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running openssl")?;
    child
        .stdin
        .take()
        .context("openssl's standard input")?
        .write_all(input.as_bytes())?;
    let output = child.wait_with_output()?;
    anyhow::ensure!(
        output.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}
