//! Test support: temporary files, RSA keys made at test time with the `openssl` CLI, a local axum
//! server answering canned responses (and recording the requests), and raw TCP servers that
//! misbehave (never answer, cut the answer, reset).

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A fresh directory under the system's temporary directory, removed when dropped (test keys
/// and secrets never outlive the test that wrote them).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh temporary directory.
pub fn temp_dir() -> TempDir {
    let dir = std::env::temp_dir().join(format!("opledger-custodian-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

/// Writes `contents` to `dir/name`.
pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write");
    path
}

/// Runs `openssl` with `args`, feeding `stdin`; its stdout.
pub fn openssl(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let mut child = Command::new("/usr/bin/openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("stdin write");
    let out = child.wait_with_output().expect("openssl output");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A test RSA key made by `openssl` at test time, kept in memory only (written to a temporary
/// directory for the length of one `openssl` call).
#[derive(Debug, Clone)]
pub struct TestKey {
    /// The private key, PKCS#8 PEM.
    pub private_pem: Vec<u8>,
    /// The public key, SPKI PEM.
    pub public_pem: Vec<u8>,
}

impl TestKey {
    fn generate() -> TestKey {
        let private_pem = openssl(
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ],
            b"",
        );
        let public_pem = openssl(&["pkey", "-pubout"], &private_pem);
        TestKey {
            private_pem,
            public_pem,
        }
    }

    /// The private key as a `ring` key pair.
    pub fn key_pair(&self) -> ring::signature::RsaKeyPair {
        let der = crate::fireblocks::jwt::pkcs8_from_pem(&self.private_pem).expect("pkcs8");
        ring::signature::RsaKeyPair::from_pkcs8(&der).expect("key pair")
    }

    /// Whether `openssl` verifies `signature` over `message` with this key and `digest`
    /// (`-sha256`, `-sha512`), PKCS#1 v1.5.
    pub fn openssl_verifies(&self, digest: &str, message: &[u8], signature: &[u8]) -> bool {
        let dir = temp_dir();
        let sig = write(&dir, "sig.bin", signature);
        let public = write(&dir, "pub.pem", &self.public_pem);
        let out = Command::new("/usr/bin/openssl")
            .args(["dgst", digest, "-verify"])
            .arg(&public)
            .arg("-signature")
            .arg(&sig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                child.stdin.take().expect("stdin").write_all(message)?;
                child.wait_with_output()
            })
            .expect("openssl dgst");
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Verified OK")
    }

    /// `openssl`'s PKCS#1 v1.5 signature over `message` with `digest`.
    pub fn openssl_sign(&self, digest: &str, message: &[u8]) -> Vec<u8> {
        let dir = temp_dir();
        let private = write(&dir, "key.pem", &self.private_pem);
        openssl(
            &["dgst", digest, "-sign", private.to_str().expect("path")],
            message,
        )
    }
}

/// The first test key (made once per test binary).
pub fn key() -> &'static TestKey {
    static KEY: OnceLock<TestKey> = OnceLock::new();
    KEY.get_or_init(TestKey::generate)
}

/// A second, unrelated test key.
pub fn other_key() -> &'static TestKey {
    static KEY: OnceLock<TestKey> = OnceLock::new();
    KEY.get_or_init(TestKey::generate)
}

/// A canned answer.
#[derive(Debug, Clone)]
pub struct Canned {
    /// Its status.
    pub status: u16,
    /// Its headers.
    pub headers: Vec<(&'static str, String)>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Canned {
    /// `status` with a JSON `body`.
    pub fn json(status: u16, body: &str) -> Canned {
        Canned {
            status,
            headers: vec![("content-type", "application/json".to_owned())],
            body: body.as_bytes().to_vec(),
        }
    }

    /// The same with one more header.
    pub fn with_header(mut self, name: &'static str, value: &str) -> Canned {
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Its method.
    pub method: String,
    /// Its path and query.
    pub uri: String,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Vec<u8>,
}

impl Captured {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A local axum server answering canned responses in order (the last one repeats).
#[derive(Debug, Clone)]
pub struct Server {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Every request received.
    pub captured: Arc<Mutex<Vec<Captured>>>,
}

impl Server {
    /// The requests received so far.
    pub fn requests(&self) -> Vec<Captured> {
        self.captured.lock().expect("lock").clone()
    }
}

/// Starts a server answering `answers` in order.
pub async fn serve(answers: Vec<Canned>) -> Server {
    let captured: Arc<Mutex<Vec<Captured>>> = Arc::default();
    let queue = Arc::new(Mutex::new(VecDeque::from(answers)));
    let log = captured.clone();
    let handler = move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let log = log.clone();
        let queue = queue.clone();
        async move {
            log.lock().expect("lock").push(Captured {
                method: method.to_string(),
                uri: uri.to_string(),
                headers,
                body: body.to_vec(),
            });
            let canned = {
                let mut queue = queue.lock().expect("lock");
                if queue.len() > 1 {
                    queue.pop_front().expect("answer")
                } else {
                    queue.front().cloned().expect("answer")
                }
            };
            let mut response = axum::response::Response::new(axum::body::Body::from(canned.body));
            *response.status_mut() = StatusCode::from_u16(canned.status).expect("status");
            for (name, value) in canned.headers {
                response
                    .headers_mut()
                    .insert(name, value.parse().expect("header"));
            }
            response
        }
    };
    let app = axum::Router::new().fallback(handler);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server { base, captured }
}

/// How a raw server misbehaves once it has read a request.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Keeps the connection open and never answers.
    NeverAnswer,
    /// Sends the head and half the promised body, then closes.
    CutAnswer,
    /// Closes without answering.
    Close,
}

/// Starts a raw TCP server that reads a request and then misbehaves with `fault`.
pub async fn serve_fault(fault: Fault) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buffer = vec![0_u8; 64 * 1024];
            let _ = socket.read(&mut buffer).await;
            match fault {
                Fault::NeverAnswer => held.push(socket),
                Fault::CutAnswer => {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                content-length: 200\r\n\r\n{\"id\":\"abc\",";
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.flush().await;
                    drop(socket);
                }
                Fault::Close => drop(socket),
            }
        }
    });
    base
}

/// A base URL nothing listens on (the port was just released).
pub async fn refused() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    base
}

/// The vault, wallet and portfolio ids of the test accounts.
pub const VAULT: &str = "7";
/// The BitGo test wallet.
pub const WALLET: &str = "0123456789abcdef0123456789abcdef";
/// The Prime test portfolio.
pub const PORTFOLIO: &str = "portfolio-1";
/// The Prime test wallet.
pub const PRIME_WALLET: &str = "wallet-1";
/// The Fireblocks test API key.
pub const API_KEY: &str = "api-key-0001";
/// The BitGo test token.
pub const TOKEN: &str = "v2x-token-secret";
/// The BitGo test passphrase (with characters JSON must escape).
pub const PASSPHRASE: &str = "pass \"phrase\" \\ secret";
/// The Prime test signing key.
pub const SIGNING_KEY: &str = "prime-signing-secret";

/// A configuration and the directory holding its secret files (removed when dropped).
#[derive(Debug)]
pub struct Fixture<T> {
    /// The configuration.
    pub config: T,
    /// Its secret files, removed with it.
    _dir: TempDir,
}

impl<T> std::ops::Deref for Fixture<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.config
    }
}

impl<T> std::ops::DerefMut for Fixture<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.config
    }
}

/// A Fireblocks account at `base`, its secrets written to a fresh directory.
pub fn fireblocks_config(base: &str) -> Fixture<crate::config::FireblocksConfig> {
    let dir = temp_dir();
    let config = crate::config::FireblocksConfig {
        base_url: base.to_owned(),
        api_key_file: write(&dir, "api_key", format!("{API_KEY}\n")),
        api_secret_file: write(&dir, "api_secret.pem", &key().private_pem),
        vault_account_id: VAULT.to_owned(),
        asset_id: "ETH".to_owned(),
        decimals: 18,
        timeout_secs: 1,
        ca_file: None,
        consistency_window_secs: 60,
    };
    Fixture { config, _dir: dir }
}

/// A BitGo wallet at `base`.
pub fn bitgo_config(base: &str) -> Fixture<crate::config::BitGoConfig> {
    let dir = temp_dir();
    let config = crate::config::BitGoConfig {
        base_url: base.to_owned(),
        access_token_file: write(&dir, "token", format!("{TOKEN}\n")),
        wallet_passphrase_file: write(&dir, "passphrase", PASSPHRASE),
        coin: "hteth".to_owned(),
        wallet_id: WALLET.to_owned(),
        timeout_secs: 1,
        ca_file: None,
        consistency_window_secs: 30,
    };
    Fixture { config, _dir: dir }
}

/// A Prime wallet at `base`.
pub fn prime_config(base: &str) -> Fixture<crate::config::PrimeConfig> {
    let dir = temp_dir();
    let config = crate::config::PrimeConfig {
        base_url: base.to_owned(),
        access_key_file: write(&dir, "access", "access-key\n"),
        passphrase_file: write(&dir, "passphrase", "prime-passphrase\n"),
        signing_key_file: write(&dir, "signing", format!("{SIGNING_KEY}\n")),
        portfolio_id: PORTFOLIO.to_owned(),
        wallet_id: PRIME_WALLET.to_owned(),
        currency_symbol: "ETH".to_owned(),
        decimals: 18,
        timeout_secs: 1,
        ca_file: None,
        consistency_window_secs: 0,
    };
    Fixture { config, _dir: dir }
}

/// A request of `amount` wei to address `0x1111...11`.
pub fn request(amount: u128) -> crate::types::TransferRequest {
    crate::types::TransferRequest {
        reference: uuid::Uuid::parse_str("0f8fad5b-d9cb-469f-a165-70867728950e").expect("uuid"),
        destination: [0x11; 20],
        amount,
        note: None,
    }
}
