//! The broadcaster reaches a signer that accepts mutual TLS only: with the caller certificate its
//! signer settings name, the withdrawal is signed and submitted; with a certificate from another
//! CA nothing is signed and the withdrawal waits, APPROVED with its hold.

use opledger_grpc::client::ClientTls;
use opledger_signer::config::TlsConfig;
use opledger_testkit::Anvil;
use opledger_tests::chain::Chain;
use opledger_tests::chain::broadcaster_config;
use opledger_tests::signer::{InProcessSigner, approve, attempts};
use opledger_tests::tls::{TlsProxy, ca, dir, leaf, write};
use opledger_tests::{BOB, Stack};

#[tokio::test]
async fn the_broadcaster_signs_through_a_mutual_tls_signer_only_with_its_caller_certificate()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    let node = Anvil::start().await?;
    let (server_ca, caller_ca, rogue_ca) = (ca()?, ca()?, ca()?);
    let server = leaf("localhost", &server_ca)?;
    let caller = leaf("broadcaster", &caller_ca)?;
    let rogue = leaf("broadcaster", &rogue_ca)?;
    let dir = dir()?;
    let server_tls = TlsConfig {
        cert: write(&dir, "signer.pem", &server.cert)?,
        key: write(&dir, "signer.key", &server.key)?,
        client_ca: Some(write(&dir, "callers.pem", &caller_ca.pem())?),
    };
    let signer = InProcessSigner::start_tls(
        &stack.db,
        acme.id,
        opledger_signer::tls_config(&server_tls)?,
    )
    .await?;
    let signer_ca = write(&dir, "signer-ca.pem", &server_ca.pem())?;
    let broadcaster_with = |name: &str, cert: &str, key: &str| -> anyhow::Result<_> {
        let mut config = broadcaster_config(&stack, &signer, &node.rpc_url());
        config.signer.signer_url = format!("https://localhost:{}", signer.addr.port());
        config.signer.signer_tls = Some(ClientTls {
            ca: signer_ca.clone(),
            cert: Some(write(&dir, &format!("{name}.pem"), cert)?),
            key: Some(write(&dir, &format!("{name}.key"), key)?),
            domain: None,
        });
        Ok(opledger_broadcaster::broadcaster(
            &config,
            stack.admin.broadcaster(),
        )?)
    };
    let w = stack.withdraw(&acme, "2500000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;

    // A certificate the signer's caller CA did not issue: the handshake fails, nothing is signed.
    let impostor = broadcaster_with("rogue", &rogue.cert, &rogue.key)?;
    assert_eq!(impostor.tick(64, 8).await, 0);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "APPROVED");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 0);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (
            10_000_000_000_000_000_000 - 2_500_000_000_000_000,
            2_500_000_000_000_000
        ),
        "the hold stays"
    );

    // The configured caller certificate: signed over TLS, then submitted.
    let broadcaster = broadcaster_with("caller", &caller.cert, &caller.key)?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 1);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test]
async fn signer_urls_and_tls_settings_that_disagree_are_refused_at_start() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut config = broadcaster_config(&stack, &signer, "http://127.0.0.1:1");
    config.signer.signer_url = format!("https://{}", signer.addr);
    let refused = opledger_broadcaster::broadcaster(&config, stack.admin.broadcaster())
        .expect_err("https without tls settings");
    assert!(refused.to_string().contains("no tls settings"), "{refused}");
    config.signer.signer_url = format!("http://{}", signer.addr);
    config.signer.signer_tls = Some(ClientTls {
        ca: std::path::PathBuf::from("/nonexistent/ca.pem"),
        cert: None,
        key: None,
        domain: None,
    });
    let refused = opledger_reconciler::reconciler(
        &opledger_reconciler::Config {
            signer: config.signer.clone(),
            ..opledger_tests::chain::reconciler_config(&stack, &signer, "http://127.0.0.1:1")
        },
        stack.admin.reconciler(),
    )
    .expect_err("tls settings with an http url");
    assert!(
        refused.to_string().contains("must be https://"),
        "{refused}"
    );
    Ok(())
}

#[tokio::test]
async fn the_broadcaster_and_watcher_use_an_https_node_verified_against_the_configured_ca()
-> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let (node_ca, other_ca) = (ca()?, ca()?);
    let node_port: u16 = node
        .rpc_url()
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no port in the node url"))?;
    let proxy = TlsProxy::start(
        std::net::SocketAddr::from(([127, 0, 0, 1], node_port)),
        &leaf("localhost", &node_ca)?,
    )
    .await?;
    let dir = dir()?;
    let https = format!("https://localhost:{}", proxy.addr.port());
    let config_trusting = |name: &str, pem: String| -> anyhow::Result<_> {
        let mut config = broadcaster_config(&stack, &signer, &https);
        config.chain.rpc_ca = Some(write(&dir, name, &pem)?);
        Ok(config)
    };

    // The node's CA: submitted over TLS and confirmed by the watcher over TLS.
    let w = stack.withdraw(&acme, "2500000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    let right = config_trusting("node-ca.pem", node_ca.pem())?;
    let broadcaster = opledger_broadcaster::broadcaster(&right, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&right, stack.admin.broadcaster())?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    node.mine(opledger_tests::chain::CONFIRMATIONS - 1).await?;
    let mut confirmed = 0;
    for _ in 0..50 {
        confirmed += watcher.tick(64).await.confirmed;
        if confirmed > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(confirmed, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "CONFIRMED");
    // A node whose certificate does not chain to the configured CA is never trusted: nothing
    // reaches it, and as the broadcaster cannot know that, UNKNOWN with the hold kept.
    let doubtful = stack.withdraw(&acme, "1000000000000000", BOB).await?;
    approve(&stack, &acme, &doubtful).await?;
    let wrong = config_trusting("other-ca.pem", other_ca.pem())?;
    let broadcaster = opledger_broadcaster::broadcaster(&wrong, stack.admin.broadcaster())?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    assert_eq!(stack.state(&doubtful.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(
        node.nonce(opledger_tests::signer::HOT_WALLET, "latest")
            .await?,
        1,
        "only the first withdrawal reached the node"
    );

    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn rpc_headers_are_secrets_and_must_name_a_configured_network() -> anyhow::Result<()> {
    let dir = dir()?;
    let base = "database_url = \"postgres://u:p@127.0.0.1:1/db\"\nsigner_token = \"t\"\n\
                [rpc]\nmainnet = \"https://node.example\"\n\
                [evidence.mainnet]\nurls = [\"https://node.example\"]\nchain_id = 1\nquorum = 1\nconfirmations = 12\n";
    let good = write(
        &dir,
        "good.toml",
        &format!("{base}[rpc_headers.mainnet]\nx-api-key = \"provider-key-5678\"\n"),
    )?;
    let config = opledger_broadcaster::Config::load(Some(&good))?;
    assert_eq!(
        config.chain.rpc_headers["mainnet"]["x-api-key"].0,
        "provider-key-5678"
    );
    assert!(
        !format!("{config:?}").contains("provider-key-5678"),
        "the configuration's Debug shows the key"
    );
    let stray = write(
        &dir,
        "stray.toml",
        &format!("{base}[rpc_headers.testnet]\nx-api-key = \"k\"\n"),
    )?;
    let refused = opledger_broadcaster::Config::load(Some(&stray))
        .expect_err("headers for a network without a URL");
    assert!(refused.to_string().contains("rpc_headers"), "{refused}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
