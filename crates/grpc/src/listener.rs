//! Timeouts and limits of every listener a service opens (gRPC, webhook HTTP, metrics), the same
//! on every service ([`Limits`], configured as `[listener]`):
//!
//! - at most `max_connections` connections at once per listener; a connection beyond that is
//!   accepted and closed at once (so the kernel's backlog never fills with them);
//! - a connection from which nothing has been read for `idle_timeout` is closed: an idle
//!   keep-alive connection, one that never sent its HTTP/2 preface or request, one stalled
//!   half-way through its headers or body. A healthy HTTP/2 client answers the server's
//!   keep-alive pings (every `http2_keepalive_interval`, closed when unanswered within
//!   `http2_keepalive_timeout`), so its channel stays open while it lives;
//! - an HTTP/1.1 request head must arrive within `header_read_timeout` (a slow drip of header
//!   bytes is closed too);
//! - a gRPC call is cancelled after `request_timeout`; a webhook body must arrive whole within it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The limits of one listener (configured as `[listener]`, see [`opledger_config::ListenerConfig`]).
pub use opledger_config::Limits;

/// A connection whose reads fail with `TimedOut` once nothing has been read for the idle
/// timeout, holding its place among the listener's `max_connections` until it is dropped.
#[derive(Debug)]
pub struct Guarded<T> {
    io: T,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl<T> Guarded<T> {
    fn new(io: T, idle: Duration, permit: OwnedSemaphorePermit) -> Guarded<T> {
        Guarded {
            io,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            _permit: permit,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let next = Instant::now() + this.idle;
                    this.deadline.as_mut().reset(next);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle beyond the listener's idle_timeout",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for Guarded<TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// Accepts connections within the listener's limits: TCP_NODELAY on, each [`Guarded`]; one over
/// `max_connections` is closed at once and counted.
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    idle: Duration,
    refused: Arc<std::sync::atomic::AtomicU64>,
}

impl Acceptor {
    /// Accepts on `listener` within `limits`.
    pub fn new(listener: TcpListener, limits: &Limits) -> Acceptor {
        Acceptor {
            listener,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            idle: limits.idle_timeout,
            refused: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// The next connection within the limits (transient accept errors, such as a file
    /// descriptor shortage, are logged and retried after a short pause).
    pub async fn accept(&self) -> Guarded<TcpStream> {
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = self.slots.clone().try_acquire_owned() else {
                let refused = self
                    .refused
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if refused.is_power_of_two() {
                    tracing::warn!(
                        refused = refused + 1,
                        "connection refused: the listener's max_connections are open"
                    );
                }
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            return Guarded::new(stream, self.idle, permit);
        }
    }

    /// The stream of connections tonic's server takes.
    pub fn into_incoming(
        self,
    ) -> impl futures::Stream<Item = io::Result<Guarded<TcpStream>>> + Send + 'static {
        futures::stream::unfold(self, |acceptor| async move {
            let next = acceptor.accept().await;
            Some((Ok(next), acceptor))
        })
    }
}

/// Serves an HTTP/1.1 router (the webhook ingress, a metrics endpoint) on `listener` within
/// `limits` until `shutdown` resolves; then stops accepting and lets open requests finish (a
/// failed connection ends that connection only).
pub async fn serve_http(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let acceptor = Acceptor::new(listener, &limits);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // A request head larger than this is answered 431 (hyper's floor is 8 KiB).
        .max_buf_size(
            usize::try_from(limits.max_header_list_bytes)
                .unwrap_or(usize::MAX)
                .max(8192),
        )
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.http2_keepalive_interval)
        .keep_alive_timeout(limits.http2_keepalive_timeout)
        .max_header_list_size(limits.max_header_list_bytes);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let io = tokio::select! {
            io = acceptor.accept() => io,
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        let connection = graceful.watch(connection.into_owned());
        tokio::spawn(async move {
            // A closed, reset or timed-out connection is routine here.
            let _ = connection.await;
        });
    }
    // Open requests get a bounded time to finish.
    let _ = tokio::time::timeout(limits.request_timeout, graceful.shutdown()).await;
}

/// A request body that fails once `budget` has passed since the request arrived without the body
/// having ended (a slow drip of body bytes cannot keep a request open).
#[derive(Debug)]
pub struct DeadlineBody {
    inner: axum::body::Body,
    deadline: Pin<Box<Sleep>>,
    expired: Arc<std::sync::atomic::AtomicBool>,
}

impl DeadlineBody {
    /// `inner`, ending in an error if still unfinished after `budget`.
    pub fn new(inner: axum::body::Body, budget: Duration) -> DeadlineBody {
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(budget)),
            expired: Arc::default(),
        }
    }

    /// Set once the budget ran out before the body ended.
    pub fn expired(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.expired.clone()
    }
}

impl http_body::Body for DeadlineBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.expired
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    Poll::Ready(Some(Err(axum::Error::new(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request body not received within the listener's request_timeout",
                    )))))
                }
                Poll::Pending => Poll::Pending,
            },
            ready => ready,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
