//! The node baseline of the pipeline benchmark: pre-signed transfers submitted straight to the
//! node, its own acceptance rate measured in the same run.

use alloy_primitives::{Address, U256};
use opledger_evm::signer::{self as evm, KeyProvider, LocalKey};
use opledger_evm::tx::{TransferKind, TransferRequest};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::cpu;
use super::node::Node;
use super::options::Args;
use super::services;
use super::setup::random_address;
use super::types::Baseline;

/// Pre-signed native transfers from one fresh wallet, submitted with `eth_sendRawTransaction` by
/// a few concurrent submitters: the node's own acceptance rate.
pub(super) async fn measure(
    node: &Node,
    meter: &cpu::Meter,
    key: LocalKey,
    args: &Args,
) -> anyhow::Result<Baseline> {
    let n = args.withdrawals;
    let network = services::network();
    let address = format!("{:#x}", key.address());
    let template = TransferRequest {
        chain_id: network.chain_id,
        nonce: 0,
        to: Address::ZERO,
        kind: TransferKind::Native {
            value: U256::from(100_u64),
        },
        gas_limit: network.gas_limit_native,
        max_fee_per_gas: network.max_fee_per_gas.0,
        max_priority_fee_per_gas: network.max_priority_fee_per_gas.0,
    };
    let raws = tokio::task::spawn_blocking(move || {
        (0..n)
            .map(|i| {
                let request = TransferRequest {
                    nonce: i as u64,
                    to: random_address(),
                    ..template.clone()
                };
                evm::sign(&request, &key).map(|s| s.raw)
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await??;
    let raws = Arc::new(raws);
    let next = Arc::new(AtomicUsize::new(0));
    let before = meter.sample();
    let start = Instant::now();
    let mut first_error = None;
    let results = join_tasks(args.baseline_concurrency.max(1), |_| {
        let (raws, next) = (raws.clone(), next.clone());
        async move {
            let mut errors = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(raw) = raws.get(i) else { break };
                if let Err(e) = node.send_raw(raw).await {
                    errors.push(format!("{e:#}"));
                }
            }
            errors
        }
    })
    .await;
    let elapsed = start.elapsed();
    for errors in results {
        if let Some(e) = errors.into_iter().next() {
            first_error.get_or_insert(e);
        }
    }
    if let Some(e) = first_error {
        anyhow::bail!("the node refused a baseline transfer: {e}");
    }
    anyhow::ensure!(
        node.wait_nonce(&address, n as u64, Duration::from_secs(60))
            .await?,
        "the baseline's {n} transfers were not all mined within 60 s"
    );
    let mined_after = start.elapsed();
    let used = before.until(&meter.sample());
    Ok(Baseline {
        sent: n,
        per_sec: n as f64 / elapsed.as_secs_f64(),
        mined_after,
        node_cpu: used.node,
    })
}

/// Runs `tasks` copies of `make(i)` concurrently on this task and collects their outputs.
async fn join_tasks<F, Fut, T>(tasks: usize, make: F) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    futures::future::join_all((0..tasks).map(make)).await
}
