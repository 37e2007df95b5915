//! One child process of the fault harness's cluster, and the small helpers its configuration
//! needs.

use anyhow::Context;
use opledger_testkit::ChildService;
use opledger_tests::signer::CALLER_TOKEN;
use std::net::SocketAddr;
use std::path::PathBuf;

/// A service instance the cluster starts, kills and restarts.
pub struct Service {
    pub(crate) bin: &'static str,
    pub(crate) env: Vec<(&'static str, String)>,
    pub(crate) ready_port: u16,
    pub(crate) child: Option<ChildService>,
    /// Started with a failpoint armed (and not restarted unarmed since).
    pub(crate) armed: bool,
}

impl Service {
    /// The binary `bin` run with `env`, ready once `ready_port` accepts connections.
    pub fn new(bin: &'static str, env: Vec<(&'static str, String)>, ready_port: u16) -> Service {
        Service {
            bin,
            env,
            ready_port,
            child: None,
            armed: false,
        }
    }
}

/// A removed-on-drop folder for configuration files.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `url` with its `host:port` replaced by `addr` (to route a database URL through a proxy).
pub fn through(url: &str, addr: SocketAddr) -> anyhow::Result<String> {
    let at = url.rfind('@').context("database url without credentials")?;
    let slash = url[at..]
        .find('/')
        .context("database url without a database")?
        + at;
    Ok(format!("{}{addr}{}", &url[..=at], &url[slash..]))
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The signer instance on `port`, reached in clear with the test caller token.
pub fn signer_link(port: u16) -> opledger_grpc::client::SignerLink {
    opledger_grpc::client::SignerLink {
        signer_url: format!("http://{}", loopback(port)),
        signer_token: opledger_config::Secret(CALLER_TOKEN.to_owned()),
        signer_tls: None,
    }
}
