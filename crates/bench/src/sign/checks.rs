//! What the sign benchmark checks in SQL after each phase.

use super::types::Sender;

/// Checks in SQL what the phase must have left: one attempt per withdrawal, gapless nonces per
/// sender from 0 matching the nonce counter, every operation SIGNED.
pub(super) async fn verify(
    db: &sqlx::PgPool,
    label: &str,
    senders: &[Sender],
    withdrawals: usize,
) -> anyhow::Result<()> {
    let tenants: Vec<uuid::Uuid> = senders.iter().map(|s| s.tenant.as_uuid()).collect();
    let n = i64::try_from(withdrawals)?;

    let (ops, with_one): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE a.attempts = 1) \
         FROM withdrawal_ops o \
         LEFT JOIN (SELECT tenant_id, op_id, count(*) AS attempts FROM tx_attempts \
                    GROUP BY tenant_id, op_id) a USING (tenant_id, op_id) \
         WHERE o.tenant_id = ANY($1)",
    )
    .bind(&tenants)
    .fetch_one(db)
    .await?;
    anyhow::ensure!(
        ops == n && with_one == n,
        "{label}: {with_one} of {ops} withdrawals have exactly one tx_attempts row, expected {n}"
    );

    let per_sender: Vec<(String, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT a.sender, count(*), min(a.nonce), max(a.nonce), count(DISTINCT a.nonce), \
           max(s.next_nonce) \
         FROM tx_attempts a JOIN signer_nonces s ON s.network = a.network AND s.sender = a.sender \
         WHERE a.tenant_id = ANY($1) AND a.kind = 'ORIGINAL' GROUP BY a.sender ORDER BY a.sender",
    )
    .bind(&tenants)
    .fetch_all(db)
    .await?;
    let mut expected: Vec<&str> = senders.iter().map(|s| s.address.as_str()).collect();
    expected.sort_unstable();
    let found: Vec<&str> = per_sender.iter().map(|r| r.0.as_str()).collect();
    anyhow::ensure!(
        found == expected,
        "{label}: attempts came from {} senders, expected the phase's {}",
        found.len(),
        expected.len()
    );
    let mut total = 0;
    for (sender, count, min, max, distinct, next) in &per_sender {
        anyhow::ensure!(
            *min == 0 && *max == count - 1 && distinct == count && next == count,
            "{label}: sender {sender} has {count} attempts with nonces {min}..={max}, \
             {distinct} distinct, next_nonce {next}"
        );
        total += count;
    }
    anyhow::ensure!(
        total == n,
        "{label}: {total} original attempts, expected {n}"
    );

    let states: Vec<(String, i64)> = sqlx::query_as(
        "SELECT state, count(*) FROM withdrawal_ops WHERE tenant_id = ANY($1) GROUP BY state",
    )
    .bind(&tenants)
    .fetch_all(db)
    .await?;
    anyhow::ensure!(
        states == [("SIGNED".to_owned(), n)],
        "{label}: operation states {states:?}, expected all {n} SIGNED"
    );
    Ok(())
}
