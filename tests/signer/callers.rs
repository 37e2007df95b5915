//! Scoped signer callers: each caller token holds only its own capabilities (broadcaster:
//! signatures and fee bumps; reconciler: cancels), and the signer itself checks, under the
//! operation's row lock, that a fee bump is of a BROADCAST withdrawal and a cancel of an UNKNOWN
//! one, each only once its latest attempt is older than the signer's own window. The adversary
//! holds one caller's token (it took over the broadcaster's or the reconciler's host) and asks for
//! what that caller may not do: every refusal is PERMISSION_DENIED / CALLER_NOT_ALLOWED, a
//! security event naming the caller, no attempt written and the state unchanged.

use opledger_domain::ids::TenantId;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_proto::v1::{self as pb, AttemptKind};
use opledger_signer::config::TlsConfig;
use opledger_tests::signer::{
    BROADCASTER_TOKEN, InProcessSigner, RECONCILER_TOKEN, approve, attempts, callers, client,
    production_windows,
};
use opledger_tests::tls::{Pem, ca, dir, leaf, write};
use opledger_tests::{ALICE, Stack, Tenant, authed, reason};
use sha2::{Digest, Sha256};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic_types::StatusExt;

/// The production windows the signer enforces (`Config::default()`): 30 s and 300 s.
const FEE_BUMP_WINDOW: i64 = 30;
const CANCEL_WINDOW: i64 = 300;

fn sign(
    token: &str,
    tenant: TenantId,
    w: &pb::Withdrawal,
) -> tonic::Request<pb::SignWithdrawalRequest> {
    authed(
        token,
        pb::SignWithdrawalRequest {
            tenant_id: tenant.to_string(),
            withdrawal_id: w.withdrawal_id.clone(),
        },
    )
}

fn replace(
    token: &str,
    tenant: TenantId,
    w: &pb::Withdrawal,
    kind: AttemptKind,
) -> tonic::Request<pb::SignReplacementRequest> {
    authed(
        token,
        pb::SignReplacementRequest {
            tenant_id: tenant.to_string(),
            withdrawal_id: w.withdrawal_id.clone(),
            kind: kind as i32,
        },
    )
}

/// A funded tenant with one APPROVED withdrawal.
async fn approved(stack: &Stack) -> anyhow::Result<(Tenant, pb::Withdrawal)> {
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(stack, &acme, &w).await?;
    Ok((acme, w))
}

/// Signs the withdrawal with the broadcaster's token (SIGNED, one attempt).
async fn signed(
    client: &mut SignerServiceClient<Channel>,
    tenant: TenantId,
    w: &pb::Withdrawal,
) -> anyhow::Result<()> {
    let done = client
        .sign_withdrawal(sign(BROADCASTER_TOKEN, tenant, w))
        .await?
        .into_inner();
    anyhow::ensure!(done.attempt.is_some(), "signed");
    Ok(())
}

/// Makes every attempt of the operation `secs` seconds old (privileged SQL past the attempts'
/// immutability trigger).
async fn age_attempts(stack: &Stack, w: &pb::Withdrawal, secs: i64) -> anyhow::Result<()> {
    let admin = stack.db.admin_pool().await?;
    let mut tx = admin.begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    let aged = sqlx::query(
        "UPDATE tx_attempts SET created_at = now() - $2::bigint * interval '1 second' \
         WHERE op_id = $1",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .bind(secs)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    anyhow::ensure!(aged > 0, "attempts aged");
    Ok(())
}

async fn state(stack: &Stack, w: &pb::Withdrawal) -> anyhow::Result<String> {
    let (state,): (String,) = sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
        .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(stack.admin.pool())
        .await?;
    Ok(state)
}

/// `SIGNER_CALLER_NOT_ALLOWED` events of the operation recorded against `caller`.
async fn refusals(stack: &Stack, w: &pb::Withdrawal, caller: &str) -> anyhow::Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM security_events WHERE op_id = $1 \
           AND kind = 'SIGNER_CALLER_NOT_ALLOWED' AND actor = 'signer' AND actor_id = $2",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .bind(caller)
    .fetch_one(stack.admin.pool())
    .await?;
    Ok(n)
}

/// What every refusal must show: the code and reason, what was missing, no new attempt, one more
/// security event naming the caller, the state unchanged.
struct Before {
    attempts: i64,
    events: i64,
    state: String,
}

async fn before(stack: &Stack, w: &pb::Withdrawal, caller: &str) -> anyhow::Result<Before> {
    Ok(Before {
        attempts: attempts(stack, &w.withdrawal_id).await?,
        events: refusals(stack, w, caller).await?,
        state: state(stack, w).await?,
    })
}

async fn assert_refused(
    stack: &Stack,
    w: &pb::Withdrawal,
    caller: &str,
    then: Before,
    result: Result<tonic::Response<pb::SignResponse>, tonic::Status>,
    missing: &str,
) -> anyhow::Result<()> {
    let err = result.expect_err("the signer must refuse");
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    assert_eq!(reason(&err), "CALLER_NOT_ALLOWED");
    let info = err.get_error_details().error_info().cloned().expect("info");
    assert_eq!(
        info.metadata.get("missing").map(String::as_str),
        Some(missing),
        "{info:?}"
    );
    assert_eq!(
        attempts(stack, &w.withdrawal_id).await?,
        then.attempts,
        "nothing was signed"
    );
    assert_eq!(
        refusals(stack, w, caller).await?,
        then.events + 1,
        "the refusal is a security event naming the caller"
    );
    assert_eq!(state(stack, w).await?, then.state, "state unchanged");
    Ok(())
}

#[tokio::test]
async fn broadcaster_token_cannot_cancel_a_healthy_withdrawal() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    signed(&mut client, acme.id, &w).await?;
    // In flight and long past every window: only the reconciler may cancel, and only UNKNOWN.
    stack.force_state(&w.withdrawal_id, "BROADCAST").await?;
    age_attempts(&stack, &w, 10 * CANCEL_WINDOW).await?;
    for at in ["BROADCAST", "UNKNOWN"] {
        stack.force_state(&w.withdrawal_id, at).await?;
        let then = before(&stack, &w, "broadcaster").await?;
        let result = client
            .sign_replacement(replace(BROADCASTER_TOKEN, acme.id, &w, AttemptKind::Cancel))
            .await;
        assert_refused(&stack, &w, "broadcaster", then, result, "capability").await?;
    }
    Ok(())
}

#[tokio::test]
async fn reconciler_token_cannot_fee_bump_or_sign() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    // An APPROVED withdrawal: the reconciler's token cannot get it signed.
    let then = before(&stack, &w, "reconciler").await?;
    let result = client
        .sign_withdrawal(sign(RECONCILER_TOKEN, acme.id, &w))
        .await;
    assert_refused(&stack, &w, "reconciler", then, result, "capability").await?;
    assert_eq!(state(&stack, &w).await?, "APPROVED");
    // Nor a fee bump of a BROADCAST one past the window (fresh raw bytes of a live payout).
    signed(&mut client, acme.id, &w).await?;
    stack.force_state(&w.withdrawal_id, "BROADCAST").await?;
    age_attempts(&stack, &w, 10 * CANCEL_WINDOW).await?;
    let then = before(&stack, &w, "reconciler").await?;
    let result = client
        .sign_replacement(replace(RECONCILER_TOKEN, acme.id, &w, AttemptKind::FeeBump))
        .await;
    assert_refused(&stack, &w, "reconciler", then, result, "capability").await?;
    // Nor the stored signed bytes of the now SIGNED withdrawal, which SignWithdrawal would replay.
    let then = before(&stack, &w, "reconciler").await?;
    let result = client
        .sign_withdrawal(sign(RECONCILER_TOKEN, acme.id, &w))
        .await;
    assert_refused(&stack, &w, "reconciler", then, result, "capability").await?;
    Ok(())
}

#[tokio::test]
async fn reconciler_token_cannot_cancel_a_broadcast_withdrawal_or_one_inside_the_cancel_window()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    signed(&mut client, acme.id, &w).await?;
    // UNKNOWN, but its attempt is only just inside the cancel window.
    stack.force_state(&w.withdrawal_id, "UNKNOWN").await?;
    age_attempts(&stack, &w, CANCEL_WINDOW - 20).await?;
    let then = before(&stack, &w, "reconciler").await?;
    let result = client
        .sign_replacement(replace(RECONCILER_TOKEN, acme.id, &w, AttemptKind::Cancel))
        .await;
    assert_refused(&stack, &w, "reconciler", then, result, "age").await?;
    // Past the window but SIGNED or BROADCAST (a healthy payout): refused on the state.
    age_attempts(&stack, &w, 10 * CANCEL_WINDOW).await?;
    for at in ["SIGNED", "BROADCAST"] {
        stack.force_state(&w.withdrawal_id, at).await?;
        let then = before(&stack, &w, "reconciler").await?;
        let result = client
            .sign_replacement(replace(RECONCILER_TOKEN, acme.id, &w, AttemptKind::Cancel))
            .await;
        assert_refused(&stack, &w, "reconciler", then, result, "state").await?;
    }
    Ok(())
}

#[tokio::test]
async fn broadcaster_token_cannot_fee_bump_before_the_window_or_outside_broadcast()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    // Not signed yet: nothing to bump.
    let then = before(&stack, &w, "broadcaster").await?;
    let result = client
        .sign_replacement(replace(
            BROADCASTER_TOKEN,
            acme.id,
            &w,
            AttemptKind::FeeBump,
        ))
        .await;
    assert_refused(&stack, &w, "broadcaster", then, result, "state").await?;
    signed(&mut client, acme.id, &w).await?;
    // BROADCAST, attempt just persisted: inside the fee bump window.
    stack.force_state(&w.withdrawal_id, "BROADCAST").await?;
    let then = before(&stack, &w, "broadcaster").await?;
    let result = client
        .sign_replacement(replace(
            BROADCASTER_TOKEN,
            acme.id,
            &w,
            AttemptKind::FeeBump,
        ))
        .await;
    assert_refused(&stack, &w, "broadcaster", then, result, "age").await?;
    // Past the window, but SIGNED or UNKNOWN: refused on the state.
    age_attempts(&stack, &w, 10 * FEE_BUMP_WINDOW).await?;
    for at in ["SIGNED", "UNKNOWN"] {
        stack.force_state(&w.withdrawal_id, at).await?;
        let then = before(&stack, &w, "broadcaster").await?;
        let result = client
            .sign_replacement(replace(
                BROADCASTER_TOKEN,
                acme.id,
                &w,
                AttemptKind::FeeBump,
            ))
            .await;
        assert_refused(&stack, &w, "broadcaster", then, result, "state").await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_caller_holding_every_capability_still_meets_the_signers_state_and_window()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    signed(&mut client, acme.id, &w).await?;
    stack.force_state(&w.withdrawal_id, "UNKNOWN").await?;
    let token = opledger_tests::signer::CALLER_TOKEN;
    let then = before(&stack, &w, "test-caller").await?;
    let result = client
        .sign_replacement(replace(token, acme.id, &w, AttemptKind::Cancel))
        .await;
    assert_refused(&stack, &w, "test-caller", then, result, "age").await?;
    Ok(())
}

#[tokio::test]
async fn reconciler_cancel_of_an_unknown_withdrawal_past_the_window_is_signed() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    signed(&mut client, acme.id, &w).await?;
    stack.force_state(&w.withdrawal_id, "UNKNOWN").await?;
    age_attempts(&stack, &w, CANCEL_WINDOW + 5).await?;
    let cancel = client
        .sign_replacement(replace(RECONCILER_TOKEN, acme.id, &w, AttemptKind::Cancel))
        .await?
        .into_inner()
        .attempt
        .expect("cancel");
    assert_eq!(
        (cancel.attempt, cancel.kind),
        (2, AttemptKind::Cancel as i32)
    );
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 2);
    assert_eq!(refusals(&stack, &w, "reconciler").await?, 0);
    assert_eq!(state(&stack, &w).await?, "UNKNOWN");
    Ok(())
}

#[tokio::test]
async fn broadcaster_bump_of_a_broadcast_withdrawal_past_the_window_is_signed() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    signed(&mut client, acme.id, &w).await?;
    stack.force_state(&w.withdrawal_id, "BROADCAST").await?;
    age_attempts(&stack, &w, FEE_BUMP_WINDOW + 5).await?;
    let bump = client
        .sign_replacement(replace(
            BROADCASTER_TOKEN,
            acme.id,
            &w,
            AttemptKind::FeeBump,
        ))
        .await?
        .into_inner()
        .attempt
        .expect("bump");
    assert_eq!((bump.attempt, bump.kind), (2, AttemptKind::FeeBump as i32));
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 2);
    assert_eq!(refusals(&stack, &w, "broadcaster").await?, 0);
    // The new attempt restarts the window: an immediate second bump is refused.
    let then = before(&stack, &w, "broadcaster").await?;
    let result = client
        .sign_replacement(replace(
            BROADCASTER_TOKEN,
            acme.id,
            &w,
            AttemptKind::FeeBump,
        ))
        .await;
    assert_refused(&stack, &w, "broadcaster", then, result, "age").await?;
    Ok(())
}

#[tokio::test]
async fn an_unknown_token_stays_unauthenticated() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let signer = InProcessSigner::start_with_production_windows(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    let err = client
        .sign_withdrawal(sign("not-a-caller-token", acme.id, &w))
        .await
        .expect_err("unknown token");
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    assert_eq!(reason(&err), "CREDENTIALS_INVALID");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 0);
    Ok(())
}

fn der_sha256(pem: &Pem) -> anyhow::Result<String> {
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let der = CertificateDer::from_pem_slice(pem.cert.as_bytes())?;
    Ok(hex::encode(Sha256::digest(der.as_ref())))
}

async fn tls_client(
    port: u16,
    ca: &str,
    identity: &Pem,
) -> anyhow::Result<SignerServiceClient<Channel>> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost")
        .identity(Identity::from_pem(&identity.cert, &identity.key));
    let channel = Channel::from_shared(format!("https://127.0.0.1:{port}"))?
        .tls_config(tls)?
        .connect()
        .await?;
    Ok(SignerServiceClient::new(channel))
}

#[tokio::test]
async fn a_token_bound_to_a_client_certificate_is_refused_without_it() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, w) = approved(&stack).await?;
    let (server_ca, caller_ca) = (ca()?, ca()?);
    let server = leaf("localhost", &server_ca)?;
    // Two certificates from the same caller CA: the CA alone would admit both.
    let broadcaster_cert = leaf("broadcaster", &caller_ca)?;
    let reconciler_cert = leaf("reconciler", &caller_ca)?;
    let bound = der_sha256(&broadcaster_cert)?;
    let bind = move |config: &mut opledger_signer::Config| {
        production_windows(config);
        let mut all = callers();
        for c in &mut all {
            if c.name == "broadcaster" {
                c.client_cert_sha256 = Some(bound.clone());
            }
        }
        config.callers = all;
    };

    // A plaintext signer: the bound token never comes with its certificate.
    let plain = InProcessSigner::start_configured(&stack.db, acme.id, None, bind.clone()).await?;
    let mut plain_client = client(plain.addr).await?;
    let then = before(&stack, &w, "broadcaster").await?;
    let result = plain_client
        .sign_withdrawal(sign(BROADCASTER_TOKEN, acme.id, &w))
        .await;
    assert_refused(
        &stack,
        &w,
        "broadcaster",
        then,
        result,
        "client_certificate",
    )
    .await?;
    assert_eq!(state(&stack, &w).await?, "APPROVED");

    // Mutual TLS: the stolen token with another certificate of the same CA is refused.
    let dir = dir()?;
    let tls = TlsConfig {
        cert: write(&dir, "server.pem", &server.cert)?,
        key: write(&dir, "server.key", &server.key)?,
        client_ca: Some(write(&dir, "callers.pem", &caller_ca.pem())?),
    };
    let signer = InProcessSigner::start_configured(
        &stack.db,
        acme.id,
        Some(opledger_signer::tls_config(&tls)?),
        bind,
    )
    .await?;
    let server_ca_pem = server_ca.pem();
    let mut other = tls_client(signer.addr.port(), &server_ca_pem, &reconciler_cert).await?;
    let then = before(&stack, &w, "broadcaster").await?;
    let result = other
        .sign_withdrawal(sign(BROADCASTER_TOKEN, acme.id, &w))
        .await;
    assert_refused(
        &stack,
        &w,
        "broadcaster",
        then,
        result,
        "client_certificate",
    )
    .await?;

    // The bound certificate with its token: signed.
    let mut own = tls_client(signer.addr.port(), &server_ca_pem, &broadcaster_cert).await?;
    let done = own
        .sign_withdrawal(sign(BROADCASTER_TOKEN, acme.id, &w))
        .await?
        .into_inner();
    assert!(done.attempt.is_some(), "the bound caller is signed for");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 1);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
