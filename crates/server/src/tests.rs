//! How a runtime stops: a polled pass in progress finishes and no new one starts; `spawn`ed work
//! sees the token and is waited for; `background` work is dropped.

use super::Runtime;
use opledger_config::ListenerConfig;
use opledger_store::{Store, StoreConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;

/// A runtime on loopback ports over a store that never connects (nothing here reaches it; the
/// readiness probe only fails to).
async fn runtime() -> Result<Runtime, Box<dyn std::error::Error>> {
    let pool = sqlx::postgres::PgPoolOptions::new().connect_lazy("postgres://127.0.0.1:1/none")?;
    Ok(Runtime::new(
        "opledger.v1.OperationsService",
        TcpListener::bind("127.0.0.1:0").await?,
        TcpListener::bind("127.0.0.1:0").await?,
        Store::from_pool(pool, StoreConfig::default()),
        ListenerConfig::default().limits(),
    ))
}

#[tokio::test]
async fn a_pass_in_progress_finishes_and_none_starts_after_the_stop()
-> Result<(), Box<dyn std::error::Error>> {
    let mut runtime = runtime().await?;
    let (started, finished) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (s, f) = (started.clone(), finished.clone());
    runtime.every(Duration::from_millis(5), move || {
        let (s, f) = (s.clone(), f.clone());
        async move {
            s.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(40)).await;
            f.fetch_add(1, Ordering::SeqCst);
        }
    });
    let saw_stop = Arc::new(AtomicBool::new(false));
    let saw = saw_stop.clone();
    runtime.spawn(|stop| async move {
        stop.cancelled().await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        saw.store(true, Ordering::SeqCst);
    });
    let dropped = Arc::new(AtomicBool::new(true));
    let background = dropped.clone();
    runtime.background(async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        background.store(false, Ordering::SeqCst);
    });
    // Stop in the middle of a pass (each takes 40 ms).
    let shutdown = tokio::time::sleep(Duration::from_millis(100));
    runtime
        .serve_until(Routes::default(), None, shutdown)
        .await?;
    let (s, f) = (
        started.load(Ordering::SeqCst),
        finished.load(Ordering::SeqCst),
    );
    assert!(s >= 1, "passes ran before the stop: {s}");
    assert_eq!(
        s, f,
        "the pass in progress finished before serve_until returned"
    );
    assert!(
        saw_stop.load(Ordering::SeqCst),
        "spawned work saw the stop and was waited for"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "background work was dropped, not run to its end"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        s,
        "no pass starts after the stop"
    );
    Ok(())
}
