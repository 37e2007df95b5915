//! What the webhook benchmark reads and checks in SQL: the processor's progress, deliveries per
//! commit, and the rows each source left.

use sqlx::PgPool;

use super::options::SOURCE;

/// Work items of the bench endpoint's events: (finished by the processor, still pending).
pub(super) async fn processed(owner: &PgPool) -> anyhow::Result<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT count(*) FILTER (WHERE w.status = 'DONE'), \
           count(*) FILTER (WHERE w.status = 'PENDING') \
         FROM inbox_work w JOIN inbox_events e USING (inbox_id) WHERE e.source = $1",
    )
    .bind(SOURCE)
    .fetch_one(owner)
    .await?)
}

/// Mean deliveries per commit of the service since `since`: rows of one statement share their
/// transaction's `now()`, so each distinct `received_at` is one commit.
pub(super) async fn per_commit(
    owner: &PgPool,
    since: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<f64> {
    let (rows, commits): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT received_at) FROM inbox_events \
         WHERE source = $1 AND received_at >= $2",
    )
    .bind(SOURCE)
    .bind(since)
    .fetch_one(owner)
    .await?;
    Ok(rows as f64 / commits.max(1) as f64)
}

/// Checks the rows of `source`: `expected` events (at most `uncertain` more: failed requests
/// whose transaction may have committed), every one an EVENT with exactly one work item.
pub(super) async fn check_rows(
    owner: &PgPool,
    source: &str,
    expected: usize,
    uncertain: usize,
) -> anyhow::Result<i64> {
    let (events, work, other): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(w.inbox_id), count(*) FILTER (WHERE e.kind <> 'EVENT') \
         FROM inbox_events e LEFT JOIN inbox_work w USING (inbox_id) WHERE e.source = $1",
    )
    .bind(source)
    .fetch_one(owner)
    .await?;
    let expected = i64::try_from(expected)?;
    let uncertain = i64::try_from(uncertain)?;
    anyhow::ensure!(
        (expected..=expected + uncertain).contains(&events),
        "{source}: {events} inbox rows, expected {expected} (+ at most {uncertain})"
    );
    anyhow::ensure!(
        work == events && other == 0,
        "{source}: {events} inbox rows, {work} with a work item, {other} not EVENT"
    );
    Ok(events)
}
