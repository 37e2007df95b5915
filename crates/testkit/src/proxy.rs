//! A fault-injecting TCP proxy on 127.0.0.1, switched between behaviours at run time by the test.
//!
//! [`FaultProxy`] sits between a client (the broadcaster, any service) and an upstream (anvil's
//! HTTP JSON-RPC, PostgreSQL). Each new connection takes the proxy's current [`FaultMode`] and
//! keeps it until it ends; [`FaultProxy::set_mode`] and [`FaultProxy::once`] change what later
//! connections get and never touch live ones. HTTP clients keep connections in a pool, so to make
//! the next request take a new mode, call [`FaultProxy::drop_connections`] first: it shuts every
//! live proxied connection down before it returns, and the client reconnects.
//!
//! ```no_run
//! # async fn demo(anvil: std::net::SocketAddr) -> anyhow::Result<()> {
//! use opledger_testkit::{FaultMode, FaultProxy};
//!
//! let proxy = FaultProxy::start(anvil).await?;
//! let rpc_url = proxy.url("http"); // give this to the broadcaster instead of anvil's URL
//! // ... later: the next request reaches anvil, which acts on it, but its answer is lost.
//! proxy.drop_connections();
//! proxy.once(FaultMode::ForwardThenDropResponse);
//! # let _ = rpc_url;
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, anyhow};
use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// In [`FaultMode::ForwardThenDropResponse`], how long after the client's last forwarded byte
/// the client side is closed when the upstream has not answered by then.
pub const DROP_RESPONSE_GRACE: Duration = Duration::from_secs(2);

/// In [`FaultMode::ForwardThenDropResponse`], how long the upstream connection is kept open
/// (and read from) after the client side was closed without an answer, so that the upstream
/// finishes the work it was asked for instead of seeing its caller vanish.
const UPSTREAM_LINGER: Duration = Duration::from_secs(30);
/// Once the upstream has started answering, the rest of its answer is read (and discarded) until
/// it has been quiet this long.
const ANSWER_DRAIN_IDLE: Duration = Duration::from_millis(200);
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const BUFFER_SIZE: usize = 16 * 1024;
/// Chunks in flight per direction in [`FaultMode::Latency`].
const LATENCY_QUEUE: usize = 64;
/// Pause after a failed `accept` (e.g. out of file descriptors) before the next one.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// What the proxy does with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultMode {
    /// Copies bytes both ways, half-closes included.
    #[default]
    Pass,
    /// Forwards the client's bytes to the upstream (which acts on them), discards everything the
    /// upstream sends back, and closes the client side as soon as the upstream starts answering,
    /// or [`DROP_RESPONSE_GRACE`] after the client's last byte: the caller sees its request
    /// vanish after the work was done ("accepted by the node, but the caller lost the
    /// connection"). The client reads end of stream, never a byte of the answer.
    ForwardThenDropResponse,
    /// Accepts and resets the connection at once (RST); the upstream never hears of it.
    ResetOnConnect,
    /// Accepts, reads and discards the client's bytes for as long as the client keeps the
    /// connection, never connects to the upstream and never answers: the caller times out.
    Blackhole,
    /// Like [`FaultMode::Pass`], but every chunk is delayed by the given time in each direction
    /// (a request and its answer take at least twice that).
    Latency(Duration),
}

/// Counters of a [`FaultProxy`] since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProxyStats {
    /// Connections accepted (in every mode).
    pub connections: u64,
    /// Connections handled in a mode other than [`FaultMode::Pass`].
    pub faulted: u64,
    /// Bytes forwarded from clients to the upstream.
    pub bytes_up: u64,
    /// Bytes forwarded from the upstream to clients; answers discarded by
    /// [`FaultMode::ForwardThenDropResponse`] are not counted.
    pub bytes_down: u64,
    /// Live connections closed by [`FaultProxy::drop_connections`].
    pub severed: u64,
}

/// A fault-injecting TCP proxy on a free port of 127.0.0.1 in front of one upstream address.
///
/// It runs on the Tokio runtime that called [`FaultProxy::start`]. Dropping it, or
/// [`FaultProxy::stop`], closes the listener and every connection.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream)
            .field("mode", &self.mode())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1 and proxies every connection to `upstream`, in
    /// [`FaultMode::Pass`] until told otherwise. The upstream is only connected to when a client
    /// connects, so it need not be up yet.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<FaultProxy> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("binding the fault proxy's listener on 127.0.0.1")?;
        let addr = listener
            .local_addr()
            .context("reading the fault proxy's listening address")?;
        let listener_fd = listener
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating the fault proxy's listening socket")?;
        let (generation, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            upstream,
            modes: Mutex::new(Modes::default()),
            live: Mutex::new(Live::default()),
            generation,
            listener: Mutex::new(Some(listener_fd)),
            connections: AtomicU64::new(0),
            faulted: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
            severed: AtomicU64::new(0),
        });
        let accept_task = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        tracing::debug!("fault proxy on {addr} in front of {upstream}");
        Ok(FaultProxy {
            addr,
            shared,
            accept_task,
        })
    }

    /// The address clients connect to (127.0.0.1 and the proxy's port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address connections are forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// `{scheme}://127.0.0.1:{port}`, e.g. `url("http")` for a JSON-RPC client.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.addr)
    }

    /// The mode new connections get (after any pending [`Self::once`] modes).
    pub fn mode(&self) -> FaultMode {
        self.shared.modes().current
    }

    /// Every later new connection gets `mode`; pending [`Self::once`] modes are forgotten.
    ///
    /// A connection takes its mode when the proxy accepts it, which can be a moment after the
    /// client's `connect` returned: set the mode before the client connects.
    ///
    /// Live connections keep the mode they started with: this never breaks one (switching back
    /// to [`FaultMode::Pass`] included). Use [`Self::drop_connections`] to make pooled clients
    /// reconnect under the new mode.
    pub fn set_mode(&self, mode: FaultMode) {
        let mut modes = self.shared.modes();
        modes.current = mode;
        modes.once.clear();
    }

    /// The next new connection gets `mode`; later ones get the mode set by [`Self::set_mode`].
    /// Calls add up in order: two calls fault the next two connections.
    pub fn once(&self, mode: FaultMode) {
        self.shared.modes().once.push_back(mode);
    }

    /// Closes every live proxied connection (both sides) and forgets them. The client side is
    /// shut down before this returns, so a pooled HTTP client sees its idle connections end and
    /// opens a new one (give it a moment to notice, e.g. a few milliseconds, before the request
    /// that must take a new connection). Connections accepted afterwards are not affected.
    pub fn drop_connections(&self) {
        let live = self.shared.live();
        self.shared.generation.send_modify(|g| *g += 1);
        let count = u64::try_from(live.clients.len()).unwrap_or(u64::MAX);
        self.shared.severed.fetch_add(count, Ordering::Relaxed);
        for fd in live.clients.values() {
            // An error means the connection is closing anyway.
            let _ = SockRef::from(fd).shutdown(Shutdown::Both);
        }
    }

    /// Counters since the proxy started.
    pub fn stats(&self) -> ProxyStats {
        let s = &self.shared;
        ProxyStats {
            connections: s.connections.load(Ordering::Relaxed),
            faulted: s.faulted.load(Ordering::Relaxed),
            bytes_up: s.bytes_up.load(Ordering::Relaxed),
            bytes_down: s.bytes_down.load(Ordering::Relaxed),
            severed: s.severed.load(Ordering::Relaxed),
        }
    }

    /// Stops listening (new connections are refused from now on) and closes every connection.
    /// Idempotent; also done on drop.
    pub fn stop(&self) {
        self.shared.live().stopped = true;
        self.drop_connections();
        if let Some(fd) = self.shared.listener_fd().take() {
            // On Linux, shutting a listening socket down stops it listening at once, even while
            // the accept task still holds it; elsewhere it closes when the task is aborted.
            let _ = SockRef::from(&fd).shutdown(Shutdown::Read);
        }
        self.accept_task.abort();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Shared {
    upstream: SocketAddr,
    modes: Mutex<Modes>,
    live: Mutex<Live>,
    /// Bumped by `drop_connections` and `stop`: a connection ends when the generation it was
    /// registered under is gone.
    generation: watch::Sender<u64>,
    /// A duplicate of the listening socket, to stop it from outside the accept task.
    listener: Mutex<Option<OwnedFd>>,
    connections: AtomicU64,
    faulted: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    severed: AtomicU64,
}

#[derive(Default)]
struct Modes {
    current: FaultMode,
    once: VecDeque<FaultMode>,
}

#[derive(Default)]
struct Live {
    stopped: bool,
    next_id: u64,
    /// A duplicate of each live connection's client socket, to shut it down from outside its task.
    clients: HashMap<u64, OwnedFd>,
}

impl Shared {
    fn modes(&self) -> MutexGuard<'_, Modes> {
        self.modes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn listener_fd(&self) -> MutexGuard<'_, Option<OwnedFd>> {
        self.listener.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count_connection(&self, mode: FaultMode) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        if mode != FaultMode::Pass {
            self.faulted.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn next_mode(&self) -> FaultMode {
        let mut modes = self.modes();
        modes.once.pop_front().unwrap_or(modes.current)
    }

    /// Records a new client connection; `None` once the proxy is stopped.
    fn register(self: &Arc<Self>, client: &TcpStream) -> anyhow::Result<Option<Registration>> {
        let fd = client
            .as_fd()
            .try_clone_to_owned()
            .context("duplicating a proxied client socket")?;
        let mut live = self.live();
        if live.stopped {
            return Ok(None);
        }
        let id = live.next_id;
        live.next_id += 1;
        live.clients.insert(id, fd);
        Ok(Some(Registration {
            id,
            generation: *self.generation.borrow(),
            shared: Arc::clone(self),
        }))
    }
}

/// A live connection's entry in [`Live::clients`], removed on drop (which closes the duplicate
/// socket, so the client side really closes once its task lets go of it too).
struct Registration {
    id: u64,
    generation: u64,
    shared: Arc<Shared>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.live().clients.remove(&self.id);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (client, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                if shared.live().stopped {
                    return;
                }
                tracing::debug!("fault proxy: accept failed: {e}");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        if shared.live().stopped {
            reset(client);
            return;
        }
        let mode = shared.next_mode();
        tracing::debug!("fault proxy: connection from {peer} in mode {mode:?}");
        if mode == FaultMode::ResetOnConnect {
            shared.count_connection(mode);
            reset(client);
            continue;
        }
        // Small writes (a JSON-RPC request, a PostgreSQL message) go out at once.
        let _ = client.set_nodelay(true);
        let registration = match shared.register(&client) {
            Ok(Some(registration)) => registration,
            Ok(None) => {
                reset(client);
                return;
            }
            Err(e) => {
                tracing::debug!("fault proxy: {e:#}");
                reset(client);
                continue;
            }
        };
        // Counted once registered, so that drop_connections reaches every counted connection.
        shared.count_connection(mode);
        tokio::spawn(connection(Arc::clone(&shared), client, registration, mode));
    }
}

/// Closes `stream` with a reset (RST) instead of an orderly end of stream.
fn reset(stream: TcpStream) {
    // Zero linger: the close sends RST and never blocks.
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Serves one connection in `mode` until it ends or is dropped by `drop_connections` or `stop`.
async fn connection(
    shared: Arc<Shared>,
    client: TcpStream,
    registration: Registration,
    mode: FaultMode,
) {
    let mut generation = shared.generation.subscribe();
    let mine = registration.generation;
    tokio::select! {
        result = serve(&shared, client, mode) => {
            if let Err(e) = result {
                tracing::debug!("fault proxy: connection in mode {mode:?} ended: {e:#}");
            }
        }
        _ = generation.wait_for(|g| *g != mine) => {}
    }
    drop(registration);
}

async fn serve(shared: &Shared, mut client: TcpStream, mode: FaultMode) -> anyhow::Result<()> {
    match mode {
        FaultMode::Pass => pass(shared, client, None).await,
        FaultMode::Latency(delay) => pass(shared, client, Some(delay)).await,
        FaultMode::ForwardThenDropResponse => forward_then_drop(shared, client).await,
        FaultMode::Blackhole => {
            let mut buf = vec![0; BUFFER_SIZE];
            while client
                .read(&mut buf)
                .await
                .context("reading a blackholed client")?
                > 0
            {}
            Ok(())
        }
        FaultMode::ResetOnConnect => {
            reset(client);
            Ok(())
        }
    }
}

async fn connect_upstream(upstream: SocketAddr) -> anyhow::Result<TcpStream> {
    let stream = tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream))
        .await
        .map_err(|_| {
            anyhow!(
                "connecting to upstream {upstream} timed out after {UPSTREAM_CONNECT_TIMEOUT:?}"
            )
        })?
        .with_context(|| format!("connecting to upstream {upstream}"))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

async fn pass(
    shared: &Shared,
    mut client: TcpStream,
    delay: Option<Duration>,
) -> anyhow::Result<()> {
    let mut upstream = match connect_upstream(shared.upstream).await {
        Ok(upstream) => upstream,
        Err(e) => {
            // The client sees what it would see if the upstream refused it.
            reset(client);
            return Err(e);
        }
    };
    let (mut client_read, mut client_write) = client.split();
    let (mut upstream_read, mut upstream_write) = upstream.split();
    tokio::try_join!(
        async {
            pump(
                &mut client_read,
                &mut upstream_write,
                &shared.bytes_up,
                delay,
            )
            .await
            .context("copying client to upstream")
        },
        async {
            pump(
                &mut upstream_read,
                &mut client_write,
                &shared.bytes_down,
                delay,
            )
            .await
            .context("copying upstream to client")
        },
    )?;
    Ok(())
}

/// Copies `reader` to `writer` until end of stream, then shuts `writer` down (half-close).
/// With a delay, each chunk is written that long after it was read; reading goes on meanwhile.
async fn pump<R, W>(
    reader: &mut R,
    writer: &mut W,
    counter: &AtomicU64,
    delay: Option<Duration>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some(delay) = delay else {
        let mut buf = vec![0; BUFFER_SIZE];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0 {
                return writer.shutdown().await;
            }
            writer.write_all(&buf[..n]).await?;
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
    };
    let (chunks, mut due_chunks) = mpsc::channel::<(Instant, Vec<u8>)>(LATENCY_QUEUE);
    let read = async move {
        let mut buf = vec![0; BUFFER_SIZE];
        loop {
            let n = reader.read(&mut buf).await?;
            if n == 0
                || chunks
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .await
                    .is_err()
            {
                break;
            }
        }
        // End of stream reaches the writer after the chunks before it.
        drop(chunks);
        Ok::<(), io::Error>(())
    };
    let write = async {
        while let Some((due, chunk)) = due_chunks.recv().await {
            tokio::time::sleep_until(due).await;
            writer.write_all(&chunk).await?;
            counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        writer.shutdown().await
    };
    tokio::try_join!(read, write)?;
    Ok(())
}

async fn forward_then_drop(shared: &Shared, mut client: TcpStream) -> anyhow::Result<()> {
    let mut upstream = connect_upstream(shared.upstream).await?;
    let mut client_buf = vec![0; BUFFER_SIZE];
    let mut upstream_buf = vec![0; BUFFER_SIZE];
    let mut last_forwarded: Option<Instant> = None;
    let mut client_open = true;
    let mut upstream_open = true;
    let mut answered = false;
    loop {
        let grace = async {
            match last_forwarded {
                Some(at) => tokio::time::sleep_until(at + DROP_RESPONSE_GRACE).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            read = client.read(&mut client_buf), if client_open => match read {
                Ok(0) => {
                    client_open = false;
                    // An error means the upstream went away; its read below will tell.
                    let _ = upstream.shutdown().await;
                }
                Ok(n) => {
                    upstream
                        .write_all(&client_buf[..n])
                        .await
                        .context("forwarding client bytes to the upstream")?;
                    shared.bytes_up.fetch_add(n as u64, Ordering::Relaxed);
                    last_forwarded = Some(Instant::now());
                }
                // The client is gone; the upstream still gets to finish below.
                Err(_) => client_open = false,
            },
            read = upstream.read(&mut upstream_buf) => match read {
                Ok(0) | Err(_) => {
                    upstream_open = false;
                    break;
                }
                // Bytes before any request (a server greeting) are discarded without closing.
                Ok(_) if last_forwarded.is_some() => {
                    answered = true;
                    break;
                }
                Ok(_) => {}
            },
            () = grace => break,
        }
    }
    // The caller loses its connection without a byte of the answer.
    let _ = SockRef::from(&client).shutdown(Shutdown::Both);
    drop(client);
    // Let the upstream finish the work (and its answer) rather than see its caller vanish.
    let mut wait = if answered {
        ANSWER_DRAIN_IDLE
    } else {
        UPSTREAM_LINGER
    };
    while upstream_open {
        match tokio::time::timeout(wait, upstream.read(&mut upstream_buf)).await {
            Ok(Ok(n)) if n > 0 => wait = ANSWER_DRAIN_IDLE,
            _ => upstream_open = false,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::{Value, json};

    const SHORT: Duration = Duration::from_millis(300);
    const LONG: Duration = Duration::from_secs(5);

    /// What a test upstream does with a connection.
    #[derive(Clone, Copy, PartialEq)]
    enum Behaviour {
        /// Sends back what it reads.
        Echo,
        /// Reads and records, never answers.
        Sink,
        /// Minimal HTTP/1.1 keep-alive server: answers every request with a JSON body.
        Http,
    }

    /// An in-test upstream on 127.0.0.1 that records the connections and bytes it received.
    struct Upstream {
        addr: SocketAddr,
        connections: Arc<AtomicU64>,
        received: Arc<Mutex<Vec<u8>>>,
        /// HTTP request bodies, in arrival order.
        bodies: Arc<Mutex<Vec<String>>>,
        task: JoinHandle<()>,
    }

    impl Drop for Upstream {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    impl Upstream {
        async fn start(behaviour: Behaviour) -> anyhow::Result<Upstream> {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let connections = Arc::new(AtomicU64::new(0));
            let received = Arc::new(Mutex::new(Vec::new()));
            let bodies = Arc::new(Mutex::new(Vec::new()));
            let (c, r, b) = (connections.clone(), received.clone(), bodies.clone());
            let task = tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    c.fetch_add(1, Ordering::SeqCst);
                    let (r, b) = (r.clone(), b.clone());
                    tokio::spawn(async move {
                        if behaviour == Behaviour::Http {
                            let _ = serve_http(stream, r, b).await;
                        } else {
                            let _ = serve_raw(stream, behaviour, r).await;
                        }
                    });
                }
            });
            Ok(Upstream {
                addr,
                connections,
                received,
                bodies,
                task,
            })
        }

        fn connections(&self) -> u64 {
            self.connections.load(Ordering::SeqCst)
        }

        fn received(&self) -> Vec<u8> {
            self.received
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }

        fn bodies(&self) -> Vec<String> {
            self.bodies
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }

    async fn serve_raw(
        mut stream: TcpStream,
        behaviour: Behaviour,
        received: Arc<Mutex<Vec<u8>>>,
    ) -> io::Result<()> {
        let mut buf = vec![0; 4096];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            received
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(&buf[..n]);
            if behaviour == Behaviour::Echo {
                stream.write_all(&buf[..n]).await?;
            }
        }
    }

    async fn serve_http(
        mut stream: TcpStream,
        received: Arc<Mutex<Vec<u8>>>,
        bodies: Arc<Mutex<Vec<String>>>,
    ) -> anyhow::Result<()> {
        let mut pending = Vec::new();
        let mut buf = vec![0; 4096];
        loop {
            // Headers, then a Content-Length body.
            let header_end = loop {
                if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                let n = stream.read(&mut buf).await?;
                if n == 0 {
                    return Ok(());
                }
                received
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(&buf[..n]);
                pending.extend_from_slice(&buf[..n]);
            };
            let head = String::from_utf8_lossy(&pending[..header_end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse())
                .transpose()?
                .unwrap_or(0);
            while pending.len() < header_end + length {
                let n = stream.read(&mut buf).await?;
                if n == 0 {
                    return Ok(());
                }
                received
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(&buf[..n]);
                pending.extend_from_slice(&buf[..n]);
            }
            let body = String::from_utf8_lossy(&pending[header_end..header_end + length]);
            bodies
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(body.into_owned());
            pending.drain(..header_end + length);
            let answer = r#"{"jsonrpc":"2.0","id":1,"result":"0xabc"}"#;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            stream.write_all(response.as_bytes()).await?;
        }
    }

    /// Writes `data`, then reads until `expected` bytes came back or the stream ended.
    async fn round_trip(stream: &mut TcpStream, data: &[u8]) -> anyhow::Result<Vec<u8>> {
        stream.write_all(data).await?;
        let mut back = vec![0; data.len()];
        tokio::time::timeout(LONG, stream.read_exact(&mut back)).await??;
        Ok(back)
    }

    /// True when the peer closed `stream` (end of stream or reset) within `LONG`, having sent
    /// nothing.
    async fn closed_without_data(stream: &mut TcpStream) -> anyhow::Result<bool> {
        let mut buf = [0u8; 64];
        match tokio::time::timeout(LONG, stream.read(&mut buf)).await {
            Err(_) => Err(anyhow!("the connection stayed open")),
            Ok(Ok(0)) => Ok(true),
            Ok(Ok(_)) => Ok(false),
            Ok(Err(e)) => Ok(matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
            )),
        }
    }

    /// Connects to `addr` and tells whether the connection was closed without a byte, be it
    /// seen by `connect` itself (a reset that came before the client looked) or by a read.
    async fn connect_and_see_closed(addr: SocketAddr) -> anyhow::Result<bool> {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(true),
            Err(e) => Err(e.into()),
            Ok(mut stream) => closed_without_data(&mut stream).await,
        }
    }

    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + LONG;
        while !check() {
            assert!(
                Instant::now() < deadline,
                "{what} did not happen within {LONG:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn http_client() -> anyhow::Result<reqwest::Client> {
        Ok(crate::http_client().no_proxy().timeout(LONG).build()?)
    }

    #[tokio::test]
    async fn proxy_pass_round_trips_bytes() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        assert!(proxy.addr().ip().is_loopback());
        assert_ne!(proxy.addr().port(), upstream.addr.port());
        assert_eq!(proxy.url("http"), format!("http://{}", proxy.addr()));
        assert_eq!(proxy.upstream(), upstream.addr);
        assert_eq!(proxy.mode(), FaultMode::Pass);

        let mut client = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut client, b"hello").await?, b"hello");
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(round_trip(&mut client, &big).await?, big);
        let total = 5 + big.len() as u64;
        eventually("byte counters", || {
            proxy.stats()
                == ProxyStats {
                    connections: 1,
                    faulted: 0,
                    bytes_up: total,
                    bytes_down: total,
                    severed: 0,
                }
        })
        .await;
        // A half-close travels through: the echo server ends, so does the client's stream.
        client.shutdown().await?;
        assert!(closed_without_data(&mut client).await?);
        assert_eq!(upstream.connections(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn proxy_forward_then_drop_response_delivers_the_request_but_not_the_answer()
    -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        proxy.set_mode(FaultMode::ForwardThenDropResponse);
        let mut client = TcpStream::connect(proxy.addr()).await?;
        let started = Instant::now();
        client.write_all(b"eth_sendRawTransaction 0x02f8").await?;
        assert!(closed_without_data(&mut client).await?);
        // Closed because the upstream answered, not because the grace period ran out.
        assert!(
            started.elapsed() < DROP_RESPONSE_GRACE,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(upstream.received(), b"eth_sendRawTransaction 0x02f8");
        let stats = proxy.stats();
        assert_eq!((stats.connections, stats.faulted), (1, 1));
        assert_eq!(stats.bytes_up, 29);
        assert_eq!(stats.bytes_down, 0);
        Ok(())
    }

    #[tokio::test]
    async fn proxy_forward_then_drop_response_closes_after_grace_when_upstream_is_silent()
    -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Sink).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        proxy.set_mode(FaultMode::ForwardThenDropResponse);
        let mut client = TcpStream::connect(proxy.addr()).await?;
        let started = Instant::now();
        client.write_all(b"SELECT 1").await?;
        assert!(closed_without_data(&mut client).await?);
        assert!(
            started.elapsed() >= DROP_RESPONSE_GRACE,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(upstream.received(), b"SELECT 1");
        Ok(())
    }

    #[tokio::test]
    async fn proxy_forward_then_drop_response_with_an_http_client() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Http).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        let client = http_client()?;
        let request = json!({
            "jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": ["0x02f8"]
        });

        // Through Pass, the answer arrives.
        let answer: Value = client
            .post(proxy.url("http"))
            .json(&request)
            .send()
            .await?
            .json()
            .await?;
        assert_eq!(answer["result"], json!("0xabc"));

        // Faulted: the upstream gets the POST, the caller gets an error (not a timeout).
        proxy.drop_connections();
        assert_eq!(
            proxy.stats().severed,
            1,
            "the pooled keep-alive connection was cut"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        proxy.once(FaultMode::ForwardThenDropResponse);
        let started = Instant::now();
        let result = client.post(proxy.url("http")).json(&request).send().await;
        let err = match result {
            Ok(response) => panic!("expected an error, got HTTP {}", response.status()),
            Err(e) => e,
        };
        assert!(!err.is_timeout(), "{err:?}");
        assert!(started.elapsed() < DROP_RESPONSE_GRACE);
        let bodies = upstream.bodies();
        assert_eq!(bodies.len(), 2, "{bodies:?}");
        for body in &bodies {
            assert_eq!(serde_json::from_str::<Value>(body)?, request);
        }
        let received = String::from_utf8_lossy(&upstream.received()).into_owned();
        assert_eq!(received.matches("POST / HTTP/1.1").count(), 2, "{received}");

        // The fault was for one connection only.
        let answer: Value = client
            .post(proxy.url("http"))
            .json(&request)
            .send()
            .await?
            .json()
            .await?;
        assert_eq!(answer["result"], json!("0xabc"));
        let stats = proxy.stats();
        assert_eq!((stats.connections, stats.faulted), (3, 1));
        Ok(())
    }

    #[tokio::test]
    async fn proxy_reset_on_connect() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        proxy.set_mode(FaultMode::ResetOnConnect);
        // The reset shows at connect or at the first read, depending on who runs first.
        let read = match TcpStream::connect(proxy.addr()).await {
            Err(e) => Err(e),
            Ok(mut client) => {
                let mut buf = [0u8; 8];
                tokio::time::timeout(LONG, client.read(&mut buf)).await?
            }
        };
        assert!(
            matches!(&read, Err(e) if e.kind() == io::ErrorKind::ConnectionReset),
            "{read:?}"
        );
        assert_eq!(upstream.connections(), 0);
        assert_eq!(
            proxy.stats(),
            ProxyStats {
                connections: 1,
                faulted: 1,
                bytes_up: 0,
                bytes_down: 0,
                severed: 0,
            }
        );
        Ok(())
    }

    #[tokio::test]
    async fn proxy_blackhole_never_answers() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        proxy.set_mode(FaultMode::Blackhole);
        let mut client = TcpStream::connect(proxy.addr()).await?;
        client.write_all(b"anyone there?").await?;
        let mut buf = [0u8; 8];
        assert!(
            tokio::time::timeout(SHORT, client.read(&mut buf))
                .await
                .is_err(),
            "the read should time out"
        );
        // The connection is still open: more writes are swallowed too.
        client.write_all(b"hello?").await?;
        assert_eq!(upstream.connections(), 0);
        let stats = proxy.stats();
        assert_eq!((stats.connections, stats.faulted), (1, 1));
        assert_eq!((stats.bytes_up, stats.bytes_down), (0, 0));
        Ok(())
    }

    #[tokio::test]
    async fn proxy_latency_delays_both_directions() -> anyhow::Result<()> {
        let delay = Duration::from_millis(150);
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        proxy.set_mode(FaultMode::Latency(delay));
        let mut client = TcpStream::connect(proxy.addr()).await?;
        let started = Instant::now();
        assert_eq!(round_trip(&mut client, b"ping").await?, b"ping");
        let elapsed = started.elapsed();
        assert!(elapsed >= 2 * delay, "round trip took only {elapsed:?}");

        // Chunks in flight are pipelined, not serialised: three quick writes take about one
        // round trip, not three.
        let started = Instant::now();
        for _ in 0..3 {
            client.write_all(b"x").await?;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut back = [0u8; 3];
        tokio::time::timeout(LONG, client.read_exact(&mut back)).await??;
        assert!(started.elapsed() >= 2 * delay);
        assert!(started.elapsed() < 6 * delay, "{:?}", started.elapsed());
        let stats = proxy.stats();
        assert_eq!((stats.connections, stats.faulted), (1, 1));
        eventually("byte counters", || {
            let s = proxy.stats();
            s.bytes_up == 7 && s.bytes_down == 7
        })
        .await;
        Ok(())
    }

    #[tokio::test]
    async fn proxy_once_faults_exactly_one_connection() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        proxy.once(FaultMode::ResetOnConnect);
        assert_eq!(proxy.mode(), FaultMode::Pass);
        assert!(connect_and_see_closed(proxy.addr()).await?);
        for _ in 0..2 {
            let mut next = TcpStream::connect(proxy.addr()).await?;
            assert_eq!(round_trip(&mut next, b"ok").await?, b"ok");
        }
        assert_eq!(upstream.connections(), 2);

        // Queued in order, on top of the current mode; set_mode forgets what is queued.
        proxy.set_mode(FaultMode::Blackhole);
        proxy.once(FaultMode::Pass);
        proxy.once(FaultMode::ResetOnConnect);
        let mut pass = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut pass, b"ok").await?, b"ok");
        assert!(connect_and_see_closed(proxy.addr()).await?);
        proxy.once(FaultMode::ResetOnConnect);
        proxy.set_mode(FaultMode::Pass);
        let mut after = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut after, b"ok").await?, b"ok");
        let stats = proxy.stats();
        assert_eq!((stats.connections, stats.faulted), (6, 2));
        Ok(())
    }

    #[tokio::test]
    async fn proxy_live_connections_keep_their_mode() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        let mut passing = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut passing, b"a").await?, b"a");

        proxy.set_mode(FaultMode::Blackhole);
        let mut holed = TcpStream::connect(proxy.addr()).await?;
        eventually("the accept", || proxy.stats().connections == 2).await;
        assert_eq!(round_trip(&mut passing, b"b").await?, b"b");
        holed.write_all(b"c").await?;

        proxy.set_mode(FaultMode::Pass);
        assert_eq!(round_trip(&mut passing, b"d").await?, b"d");
        let mut buf = [0u8; 1];
        assert!(
            tokio::time::timeout(SHORT, holed.read(&mut buf))
                .await
                .is_err()
        );
        let mut fresh = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut fresh, b"e").await?, b"e");
        Ok(())
    }

    #[tokio::test]
    async fn proxy_drop_connections_closes_live_connections() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        let mut a = TcpStream::connect(proxy.addr()).await?;
        let mut b = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut a, b"a").await?, b"a");
        assert_eq!(round_trip(&mut b, b"b").await?, b"b");
        assert_eq!(proxy.stats().connections, 2);

        proxy.drop_connections();
        assert!(closed_without_data(&mut a).await?);
        assert!(closed_without_data(&mut b).await?);
        // New connections are not affected.
        proxy.set_mode(FaultMode::Pass);
        let mut c = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut c, b"c").await?, b"c");
        Ok(())
    }

    #[tokio::test]
    async fn proxy_drop_connections_makes_a_pooled_http_client_reconnect() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Http).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        let client = http_client()?;
        for _ in 0..3 {
            let response = client
                .post(proxy.url("http"))
                .json(&json!({}))
                .send()
                .await?;
            assert!(response.status().is_success());
            response.bytes().await?;
        }
        assert_eq!(upstream.connections(), 1, "the client pools its connection");
        proxy.drop_connections();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let response = client
            .post(proxy.url("http"))
            .json(&json!({}))
            .send()
            .await?;
        assert!(response.status().is_success());
        assert_eq!(upstream.connections(), 2);
        assert_eq!(proxy.stats().connections, 2);
        Ok(())
    }

    #[tokio::test]
    async fn proxy_stop_and_drop_close_everything() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        let addr = proxy.addr();
        let mut live = TcpStream::connect(addr).await?;
        assert_eq!(round_trip(&mut live, b"x").await?, b"x");
        proxy.stop();
        assert!(closed_without_data(&mut live).await?);
        let refused = TcpStream::connect(addr).await;
        assert!(
            matches!(&refused, Err(e) if e.kind() == io::ErrorKind::ConnectionRefused),
            "{refused:?}"
        );
        proxy.stop(); // idempotent
        drop(proxy);

        let proxy = FaultProxy::start(upstream.addr).await?;
        let addr = proxy.addr();
        let mut live = TcpStream::connect(addr).await?;
        assert_eq!(round_trip(&mut live, b"y").await?, b"y");
        drop(proxy);
        assert!(closed_without_data(&mut live).await?);
        assert!(TcpStream::connect(addr).await.is_err());
        Ok(())
    }

    #[tokio::test]
    async fn proxy_upstream_down_resets_the_client() -> anyhow::Result<()> {
        // A port nobody listens on.
        let port = crate::free_port();
        let proxy = FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], port))).await?;
        assert!(connect_and_see_closed(proxy.addr()).await?);
        Ok(())
    }

    #[tokio::test]
    async fn proxy_stats_count_every_mode() -> anyhow::Result<()> {
        let upstream = Upstream::start(Behaviour::Echo).await?;
        let proxy = FaultProxy::start(upstream.addr).await?;
        let modes = [
            FaultMode::Pass,
            FaultMode::Latency(Duration::from_millis(1)),
            FaultMode::ForwardThenDropResponse,
            FaultMode::ResetOnConnect,
            FaultMode::Blackhole,
        ];
        let mut keep = Vec::new();
        for (accepted, mode) in (1..).zip(modes) {
            proxy.set_mode(mode);
            let client = TcpStream::connect(proxy.addr()).await;
            // The mode is taken when the proxy accepts, which may be after connect returned.
            eventually("the accept", || proxy.stats().connections == accepted).await;
            if mode == FaultMode::ResetOnConnect {
                continue;
            }
            let mut client = client?;
            client.write_all(b"1234").await?;
            keep.push(client);
        }
        for client in &mut keep[..2] {
            let mut back = [0u8; 4];
            client.read_exact(&mut back).await?;
        }
        eventually("the counters", || {
            proxy.stats()
                == ProxyStats {
                    connections: 5,
                    faulted: 4,
                    bytes_up: 12,
                    bytes_down: 8,
                    severed: 0,
                }
        })
        .await;
        Ok(())
    }
}
