//! The guards an adversarial review of the `no_lookup` binding asked for, each played by its
//! adversary:
//! - a careless operator (or the executor's login writing the binding itself) binding a paid
//!   withdrawal to the rejection of another withdrawal with the same destination and amount: the
//!   API refuses it, and a binding written anyway never releases anything;
//! - a provider naming one transaction for two withdrawals: the second is never settled on it;
//! - the executor's login storing a request body of its own: the executor derives the body
//!   again from the approved payload before every send and sends nothing else.

use crate::no_lookup::{funded, operator_api as api, prime};
use crate::witness::scalar;
use opledger_domain::state::OperationState as S;
use opledger_proto::v1 as pb;
use opledger_proto::v1::custodian_operator_service_client::CustodianOperatorServiceClient;
use opledger_store::custodian::{NewRecord, StoredRequest, custodian_move};
use opledger_store::custodian_bindings::{Bound, NewBinding};
use opledger_store::roles::CustodianStore;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::ServiceRole;
use opledger_tests::custodian::{
    Sim, approved_withdrawal, approved_withdrawal_to, chains, custodian_witness, drive_until,
    executor, state,
};
use opledger_tests::{Stack, Tenant, authed, reason};
use serde_json::json;
use std::time::{Duration, Instant};
use tonic::Code;

const AMOUNT: &str = "1000000000000000";
const WITHIN: Duration = Duration::from_secs(30);

async fn login(stack: &Stack) -> anyhow::Result<CustodianStore> {
    Ok(
        Store::connect(&stack.url(ServiceRole::Custodian), StoreConfig::default())
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?
            .custodian(),
    )
}

fn bind(op: &str, provider_id: &str) -> pb::BindCustodianCandidateRequest {
    pb::BindCustodianCandidateRequest {
        withdrawal_id: op.to_owned(),
        provider_id: provider_id.to_owned(),
        reason: "matched in the provider's console".to_owned(),
    }
}

/// The provider id of `op`'s candidate with `status`.
async fn candidate(
    api: &mut CustodianOperatorServiceClient<tonic::transport::Channel>,
    tenant: &Tenant,
    op: &str,
    status: &str,
) -> anyhow::Result<String> {
    let listed = api
        .list_custodian_candidates(authed(
            &tenant.operator,
            pb::ListCustodianCandidatesRequest {
                withdrawal_id: op.to_owned(),
            },
        ))
        .await?
        .into_inner();
    listed
        .candidates
        .iter()
        .find(|c| c.status == status)
        .map(|c| c.provider_id.clone())
        .ok_or_else(|| anyhow::anyhow!("no {status} candidate: {:?}", listed.candidates))
}

async fn escalations(stack: &Stack, op: &str) -> anyhow::Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT reason_code FROM escalations WHERE op_id = $1::uuid ORDER BY reason_code",
    )
    .bind(op)
    .fetch_all(stack.admin.pool())
    .await?)
}

/// Passes `executor` until `op` has escalated `reason` (or `WITHIN`).
async fn until_escalated(
    stack: &Stack,
    executor: &opledger_custodian_executor::Executor,
    op: &str,
    reason: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + WITHIN;
    while !escalations(stack, op).await?.iter().any(|r| r == reason) {
        anyhow::ensure!(Instant::now() < deadline, "never escalated {reason}");
        executor.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    Ok(())
}

/// Two `no_lookup` withdrawals A and B to one destination with one amount, both answers lost:
/// the provider paid A and rejected B.
struct Paired {
    sim: Sim,
    stack: Stack,
    acme: Tenant,
    account: opledger_custodian_executor::config::AccountRoute,
    executor: opledger_custodian_executor::Executor,
    destination: String,
    a: String,
    b: String,
}

impl Paired {
    async fn start() -> anyhow::Result<Paired> {
        let sim = prime(json!([{"kind": "drop_response", "nth": 1, "profile": "prime"}])).await?;
        let stack = Stack::start().await?;
        let (acme, account) = funded(&stack, &sim).await?;
        let executor = executor(&stack, "executor-1", vec![account.clone()])
            .await?
            .with_chains(chains(&sim)?);
        let destination = format!(
            "0x{}",
            hex::encode(uuid::Uuid::new_v4().as_bytes()) + "42424242"
        );
        let a = approved_withdrawal_to(&stack, &acme, AMOUNT, &destination)
            .await?
            .withdrawal_id;
        executor.pass(16, 4).await;
        // The provider pays A before B is requested.
        sim.mined_transfer(&a, WITHIN).await?;
        sim.set_faults(&json!({"seed": 5, "rules": [
            {"kind": "drop_response", "nth": 1, "profile": "prime"},
            {"kind": "reject", "profile": "prime"}
        ]}))
        .await?;
        let b = approved_withdrawal_to(&stack, &acme, AMOUNT, &destination)
            .await?
            .withdrawal_id;
        executor.pass(16, 4).await;
        Ok(Paired {
            sim,
            stack,
            acme,
            account,
            executor,
            destination,
            a,
            b,
        })
    }
}

/// Waits until the executor escalates `a`'s binding as ambiguous, then passes it and a witness
/// (with its own Prime account) a few times: nothing is proposed and `a` stays UNKNOWN. The
/// witness, for later passes.
async fn never_proposed_while_ambiguous(
    stack: &Stack,
    sim: &Sim,
    acme: &Tenant,
    executor: &opledger_custodian_executor::Executor,
    a: &str,
) -> anyhow::Result<opledger_witness::CustodianWitness> {
    until_escalated(stack, executor, a, "CUSTODIAN_BINDING_AMBIGUOUS").await?;
    let mut own = sim.prime_account(acme)?;
    own.name = "prime-witness".to_owned();
    let witness = custodian_witness(stack, sim, vec![own]).await?;
    for _ in 0..3 {
        executor.pass(16, 4).await;
        witness.tick(16).await;
    }
    let proposals = "SELECT count(*) FROM custodian_release_proposals WHERE op_id = $1::uuid";
    assert_eq!(scalar(stack, proposals, a).await?, 0);
    assert_eq!(state(stack, a).await?, "UNKNOWN");
    Ok(witness)
}

/// The review's money-loss path. Two withdrawals to one destination, same amount, both answers
/// lost: the provider paid A and rejected B. A's candidates are both transactions.
#[tokio::test]
async fn a_paid_withdrawal_bound_to_another_withdrawals_rejection_is_never_released()
-> anyhow::Result<()> {
    let Paired {
        sim,
        stack,
        acme,
        account,
        executor,
        destination,
        a,
        b,
    } = Paired::start().await?;
    assert_eq!(state(&stack, &a).await?, "UNKNOWN");
    assert_eq!(state(&stack, &b).await?, "UNKNOWN");

    let mut api = api(&stack, account).await?;
    let paid = candidate(&mut api, &acme, &a, "TRANSACTION_DONE").await?;
    let rejected = candidate(&mut api, &acme, &a, "TRANSACTION_REJECTED").await?;
    // The wrong binding is refused while the payment is bound to no withdrawal, and so is B's
    // right one: either rejection may be the withdrawal that was paid.
    for (op, id) in [(&a, &rejected), (&b, &rejected)] {
        let err = api
            .bind_custodian_candidate(authed(&acme.operator, bind(op, id)))
            .await
            .expect_err("ambiguous");
        assert_eq!(
            (err.code(), reason(&err).as_str()),
            (Code::FailedPrecondition, "CANDIDATE_AMBIGUOUS")
        );
    }
    let bindings = "SELECT count(*) FROM custodian_bindings WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, bindings, &a).await?, 0);

    // Written anyway (the executor's login, past the API): the executor concludes nothing,
    // escalates, and the witness has nothing to attest; A is never released.
    let wrong = NewBinding {
        provider_id: &rejected,
        status: "TRANSACTION_REJECTED",
        tx_hashes: &[],
        answer_sha256: [0; 32],
        operator_key_id: "forged",
        reason: "past the API",
        executor_id: "rogue",
        record: None,
    };
    let store = login(&stack).await?;
    assert_eq!(
        store
            .bind_custodian_transaction(acme.id, a.parse()?, &wrong)
            .await?,
        Bound::Recorded
    );
    let witness = never_proposed_while_ambiguous(&stack, &sim, &acme, &executor, &a).await?;

    // B bound to the payment accounts for it (its hold is open): A's rejection now reads, and A
    // is released once the witness attests. B never settles on it: the payment was on chain
    // before B was requested (PAYOUT_BEFORE_REQUEST, a security event), and B's hold keeps the
    // amount the chain paid held.
    api.bind_custodian_candidate(authed(&acme.operator, bind(&b, &paid)))
        .await?;
    sim.anvil()?.mine(3).await?;
    until_escalated(&stack, &executor, &b, "CUSTODIAN_TRANSACTION_CONTRADICTED").await?;
    let detail: String = sqlx::query_scalar(
        "SELECT detail FROM security_events WHERE op_id = $1::uuid \
         AND kind = 'CUSTODIAN_TRANSACTION_CONTRADICTED'",
    )
    .bind(&b)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(detail, "PAYOUT_BEFORE_REQUEST");
    let deadline = Instant::now() + WITHIN;
    while state(&stack, &a).await? != "VERIFIED_NOT_SENT" {
        anyhow::ensure!(Instant::now() < deadline, "A never released");
        executor.pass(16, 4).await;
        witness.tick(16).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // One payment on chain, held by B; A released: the books hold what the chain paid.
    assert_eq!(sim.anvil()?.balance(&destination).await?, AMOUNT.parse()?);
    assert_eq!(state(&stack, &b).await?, "BROADCAST");
    let (settles, releases): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE kind = 'SETTLE'), count(*) FILTER (WHERE kind = 'RELEASE') \
         FROM ledger_entries WHERE op_id IN ($1::uuid, $2::uuid)",
    )
    .bind(&a)
    .bind(&b)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!((settles, releases), (0, 1));
    stack.assert_invariants().await
}

/// The review's money-loss path played through the answers instead of the bindings. A and B go to
/// one destination with one amount, both answers lost; the provider paid A and rejected B. Past
/// the API the executor's login records for A a second send that was never made, "accepted" with
/// an answer naming B's rejection: A now follows that transaction, whose rejection concludes
/// nothing while A's payment is listed and accounted for by no withdrawal. A is never proposed
/// for release, so never released.
#[tokio::test]
async fn a_forged_answer_naming_another_withdrawals_rejection_never_releases_a_paid_one()
-> anyhow::Result<()> {
    let paired = Paired::start().await?;
    let (stack, acme, a) = (&paired.stack, &paired.acme, &paired.a);
    let mut api = api(stack, paired.account.clone()).await?;
    let rejected = candidate(&mut api, acme, a, "TRANSACTION_REJECTED").await?;
    let store = login(stack).await?;
    let (t, o) = (acme.id, a.parse()?);
    anyhow::ensure!(
        store
            .take_custodian_lease(t, o, "rogue", Duration::from_secs(5))
            .await?,
        "the rogue could not take the follow lease"
    );
    let send_no = store
        .begin_custodian_send(t, o, "rogue", false)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the rogue could not record a send"))?;
    assert_eq!(send_no, 2);
    store
        .record_custodian_answer(t, o, send_no, "ACCEPTED", Some(&rejected))
        .await?;
    store.release_custodian_lease(t, o, "rogue").await?;
    let answered = "SELECT count(*) FROM custodian_answers WHERE op_id = $1::uuid \
                    AND answer = 'ACCEPTED' AND provider_id IS NOT NULL";
    assert_eq!(scalar(stack, answered, a).await?, 1);

    never_proposed_while_ambiguous(stack, &paired.sim, acme, &paired.executor, a).await?;
    // Paid once on chain (A's payment), nothing released.
    let paid = paired.sim.anvil()?.balance(&paired.destination).await?;
    assert_eq!(paid, AMOUNT.parse()?);
    let releases =
        "SELECT count(*) FROM ledger_entries WHERE op_id = $1::uuid AND kind = 'RELEASE'";
    assert_eq!(scalar(stack, releases, a).await?, 0);
    stack.assert_invariants().await
}

/// The second review's money-loss path: the executor's login makes another withdrawal "account
/// for" A's payment. A and B go to one destination with one amount, both answers lost; the
/// provider paid A and rejected B. C is another `no_lookup` withdrawal to the same destination
/// with another amount. Past the API the login binds A to B's rejection and C to A's payment.
/// C cannot account for a payment of another amount: A's rejection still concludes nothing and
/// A is never released.
#[tokio::test]
async fn only_a_withdrawal_with_the_same_destination_and_amount_accounts_for_a_payment()
-> anyhow::Result<()> {
    let Paired {
        sim,
        stack,
        acme,
        account,
        executor,
        destination,
        a,
        b,
    } = Paired::start().await?;
    let c = approved_withdrawal_to(&stack, &acme, "2000000000000000", &destination)
        .await?
        .withdrawal_id;
    executor.pass(16, 4).await;
    for op in [&a, &b, &c] {
        assert_eq!(state(&stack, op).await?, "UNKNOWN");
    }
    let mut api = api(&stack, account).await?;
    let paid = candidate(&mut api, &acme, &a, "TRANSACTION_DONE").await?;
    let rejected = candidate(&mut api, &acme, &a, "TRANSACTION_REJECTED").await?;
    let store = login(&stack).await?;
    let forged = |provider_id| NewBinding {
        provider_id,
        status: "TRANSACTION_DONE",
        tx_hashes: &[],
        answer_sha256: [0; 32],
        operator_key_id: "forged",
        reason: "past the API",
        executor_id: "rogue",
        record: None,
    };
    for (op, id) in [(&c, &paid), (&a, &rejected)] {
        assert_eq!(
            store
                .bind_custodian_transaction(acme.id, op.parse()?, &forged(id))
                .await?,
            Bound::Recorded
        );
    }
    never_proposed_while_ambiguous(&stack, &sim, &acme, &executor, &a).await?;
    assert_eq!(entries_of(&stack, &a).await?, (0, 0));
    // C never settles on a payment of another amount either: the chain shows the exact transfer
    // or nothing settles.
    assert_ne!(state(&stack, &c).await?, "CONFIRMED");
    stack.assert_invariants().await
}

/// The SETTLE and RELEASE entries of `op`.
async fn entries_of(stack: &Stack, op: &str) -> anyhow::Result<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT count(*) FILTER (WHERE kind = 'SETTLE'), count(*) FILTER (WHERE kind = 'RELEASE') \
         FROM ledger_entries WHERE op_id = $1::uuid",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?)
}

/// Where the first withdrawal's transaction is named for the second before the first settles.
#[derive(Clone, Copy)]
enum NamedFor {
    /// A provider record of the second (a lying provider).
    Record,
    /// A live inclusion of the second (the transaction settled it first: another executor's, a
    /// local signer's).
    Inclusion,
}

/// Two withdrawals of one amount; the first BROADCAST by the provider; then its transaction is
/// named for the second (`named`). Settled from the double's chain when `watched`, on the
/// provider's word otherwise.
async fn one_transaction_for_two(
    watched: bool,
    named: NamedFor,
) -> anyhow::Result<(
    Sim,
    Stack,
    opledger_custodian_executor::Executor,
    pb::Withdrawal,
    pb::Withdrawal,
)> {
    let sim = Sim::start(json!({"seed": 3, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let mut executor = executor(&stack, "executor-1", vec![sim.account(&acme, 2)?]).await?;
    if watched {
        executor = executor.with_chains(chains(&sim)?);
    }
    let (paid, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let (other, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    drive_until(
        &stack,
        &[&executor],
        &paid.withdrawal_id,
        &["BROADCAST"],
        WITHIN,
    )
    .await?;
    let transfer = &sim.transfers_of(&paid.withdrawal_id).await?[0];
    let hash = transfer["hash"].as_str().unwrap_or_default().to_owned();
    if let NamedFor::Inclusion = named {
        sqlx::query(
            "INSERT INTO inclusions (tenant_id, op_id, tx_hash, block_number, block_hash) \
             VALUES ($1, $2::uuid, $3, 1, $4)",
        )
        .bind(acme.id.as_uuid())
        .bind(&other.withdrawal_id)
        .bind(&hash)
        .bind(format!("0x{}", "ab".repeat(32)))
        .execute(stack.admin.pool())
        .await?;
        return Ok((sim, stack, executor, paid, other));
    }
    login(&stack)
        .await?
        .record_custodian_record(
            acme.id,
            other.withdrawal_id.parse()?,
            &NewRecord {
                status: "COMPLETED",
                sub_status: None,
                tx_hash: Some(&hash),
                replaced_hashes: &[],
                provider_id: None,
                answer_sha256: [1; 32],
            },
            "lying-provider",
        )
        .await?;
    Ok((sim, stack, executor, paid, other))
}

/// A provider naming, for another withdrawal, the transaction that paid this one, or naming a
/// transaction that already settled another withdrawal (its live inclusion; another executor's,
/// a local signer's): the second settlement on it is refused as a security event.
#[tokio::test]
async fn one_transaction_never_settles_two_withdrawals() -> anyhow::Result<()> {
    for named in [NamedFor::Record, NamedFor::Inclusion] {
        let (sim, stack, executor, paid, _) = one_transaction_for_two(true, named).await?;
        sim.anvil()?.mine(3).await?;
        until_escalated(
            &stack,
            &executor,
            &paid.withdrawal_id,
            "CUSTODIAN_TRANSACTION_SETTLES_ANOTHER",
        )
        .await?;
        assert_eq!(state(&stack, &paid.withdrawal_id).await?, "BROADCAST");
        let inclusions = "SELECT count(*) FROM inclusions WHERE op_id = $1::uuid";
        assert_eq!(scalar(&stack, inclusions, &paid.withdrawal_id).await?, 0);
        if let NamedFor::Record = named {
            // (The inclusion stand-in belongs to no settlement: the books' invariants would
            // rightly flag it.)
            stack.assert_invariants().await?;
        }
    }
    Ok(())
}

/// On a network the executor does not watch, the provider's COMPLETED record settles on its word
/// (said plainly in the threat model): a provider that lies there can settle a withdrawal it
/// never paid. What still holds: one transaction named by two withdrawals' records settles only
/// one of them, and an unwatched settlement writes no inclusion (nothing claims the chain was
/// read).
#[tokio::test]
async fn on_an_unwatched_network_one_transaction_still_never_settles_two_withdrawals()
-> anyhow::Result<()> {
    let (_sim, stack, executor, paid, other) =
        one_transaction_for_two(false, NamedFor::Record).await?;
    until_escalated(
        &stack,
        &executor,
        &paid.withdrawal_id,
        "CUSTODIAN_TRANSACTION_SETTLES_ANOTHER",
    )
    .await?;
    assert_eq!(state(&stack, &paid.withdrawal_id).await?, "BROADCAST");
    // The other withdrawal settles on its own COMPLETED record, on the provider's word alone.
    drive_until(
        &stack,
        &[&executor],
        &other.withdrawal_id,
        &["CONFIRMED"],
        WITHIN,
    )
    .await?;
    let inclusions = "SELECT count(*) FROM inclusions WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, inclusions, &other.withdrawal_id).await?, 0);
    assert_eq!(state(&stack, &paid.withdrawal_id).await?, "BROADCAST");
    stack.assert_invariants().await
}

/// The executor's login claims a withdrawal and stores a request body paying another address:
/// the executor, deriving the body again from the approved payload, never sends it.
#[tokio::test]
async fn a_stored_body_that_is_not_the_approved_payloads_is_never_sent() -> anyhow::Result<()> {
    let sim = Sim::start(json!({"seed": 3, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let account = sim.account(&acme, 2)?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let (t, o) = (acme.id, w.withdrawal_id.parse()?);
    let store = login(&stack).await?;
    let op = stack.admin.withdrawal(acme.id, o).await?;
    let mut claim = custodian_move(t, o, S::Approved, S::Signing, "rogue", "claimed");
    claim.expected_hash = Some(op.payload_hash);
    claim.lease_for = Some(Duration::from_millis(200));
    store.transition(&claim).await?;
    // The approved payload's request, with the destination swapped.
    let adapter = opledger_custodian::build(&account.provider)?;
    let mut request =
        opledger_custodian_executor::accounts::transfer(&op).map_err(|e| anyhow::anyhow!(e))?;
    request.destination = [0x66; 20];
    let forged = adapter.request(&request)?;
    let mut persist = custodian_move(t, o, S::Signing, S::Signed, "rogue", "persisted");
    persist.expected_hash = Some(op.payload_hash);
    persist.lease_guard = opledger_store::transition::LeaseGuard::HeldBy("rogue");
    store
        .persist_custodian_request(
            &persist,
            &StoredRequest {
                account: account.name.clone(),
                profile: adapter.profile(),
                body: forged.bytes,
                body_sha256: forged.sha256,
                bound: None,
            },
        )
        .await?;
    // The honest executor finds it SIGNED with nothing sent once the rogue's lease lapsed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let executor = executor(&stack, "executor-1", vec![account]).await?;
    until_escalated(
        &stack,
        &executor,
        &w.withdrawal_id,
        "CUSTODIAN_REQUEST_BODY_DIFFERS",
    )
    .await?;
    assert!(sim.creates_of(&w.withdrawal_id).await?.is_empty(), "sent");
    let sends = "SELECT count(*) FROM custodian_sends WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, sends, &w.withdrawal_id).await?, 0);
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "SIGNED");
    stack.assert_invariants().await
}

/// The binding check reads other withdrawals' bindings after taking the transaction's lock;
/// under an older snapshot it would miss one committed meanwhile, so the database binds only
/// under READ COMMITTED, whichever login asks.
#[tokio::test]
async fn a_binding_under_a_snapshot_older_than_its_lock_is_refused() -> anyhow::Result<()> {
    let sim = prime(json!([{"kind": "drop_response", "nth": 1, "profile": "prime"}])).await?;
    let stack = Stack::start().await?;
    let (acme, account) = funded(&stack, &sim).await?;
    let executor = executor(&stack, "executor-1", vec![account]).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    executor.pass(16, 4).await;
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "UNKNOWN");
    let pool = sqlx::PgPool::connect(&stack.url(ServiceRole::Custodian)).await?;
    for level in ["REPEATABLE READ", "SERIALIZABLE"] {
        let mut tx = pool.begin().await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SET TRANSACTION ISOLATION LEVEL {level}"
        )))
        .execute(&mut *tx)
        .await?;
        let inserted = sqlx::query(
            "INSERT INTO custodian_bindings (tenant_id, op_id, provider_id, status, \
               answer_sha256, operator_key_id, reason, executor_id) \
             VALUES ($1, $2::uuid, 'tx-1', 'TRANSACTION_DONE', $3, 'k', 'r', 'rogue')",
        )
        .bind(acme.id.as_uuid())
        .bind(&w.withdrawal_id)
        .bind([0_u8; 32].as_slice())
        .execute(&mut *tx)
        .await;
        let code = match inserted {
            Err(sqlx::Error::Database(db)) => db.code().map(|c| c.into_owned()),
            other => anyhow::bail!("{level}: {other:?}"),
        };
        assert_eq!(code.as_deref(), Some("23514"), "{level}");
    }
    let bindings = "SELECT count(*) FROM custodian_bindings WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, bindings, &w.withdrawal_id).await?, 0);
    Ok(())
}
