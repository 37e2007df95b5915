//! Listener timeouts and limits on the webhook port: silent connections, request heads that
//! never end (or arrive a byte at a time) and bodies that never arrive are closed within the
//! limits, nothing is stored for them, and a genuine delivery is accepted throughout.

use opledger_config::ListenerConfig;
use opledger_tests::Stack;
use opledger_tests::conn::{self, End};
use opledger_tests::inbox::{ALL_TYPES, Inbox, Sender, World, config, deposit, endpoint};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt as _;

async fn world() -> anyhow::Result<World> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let inbox = Inbox::start_with(&stack, {
        let mut config = config(&stack);
        config.base.listener = ListenerConfig {
            idle_timeout_ms: 3_000,
            header_read_timeout_ms: 1_000,
            request_timeout_ms: 1_000,
            http2_keepalive_interval_ms: 500,
            http2_keepalive_timeout_ms: 500,
            ..ListenerConfig::default()
        };
        config
    })
    .await?;
    let ep = endpoint(&stack, &acme, "chainwatch", &ALL_TYPES).await?;
    let sender = Sender::new(inbox.http);
    Ok(World {
        stack,
        acme,
        inbox,
        ep,
        sender,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_half_sent_and_dripping_requests_are_closed_and_deliveries_stay_prompt()
-> anyhow::Result<()> {
    let world = world().await?;
    let http = world.inbox.http;
    let path = world.sender.url(&world.ep);
    let path = path.trim_start_matches(&format!("http://{http}"));
    let mut silent = conn::open(http, 100, b"").await?;
    let head = format!("POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n");
    let mut half_head = conn::open(http, 100, head.as_bytes()).await?;
    // A declared 200 KiB body of which 1 KiB ever arrives.
    let mut body_head = format!("{head}content-length: 204800\r\n\r\n").into_bytes();
    body_head.extend_from_slice(&[b'{'; 1024]);
    let mut half_body = conn::open(http, 100, &body_head).await?;

    let started = Instant::now();
    let n = |i: u32| deposit(&format!("dep-{i}"), "treasury", "ETH", "1");
    assert_eq!(world.post(&n(1)).await?, 200);
    assert!(started.elapsed() < Duration::from_secs(1));

    // A request head dripped one byte every 200 ms: closed by the header read timeout (1 s),
    // long before the idle timeout (3 s) would.
    let mut drip = tokio::net::TcpStream::connect(http).await?;
    let dripped = Instant::now();
    let mut closed_by_server = false;
    for byte in head.as_bytes().iter().cycle().take(40) {
        if drip.write_all(&[*byte]).await.is_err() {
            closed_by_server = true;
            break;
        }
        if let End::Closed(_) = conn::end(&mut drip, Duration::from_millis(200)).await {
            closed_by_server = true;
            break;
        }
    }
    assert!(closed_by_server, "a dripped head stayed open");
    assert!(
        dripped.elapsed() < Duration::from_millis(2_500),
        "{:?}",
        dripped.elapsed()
    );

    // Bodies that never arrive are answered 408 after the request timeout (1 s) and closed.
    let mut timed_out = 0;
    for stream in &mut half_body {
        if let End::Closed(seen) = conn::end(stream, Duration::from_secs(4)).await
            && seen.starts_with(b"HTTP/1.1 408")
        {
            timed_out += 1;
        }
    }
    assert_eq!(timed_out, 100);
    let within = Duration::from_secs(5);
    assert_eq!(conn::closed_within(&mut half_head, within).await, 100);
    assert_eq!(conn::closed_within(&mut silent, within).await, 100);
    assert_eq!(world.post(&n(2)).await?, 200);
    // Nothing of the refused requests was stored; the two deliveries were.
    assert_eq!(world.rows("inbox_events", "").await?, 2);
    world.stop().await
}
