//! The HTTP/1.1 connection loop: every request goes through the router, is logged with the note
//! its handler left, and may have its connection closed without an answer (fault 1).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tower::ServiceExt;

use crate::app::App;
use crate::reply::{DropMode, Note};
use crate::state::RequestEntry;

/// Serves `router` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, router: Router, app: Arc<App>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (router, app) = (router.clone(), app.clone());
        tokio::spawn(async move {
            let kill = Arc::new(Notify::new());
            let service = {
                let kill = kill.clone();
                hyper::service::service_fn(move |request| {
                    handle(router.clone(), app.clone(), kill.clone(), request)
                })
            };
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = kill.notified() => {}
            }
        });
    }
}

async fn handle(
    router: Router,
    app: Arc<App>,
    kill: Arc<Notify>,
    request: http::Request<Incoming>,
) -> Result<http::Response<Body>, Infallible> {
    let method = request.method().to_string();
    let path = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_owned(),
        |p| p.as_str().to_owned(),
    );
    let response = router.oneshot(request.map(Body::new)).await?;
    let note = response
        .extensions()
        .get::<Note>()
        .cloned()
        .unwrap_or_default();
    if !path.starts_with("/sim/") {
        app.shared.log_request(RequestEntry {
            at_ms: app.now_ms(),
            method,
            path,
            profile: note.profile,
            reference: note.reference.clone(),
            status: match note.drop {
                Some(DropMode::Close) => None,
                _ => Some(response.status().as_u16()),
            },
            faults: note.faults.clone(),
        });
    }
    match note.drop {
        Some(DropMode::Close) => {
            kill.notify_one();
            std::future::pending::<()>().await;
        }
        Some(DropMode::Delay(ms)) => tokio::time::sleep(Duration::from_millis(ms)).await,
        None => {}
    }
    Ok(response)
}
