//! Control 6 (signer part): the signed artifact is persisted before anyone may broadcast, and a
//! crash never yields a second signature for another nonce. The real signer process is killed
//! after signing but before its commit, and after its commit but before its reply.

use opledger_testkit::{ChildService, free_port, wait_for_tcp};
use opledger_tests::signer::{
    approve, attempts, client, config, sign_request, signer_url, write_keystore,
};
use opledger_tests::{ALICE, Stack};
use std::net::SocketAddr;
use std::time::Duration;

struct Harness {
    stack: Stack,
    tenant: opledger_tests::Tenant,
    withdrawal_id: String,
    config_path: std::path::PathBuf,
    port: u16,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn harness() -> anyhow::Result<Harness> {
    harness_with_lease(1).await
}

/// A harness whose signer leases its claims for `lease_secs`.
async fn harness_with_lease(lease_secs: u64) -> anyhow::Result<Harness> {
    let stack = Stack::start().await?;
    let tenant = stack.tenant("acme").await?;
    stack.fund(&tenant, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&tenant, "1000", ALICE).await?;
    approve(&stack, &tenant, &w).await?;
    let dir =
        std::env::temp_dir().join(format!("opledger-signer-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir)?;
    let (keystore, passphrase) = write_keystore(&dir)?;
    let port = free_port();
    let mut config = config(
        &signer_url(&stack.db).await?,
        tenant.id,
        &keystore,
        &passphrase,
        lease_secs,
    );
    config.base.listen = SocketAddr::from(([127, 0, 0, 1], port));
    let config_path = dir.join("signer.toml");
    std::fs::write(&config_path, toml::to_string(&config)?)?;
    Ok(Harness {
        stack,
        tenant,
        withdrawal_id: w.withdrawal_id,
        config_path,
        port,
        _dir: TempDir(dir),
    })
}

async fn start(h: &Harness, failpoints: &str) -> anyhow::Result<ChildService> {
    let child = ChildService::spawn(
        "opledger-signer",
        &[
            (
                "OPLEDGER_SIGNER_CONFIG",
                h.config_path.display().to_string(),
            ),
            ("OPLEDGER_SIGNER_METRICS_LISTEN", "127.0.0.1:0".to_owned()),
            ("OPLEDGER_FAILPOINTS", failpoints.to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )?;
    wait_for_tcp(
        SocketAddr::from(([127, 0, 0, 1], h.port)),
        Duration::from_secs(20),
    )
    .await?;
    Ok(child)
}

async fn sign(h: &Harness) -> anyhow::Result<opledger_proto::v1::SignResponse> {
    let mut c = client(SocketAddr::from(([127, 0, 0, 1], h.port))).await?;
    Ok(
        c.sign_withdrawal(sign_request(h.tenant.id, &h.withdrawal_id))
            .await?
            .into_inner(),
    )
}

async fn killed(h: &Harness, child: &mut ChildService, failpoint: &str) -> anyhow::Result<()> {
    assert!(
        sign(h).await.is_err(),
        "the signer replied instead of dying at {failpoint}: build it with `cargo build --workspace --bins`"
    );
    assert!(
        child
            .wait_exit(Duration::from_secs(10))
            .is_some_and(|s| !s.success())
    );
    Ok(())
}

async fn state(h: &Harness) -> anyhow::Result<String> {
    let (state,): (String,) = sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
        .bind(h.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(h.stack.admin.pool())
        .await?;
    Ok(state)
}

#[tokio::test]
async fn control_06_killed_after_signing_before_commit_signs_once_with_the_same_nonce()
-> anyhow::Result<()> {
    let h = harness().await?;
    let mut child = start(&h, "sign.after_sign=abort").await?;
    killed(&h, &mut child, "sign.after_sign").await?;
    // The signature died with the process: nothing persisted, no nonce taken, claim still leased.
    assert_eq!(attempts(&h.stack, &h.withdrawal_id).await?, 0);
    let (nonces,): (i64,) = sqlx::query_as("SELECT count(*) FROM signer_nonces")
        .fetch_one(h.stack.admin.pool())
        .await?;
    assert_eq!(nonces, 0);
    assert_eq!(state(&h).await?, "SIGNING");

    // Restarted; the 1 s lease has expired, so the claim is reclaimed and signed, once.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut child = start(&h, "").await?;
    let signed = sign(&h).await?;
    assert!(!signed.already_signed);
    let attempt = signed.attempt.expect("attempt");
    assert_eq!(
        attempt.nonce, 0,
        "the nonce the lost signature would have used"
    );
    assert_eq!(attempts(&h.stack, &h.withdrawal_id).await?, 1);
    assert_eq!(state(&h).await?, "SIGNED");
    let again = sign(&h).await?;
    assert!(again.already_signed);
    assert_eq!(
        again.attempt.map(|a| a.raw_transaction),
        Some(attempt.raw_transaction)
    );
    let log = child.log_tail(10_000);
    assert!(
        !log.contains(ALICE) && !log.contains(&attempt.tx_hash),
        "no address or tx hash in the log"
    );
    child.kill();
    h.stack.assert_invariants().await
}

#[tokio::test]
async fn control_06_killed_after_commit_before_reply_returns_the_stored_bytes() -> anyhow::Result<()>
{
    let h = harness().await?;
    let mut child = start(&h, "sign.after_commit=abort").await?;
    killed(&h, &mut child, "sign.after_commit").await?;
    assert_eq!(
        attempts(&h.stack, &h.withdrawal_id).await?,
        1,
        "persisted before any reply"
    );
    let (stored,): (Vec<u8>,) = sqlx::query_as("SELECT raw_tx FROM tx_attempts WHERE op_id = $1")
        .bind(h.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(h.stack.admin.pool())
        .await?;
    let mut child = start(&h, "").await?;
    let signed = sign(&h).await?;
    assert!(signed.already_signed, "no second signature");
    assert_eq!(
        signed.attempt.map(|a| a.raw_transaction),
        Some(stored),
        "exactly the stored bytes"
    );
    assert_eq!(attempts(&h.stack, &h.withdrawal_id).await?, 1);
    child.kill();
    h.stack.assert_invariants().await
}

#[tokio::test]
async fn control_06_killed_after_claim_is_reclaimed_only_after_the_lease() -> anyhow::Result<()> {
    // A lease long enough to outlast the restart on a loaded machine.
    const LEASE_SECS: u64 = 5;
    let h = harness_with_lease(LEASE_SECS).await?;
    let mut child = start(&h, "sign.after_claim=abort").await?;
    killed(&h, &mut child, "sign.after_claim").await?;
    assert_eq!(state(&h).await?, "SIGNING");
    let mut child = start(&h, "").await?;
    // Immediately: the lease is live, so this is a clear, retryable conflict.
    let mut c = client(SocketAddr::from(([127, 0, 0, 1], h.port))).await?;
    let err = c
        .sign_withdrawal(sign_request(h.tenant.id, &h.withdrawal_id))
        .await
        .expect_err("leased");
    assert_eq!(err.code(), tonic::Code::Aborted);
    tokio::time::sleep(Duration::from_millis(LEASE_SECS * 1000 + 200)).await;
    let signed = sign(&h).await?;
    assert_eq!(signed.attempt.map(|a| a.nonce), Some(0));
    assert_eq!(attempts(&h.stack, &h.withdrawal_id).await?, 1);
    child.kill();
    Ok(())
}
