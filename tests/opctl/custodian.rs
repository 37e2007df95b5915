//! `opctl custodian candidates` and `opctl custodian bind` against the custodian executor's
//! operator API, served in-process over the executor's own login (`opledger_custodian`), with the
//! conformance double in the Prime profile (`no_lookup`: no lookup by our reference). The answer
//! to the withdrawal's request is lost, so it stays UNKNOWN; the operator lists the provider's
//! candidates with opctl, binds the one transaction with a reason, and a second binding is
//! refused with an explanation and a non-zero exit. The database keeps the binding and its
//! reason, once.

use super::{Opctl, serve_routes, text};
use opledger_custodian_executor::config::AccountRoute;
use opledger_testkit::free_port;
use opledger_tests::custodian::{Sim, SimWebhooks, approved_withdrawal, executor, state};
use opledger_tests::{Stack, Tenant};
use serde_json::json;
use std::net::SocketAddr;
use tokio::task::JoinHandle;

const AMOUNT: &str = "1000000000000000";

/// A tenant funded at a Prime double that loses the answer to the first request, and one approved
/// withdrawal of it that the executor sent there: UNKNOWN, never sent again.
async fn unknown_at_prime(stack: &Stack) -> anyhow::Result<(Sim, Tenant, AccountRoute, String)> {
    let lost_answer = json!({"kind": "drop_response", "nth": 1, "profile": "prime"});
    let sim = Sim::start_webhooks(SimWebhooks {
        faults: json!({"seed": 29, "rules": [lost_answer]}),
        authorization_delay_secs: 0,
        fireblocks_webhook_url: None,
        bitgo: None,
        prime: Some((None, "prime-opctl-signing-secret".to_owned())),
    })
    .await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    let account = sim.prime_account(&acme)?;
    let worker = executor(stack, "executor-opctl", vec![account.clone()]).await?;
    let (withdrawal, _) = approved_withdrawal(stack, &acme, AMOUNT).await?;
    worker.pass(16, 4).await;
    let id = withdrawal.withdrawal_id;
    anyhow::ensure!(state(stack, &id).await? == "UNKNOWN", "not UNKNOWN");
    Ok((sim, acme, account, id))
}

/// The executor's `CustodianOperatorService` over the custodian login, as the executor serves it.
async fn serve_custodian_api(
    stack: &Stack,
    account: AccountRoute,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let routes = opledger_tests::custodian::operator_routes(stack, account).await?;
    serve_routes(opledger_custodian_executor::SERVICE_NAME, routes).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_lists_a_no_lookup_withdrawals_candidates_and_binds_one_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (_sim, acme, account, id) = unknown_at_prime(&stack).await?;
    let (addr, server) = serve_custodian_api(&stack, account).await?;
    let opctl = Opctl::new(&stack, &acme).with("--custodian", addr);
    let operator = Some(acme.operator.as_str());

    // The candidates, for scripts: the one transaction the double made, nothing bound yet.
    let listed = opctl
        .run(operator, &["--json", "custodian", "candidates", &id])
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(
        (listed["withdrawal_id"].clone(), listed["state"].clone()),
        (json!(id), json!("UNKNOWN"))
    );
    assert!(listed["bound_provider_id"].is_null(), "{listed}");
    let candidates = listed["candidates"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("no candidates: {listed}"))?;
    anyhow::ensure!(candidates.len() == 1, "candidates: {listed}");
    let provider_id = text(&candidates[0]["provider_id"])?;
    let status = text(&candidates[0]["status"])?;

    // For people: the withdrawal, nothing bound, the table, and how to bind.
    let shown = opctl
        .run(operator, &["custodian", "candidates", &id])
        .await?
        .expect(0)?;
    let lines: Vec<&str> = shown.stdout.lines().collect();
    assert_eq!(
        lines.get(..3),
        Some(
            &[
                format!("withdrawal     {id}").as_str(),
                "state          UNKNOWN",
                "bound to       -",
            ][..]
        ),
        "{}",
        shown.stdout
    );
    let header = lines.get(4).copied().unwrap_or_default();
    for column in ["PROVIDER ID", "STATUS", "TX HASHES", "CREATED", "COMPLETED"] {
        assert!(header.contains(column), "{column}: {}", shown.stdout);
    }
    let row = lines.get(5).copied().unwrap_or_default();
    assert!(
        row.starts_with(&provider_id) && row.contains(&status),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .contains(&format!("opctl custodian bind {id} "))
    );

    // A client key may not list: refused with what to do, nothing shown.
    let run = opctl
        .run(Some(&acme.client), &["custodian", "candidates", &id])
        .await?
        .expect(1)?;
    assert!(
        run.stderr.starts_with("error: ROLE_NOT_ALLOWED: ")
            && run.stderr.contains("opledger-admin key create --role"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains(&provider_id) && !run.stderr.contains(&provider_id));

    // Bound with a reason.
    let why =
        "Prime console: the one transfer to this destination and amount, sent at request time";
    let bound = opctl
        .run(
            operator,
            &["custodian", "bind", &id, &provider_id, "--reason", why],
        )
        .await?
        .expect(0)?;
    assert_eq!(
        bound.stdout,
        format!("withdrawal     {id}\nbound to       {provider_id}\n")
    );

    // A second binding, of another transaction id, is refused: explained, non-zero, for
    // people and for scripts.
    let again: [&str; 6] = [
        "custodian",
        "bind",
        &id,
        "another-provider-transaction",
        "--reason",
        "a second look",
    ];
    let refused = opctl.run(operator, &again).await?.expect(1)?;
    assert!(
        refused.stderr.starts_with("error: CANDIDATE_TAKEN: ")
            && refused.stderr.contains("this withdrawal is bound already")
            && refused.stderr.contains("another withdrawal's"),
        "{}",
        refused.stderr
    );
    let mut scripted = vec!["--json"];
    scripted.extend(again);
    let refused = opctl.run(operator, &scripted).await?.expect(1)?.json()?;
    assert_eq!(
        (
            refused["error"]["code"].clone(),
            refused["error"]["reason"].clone()
        ),
        (json!("ALREADY_EXISTS"), json!("CANDIDATE_TAKEN"))
    );

    // The list now names the binding.
    let listed = opctl
        .run(operator, &["--json", "custodian", "candidates", &id])
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(listed["bound_provider_id"], json!(provider_id.as_str()));

    // The database keeps one binding, with the operator's reason.
    let kept: Vec<(String, String)> =
        sqlx::query_as("SELECT provider_id, reason FROM custodian_bindings WHERE op_id = $1::uuid")
            .bind(&id)
            .fetch_all(stack.admin.pool())
            .await?;
    assert_eq!(kept, vec![(provider_id, why.to_owned())]);
    assert_eq!(
        stack.state(&id).await?,
        "UNKNOWN",
        "a binding moves nothing"
    );

    // Nothing listening at --custodian: transient, exit 3.
    server.abort();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let run = opctl
        .run(
            operator,
            &["--custodian", &dead, "custodian", "candidates", &id],
        )
        .await?
        .expect(3)?;
    assert!(
        run.stderr
            .starts_with("error: UNAVAILABLE: cannot connect to the custodian executor service"),
        "{}",
        run.stderr
    );
    stack.assert_invariants().await
}
