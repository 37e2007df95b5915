//! Red team: the adversary holds the inbox service's own database login (a compromised inbox
//! host). A custodian withdrawal in flight (BROADCAST) and an ambiguous one (UNKNOWN) must stay
//! exactly as they are: no move, as any actor; no release or settlement of the hold; no record,
//! proposal or attestation of the custodian's; and its one custodian table, the hints, can at most
//! make the executor look a withdrawal up sooner.

use super::{Custody, fireblocks, hinted};
use opledger_domain::ids::OperationId;
use opledger_domain::state::OperationState as S;
use opledger_store::custodian::custodian_move;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::ServiceRole;
use serde_json::json;

/// Runs `sql` as the inbox login with `$1` the withdrawal and `$2` its tenant; the database's
/// error code, or `None` when it was accepted.
async fn attempt(
    pool: &sqlx::PgPool,
    sql: &str,
    c: &Custody,
    op: &str,
) -> anyhow::Result<Option<String>> {
    let result = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(op.parse::<uuid::Uuid>()?)
        .bind(c.acme.id.as_uuid())
        .execute(pool)
        .await;
    Ok(match result {
        Ok(_) => None,
        Err(e) => Some(
            e.as_database_error()
                .and_then(|d| d.code())
                .map_or_else(|| "other".to_owned(), |code| code.into_owned()),
        ),
    })
}

/// The hold's status and every ledger entry kind of `op`.
async fn ledger(c: &Custody, op: &str) -> anyhow::Result<(String, Vec<String>)> {
    let (hold,): (String,) =
        sqlx::query_as("SELECT status FROM ledger_holds WHERE op_id = $1::uuid")
            .bind(op)
            .fetch_one(c.stack.admin.pool())
            .await?;
    let kinds: Vec<(String,)> =
        sqlx::query_as("SELECT kind FROM ledger_entries WHERE op_id = $1::uuid ORDER BY kind")
            .bind(op)
            .fetch_all(c.stack.admin.pool())
            .await?;
    Ok((hold, kinds.into_iter().map(|(k,)| k).collect()))
}

#[tokio::test]
async fn the_inbox_login_cannot_move_or_release_a_custodian_withdrawal() -> anyhow::Result<()> {
    let c = fireblocks(json!({"seed": 41, "rules": []}), 200).await?;
    let in_flight = c.sent_and_followed().await?;
    // The second request's answer is lost: UNKNOWN, the provider may hold it.
    c.sim
        .set_faults(&json!({"seed": 42, "rules": [
            {"kind": "drop_response", "profile": "fireblocks"}]}))
        .await?;
    let (w, _) =
        opledger_tests::custodian::approved_withdrawal(&c.stack, &c.acme, super::AMOUNT).await?;
    let unknown = w.withdrawal_id;
    c.drive(&unknown, "UNKNOWN").await?;
    let before = [ledger(&c, &in_flight).await?, ledger(&c, &unknown).await?];
    let inbox = c.stack.db.pool_as(ServiceRole::Inbox).await?;

    let mut tried = 0;
    for (op, now) in [(&in_flight, "BROADCAST"), (&unknown, "UNKNOWN")] {
        let targets = [
            "CONFIRMED",
            "VERIFIED_NOT_SENT",
            "FAILED_TERMINAL",
            "REJECTED",
            "BROADCAST",
        ];
        for to in targets.into_iter().filter(|to| *to != now) {
            // As it stands (last moved by the custodian), and as every actor there is.
            let mut sqls = vec![format!(
                "UPDATE withdrawal_ops SET state = '{to}', version = version + 1 \
                 WHERE op_id = $1 AND tenant_id = $2"
            )];
            for actor in [
                "webhook_processor",
                "custodian",
                "chain_watcher",
                "reconciler",
                "operator",
                "broadcaster",
            ] {
                sqls.push(format!(
                    "UPDATE withdrawal_ops SET state = '{to}', last_actor = '{actor}', \
                     version = version + 1 WHERE op_id = $1 AND tenant_id = $2"
                ));
            }
            for sql in sqls {
                tried += 1;
                let refused = attempt(&inbox, &sql, &c, op).await?;
                assert!(refused.is_some(), "accepted: {sql}");
            }
        }
        // The custodian's evidence and the witness's attestation: not the inbox's to write.
        for sql in [
            "INSERT INTO custodian_records (tenant_id, op_id, status, answer_sha256, executor_id) \
             VALUES ($2, $1, 'CANCELLED', sha256('x'), 'inbox')",
            "INSERT INTO custodian_release_proposals (tenant_id, op_id, record_id, executor_id) \
             SELECT $2, $1, record_id, 'inbox' FROM custodian_records WHERE op_id = $1 LIMIT 1",
            "INSERT INTO custodian_release_attestations (tenant_id, op_id, record_id, status, \
               answer_sha256, witness_id) SELECT $2, $1, record_id, 'CANCELLED', sha256('x'), 'w' \
             FROM custodian_records WHERE op_id = $1 LIMIT 1",
            "INSERT INTO custodian_sends (tenant_id, op_id, send_no, executor_id) \
             VALUES ($2, $1, 99, 'inbox')",
            "UPDATE custodian_follows SET followed_at = now() WHERE op_id = $1 AND tenant_id = $2",
            "DELETE FROM custodian_hints WHERE op_id = $1 AND tenant_id = $2",
        ] {
            tried += 1;
            assert_eq!(
                attempt(&inbox, sql, &c, op).await?.as_deref(),
                Some("42501"),
                "{sql}"
            );
        }
        // The hold functions it may call release and settle nothing in these states.
        for effect in ["RELEASE", "SETTLE"] {
            tried += 2;
            let (done,): (bool,) = sqlx::query_as("SELECT opledger_resolve_hold($2, $1, $3)")
                .bind(op.parse::<uuid::Uuid>()?)
                .bind(c.acme.id.as_uuid())
                .bind(effect)
                .fetch_one(&inbox)
                .await?;
            assert!(!done, "{effect}");
            let (moved,): (i32,) =
                sqlx::query_as("SELECT opledger_resolve_holds($2, ARRAY[$1], ARRAY[$3])")
                    .bind(op.parse::<uuid::Uuid>()?)
                    .bind(c.acme.id.as_uuid())
                    .bind(effect)
                    .fetch_one(&inbox)
                    .await?;
            assert_eq!(moved, 0, "{effect}");
        }
        // Through the store, as the custodian, the one actor allowed these moves.
        let store = Store::connect(&c.stack.url(ServiceRole::Inbox), StoreConfig::default())
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        let from = if *op == in_flight {
            S::Broadcast
        } else {
            S::Unknown
        };
        for to in [
            S::VerifiedNotSent,
            S::FailedTerminal,
            S::Confirmed,
            S::Unknown,
        ] {
            tried += 1;
            let request = custodian_move(
                c.acme.id,
                op.parse::<OperationId>()?,
                from,
                to,
                "inbox-login",
                "forged by the red team",
            );
            assert!(store.transition(&request).await.is_err(), "{from} -> {to}");
        }
    }

    // Its hints: refused for a withdrawal no custodian executes, and stamped with the database's
    // clock whatever time it writes (a hint cannot pin a withdrawal at the head of the queue).
    let local = c
        .stack
        .withdraw(&c.acme, "100", opledger_tests::ALICE)
        .await?
        .withdrawal_id;
    let insert = "INSERT INTO custodian_hints (tenant_id, op_id) VALUES ($2, $1)";
    assert_eq!(
        attempt(&inbox, insert, &c, &local).await?.as_deref(),
        Some("23514")
    );
    let future = "UPDATE custodian_hints SET hinted_at = 'infinity' \
                  WHERE op_id = $1 AND tenant_id = $2";
    assert_eq!(attempt(&inbox, future, &c, &in_flight).await?, None);
    let (pinned,): (bool,) = sqlx::query_as(
        "SELECT hinted_at > clock_timestamp() FROM custodian_hints WHERE op_id = $1::uuid",
    )
    .bind(&in_flight)
    .fetch_one(c.stack.admin.pool())
    .await?;
    assert!(!pinned);

    println!("redteam: inbox login against custodian withdrawals: {tried} attempts, all refused");
    assert_eq!(c.stack.state(&in_flight).await?, "BROADCAST");
    assert_eq!(c.stack.state(&unknown).await?, "UNKNOWN");
    assert_eq!(
        [ledger(&c, &in_flight).await?, ledger(&c, &unknown).await?],
        before
    );
    assert_eq!(before[0].0, "OPEN");
    assert_eq!(before[1].0, "OPEN");
    let hinted = hinted(&c.stack, &c.acme).await?;
    assert!(hinted.contains(&in_flight) && !hinted.contains(&local));
    for op in [&in_flight, &unknown] {
        c.moved_by_the_executor_only(op).await?;
    }
    c.inbox.stop().await
}

#[tokio::test]
async fn the_executor_takes_a_hinted_withdrawal_before_older_ones() -> anyhow::Result<()> {
    let c = fireblocks(json!({"seed": 43, "rules": []}), 200).await?;
    let older = c.sent_and_followed().await?;
    let newer = c.sent_and_followed().await?;
    // Both followed just now: neither is due for an hour.
    let due = c
        .stack
        .admin
        .custodian_due(super::FOLLOW_EVERY, 10, &[])
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    assert!(due.is_empty(), "{due:?}");
    // A hint (as the inbox records it) on the newer one makes it due, and first.
    let inbox = c.stack.db.pool_as(ServiceRole::Inbox).await?;
    let hint = "INSERT INTO custodian_hints (tenant_id, op_id) VALUES ($2, $1) \
                ON CONFLICT (tenant_id, op_id) DO UPDATE SET hinted_at = now()";
    assert_eq!(attempt(&inbox, hint, &c, &newer).await?, None);
    let ids = |due: Vec<opledger_store::custodian::CustodianDue>| -> Vec<String> {
        due.iter().map(|d| d.operation.op_id.to_string()).collect()
    };
    let due = c
        .stack
        .admin
        .custodian_due(super::FOLLOW_EVERY, 10, &[])
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    assert_eq!(ids(due), [newer.as_str()]);
    // Were both due (followed long enough ago), the hinted one still comes first, before the
    // one followed earlier.
    let due = c
        .stack
        .admin
        .custodian_due(std::time::Duration::ZERO, 2, &[])
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    assert_eq!(ids(due), [newer.clone(), older.clone()]);
    // One pass serves it; the hint is then older than the follow.
    let looked = c.sim.lookups_of(&newer).await?;
    c.passes(1).await;
    assert_eq!(c.sim.lookups_of(&newer).await?, looked + 1);
    let due = c
        .stack
        .admin
        .custodian_due(super::FOLLOW_EVERY, 10, &[])
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    assert!(due.is_empty());
    c.inbox.stop().await
}
