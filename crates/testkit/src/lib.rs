//! Test-only helpers for opledger; never linked into a service binary (only ever a
//! `[dev-dependencies]` entry).
//!
//! * [`TestDatabase`]: a fresh PostgreSQL database per test, cloned from a template database that
//!   holds every migration of `opledger-store`. The cluster comes from `scripts/test.sh`, which
//!   exports its superuser URL as `OPLEDGER_TEST_DATABASE_URL`.
//! * [`HaCluster`]: a highly available PostgreSQL per test (`scripts/ha.sh`: etcd, a Patroni
//!   primary and synchronous standby, HAProxy routing to the leader) that a test fails over by
//!   SIGKILL of the primary's postmaster or by a switchover.
//! * [`ChildService`]: a real service binary of the workspace run as a child process, its output
//!   captured to a log file.
//! * [`free_port`] and [`wait_for_tcp`]: loopback ports for those services.
//! * [`Anvil`]: a real anvil EVM node (Foundry) per test on 127.0.0.1, with JSON-RPC helpers
//!   for fault tests (automine off, dropped transactions, reorgs, snapshots). `scripts/test.sh`
//!   installs the pinned anvil from npm and exports its path as `OPLEDGER_ANVIL_BIN`.
//! * [`FaultProxy`]: a fault-injecting TCP proxy on 127.0.0.1 in front of anvil, PostgreSQL or a
//!   service ([`FaultMode`]: pass, forward the request but drop the answer, reset, blackhole,
//!   latency), switched at run time.
//! * [`hsm::TestToken`]: a SoftHSM2 token of the test's own (`scripts/test.sh` installs SoftHSM2
//!   and exports `SOFTHSM2_CONF` and `OPLEDGER_PKCS11_MODULE`).
//! * [`RpcProxy`]: a JSON-RPC proxy on 127.0.0.1 in front of anvil that plays a lagging,
//!   receipt-hiding, forked, nonce-rewriting or down node ([`RpcMode`]), switched at run time.

mod anvil;
mod child;
mod database;
mod ha;
pub mod hsm;
mod proxy;
mod rpc_proxy;
mod token;
pub mod trust;

pub use anvil::{
    ANVIL_BIN_ENV, Anvil, AnvilOptions, DEV_KEYS, RpcCallError, RpcError, TxpoolStatus,
};
pub use child::{ChildService, binary_path};

/// A reqwest client builder usable in any test process: installs ring as the rustls crypto
/// provider first (reqwest's TLS, compiled in for the chain crate's https:// nodes, needs one).
pub fn http_client() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}
pub use database::{ServiceRole, TEST_DATABASE_URL_ENV, TestDatabase, template_name};
pub use ha::{HaCluster, HaMember};
pub use proxy::{DROP_RESPONSE_GRACE, FaultMode, FaultProxy, ProxyStats};
pub use rpc_proxy::{RpcMode, RpcProxy};
pub use token::{
    TEST_TOKEN_DECIMALS, TRANSFER_EVENT_TOPIC, deploy_test_token, token_balance, token_transfer,
};

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use anyhow::bail;

/// Ports [`free_port`] hands out: below Linux's ephemeral range (32768-60999 by default), so that
/// no outgoing connection of any process (a proxy's, a client's) is given the port between this
/// call and the caller's bind, and above the development stack's fixed ports (15051-15057,
/// 9101-9107).
const FREE_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A TCP port on 127.0.0.1 that was free when this returned (bound, read, released), chosen at
/// random in [`FREE_PORTS`].
///
/// Another test may pick the same port before the caller binds it; with the ports spread over
/// 12,000 values and no outgoing connection ever taking one, that race is rare. When no port of
/// the range can be bound, falls back to one the system picks.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let span = u64::from(FREE_PORTS.end - FREE_PORTS.start);
    for attempt in 0..256_u32 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(attempt);
        hasher.write_u32(std::process::id());
        let offset = u16::try_from(hasher.finish() % span).unwrap_or(0);
        let port = FREE_PORTS.start + offset;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let listener =
        TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0 to find a free port");
    listener
        .local_addr()
        .expect("reading the local address of a bound listener")
        .port()
}

/// Waits until something accepts TCP connections on `addr`, or fails after `timeout`.
pub async fn wait_for_tcp(addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let last_error = match tokio::time::timeout(
            remaining.max(Duration::from_millis(1)),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(_stream)) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "connect timed out".to_owned(),
        };
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "nothing accepted TCP connections on {addr} within {timeout:?} (last error: {last_error})"
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn free_port_and_wait_for_tcp() -> anyhow::Result<()> {
        let port = free_port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        // Nobody listens yet: waiting times out with an error.
        assert!(
            wait_for_tcp(addr, Duration::from_millis(200))
                .await
                .is_err()
        );
        let _listener = tokio::net::TcpListener::bind(addr).await?;
        wait_for_tcp(addr, Duration::from_secs(5)).await?;
        Ok(())
    }
}
