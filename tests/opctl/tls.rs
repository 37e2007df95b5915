//! opctl over TLS, and a man in the middle between an approver and the services: `https://`
//! trusts only the CA of `--ca-file` (a certificate another CA issued is refused), and clear-text
//! `http://` to a host that is not loopback is refused before anything connects unless
//! `--allow-clear-text` says otherwise.

use super::Opctl;
use opledger_tests::tls::{Pem, ca, dir, leaf, write};
use opledger_tests::{ALICE, Stack};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A TLS front on 127.0.0.1 in front of a plain gRPC service, presenting `server` and offering
/// HTTP/2 by ALPN (as a gRPC ingress does); stops when dropped.
#[derive(Debug)]
struct TlsFront {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsFront {
    async fn start(upstream: SocketAddr, server: &Pem) -> anyhow::Result<TlsFront> {
        let certs = CertificateDer::pem_slice_iter(server.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes())?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if let Ok(mut service) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut service).await;
                    }
                });
            }
        });
        Ok(TlsFront { addr, task })
    }

    /// `https://localhost:<port>` (the name the certificate carries).
    fn url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_approves_over_tls_trusting_only_the_ca_of_ca_file() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "1000000000000000000")
        .await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    let id = w.withdrawal_id.as_str();

    let ours = ca()?;
    let server = leaf("localhost", &ours)?;
    let folder = dir()?;
    let ca_file = write(&folder, "ca.pem", &ours.pem())?;
    let ca_file = ca_file.to_string_lossy().into_owned();
    let operations = TlsFront::start(stack.addr, &server).await?;
    let approvals = TlsFront::start(stack.approvals_addr, &server).await?;
    let opctl = Opctl::new(&stack, &acme)
        .with_url("--operations", operations.url())
        .with_url("--approvals", approvals.url());

    // https:// without a CA to trust: refused before connecting.
    let run = opctl
        .run(Some(&acme.approver), &["get", id])
        .await?
        .expect(2)?;
    assert!(run.stderr.contains("--ca-file"), "{}", run.stderr);

    let shown = opctl
        .run(Some(&acme.approver), &["get", id, "--ca-file", &ca_file])
        .await?
        .expect(0)?;
    assert!(shown.stdout.contains(&w.payload_hash), "{}", shown.stdout);
    let approved = opctl
        .clone()
        .env("OPCTL_CA_FILE", &ca_file)
        .run(Some(&acme.approver), &["--json", "approve", id])
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(approved["state"], "APPROVED");
    assert_eq!(stack.state(id).await?, "APPROVED");
    std::fs::remove_dir_all(&folder)?;
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn man_in_the_middle_with_a_certificate_from_another_ca_gets_no_approval()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "1000000000000000000")
        .await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    let id = w.withdrawal_id.as_str();

    // The approver trusts our CA; the interceptor presents a valid certificate for the right
    // name from another CA (a public one, say).
    let ours = ca()?;
    let theirs = ca()?;
    let folder = dir()?;
    let ca_file = write(&folder, "ca.pem", &ours.pem())?;
    let ca_file = ca_file.to_string_lossy().into_owned();
    let intercepting = leaf("localhost", &theirs)?;
    let operations = TlsFront::start(stack.addr, &intercepting).await?;
    let approvals = TlsFront::start(stack.approvals_addr, &intercepting).await?;
    let opctl = Opctl::new(&stack, &acme)
        .with_url("--operations", operations.url())
        .with_url("--approvals", approvals.url());
    for args in [
        &["get", id, "--ca-file", &ca_file][..],
        &["approve", id, "--ca-file", &ca_file],
    ] {
        let run = opctl.run(Some(&acme.approver), args).await?.expect(3)?;
        assert!(
            run.stderr
                .starts_with("error: UNAVAILABLE: cannot connect to the operations service"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
    assert_eq!(stack.state(id).await?, "REQUESTED");
    std::fs::remove_dir_all(&folder)?;
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_text_to_a_host_that_is_not_loopback_is_refused_before_connecting()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let nobody = uuid::Uuid::now_v7().to_string();
    // 192.0.2.1 (TEST-NET-1) answers nobody: an attempt to connect would end in exit 3.
    let off_loopback = "http://192.0.2.1:15051";
    let opctl = Opctl::new(&stack, &acme).with_url("--operations", off_loopback.to_owned());
    for json in [false, true] {
        let mut args = vec!["--timeout", "2", "get", &nobody];
        if json {
            args.insert(0, "--json");
        }
        let run = opctl.run(Some(&acme.approver), &args).await?.expect(2)?;
        if json {
            assert_eq!(run.json()?["error"]["reason"], "CLEAR_TEXT_NOT_ALLOWED");
        } else {
            assert!(
                run.stderr
                    .starts_with("error: CLEAR_TEXT_NOT_ALLOWED: --operations: http:// "),
                "{}",
                run.stderr
            );
        }
    }
    let run = opctl
        .run(
            Some(&acme.approver),
            &["--timeout", "2", "approve", &nobody],
        )
        .await?
        .expect(2)?;
    assert!(
        run.stderr.starts_with("error: CLEAR_TEXT_NOT_ALLOWED: "),
        "{}",
        run.stderr
    );
    // With the explicit flag opctl does try (and, nobody answering, ends transient).
    opctl
        .run(
            Some(&acme.approver),
            &["--timeout", "1", "--allow-clear-text", "get", &nobody],
        )
        .await?
        .expect(3)?;
    // Loopback stays clear text without the flag (the default URLs, a local tunnel).
    Opctl::new(&stack, &acme)
        .with_url(
            "--operations",
            format!("http://localhost:{}", stack.addr.port()),
        )
        .run(Some(&acme.approver), &["get", &nobody])
        .await?
        .expect(1)?;
    Ok(())
}
