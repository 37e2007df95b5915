//! Configurations of the chain-facing workers (broadcaster, reconciler) for tests.

use crate::Stack;
use crate::signer::{CALLER_TOKEN, InProcessSigner, NETWORK};
use opledger_config::{DatabaseUrl, Secret, ServiceBase};
use opledger_testkit::ServiceRole;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// A broadcaster on the test database (app role) using `signer` and the node at `rpc_url`.
pub fn broadcaster_config(
    stack: &Stack,
    signer: &InProcessSigner,
    rpc_url: &str,
) -> opledger_broadcaster::Config {
    let defaults = opledger_broadcaster::Config::default();
    opledger_broadcaster::Config {
        base: test_base(stack.url(ServiceRole::Broadcaster), defaults.base.clone()),
        signer: signer_link(signer),
        chain: chain_links(rpc_url),
        submit_timeout_ms: 2_000,
        worker_id: "broadcaster-test".into(),
        ..defaults
    }
}

/// `defaults` on the database at `url`, with metrics on a free loopback port.
pub fn test_base(url: String, defaults: ServiceBase) -> ServiceBase {
    ServiceBase {
        database_url: DatabaseUrl(url),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], opledger_testkit::free_port())),
        ..defaults
    }
}

/// The in-process `signer`, reached in clear with the test caller token.
fn signer_link(signer: &InProcessSigner) -> opledger_grpc::client::SignerLink {
    opledger_grpc::client::SignerLink {
        signer_url: format!("http://{}", signer.addr),
        signer_token: Secret(CALLER_TOKEN.to_owned()),
        signer_tls: None,
    }
}

/// The test network at `rpc_url`, its evidence from that node alone (quorum 1).
fn chain_links(rpc_url: &str) -> opledger_chain::ChainLinks {
    opledger_chain::ChainLinks {
        rpc: BTreeMap::from([(NETWORK.to_owned(), rpc_url.to_owned())]),
        evidence: BTreeMap::from([(NETWORK.to_owned(), evidence(&[rpc_url], 1))]),
        ..Default::default()
    }
}

/// Confirmations the chain-facing test services require: real depth, never the including block
/// alone (a test mines `CONFIRMATIONS - 1` blocks on top of an inclusion to make it final).
pub const CONFIRMATIONS: u64 = 3;

/// Evidence for the test network from `urls` with `quorum`, at [`CONFIRMATIONS`]: below the
/// default floor of 12 on purpose (anvil mines on demand), so with `allow_shallow_finality`.
pub fn evidence(urls: &[&str], quorum: usize) -> opledger_chain::NetworkEvidence {
    opledger_chain::NetworkEvidence {
        urls: urls.iter().map(|u| (*u).to_owned()).collect(),
        // Every test anvil's (opledger_testkit::AnvilOptions' default).
        chain_id: 31337,
        quorum,
        confirmations: Some(CONFIRMATIONS),
        finalized: false,
        min_confirmations: 12,
        max_lag_blocks: 8,
        allow_shallow_finality: true,
        insecure_clear_text: false,
    }
}

/// A reconciler on the test database acting at once (no staleness or cancel delay), reading
/// evidence from `rpc_url` alone (quorum 1, [`CONFIRMATIONS`] deep).
pub fn reconciler_config(
    stack: &Stack,
    signer: &InProcessSigner,
    rpc_url: &str,
) -> opledger_reconciler::Config {
    let defaults = opledger_reconciler::Config::default();
    opledger_reconciler::Config {
        base: test_base(stack.url(ServiceRole::Reconciler), defaults.base.clone()),
        signer: signer_link(signer),
        chain: chain_links(rpc_url),
        stale_broadcast_secs: 0,
        cancel_after_secs: 0,
        rpc_timeout_ms: 2_000,
        worker_id: "reconciler-test".into(),
        ..defaults
    }
}

/// A witness on the test database under its own login (`opledger_witness`), reading evidence
/// from `urls` with `quorum` ([`CONFIRMATIONS`] deep).
pub fn witness_config(stack: &Stack, urls: &[&str], quorum: usize) -> opledger_witness::Config {
    let defaults = opledger_witness::Config::default();
    opledger_witness::Config {
        base: test_base(stack.url(ServiceRole::Witness), defaults.base.clone()),
        evidence: BTreeMap::from([(NETWORK.to_owned(), evidence(urls, quorum))]),
        rpc_timeout_ms: 2_000,
        witness_id: "witness-test".into(),
        ..defaults
    }
}

/// An in-process witness of [`witness_config`] (its own login, its own evidence reader).
pub async fn witness(
    stack: &Stack,
    urls: &[&str],
    quorum: usize,
) -> anyhow::Result<opledger_witness::Witness> {
    let config = witness_config(stack, urls, quorum);
    let store = opledger_store::Store::connect(
        &config.base.database_url.0,
        opledger_server::store_config(&config.base),
    )
    .await
    .map_err(|e| anyhow::anyhow!("the witness login cannot connect: {}", e.log_safe()))?;
    Ok(opledger_witness::witness(
        &config,
        store.witness(),
        Default::default(),
    )?)
}

/// [`witness_config`] that also credits: native `ETH` deposits on the test network, and operator
/// statements of `tenants` under trust statements signed by their testkit administrator keys.
pub fn credit_witness_config(
    stack: &Stack,
    urls: &[&str],
    quorum: usize,
    tenants: &[opledger_domain::ids::TenantId],
) -> opledger_witness::Config {
    opledger_witness::Config {
        deposit_assets: BTreeMap::from([(
            NETWORK.to_owned(),
            opledger_witness::config::DepositAssets {
                native: Some("ETH".to_owned()),
                tokens: BTreeMap::new(),
            },
        )]),
        trust_roots: tenants
            .iter()
            .map(|t| opledger_witness::config::TrustRootConfig {
                tenant_id: t.to_string(),
                admin_public_keys: vec![opledger_testkit::trust::admin_public_hex(*t)],
                min_version: 1,
            })
            .collect(),
        ..witness_config(stack, urls, quorum)
    }
}

/// An in-process credit witness of [`credit_witness_config`] (its own login and endpoints).
pub async fn credit_witness(
    stack: &Stack,
    urls: &[&str],
    quorum: usize,
    tenants: &[opledger_domain::ids::TenantId],
) -> anyhow::Result<opledger_witness::CreditWitness> {
    let config = credit_witness_config(stack, urls, quorum, tenants);
    let store = opledger_store::Store::connect(
        &config.base.database_url.0,
        opledger_server::store_config(&config.base),
    )
    .await
    .map_err(|e| anyhow::anyhow!("the witness login cannot connect: {}", e.log_safe()))?;
    Ok(opledger_witness::credit_witness(&config, store.witness())?)
}

/// A test world for the chain-facing services: the operations and approvals services with tenant
/// `acme` holding 10 ETH in `treasury`, a fresh anvil node (automine) and an in-process signer
/// holding `acme`'s hot wallet.
#[derive(Debug)]
pub struct Chain {
    /// Database and services.
    pub stack: Stack,
    /// The funded tenant.
    pub acme: crate::Tenant,
    /// The node.
    pub node: opledger_testkit::Anvil,
    /// The signer.
    pub signer: InProcessSigner,
}

impl Chain {
    /// Starts everything.
    pub async fn start() -> anyhow::Result<Chain> {
        let stack = Stack::start().await?;
        let acme = stack.tenant("acme").await?;
        stack
            .fund(&acme, "treasury", "ETH", "10000000000000000000")
            .await?;
        let node = opledger_testkit::Anvil::start().await?;
        let signer = InProcessSigner::start(&stack.db, acme.id).await?;
        Ok(Chain {
            stack,
            acme,
            node,
            signer,
        })
    }
}
