//! The bounded count of refused webhook requests (`opledger_count_rejection`) under concurrency:
//! first requests of new made-up (source, prefix) pairs racing at the cap never leave more than
//! the cap's rows (migration 21; 35 rows were once seen where at most 34 may be).

use opledger_testkit::{ServiceRole, TestDatabase};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `opledger_rejection_unknown_cap()`.
const CAP: i64 = 32;

#[tokio::test]
async fn new_unknown_pairs_racing_at_the_cap_leave_at_most_the_cap_and_count_every_request()
-> anyhow::Result<()> {
    let db = TestDatabase::create().await?;
    let admin = db.admin_pool().await?;
    let inbox = db.pool_as(ServiceRole::Inbox).await?;
    const RACERS: usize = 8;
    const ROUNDS: usize = 4;
    for round in 0..ROUNDS {
        // One row short of the cap in this minute, then RACERS new pairs at once, each from a
        // connection of its own that is already open (so they reach the function together).
        sqlx::query(
            "INSERT INTO webhook_rejection_counts \
               (minute, tenant_id, source, endpoint_id_prefix, reason, count) \
             SELECT date_trunc('minute', now()), '00000000-0000-0000-0000-000000000000', \
                    'seed-' || $1 || '-' || n, 'whe_seed', 'unknown_endpoint', 1 \
               FROM generate_series(1, $2) n",
        )
        .bind(round as i64)
        .bind(CAP - 1)
        .execute(&admin)
        .await?;
        let mut conns = Vec::new();
        for _ in 0..RACERS {
            conns.push(inbox.acquire().await?);
        }
        let start = Arc::new(tokio::sync::Barrier::new(RACERS));
        let racers: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(n, mut conn)| {
                let start = start.clone();
                tokio::spawn(async move {
                    start.wait().await;
                    sqlx::query("SELECT opledger_count_rejection(NULL, $1, $2, 'unknown_endpoint')")
                        .bind(format!("probe-{round}-{n}"))
                        .bind(format!("whe_{n:08}"))
                        .execute(&mut *conn)
                        .await
                        .map(|_| ())
                })
            })
            .collect();
        for racer in racers {
            racer.await??;
        }
        // Every minute's rows, by whether they are the `other` row.
        let rows: Vec<(chrono::DateTime<chrono::Utc>, bool, i64, i64)> = sqlx::query_as(
            "SELECT minute, source = 'other' AND endpoint_id_prefix = 'other', count(*), \
                    sum(count)::bigint \
               FROM webhook_rejection_counts GROUP BY 1, 2",
        )
        .fetch_all(&admin)
        .await?;
        let mut pairs = BTreeMap::new();
        let mut total = 0;
        for (minute, other, n, sum) in rows {
            total += sum;
            if other {
                assert_eq!(n, 1, "one `other` row per minute and reason");
            } else {
                *pairs.entry(minute).or_insert(0) += n;
            }
        }
        assert!(
            pairs.values().all(|&n| n <= CAP),
            "round {round}: made-up pairs per minute {pairs:?}, at most {CAP}"
        );
        assert_eq!(total, CAP - 1 + RACERS as i64, "every request counted once");
        // Start the next round from an empty table: its seed fills one minute again.
        sqlx::query("DELETE FROM webhook_rejection_counts")
            .execute(&admin)
            .await?;
    }
    Ok(())
}
