//! A custodian's own status webhooks through the inbox, against the conformance double (a real
//! process executing real transfers on anvil, signing its webhooks as each provider does):
//! verified with the provider's scheme (Fireblocks' JWS against its key set, rotations
//! included; BitGo's and Prime's HMACs), deduplicated by the provider's event id, and only ever a
//! wake-up: the executor, following each withdrawal at most once an hour here, looks a woken one
//! up at its next pass, and that lookup decides. Forged, replayed, duplicated and reordered
//! events never move anything; the inbox's login cannot move or release a custodian withdrawal.

mod early;
mod fireblocks;
mod hmac;
mod login;

use opledger_custodian_executor::Executor;
use opledger_inbox::Config;
use opledger_store::inbox::{NewEndpoint, new_endpoint_id};
use opledger_tests::custodian::{
    Sim, SimWebhooks, approved_withdrawal, drive_until, executor_following_every,
};
use opledger_tests::inbox::{Inbox, config, rows};
use opledger_tests::{Stack, Tenant};
use opledger_webhook::provider::{CUSTODIAN_STATUS, EndpointScheme};
use serde_json::Value;
use std::time::Duration;

/// Every withdrawal's amount (wei).
pub(crate) const AMOUNT: &str = "1000000000000000";
/// The executor follows each withdrawal at most this often: far longer than any test, so only a
/// hint makes it look a withdrawal up again.
pub(crate) const FOLLOW_EVERY: Duration = Duration::from_secs(3600);
/// Seconds (double's clock) a transfer waits in authorization, until a test moves the clock.
pub(crate) const HELD_SECS: u64 = 3600;

/// One test's world: a stack with a funded tenant, the inbox in process, the double posting its
/// webhooks to the tenant's endpoint, and an executor following at most once per
/// [`FOLLOW_EVERY`].
pub(crate) struct Custody {
    pub(crate) stack: Stack,
    pub(crate) acme: Tenant,
    pub(crate) inbox: Inbox,
    pub(crate) sim: Sim,
    pub(crate) endpoint: String,
    pub(crate) executor: Executor,
}

/// The inbox's test configuration, refreshing a key set at most every `refresh_ms`.
pub(crate) fn inbox_config(stack: &Stack, refresh_ms: u64) -> Config {
    Config {
        jwks_refresh_min_interval_ms: refresh_ms,
        jwks_timeout_ms: 2_000,
        ..config(stack)
    }
}

/// The URL of endpoint `id` of `source` at `inbox`.
pub(crate) fn endpoint_url(inbox: &Inbox, source: &str, id: &str) -> String {
    format!("http://{}/webhooks/{source}/{id}", inbox.http)
}

/// A stack with tenant `acme`, funded.
pub(crate) async fn funded() -> anyhow::Result<(Stack, Tenant)> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    Ok((stack, acme))
}

/// A Fireblocks world: the double's webhooks go to a `fireblocks_jws` endpoint of `acme` whose
/// key set is the double's `/.well-known/jwks.json`; `faults` is the double's schedule.
pub(crate) async fn fireblocks(faults: Value, refresh_ms: u64) -> anyhow::Result<Custody> {
    let (stack, acme) = funded().await?;
    let inbox = Inbox::start_with(&stack, inbox_config(&stack, refresh_ms)).await?;
    let endpoint = new_endpoint_id();
    let sim = Sim::start_webhooks(SimWebhooks {
        faults,
        authorization_delay_secs: HELD_SECS,
        fireblocks_webhook_url: Some(endpoint_url(&inbox, "fireblocks", &endpoint)),
        bitgo: None,
        prime: None,
    })
    .await?;
    let types = [CUSTODIAN_STATUS.to_owned()];
    let jwks = format!("{}/.well-known/jwks.json", sim.base);
    stack
        .admin
        .create_webhook_endpoint(&NewEndpoint {
            endpoint_id: &endpoint,
            tenant_id: acme.id,
            source: "fireblocks",
            allowed_types: &types,
            scheme: EndpointScheme::FireblocksJws,
            jwks_url: Some(&jwks),
            first: None,
        })
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    let account = sim.account(&acme, 5)?;
    let executor =
        executor_following_every(&stack, "executor-1", vec![account], FOLLOW_EVERY).await?;
    Ok(Custody {
        stack,
        acme,
        inbox,
        sim,
        endpoint,
        executor,
    })
}

impl Custody {
    /// An approved withdrawal the executor sent (BROADCAST), held in authorization at the
    /// double, its first webhooks processed, and followed once: from here only a hint makes the
    /// executor look it up again.
    pub(crate) async fn sent_and_followed(&self) -> anyhow::Result<String> {
        let (w, _) = approved_withdrawal(&self.stack, &self.acme, AMOUNT).await?;
        let op = w.withdrawal_id;
        self.drive(&op, "BROADCAST").await?;
        self.quiet(&op).await?;
        self.executor.pass(16, 4).await;
        anyhow::ensure!(self.sim.lookups_of(&op).await? >= 1, "never looked up");
        Ok(op)
    }

    /// Runs executor passes until `op` is `want` (20 s at most).
    pub(crate) async fn drive(&self, op: &str, want: &str) -> anyhow::Result<()> {
        drive_until(
            &self.stack,
            &[&self.executor],
            op,
            &[want],
            Duration::from_secs(20),
        )
        .await
        .map(|_| ())
    }

    /// `passes` executor passes, 100 ms apart.
    pub(crate) async fn passes(&self, passes: usize) {
        for _ in 0..passes {
            self.executor.pass(16, 4).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Ends the authorization wait of every transfer at the double (moves its clock).
    pub(crate) async fn authorize(&self) -> anyhow::Result<()> {
        self.sim
            .post("clock", &serde_json::json!({"advance_secs": HELD_SECS}))
            .await
            .map(|_| ())
    }

    /// Waits until the double stopped posting webhooks about `op` (every event delivered at
    /// least once, the counts unchanged for 800 ms) and the tenant's inbox has nothing pending.
    pub(crate) async fn quiet(&self, op: &str) -> anyhow::Result<()> {
        let mut last = None;
        for _ in 0..60 {
            let events = self.sim.webhooks_of(op).await?;
            let deliveries: Vec<usize> = events
                .iter()
                .map(|e| e["deliveries"].as_array().map_or(0, Vec::len))
                .collect();
            let pending = self.rows("inbox_work", "AND status = 'PENDING'").await?;
            let now = (events.len(), deliveries.iter().sum::<usize>());
            if pending == 0 && !deliveries.contains(&0) && last == Some(now) {
                return Ok(());
            }
            last = Some(now);
            tokio::time::sleep(Duration::from_millis(800)).await;
        }
        anyhow::bail!("the double's webhooks never settled")
    }

    /// Rows of `table` for the tenant matching `condition` (test constants only).
    pub(crate) async fn rows(
        &self,
        table: &'static str,
        condition: &'static str,
    ) -> anyhow::Result<i64> {
        rows(&self.stack, table, condition, self.acme.id).await
    }

    /// `status:outcome` of every work item of the tenant, oldest first.
    pub(crate) async fn outcomes(&self) -> anyhow::Result<Vec<String>> {
        outcomes(&self.stack, &self.acme).await
    }

    /// Refused requests the tenant's endpoints counted for `reason`.
    pub(crate) async fn rejections(&self, reason: &str) -> anyhow::Result<i64> {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT coalesce(sum(count), 0)::int8 FROM webhook_rejection_counts \
             WHERE tenant_id = $1 AND reason = $2",
        )
        .bind(self.acme.id.as_uuid())
        .bind(reason)
        .fetch_one(self.stack.admin.pool())
        .await?;
        Ok(n)
    }

    /// Nothing but the custodian executor moved `op`, and the ledger holds.
    pub(crate) async fn moved_by_the_executor_only(&self, op: &str) -> anyhow::Result<()> {
        moved_by_the_executor_only(&self.stack, op).await
    }
}

/// `status:outcome` of every work item of `tenant`, oldest first.
pub(crate) async fn outcomes(stack: &Stack, tenant: &Tenant) -> anyhow::Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT status || ':' || coalesce(outcome, last_error, '') FROM inbox_work \
         WHERE tenant_id = $1 ORDER BY inbox_id",
    )
    .bind(tenant.id.as_uuid())
    .fetch_all(stack.admin.pool())
    .await?;
    Ok(rows.into_iter().map(|(s,)| s).collect())
}

/// The withdrawals of `tenant` with a custodian hint.
pub(crate) async fn hinted(stack: &Stack, tenant: &Tenant) -> anyhow::Result<Vec<String>> {
    let rows: Vec<(uuid::Uuid,)> =
        sqlx::query_as("SELECT op_id FROM custodian_hints WHERE tenant_id = $1 ORDER BY op_id")
            .bind(tenant.id.as_uuid())
            .fetch_all(stack.admin.pool())
            .await?;
    Ok(rows.into_iter().map(|(op,)| op.to_string()).collect())
}

/// Nothing but the custodian executor moved `op` once it was approved (no transition by the
/// webhook processor at all), and the ledger's invariants hold.
pub(crate) async fn moved_by_the_executor_only(stack: &Stack, op: &str) -> anyhow::Result<()> {
    let moves: Vec<(Option<String>, String, String)> = sqlx::query_as(
        "SELECT from_state, to_state, actor FROM operation_transitions \
         WHERE op_id = $1::uuid ORDER BY version",
    )
    .bind(op)
    .fetch_all(stack.admin.pool())
    .await?;
    for (from, to, actor) in &moves {
        let after_approval = from.as_deref().is_some_and(|f| f != "REQUESTED");
        anyhow::ensure!(
            actor != "webhook_processor" && (!after_approval || actor == "custodian"),
            "{op}: {from:?} -> {to} by {actor}"
        );
    }
    stack.assert_invariants().await
}

/// Runs the real `opledger-admin --json` with `args` (and `env`) against the stack's database.
pub(crate) fn admin(
    stack: &Stack,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<serde_json::Value> {
    let mut command = std::process::Command::new(opledger_testkit::binary_path("opledger-admin")?);
    command
        .arg("--json")
        .args(args)
        .env("OPLEDGER_ADMIN_DATABASE_URL", &stack.db.url)
        .env(
            "OPLEDGER_INBOX_BODY_KEYS",
            opledger_tests::inbox::body_keys(),
        );
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output()?;
    anyhow::ensure!(
        out.status.success(),
        "opledger-admin {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}
