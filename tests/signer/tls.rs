//! Mutual TLS on the signer's port: only a client holding a certificate from the configured
//! caller CA can reach it at all; the caller token is still required on top.

use opledger_signer::config::TlsConfig;
use opledger_tests::signer::{InProcessSigner, approve, client, sign_request};
use opledger_tests::tls::{Pem, ca, dir, leaf, write};
use opledger_tests::{ALICE, Stack, reason};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

async fn channel(port: u16, ca: &str, identity: Option<&Pem>) -> anyhow::Result<Channel> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some(id) = identity {
        tls = tls.identity(Identity::from_pem(&id.cert, &id.key));
    }
    Ok(Channel::from_shared(format!("https://127.0.0.1:{port}"))?
        .tls_config(tls)?
        .connect()
        .await?)
}

#[tokio::test]
async fn only_the_named_caller_reaches_a_signer_with_mutual_tls() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;

    let (server_ca, caller_ca, rogue_ca) = (ca()?, ca()?, ca()?);
    let server = leaf("localhost", &server_ca)?;
    let broadcaster = leaf("broadcaster", &caller_ca)?;
    let rogue = leaf("broadcaster", &rogue_ca)?;
    let dir = dir()?;
    let tls = TlsConfig {
        cert: write(&dir, "server.pem", &server.cert)?,
        key: write(&dir, "server.key", &server.key)?,
        client_ca: Some(write(&dir, "callers.pem", &caller_ca.pem())?),
    };
    let signer =
        InProcessSigner::start_tls(&stack.db, acme.id, opledger_signer::tls_config(&tls)?).await?;
    let port = signer.addr.port();
    let server_ca_pem = server_ca.pem();

    // The named caller, with its certificate and the caller token: signed.
    let mut ok = opledger_proto::v1::signer_service_client::SignerServiceClient::new(
        channel(port, &server_ca_pem, Some(&broadcaster)).await?,
    );
    let signed = ok
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?
        .into_inner();
    assert!(signed.attempt.is_some());
    // The named caller without the token: the TLS layer lets it in, the token check does not.
    let err = ok
        .sign_withdrawal(tonic::Request::new(
            opledger_proto::v1::SignWithdrawalRequest {
                tenant_id: acme.id.to_string(),
                withdrawal_id: w.withdrawal_id.clone(),
            },
        ))
        .await
        .expect_err("token required");
    assert_eq!(reason(&err), "CREDENTIALS_MISSING");

    // No client certificate, a certificate from another CA, or plaintext: never reaches a handler.
    for identity in [None, Some(&rogue)] {
        let refused = match channel(port, &server_ca_pem, identity).await {
            Err(_) => true,
            Ok(ch) => opledger_proto::v1::signer_service_client::SignerServiceClient::new(ch)
                .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
                .await
                .is_err_and(|e| {
                    e.code() == tonic::Code::Unavailable || e.code() == tonic::Code::Unknown
                }),
        };
        assert!(
            refused,
            "a caller without the caller CA's certificate got through"
        );
    }
    let plaintext = match client(signer.addr).await {
        Err(_) => true,
        Ok(mut c) => c
            .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
            .await
            .is_err(),
    };
    assert!(plaintext, "plaintext reached a TLS-only signer");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
