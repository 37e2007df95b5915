//! Adversaries of credits (issue 25, finding 2: "the operations and inbox logins can credit any
//! account"). A credit needs a proposal by its proposer's login (the inbox for a deposit, the
//! operations API for an operator credit) and the witness's attestation, applied by the database
//! in one transaction (`opledger_attest_credit`, migration 29). Each scenario plays one login with
//! everything it is granted, or a proposal the database must never apply whoever attests it;
//! every account's balance must end as it began (or, where one honest credit is part of the
//! set-up, with exactly that credit). The honest path with both principals is
//! `tests/inbox/deposits.rs` and `tests/operations/credits.rs`.

use crate::forge::{Outcome, Scenario};
use opledger_testkit::ServiceRole;
use opledger_tests::{Stack, Tenant};
use sqlx::PgPool;

/// Every scenario, named after its adversary.
pub fn scenarios() -> Vec<(&'static str, Scenario)> {
    vec![
        (
            "operations_login_crediting_through_the_old_credit_function",
            Box::pin(old_credit_function(ServiceRole::Operations)),
        ),
        (
            "inbox_login_crediting_through_the_old_credit_function",
            Box::pin(old_credit_function(ServiceRole::Inbox)),
        ),
        (
            "inbox_login_proposing_a_deposit_and_attesting_it_itself",
            Box::pin(proposer_attests_itself(ServiceRole::Inbox, "DEPOSIT")),
        ),
        (
            "operations_login_proposing_an_operator_credit_with_a_statement_and_attesting_it_itself",
            Box::pin(proposer_attests_itself(ServiceRole::Operations, "OPERATOR")),
        ),
        (
            "witness_login_proposing_a_credit_and_attesting_it",
            Box::pin(witness_proposes()),
        ),
        (
            "inbox_login_proposing_an_operator_credit",
            Box::pin(wrong_kind(ServiceRole::Inbox, "OPERATOR")),
        ),
        (
            "operations_login_proposing_a_deposit",
            Box::pin(wrong_kind(ServiceRole::Operations, "DEPOSIT")),
        ),
        (
            "inbox_login_claiming_a_deposit_to_another_accounts_address",
            Box::pin(another_accounts_address()),
        ),
        (
            "inbox_login_proposing_one_chain_transfer_twice",
            Box::pin(one_transfer_twice()),
        ),
        (
            "inbox_login_proposing_a_deposit_without_evidence_that_the_witness_attests",
            Box::pin(no_evidence_no_statement()),
        ),
        (
            "operations_login_rewriting_a_proposal_before_the_witness_attests",
            Box::pin(rewritten_proposal()),
        ),
    ]
}

const TX: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";
const RECIPIENT: &str = "0x2222222222222222222222222222222222222222";
const BLOCK: &str = "0x3333333333333333333333333333333333333333333333333333333333333333";

async fn world() -> anyhow::Result<(Stack, Tenant)> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    Ok((stack, acme))
}

/// Every account's balance of the tenant (available + held), and its credit count.
async fn money(stack: &Stack, tenant: &Tenant) -> anyhow::Result<(String, i64)> {
    let (total, credits): (Option<String>, i64) = sqlx::query_as(
        "SELECT (SELECT sum(available + held)::text FROM ledger_accounts WHERE tenant_id = $1), \
                (SELECT count(*) FROM ledger_credits WHERE tenant_id = $1)",
    )
    .bind(tenant.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    Ok((total.unwrap_or_default(), credits))
}

fn credit_id(n: u8) -> Vec<u8> {
    vec![n; 32]
}

/// Inserts a proposal as `pool`'s login; whether the database accepted it.
async fn propose(
    pool: &PgPool,
    tenant: &Tenant,
    id: &[u8],
    kind: &str,
    account: &str,
    evidence: bool,
) -> bool {
    let query = if evidence {
        sqlx::query(
            "INSERT INTO credit_proposals (tenant_id, credit_id, kind, account, asset, amount, \
               network, tx_hash, log_index, recipient) \
             VALUES ($1, $2, $3, $4, 'ETH', 1000000, 'anvil', $5, NULL, $6)",
        )
    } else {
        sqlx::query(
            "INSERT INTO credit_proposals (tenant_id, credit_id, kind, account, asset, amount) \
             VALUES ($1, $2, $3, $4, 'ETH', 1000000)",
        )
    };
    let query = query
        .bind(tenant.id.as_uuid())
        .bind(id)
        .bind(kind)
        .bind(account);
    let query = if evidence {
        query.bind(TX).bind(RECIPIENT)
    } else {
        query
    };
    query.execute(pool).await.is_ok()
}

/// Calls the attestation as `pool`'s login with chain evidence or not; whether it applied.
async fn attest(pool: &PgPool, tenant: &Tenant, id: &[u8], chain: bool) -> bool {
    let applied: Result<(Option<i64>,), _> =
        sqlx::query_as("SELECT opledger_attest_credit($1, $2, 'attacker', $3, $4)")
            .bind(tenant.id.as_uuid())
            .bind(id)
            .bind(chain.then_some(7_i64))
            .bind(chain.then_some(BLOCK))
            .fetch_one(pool)
            .await;
    matches!(applied, Ok((Some(_),)))
}

async fn register(stack: &Stack, tenant: &Tenant, account: &str) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO deposit_addresses (network, address, tenant_id, account) \
         VALUES ('anvil', $1, $2, $3)",
    )
    .bind(RECIPIENT)
    .bind(tenant.id.as_uuid())
    .bind(account)
    .execute(stack.admin.pool())
    .await?;
    Ok(())
}

fn outcome(before: &(String, i64), after: &(String, i64)) -> Outcome {
    if before == after {
        Outcome::Refused
    } else {
        Outcome::Credited
    }
}

/// Adversary: a proposer's login calls the credit function that needed no second principal.
async fn old_credit_function(role: ServiceRole) -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    let pool = stack.db.pool_as(role).await?;
    let before = money(&stack, &acme).await?;
    let credited = sqlx::query("SELECT opledger_credit($1, $2, 'treasury', 'ETH', 1000000)")
        .bind(acme.id.as_uuid())
        .bind(credit_id(9))
        .execute(&pool)
        .await
        .is_ok();
    let after = money(&stack, &acme).await?;
    Ok(if credited {
        Outcome::Credited
    } else {
        outcome(&before, &after)
    })
}

/// Adversary: the proposer's login proposes (with a registered recipient, or its own operator
/// statement) and then plays the witness: the attestation function, a direct attestation row.
async fn proposer_attests_itself(role: ServiceRole, kind: &str) -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    register(&stack, &acme, "treasury").await?;
    let pool = stack.db.pool_as(role).await?;
    let before = money(&stack, &acme).await?;
    let id = credit_id(1);
    let deposit = kind == "DEPOSIT";
    anyhow::ensure!(
        propose(&pool, &acme, &id, kind, "treasury", deposit).await,
        "the honest proposal itself was refused"
    );
    if !deposit {
        sqlx::query(
            "INSERT INTO credit_statements (tenant_id, credit_id, operator_key_id, \
               policy_version, signature) VALUES ($1, $2, $3, 1, $4)",
        )
        .bind(acme.id.as_uuid())
        .bind(&id)
        .bind("0".repeat(32))
        .bind(vec![0_u8; 64])
        .execute(&pool)
        .await?;
    }
    let by_function = attest(&pool, &acme, &id, deposit).await;
    let by_row = sqlx::query(
        "INSERT INTO credit_attestations (tenant_id, credit_id, basis, witness_id, entry_id) \
         VALUES ($1, $2, 'OPERATORS', 'attacker', 1)",
    )
    .bind(acme.id.as_uuid())
    .bind(&id)
    .execute(&pool)
    .await
    .is_ok();
    let after = money(&stack, &acme).await?;
    Ok(if by_function || by_row {
        Outcome::Credited
    } else {
        outcome(&before, &after)
    })
}

/// Adversary: the witness's login proposes a credit (both kinds) and attests it.
async fn witness_proposes() -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    register(&stack, &acme, "treasury").await?;
    let witness = stack.db.pool_as(ServiceRole::Witness).await?;
    let before = money(&stack, &acme).await?;
    let mut applied = false;
    for (n, kind) in [(1, "DEPOSIT"), (2, "OPERATOR")] {
        let id = credit_id(n);
        let deposit = kind == "DEPOSIT";
        if propose(&witness, &acme, &id, kind, "treasury", deposit).await {
            return Ok(Outcome::Credited);
        }
        applied |= attest(&witness, &acme, &id, deposit).await;
    }
    let after = money(&stack, &acme).await?;
    Ok(if applied {
        Outcome::Credited
    } else {
        outcome(&before, &after)
    })
}

/// Adversary: a proposer's login proposes the other proposer's kind (whose evidence the witness
/// checks differently); the witness's login then attests whatever was recorded.
async fn wrong_kind(role: ServiceRole, kind: &str) -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    register(&stack, &acme, "treasury").await?;
    let pool = stack.db.pool_as(role).await?;
    let witness = stack.db.pool_as(ServiceRole::Witness).await?;
    let before = money(&stack, &acme).await?;
    let id = credit_id(3);
    let deposit = kind == "DEPOSIT";
    if propose(&pool, &acme, &id, kind, "treasury", deposit).await {
        return Ok(Outcome::Credited);
    }
    let applied = attest(&witness, &acme, &id, deposit).await;
    let after = money(&stack, &acme).await?;
    Ok(if applied {
        Outcome::Credited
    } else {
        outcome(&before, &after)
    })
}

/// Adversary: the inbox's login proposes a real-looking deposit to an address registered to the
/// treasury, for its own account; even a witness that attests the chain evidence applies nothing.
async fn another_accounts_address() -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    register(&stack, &acme, "treasury").await?;
    let inbox = stack.db.pool_as(ServiceRole::Inbox).await?;
    let witness = stack.db.pool_as(ServiceRole::Witness).await?;
    let before = money(&stack, &acme).await?;
    anyhow::ensure!(propose(&inbox, &acme, &credit_id(4), "DEPOSIT", "attacker", true).await);
    let applied = attest(&witness, &acme, &credit_id(4), true).await;
    let after = money(&stack, &acme).await?;
    Ok(if applied {
        Outcome::Credited
    } else {
        outcome(&before, &after)
    })
}

/// Adversary: the inbox's login proposes the same chain transfer under two deposit ids; the
/// witness attests both. One honest credit is expected, never two.
async fn one_transfer_twice() -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    register(&stack, &acme, "treasury").await?;
    let inbox = stack.db.pool_as(ServiceRole::Inbox).await?;
    let witness = stack.db.pool_as(ServiceRole::Witness).await?;
    anyhow::ensure!(propose(&inbox, &acme, &credit_id(5), "DEPOSIT", "treasury", true).await);
    anyhow::ensure!(
        attest(&witness, &acme, &credit_id(5), true).await,
        "the honest first credit was not applied"
    );
    let before = money(&stack, &acme).await?;
    anyhow::ensure!(propose(&inbox, &acme, &credit_id(6), "DEPOSIT", "treasury", true).await);
    let applied = attest(&witness, &acme, &credit_id(6), true).await;
    let after = money(&stack, &acme).await?;
    Ok(if applied {
        Outcome::Credited
    } else {
        outcome(&before, &after)
    })
}

/// Adversary: the inbox's login proposes a deposit with no chain evidence; a witness that attests
/// it without any operator statement applies nothing (nor does one naming a block).
async fn no_evidence_no_statement() -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    let inbox = stack.db.pool_as(ServiceRole::Inbox).await?;
    let witness = stack.db.pool_as(ServiceRole::Witness).await?;
    let before = money(&stack, &acme).await?;
    anyhow::ensure!(propose(&inbox, &acme, &credit_id(7), "DEPOSIT", "treasury", false).await);
    let applied = attest(&witness, &acme, &credit_id(7), false).await
        || attest(&witness, &acme, &credit_id(7), true).await;
    let after = money(&stack, &acme).await?;
    Ok(if applied {
        Outcome::Credited
    } else {
        outcome(&before, &after)
    })
}

/// Adversary: the operations login, having proposed a small credit that operators signed,
/// rewrites its amount or account (or deletes and re-inserts it) before the witness attests.
async fn rewritten_proposal() -> anyhow::Result<Outcome> {
    let (stack, acme) = world().await?;
    let operations = stack.db.pool_as(ServiceRole::Operations).await?;
    anyhow::ensure!(
        propose(
            &operations,
            &acme,
            &credit_id(8),
            "OPERATOR",
            "treasury",
            false
        )
        .await
    );
    let before: (String, String) =
        sqlx::query_as("SELECT account, amount::text FROM credit_proposals WHERE tenant_id = $1")
            .bind(acme.id.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    for sql in [
        "UPDATE credit_proposals SET amount = amount * 1000 WHERE tenant_id = $1",
        "UPDATE credit_proposals SET account = 'attacker' WHERE tenant_id = $1",
        "DELETE FROM credit_proposals WHERE tenant_id = $1",
    ] {
        let _ = sqlx::query(sql)
            .bind(acme.id.as_uuid())
            .execute(&operations)
            .await;
    }
    let after: (String, String) =
        sqlx::query_as("SELECT account, amount::text FROM credit_proposals WHERE tenant_id = $1")
            .bind(acme.id.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(if before == after {
        Outcome::Refused
    } else {
        Outcome::Credited
    })
}
