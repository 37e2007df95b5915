//! Control 12: privacy ownership is defined (docs/privacy.md names an owner, a retention and the
//! log handling for every sensitive kind of data, and its retention figures are the ones the code
//! uses), and a log sample from real service processes holds none of the identifiers in clear.

use crate::repo_file;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_proto::v1::{CreateWithdrawalRequest, CreditAccountRequest, SignedCreditStatement};
use opledger_testkit::{ChildService, free_port, wait_for_tcp};
use opledger_tests::inbox::{ALL_TYPES, Endpoint, Sender, body_keys, deposit, endpoint};
use opledger_tests::{Stack, authed, payload};
use std::net::SocketAddr;
use std::time::Duration;

/// The privacy table's rows: (data, owner, retention, log handling).
fn privacy_rows(doc: &str) -> Vec<(String, String, String, String)> {
    doc.lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.starts_with("| data"))
        .filter_map(|l| {
            let cells: Vec<String> = l.split('|').map(|c| c.trim().to_owned()).collect();
            (cells.len() >= 7).then(|| {
                (
                    cells[1].clone(),
                    cells[3].clone(),
                    cells[4].clone(),
                    cells[5].clone(),
                )
            })
        })
        .collect()
}

#[test]
fn control_12_every_sensitive_kind_of_data_has_an_owner_retention_and_log_rule()
-> anyhow::Result<()> {
    let doc = repo_file("docs/privacy.md")?;
    let rows = privacy_rows(&doc);
    for needed in [
        "idempotency keys",
        "destination addresses",
        "memos",
        "transaction references",
        "raw webhook bodies",
        "webhook endpoint secrets",
        "operator and approver notes",
        "API keys",
        "signing keys",
        "deposit evidence",
        "deposit addresses",
        "credit ids",
    ] {
        let row = rows
            .iter()
            .find(|r| r.0.starts_with(needed))
            .ok_or_else(|| anyhow::anyhow!("docs/privacy.md has no row for {needed}"))?;
        let owner_is_a_team =
            !row.1.is_empty() && row.1.chars().all(|c| c.is_ascii_lowercase() || c == '-');
        assert!(owner_is_a_team, "{needed}: owner {:?} is not a team", row.1);
        assert!(!row.2.is_empty(), "{needed}: no retention");
        assert!(
            row.3.starts_with("never") || row.3.contains("must not contain"),
            "{needed}: log handling {:?}",
            row.3
        );
    }
    Ok(())
}

#[test]
fn control_12_the_documented_retention_is_the_configured_retention() -> anyhow::Result<()> {
    let doc = repo_file("docs/privacy.md")?;
    let config = opledger_inbox::Config::default();
    let bodies = privacy_rows(&doc)
        .into_iter()
        .find(|r| r.0.starts_with("raw webhook bodies"))
        .ok_or_else(|| anyhow::anyhow!("no raw webhook bodies row"))?;
    assert_eq!(
        config.retention_processed_days,
        opledger_inbox::config::DEFAULT_RETENTION_PROCESSED_DAYS
    );
    assert!(
        bodies.2.contains(&format!(
            "processed events: {} days after processing (`retention_processed_days`)",
            config.retention_processed_days
        )),
        "processed retention in docs/privacy.md differs from the code: {}",
        bodies.2
    );
    assert!(
        bodies.2.contains(&format!(
            "quarantined and UNHANDLED bodies: {} days after arrival (`retention_quarantined_days`)",
            config.retention_quarantined_days
        )),
        "quarantine retention in docs/privacy.md differs from the code: {}",
        bodies.2
    );
    let refused = privacy_rows(&doc)
        .into_iter()
        .find(|r| r.0.starts_with("refused webhook requests"))
        .ok_or_else(|| anyhow::anyhow!("no refused webhook requests row"))?;
    assert!(
        refused.2.contains(&format!(
            "counts: {} days (`retention_rejections_days`)",
            config.retention_rejections_days
        )),
        "rejection retention in docs/privacy.md differs from the code: {}",
        refused.2
    );
    assert!(doc.contains(&format!(
        "every `retention_interval_secs` (default {})",
        config.retention_interval_secs
    )));
    Ok(())
}

/// Starts a real service binary on free loopback ports and waits for `wait_port`.
async fn spawn(
    bin: &str,
    env: Vec<(&str, String)>,
    wait_port: u16,
) -> anyhow::Result<ChildService> {
    let mut env = env;
    env.push(("RUST_LOG", "debug".to_owned()));
    let child = ChildService::spawn(bin, &env)?;
    wait_for_tcp(
        SocketAddr::from(([127, 0, 0, 1], wait_port)),
        Duration::from_secs(20),
    )
    .await?;
    Ok(child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_12_logs_sampled_from_real_processes_hold_no_identifiers_in_clear()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let (ops_port, inbox_http, inbox_grpc) = (free_port(), free_port(), free_port());
    let mut operations = spawn(
        "opledger-operations",
        vec![
            (
                "OPLEDGER_OPERATIONS_DATABASE_URL",
                stack.url(opledger_testkit::ServiceRole::Operations),
            ),
            (
                "OPLEDGER_OPERATIONS_LISTEN",
                format!("127.0.0.1:{ops_port}"),
            ),
            (
                "OPLEDGER_OPERATIONS_METRICS_LISTEN",
                "127.0.0.1:0".to_owned(),
            ),
        ],
        ops_port,
    )
    .await?;
    let mut inbox = spawn(
        "opledger-inbox",
        vec![
            (
                "OPLEDGER_INBOX_DATABASE_URL",
                stack.url(opledger_testkit::ServiceRole::Inbox),
            ),
            ("OPLEDGER_INBOX_LISTEN", format!("127.0.0.1:{inbox_grpc}")),
            (
                "OPLEDGER_INBOX_HTTP_LISTEN",
                format!("127.0.0.1:{inbox_http}"),
            ),
            ("OPLEDGER_INBOX_METRICS_LISTEN", "127.0.0.1:0".to_owned()),
            ("OPLEDGER_INBOX_BODY_KEYS", body_keys()),
            ("OPLEDGER_INBOX_POLL_INTERVAL_MS", "20".to_owned()),
        ],
        inbox_http,
    )
    .await?;

    // Traffic that touches every identifier: a create with a memo, its replay, a refused reuse,
    // a refused malformed destination; an operator credit and a refused one; webhooks accepted
    // (a deposit proposed), duplicated, quarantined, refused.
    let key = "4f6c2b8e-1d7a-4c3e-9b0f-7a5d2e8c1b93".to_owned();
    let destination = "0x8ba1f109551bd432803012645ac136ddd64dba72";
    let memo = "invoice-7731-jane-doe";
    let mut body = payload("100", destination);
    body.memo = Some(memo.to_owned());
    let mut client =
        OperationsServiceClient::connect(format!("http://127.0.0.1:{ops_port}")).await?;
    let request = CreateWithdrawalRequest {
        idempotency_key: key.clone(),
        payload: Some(body.clone()),
    };
    client
        .create_withdrawal(authed(&acme.client, request.clone()))
        .await?;
    client
        .create_withdrawal(authed(&acme.client, request))
        .await?;
    let mut changed = body.clone();
    changed.amount = "101".to_owned();
    let refused = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: key.clone(),
                payload: Some(changed),
            },
        ))
        .await;
    assert!(refused.is_err());
    let mut bad = body.clone();
    bad.destination = format!("{destination}zz");
    assert!(
        client
            .create_withdrawal(authed(
                &acme.client,
                CreateWithdrawalRequest {
                    idempotency_key: uuid::Uuid::new_v4().to_string(),
                    payload: Some(bad),
                },
            ))
            .await
            .is_err()
    );
    // An operator credit (proposed, pending a witness) and one whose statement signs another
    // amount (refused at the edge): the credit path sees the same idempotency key.
    let credit_key = "9a3e7c51-58d2-4f0b-8e6a-2c4b1d9f7e05".to_owned();
    let signer = opledger_testkit::trust::operator_key(acme.id, 0);
    let credit_id = opledger_domain::idempotency::IdempotencyKey::parse(&credit_key)?.digest();
    let statement = |amount: u128| -> anyhow::Result<SignedCreditStatement> {
        Ok(SignedCreditStatement {
            operator_key_id: opledger_testkit::trust::key_id(&signer).to_hex(),
            policy_version: 1,
            signature: opledger_testkit::trust::signed_credit(
                acme.id, &credit_id, "treasury", "ETH", amount, &signer, 1,
            )?,
        })
    };
    for (signed, accepted) in [(5, true), (6, false)] {
        let answer = client
            .credit_account(authed(
                &acme.operator,
                CreditAccountRequest {
                    idempotency_key: credit_key.clone(),
                    account: "treasury".to_owned(),
                    asset: "ETH".to_owned(),
                    amount: "5".to_owned(),
                    statement: Some(statement(signed)?),
                },
            ))
            .await;
        assert_eq!(answer.is_ok(), accepted, "{answer:?}");
    }
    let ep: Endpoint = endpoint(&stack, &acme, "chainwatch", &ALL_TYPES).await?;
    let sender = Sender::new(SocketAddr::from(([127, 0, 0, 1], inbox_http)));
    let event_id = "msg_2Zc9privacySampleEvent";
    let deposit_id = "0xdeadbeefdeposit-for-jane";
    let first = deposit(deposit_id, "treasury", "ETH", "5");
    assert_eq!(sender.send(&ep, event_id, &first).await?.0, 200);
    assert_eq!(sender.send(&ep, event_id, &first).await?.0, 200);
    let altered = deposit(deposit_id, "treasury", "ETH", "6");
    assert_eq!(sender.send(&ep, event_id, &altered).await?.0, 200);
    let mut stranger = ep.clone();
    stranger.secret = opledger_webhook::secret::SigningSecret::generate();
    assert_eq!(sender.send(&stranger, "msg_other", &first).await?.0, 401);
    tokio::time::sleep(Duration::from_millis(300)).await;
    operations.terminate()?;
    inbox.terminate()?;

    let mut sampled = 0;
    let secret_text = ep.secret.to_whsec_string();
    let api_secret = acme
        .client
        .rsplit('_')
        .next()
        .unwrap_or_default()
        .to_owned();
    let forbidden = [
        key.as_str(),
        credit_key.as_str(),
        destination,
        &destination.to_ascii_uppercase()[2..],
        memo,
        event_id,
        deposit_id,
        &ep.id,
        secret_text.as_str(),
        api_secret.as_str(),
    ];
    for child in [&operations, &inbox] {
        let log = std::fs::read_to_string(child.log_path())?;
        for line in log.lines().filter(|l| !l.trim().is_empty()) {
            let _: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                anyhow::anyhow!("{}: not a JSON log line ({e}): {line}", child.name())
            })?;
            for needle in forbidden {
                assert!(
                    !line.contains(needle),
                    "{} logged an identifier in clear: {line}",
                    child.name()
                );
            }
            sampled += 1;
        }
    }
    assert!(sampled >= 10, "only {sampled} log lines sampled");
    Ok(())
}
