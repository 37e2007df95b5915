//! Refusals end, and never block others (issue 9): 200 approved withdrawals of one tenant that
//! cannot be signed stand at the head of the queue, and another tenant's healthy withdrawal is
//! still on chain within two blocks of its approval (one block a second; the blocks are counted
//! on the node), then CONFIRMED by the watcher at its configured depth. Two ways of being unsignable:
//!
//! * the tenant's signer instance is down (UNAVAILABLE, a transient failure that ends nothing):
//!   its withdrawals stay APPROVED and back off exponentially, the signer is not asked again at
//!   every pass;
//! * the signer refuses them (their 1 wei fee cap fits no transfer: FEE_CAP_EXCEEDED): they stay
//!   APPROVED in back-off, or FAILED_TERMINAL when the signer ends such refusals itself (then
//!   asked once, their back-off cleared).
//!
//! Either way nothing is signed or sent for them and every hold is kept. The signer is the real
//! one, holding both tenants' hot wallets and pinning both trust roots, behind a transparent gRPC
//! front that routes each tenant to its signer instance (as a router in front of per-tenant
//! signers would) and records when each withdrawal was asked for; `bulk`'s instance may be a port
//! nobody listens on.

use futures::StreamExt;
use opledger_config::{DatabaseUrl, Secret};
use opledger_domain::state::{Actor, OperationState};
use opledger_evm::signer::LocalKey;
use opledger_proto::v1 as pb;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_proto::v1::signer_service_server::{SignerService, SignerServiceServer};
use opledger_signer::{Signer, Wallets};
use opledger_store::queue::Backoff;
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::{Anvil, AnvilOptions, DEV_KEYS, ServiceRole};
use opledger_tests::chain::evidence;
use opledger_tests::signer::{CALLER_TOKEN, NETWORK, approve, trust_root};
use opledger_tests::{ALICE, BOB, Stack, Tenant, authed, new_key, payload};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};
use zeroize::Zeroizing;

const REFUSED: usize = 200;
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_millis(4_000);

/// When each withdrawal was asked for, by withdrawal id.
type Calls = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

/// What makes `bulk`'s withdrawals unsignable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unsignable {
    /// Its signer instance does not answer: UNAVAILABLE.
    SignerDown,
    /// The signer refuses them: FEE_CAP_EXCEEDED.
    FeeCap,
}

/// Routes each tenant's calls to its signer instance, recording SignWithdrawal calls.
#[derive(Debug, Clone)]
struct RecordingFront {
    signer: SignerServiceClient<Channel>,
    /// Where `down_tenant`'s calls go (a port nobody listens on), when set.
    down: Option<(String, SignerServiceClient<Channel>)>,
    calls: Calls,
}

impl RecordingFront {
    fn instance(&self, tenant_id: &str) -> SignerServiceClient<Channel> {
        match &self.down {
            Some((tenant, down)) if tenant == tenant_id => down.clone(),
            _ => self.signer.clone(),
        }
    }
}

fn forwarded<T>(request: Request<T>) -> Request<T> {
    let token = request.metadata().get("authorization").cloned();
    let mut out = Request::new(request.into_inner());
    if let Some(token) = token {
        out.metadata_mut().insert("authorization", token);
    }
    out
}

#[tonic::async_trait]
impl SignerService for RecordingFront {
    async fn sign_withdrawal(
        &self,
        request: Request<pb::SignWithdrawalRequest>,
    ) -> Result<Response<pb::SignResponse>, Status> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(request.get_ref().withdrawal_id.clone())
            .or_default()
            .push(Instant::now());
        self.instance(&request.get_ref().tenant_id)
            .sign_withdrawal(forwarded(request))
            .await
    }

    async fn sign_replacement(
        &self,
        request: Request<pb::SignReplacementRequest>,
    ) -> Result<Response<pb::SignResponse>, Status> {
        self.instance(&request.get_ref().tenant_id)
            .sign_replacement(forwarded(request))
            .await
    }
}

/// Aborts the spawned servers and loops when the test ends, however it ends.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

fn key(index: usize) -> anyhow::Result<Arc<LocalKey>> {
    let bytes = hex::decode(DEV_KEYS[index].1.trim_start_matches("0x"))?;
    let mut secret = Zeroizing::new([0_u8; 32]);
    secret.copy_from_slice(&bytes);
    Ok(Arc::new(LocalKey::from_secret_bytes(secret)?))
}

/// The real signer in-process for both tenants (each its own hot wallet: anvil dev accounts 0 and
/// 1), and the recording front before it, sending `refused`'s calls to a dead instance when
/// `unsignable` says so; returns the front's address.
async fn signers(
    stack: &Stack,
    healthy: &Tenant,
    refused: &Tenant,
    unsignable: Unsignable,
    calls: Calls,
    tasks: &mut Tasks,
) -> anyhow::Result<std::net::SocketAddr> {
    let url = stack.url(ServiceRole::Signer);
    let store = Store::connect(
        &url,
        StoreConfig {
            max_connections: 8,
            ..StoreConfig::default()
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("signer role cannot connect: {}", e.log_safe()))?;
    let mut config = opledger_tests::signer::config(
        &url,
        healthy.id,
        Path::new("unused"),
        Path::new("unused"),
        30,
    );
    config.trust_roots.push(trust_root(refused.id));
    let mut wallets = Wallets::default();
    anyhow::ensure!(wallets.insert(healthy.id, NETWORK, key(0)?, 0));
    anyhow::ensure!(wallets.insert(refused.id, NETWORK, key(1)?, 0));
    let callers = opledger_signer::callers(&config);
    let signer = Signer::new(store.signer(), Arc::new(config), Arc::new(wallets));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let signer_addr = listener.local_addr()?;
    let routes = opledger_signer::routes(signer, callers);
    tasks.0.push(tokio::spawn(async move {
        let _ = opledger_server::serve::serve(
            listener,
            opledger_signer::SERVICE_NAME,
            routes,
            std::future::pending(),
        )
        .await;
    }));
    let down = match unsignable {
        Unsignable::SignerDown => Some((
            refused.id.to_string(),
            SignerServiceClient::new(
                tonic::transport::Endpoint::from_shared(format!(
                    "http://127.0.0.1:{}",
                    opledger_testkit::free_port()
                ))?
                .connect_lazy(),
            ),
        )),
        Unsignable::FeeCap => None,
    };
    let front = RecordingFront {
        signer: SignerServiceClient::connect(format!("http://{signer_addr}")).await?,
        down,
        calls,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let front_addr = listener.local_addr()?;
    tasks.0.push(tokio::spawn(async move {
        let _ = opledger_server::serve::serve(
            listener,
            opledger_signer::SERVICE_NAME,
            Routes::new(SignerServiceServer::new(front)),
            std::future::pending(),
        )
        .await;
    }));
    Ok(front_addr)
}

async fn created_and_approved(
    stack: &Stack,
    tenant: &Tenant,
    body: pb::WithdrawalPayload,
) -> anyhow::Result<pb::Withdrawal> {
    let w = stack
        .client()
        .await?
        .create_withdrawal(authed(
            &tenant.client,
            pb::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(body),
            },
        ))
        .await?
        .into_inner()
        .withdrawal
        .ok_or_else(|| anyhow::anyhow!("no withdrawal"))?;
    approve(stack, tenant, &w).await?;
    Ok(w)
}

/// The most calls of one operation the back-off allows within `window` of its first call.
fn most_calls(backoff: &Backoff, window: Duration) -> usize {
    let (mut calls, mut at) = (1_u32, Duration::ZERO);
    loop {
        at += backoff.delay(calls);
        if at > window {
            return calls as usize;
        }
        calls += 1;
    }
}

/// The tenant's withdrawals the signer ended (FAILED_TERMINAL).
async fn ended_count(
    stack: &Stack,
    tenant: opledger_domain::ids::TenantId,
) -> anyhow::Result<usize> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM withdrawal_ops WHERE tenant_id = $1 AND state = 'FAILED_TERMINAL'",
    )
    .bind(tenant.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    Ok(usize::try_from(n)?)
}

/// Due operations whose back-off has not expired, read as the superuser.
async fn stack_backoff_waiting(stack: &Stack) -> anyhow::Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM broadcast_backoff b JOIN withdrawal_ops o USING (tenant_id, op_id) \
         WHERE b.next_attempt_at > now() AND o.state IN ('APPROVED', 'SIGNING', 'SIGNED')",
    )
    .fetch_one(stack.admin.pool())
    .await?;
    Ok(n)
}

/// The block the node included the withdrawal's signed transfer in, once it has.
async fn included_in(
    stack: &Stack,
    node: &Anvil,
    withdrawal_id: &str,
) -> anyhow::Result<Option<u64>> {
    let hash: Option<(String,)> =
        sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_optional(stack.admin.pool())
            .await?;
    let Some((hash,)) = hash else {
        return Ok(None);
    };
    let Some(receipt) = node.receipt(&hash).await? else {
        return Ok(None);
    };
    let block = receipt["blockNumber"]
        .as_str()
        .and_then(|n| u64::from_str_radix(n.trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| anyhow::anyhow!("receipt without a block number: {receipt}"))?;
    Ok(Some(block))
}

/// The block the watcher recorded the withdrawal's inclusion in, once CONFIRMED.
async fn confirmed_in(stack: &Stack, withdrawal_id: &str) -> anyhow::Result<Option<u64>> {
    let row: Option<(String, Option<i64>)> = sqlx::query_as(
        "SELECT o.state, (SELECT max(i.block_number) FROM inclusions i \
           WHERE i.op_id = o.op_id AND i.reorged_at IS NULL) \
         FROM withdrawal_ops o WHERE o.op_id = $1",
    )
    .bind(withdrawal_id.parse::<uuid::Uuid>()?)
    .fetch_optional(stack.admin.pool())
    .await?;
    Ok(match row {
        Some((state, Some(block))) if state == "CONFIRMED" => Some(u64::try_from(block)?),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_withdrawals_whose_signer_is_down_never_delay_another_tenants_payout()
-> anyhow::Result<()> {
    scenario(Unsignable::SignerDown).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_withdrawals_the_signer_refuses_never_delay_another_tenants_payout()
-> anyhow::Result<()> {
    scenario(Unsignable::FeeCap).await
}

async fn scenario(unsignable: Unsignable) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let bulk = stack.tenant("bulk").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    stack.fund(&bulk, "treasury", "ETH", "1000000").await?;
    let node = Anvil::start_with(AnvilOptions {
        block_time: Some(1),
        ..AnvilOptions::default()
    })
    .await?;
    let mut tasks = Tasks(Vec::new());
    let calls: Calls = Arc::default();
    let front = signers(&stack, &acme, &bulk, unsignable, calls.clone(), &mut tasks).await?;

    // 200 approved withdrawals of `bulk`, the oldest due operations: their signer instance is
    // down, or their fee cap (1 wei) fits no transfer and the signer refuses each.
    let refused: Vec<pb::Withdrawal> = futures::stream::iter(0..REFUSED)
        .map(|_| {
            let mut body = payload("1000", BOB);
            if unsignable == Unsignable::FeeCap {
                body.fee_cap = "1".into();
            }
            created_and_approved(&stack, &bulk, body)
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;

    let config = opledger_broadcaster::Config {
        base: opledger_config::ServiceBase {
            database_url: DatabaseUrl(stack.url(ServiceRole::Broadcaster)),
            ..opledger_broadcaster::Config::default().base
        },
        signer: opledger_grpc::client::SignerLink {
            signer_url: format!("http://{front}"),
            signer_token: Secret(CALLER_TOKEN.to_owned()),
            signer_tls: None,
        },
        chain: opledger_chain::ChainLinks {
            rpc: BTreeMap::from([(NETWORK.to_owned(), node.rpc_url())]),
            evidence: BTreeMap::from([(NETWORK.to_owned(), evidence(&[&node.rpc_url()], 1))]),
            ..Default::default()
        },
        submit_timeout_ms: 10_000,
        worker_id: "broadcaster-fairness".into(),
        backoff_base_ms: u64::try_from(BACKOFF_BASE.as_millis())?,
        backoff_max_ms: u64::try_from(BACKOFF_MAX.as_millis())?,
        ..opledger_broadcaster::Config::default()
    };
    let broadcaster = opledger_broadcaster::broadcaster(&config, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&config, stack.admin.broadcaster())?;
    // The worker loop `opledger_broadcaster::run` runs; told to stop, it lets what is in flight
    // finish, so every deferral it made is recorded.
    let (stop, stopped_rx) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let broadcaster = broadcaster.clone();
        let poll = Duration::from_millis(config.poll_interval_ms);
        tokio::spawn(async move {
            broadcaster
                .run(config.batch_size, config.concurrency, poll, async move {
                    let _ = stopped_rx.await;
                })
                .await;
        })
    };
    tasks.0.push(tokio::spawn(async move {
        loop {
            watcher.tick(256).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }));

    // The healthy withdrawal of another tenant, approved while the refused ones lead the queue.
    // It is the broadcaster's to move from its approval on: the two blocks count from the head
    // when the approval was answered (the create and approval calls themselves, slow on a loaded
    // machine, are not the broadcaster's).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let created_at_block = node.block_number().await?;
    let healthy = created_and_approved(&stack, &acme, payload("2500000000000000", ALICE)).await?;
    let approved_at = Instant::now();
    let due_at_block = node.block_number().await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    // Included on chain (the node's receipt of its signed transfer)...
    let included = loop {
        if let Some(block) = included_in(&stack, &node, &healthy.withdrawal_id).await? {
            break block;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the healthy withdrawal was not included (state {}, head {}, created at block \
             {created_at_block})",
            stack.state(&healthy.withdrawal_id).await?,
            node.block_number().await?
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let included_after = approved_at.elapsed();
    // ...and CONFIRMED by the watcher at its configured depth, in that block.
    loop {
        if let Some(block) = confirmed_in(&stack, &healthy.withdrawal_id).await? {
            assert_eq!(block, included, "the watcher's inclusion is the node's");
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the healthy withdrawal was not confirmed (state {}, head {}, included in block \
             {included})",
            stack.state(&healthy.withdrawal_id).await?,
            node.block_number().await?
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked_after = calls
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&healthy.withdrawal_id)
        .and_then(|at| at.first().copied())
        .map(|at| at.duration_since(approved_at));
    assert!(
        included <= due_at_block + 2,
        "created at block {created_at_block}, approved at block {due_at_block}, included in \
         block {included}: more than two blocks \
         (signer asked {asked_after:?} after the approval, included about {included_after:?} after)"
    );

    // Let the unsignable ones run through several back-off periods (at least 8 s, and until each
    // was asked twice or ended by the signer: a loaded machine is slower), then stop the worker.
    let observed_from = Instant::now();
    let deadline = observed_from + Duration::from_secs(90);
    loop {
        let handled = {
            let calls = calls.lock().unwrap_or_else(|p| p.into_inner());
            refused
                .iter()
                .filter(|w| calls.get(&w.withdrawal_id).map_or(0, Vec::len) >= 2)
                .count()
        };
        let ended = ended_count(&stack, bulk.id).await?;
        if observed_from.elapsed() >= Duration::from_secs(8) && handled + ended >= REFUSED {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "after 90 s only {handled} unsignable withdrawals were asked twice and {ended} ended"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop.send(());
    worker.await?;
    let stopped = Instant::now();

    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        calls.get(&healthy.withdrawal_id).map(Vec::len),
        Some(1),
        "the healthy withdrawal was signed at the first call"
    );
    let backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
    let (reason_expected, class) = match unsignable {
        Unsignable::SignerDown => ("SIGNER_UNAVAILABLE", "signer_unavailable"),
        Unsignable::FeeCap => ("FEE_CAP_EXCEEDED", "signer_refused"),
    };
    let mut total = 0_u64;
    let mut ended = 0_usize;
    for w in &refused {
        let id = &w.withdrawal_id;
        let at = calls.get(id).cloned().unwrap_or_default();
        total += at.len() as u64;
        let (state, failures, reason): (String, Option<i32>, Option<String>) = sqlx::query_as(
            "SELECT o.state, b.failures, b.last_reason FROM withdrawal_ops o \
             LEFT JOIN broadcast_backoff b USING (tenant_id, op_id) WHERE o.op_id = $1",
        )
        .bind(id.parse::<uuid::Uuid>()?)
        .fetch_one(stack.admin.pool())
        .await?;
        if state == "FAILED_TERMINAL" && unsignable == Unsignable::FeeCap {
            // The signer ended it: out of the queue, no back-off left, asked once.
            assert_eq!((at.len(), failures), (1, None), "{id}");
            ended += 1;
            continue;
        }
        assert_eq!(state, "APPROVED", "{id}");
        // Every call was followed by its back-off: the row counts them all.
        assert!(at.len() >= 2, "{id}: asked {} times", at.len());
        assert_eq!(failures, Some(i32::try_from(at.len())?), "{id}");
        assert_eq!(reason.as_deref(), Some(reason_expected), "{id}");
        // Not asked at every pass: the n-th retry came no sooner than the back-off allowed.
        for (n, pair) in at.windows(2).enumerate() {
            let failures = u32::try_from(n + 1)?;
            let gap = pair[1].duration_since(pair[0]);
            assert!(
                gap + Duration::from_millis(50) >= backoff.delay(failures),
                "{id}: retry {failures} after {gap:?}, back-off {:?}",
                backoff.delay(failures)
            );
        }
        // Hence at most as many calls as the back-off fits in the time it was retried over
        // (about 7 in 12 s), where a retry at every pass (0.2 s apart) would have made dozens.
        let window = stopped.duration_since(at[0]);
        assert!(
            at.len() <= most_calls(&backoff, window),
            "{id}: asked {} times in {window:?}",
            at.len()
        );
    }
    // Each of those calls is one deferral of the broadcaster, and nothing else deferred.
    let deferred: u64 = broadcaster.deferral_counts().iter().map(|(_, n)| n).sum();
    assert_eq!(deferred, total);
    // Stopped, nothing new enters back-off: the gauge lies between two counts around the scrape.
    let waiting_before = stack_backoff_waiting(&stack).await?;
    let scraped = broadcaster.scrape().await;
    let waiting_after = stack_backoff_waiting(&stack).await?;
    assert!(
        scraped.contains(&format!(
            "opledger_broadcast_deferrals_total{{class=\"{class}\"}} {total}"
        )),
        "{scraped}"
    );
    let waiting: i64 = scraped
        .lines()
        .find_map(|l| l.strip_prefix("opledger_broadcast_backoff_operations "))
        .ok_or_else(|| anyhow::anyhow!("no back-off gauge in {scraped}"))?
        .parse()?;
    assert!(
        (waiting_after..=waiting_before).contains(&waiting),
        "gauge {waiting}, counted {waiting_before} then {waiting_after}"
    );
    if unsignable == Unsignable::SignerDown {
        assert_eq!(ended, 0, "an unavailable signer ends nothing");
        assert!(waiting > 0, "still waiting in back-off when stopped");
    }

    // Nothing was signed or sent for them, and every hold is kept.
    let (attempts, open_holds): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM tx_attempts WHERE tenant_id = $1), \
           (SELECT count(*) FROM ledger_holds WHERE tenant_id = $1 AND status = 'OPEN')",
    )
    .bind(bulk.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!((attempts, open_holds), (0, REFUSED as i64));
    assert_eq!(
        stack.balance(bulk.id, "treasury", "ETH").await?,
        (1_000_000 - 1000 * REFUSED as u128, 1000 * REFUSED as u128)
    );
    assert_eq!(node.nonce(DEV_KEYS[1].0, "latest").await?, 0);
    let most = refused
        .iter()
        .map(|w| calls.get(&w.withdrawal_id).map_or(0, Vec::len))
        .max()
        .unwrap_or(0);
    eprintln!(
        "fairness ({unsignable:?}): healthy created at block {created_at_block}, approved at \
         block {due_at_block}, confirmed in \
         block {included} (signer asked {asked_after:?}, included {included_after:?} after its \
         approval); \
         unsignable={REFUSED} ended={ended} signer_calls={total} most_per_withdrawal={most}"
    );
    stack.assert_invariants().await
}

/// The broadcaster's store, as its own database login.
async fn broadcaster_store(stack: &Stack) -> anyhow::Result<Store> {
    Store::connect(&stack.url(ServiceRole::Broadcaster), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!("broadcaster role cannot connect: {}", e.log_safe()))
}

#[tokio::test]
async fn the_queue_takes_each_tenant_in_turn_skips_back_off_and_forgets_it_when_the_operation_leaves()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let mut tenants = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let tenant = stack.tenant(name).await?;
        stack.fund(&tenant, "treasury", "ETH", "1000000").await?;
        tenants.push(tenant);
    }
    // alpha: 4 approved withdrawals, beta: 2, gamma: 1, approved in that order (oldest first).
    let mut ids: Vec<Vec<opledger_domain::ids::OperationId>> = Vec::new();
    for (tenant, n) in tenants.iter().zip([4, 2, 1]) {
        let mut mine = Vec::new();
        for _ in 0..n {
            let w = created_and_approved(&stack, tenant, payload("10", BOB)).await?;
            mine.push(w.withdrawal_id.parse()?);
        }
        ids.push(mine);
    }
    let store = broadcaster_store(&stack).await?;
    let order =
        |due: Vec<opledger_store::queue::Queued>| -> Vec<opledger_domain::ids::OperationId> {
            due.into_iter().map(|q| q.due.op_id).collect()
        };
    // Every tenant's oldest first, then every tenant's second, ...
    assert_eq!(
        order(store.next_due(5).await?),
        [ids[0][0], ids[1][0], ids[2][0], ids[0][1], ids[1][1]]
    );

    // alpha's oldest fails a pass: retried at once (first failure), but after the tenant's fresh
    // ones; failing again, it is skipped for the back-off.
    let back_off = |op: opledger_domain::ids::OperationId, failures: u32, retry_in: Duration| {
        opledger_store::queue::BackOff {
            tenant_id: tenants[0].id,
            op_id: op,
            failures,
            retry_in,
            reason: "SIGNER_UNAVAILABLE",
        }
    };
    assert!(
        store
            .back_off(&back_off(ids[0][0], 1, Duration::ZERO))
            .await?
    );
    let alpha: Vec<_> = order(store.next_due(50).await?)
        .into_iter()
        .filter(|op| ids[0].contains(op))
        .collect();
    assert_eq!(alpha, [ids[0][1], ids[0][2], ids[0][3], ids[0][0]]);
    assert!(
        store
            .back_off(&back_off(ids[0][0], 2, Duration::from_secs(60)))
            .await?
    );
    let due = order(store.next_due(50).await?);
    assert_eq!(due.len(), 6);
    assert!(!due.contains(&ids[0][0]), "skipped while in back-off");
    // A shorter back-off recorded later (a slower worker) never shortens it.
    assert!(
        store
            .back_off(&back_off(ids[0][0], 2, Duration::ZERO))
            .await?
    );
    assert!(!order(store.next_due(50).await?).contains(&ids[0][0]));
    assert_eq!(
        store.backoff_summary().await?,
        opledger_store::queue::BackoffSummary {
            waiting: 1,
            max_failures: 2
        }
    );

    // Leaving the due states clears the back-off, whoever made the move: here the signer's own
    // login ends the operation (APPROVED -> FAILED_TERMINAL), without any grant on the table.
    let signer_store = Store::connect(&stack.url(ServiceRole::Signer), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!("signer role cannot connect: {}", e.log_safe()))?;
    signer_store
        .transition(&TransitionRequest::new(
            tenants[0].id,
            ids[0][0],
            OperationState::Approved,
            OperationState::FailedTerminal,
            Actor::Signer,
            "signer-test",
            "refusal is final",
        ))
        .await
        .map_err(|e| anyhow::anyhow!("the signer ends it: {}", e.log_safe()))?;
    let (rows,): (i64,) = sqlx::query_as("SELECT count(*) FROM broadcast_backoff")
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!(rows, 0, "cleared by the trigger");
    // A pass that fails on an operation that is no longer due records nothing.
    assert!(
        !store
            .back_off(&back_off(ids[0][0], 3, Duration::from_secs(60)))
            .await?
    );
    assert!(
        store
            .back_off(&back_off(ids[0][1], 1, Duration::ZERO))
            .await?
    );
    assert!(store.clear_backoff(tenants[0].id, ids[0][1]).await?);
    assert!(!store.clear_backoff(tenants[0].id, ids[0][1]).await?);

    // Only the broadcaster's login writes the back-off table.
    for role in [
        ServiceRole::Operations,
        ServiceRole::Approvals,
        ServiceRole::Reconciler,
        ServiceRole::Inbox,
        ServiceRole::Signer,
    ] {
        let pool = sqlx::PgPool::connect(&stack.url(role)).await?;
        let refused = sqlx::query(
            "INSERT INTO broadcast_backoff (tenant_id, op_id, failures, next_attempt_at, \
             last_reason) VALUES ($1, $2, 1, now() + interval '1 day', 'FORGED')",
        )
        .bind(tenants[1].id.as_uuid())
        .bind(ids[1][0].as_uuid())
        .execute(&pool)
        .await
        .expect_err("no grant");
        let code = refused
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.into_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{role:?}: {refused}");
        pool.close().await;
    }
    stack.assert_invariants().await
}
