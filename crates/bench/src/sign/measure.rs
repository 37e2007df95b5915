//! The sign benchmark's measurements: `evm::sign` alone as the CPU ceiling, and concurrent
//! callers of the real signer's `sign_withdrawal`.

use crate::report::summarize;
use alloy_primitives::{Address, U256};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_evm::signer::{self as evm, LocalKey};
use opledger_evm::tx::{TransferKind, TransferRequest};
use opledger_signer::Signer;
use opledger_signer::config::NetworkConfig;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::options::BASELINE_THREADS;
use super::setup::{random_address, random_secret, signer_err};
use super::types::{Baselines, Measured};

/// The CPU ceiling of signing alone on one thread and on [`BASELINE_THREADS`], each for
/// `seconds` (run while the database is idle).
pub(super) async fn baselines(network: &NetworkConfig, seconds: u64) -> anyhow::Result<Baselines> {
    let baseline_for = Duration::from_secs(seconds);
    let net = network.clone();
    let (single, parallel) = tokio::task::spawn_blocking(move || {
        Ok::<_, anyhow::Error>((
            baseline(&net, 1, baseline_for)?,
            baseline(&net, BASELINE_THREADS, baseline_for)?,
        ))
    })
    .await??;
    Ok(Baselines { single, parallel })
}

/// `evm::sign` of native transfers shaped like the signer's, on `threads` threads for `duration`:
/// signatures made and the time taken.
fn baseline(
    network: &NetworkConfig,
    threads: usize,
    duration: Duration,
) -> anyhow::Result<(usize, Duration)> {
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
    let keys = (0..threads)
        .map(|_| LocalKey::from_secret_bytes(random_secret()))
        .collect::<Result<Vec<_>, _>>()?;
    let requests: Vec<TransferRequest> = (0..256)
        .map(|_| TransferRequest {
            to: random_address(),
            ..template.clone()
        })
        .collect();
    let start = Instant::now();
    let counts = std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .iter()
            .map(|key| {
                let requests = &requests;
                scope.spawn(move || {
                    let mut n = 0_usize;
                    while start.elapsed() < duration {
                        let request = TransferRequest {
                            nonce: n as u64,
                            ..requests[n % requests.len()].clone()
                        };
                        std::hint::black_box(evm::sign(&request, key)?);
                        n += 1;
                    }
                    Ok::<_, evm::SignError>(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a baseline thread panicked"))?
                    .map_err(anyhow::Error::from)
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    Ok((counts.iter().sum(), start.elapsed()))
}

/// `workers` concurrent callers of `sign_withdrawal` over `work` until every withdrawal was tried
/// once. A call that answers with an attempt it did not sign itself counts as an error.
pub(super) async fn sign_all(
    signer: &Signer,
    work: Vec<(TenantId, OperationId)>,
    workers: usize,
) -> anyhow::Result<Measured> {
    let work = Arc::new(work);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (signer, work, next) = (signer.clone(), work.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors, mut first_error) = (Vec::new(), 0_usize, None);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(tenant, op)) = work.get(i) else {
                    break;
                };
                let t = Instant::now();
                match signer.sign_withdrawal(tenant, op).await {
                    Ok(signed) if !signed.already_signed => lat.push(t.elapsed()),
                    Ok(_) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| "already signed".to_owned());
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| signer_err(&e));
                    }
                }
            }
            (lat, errors, first_error)
        }));
    }
    let (mut all, mut errors, mut first_error) = (Vec::new(), 0, None);
    for task in tasks {
        let (lat, e, first) = task.await?;
        all.extend(lat);
        errors += e;
        first_error = first_error.or(first);
    }
    let elapsed = start.elapsed();
    let busy = all.iter().sum();
    Ok(Measured {
        summary: summarize(all, errors, elapsed),
        busy,
        first_error,
    })
}

pub(super) fn check_errors(label: &str, m: &Measured) -> anyhow::Result<()> {
    anyhow::ensure!(
        m.summary.errors == 0,
        "{label}: {} of {} sign_withdrawal calls failed (first: {})",
        m.summary.errors,
        m.summary.errors + m.summary.count,
        m.first_error.as_deref().unwrap_or("-")
    );
    Ok(())
}
