//! A JSON-RPC proxy on 127.0.0.1 that plays a faulty or lying node in front of a real one
//! (anvil): a real HTTP/1.1 server that forwards every call, single or batched, and rewrites the
//! answers as its current [`RpcMode`] says. The mode is read per HTTP request, so switching it
//! takes effect on the very next call, pooled connections included.
//!
//! ```no_run
//! # async fn demo(anvil: &opledger_testkit::Anvil) -> anyhow::Result<()> {
//! use opledger_testkit::{RpcMode, RpcProxy};
//!
//! let proxy = RpcProxy::start(&anvil.rpc_url()).await?;
//! let endpoint = proxy.url(); // give this to the evidence reader instead of anvil's URL
//! proxy.set_mode(RpcMode::HideReceipts); // a pruned or lying node from now on
//! # let _ = endpoint;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, anyhow};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use tokio::task::JoinHandle;

const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

/// How the proxy answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RpcMode {
    /// Forwards every request and answer unchanged.
    #[default]
    Honest,
    /// Pretends its head is this many blocks behind the upstream's: `eth_blockNumber` and the
    /// `latest`, `pending`, `safe` and `finalized` tags are shifted down, blocks above the
    /// pretend head are `null`, so are receipts and transactions included above it, and state
    /// queries (`eth_getTransactionCount`, ...) at a block above it or at an unknown hash fail.
    Lag(u64),
    /// Every receipt is `null`: a pruned node, or one that hides inclusions.
    HideReceipts,
    /// Adds this to every `eth_getTransactionCount` answer (never below 0).
    RewriteNonce(i64),
    /// Every receipt names another block hash at the same height (its bytes inverted): a node
    /// on another fork, whose inclusions are in blocks that are not canonical.
    ForkedReceipts,
    /// Every request gets HTTP 503 without a JSON-RPC body.
    Down,
}

/// A running proxy; stopped when dropped.
#[derive(Debug)]
pub struct RpcProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    upstream: String,
    client: reqwest::Client,
    mode: Mutex<RpcMode>,
    requests: AtomicU64,
    calls: AtomicU64,
    /// `eth_sendRawTransaction` calls by their raw transaction (lowercase hex, no `0x`).
    sent: Mutex<HashMap<String, u64>>,
}

impl RpcProxy {
    /// Starts a proxy of `upstream` (an `http://` JSON-RPC URL, such as [`crate::Anvil::rpc_url`])
    /// on a free port of 127.0.0.1, in [`RpcMode::Honest`].
    pub async fn start(upstream: &str) -> anyhow::Result<RpcProxy> {
        let client = crate::http_client()
            .no_proxy()
            .timeout(UPSTREAM_TIMEOUT)
            .build()
            .context("building the rpc proxy's upstream client")?;
        let shared = Arc::new(Shared {
            upstream: upstream.to_owned(),
            client,
            mode: Mutex::new(RpcMode::Honest),
            requests: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            sent: Mutex::new(HashMap::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the rpc proxy on 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new()
            .route("/", axum::routing::post(handle))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("rpc proxy stopped: {e}");
            }
        });
        Ok(RpcProxy { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The current mode.
    pub fn mode(&self) -> RpcMode {
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Switches the mode for every later request.
    pub fn set_mode(&self, mode: RpcMode) {
        *self
            .shared
            .mode
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mode;
    }

    /// HTTP requests received so far (a batch is one), in any mode.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// JSON-RPC calls received so far (each call of a batch counts), in any mode but
    /// [`RpcMode::Down`].
    pub fn calls(&self) -> u64 {
        self.shared.calls.load(Ordering::Relaxed)
    }

    /// How many `eth_sendRawTransaction` calls (single or in a batch) carried each signed
    /// transaction so far, in any mode but [`RpcMode::Down`]: the key is the raw transaction in
    /// lowercase hex without `0x`, as `hex::encode` of the stored bytes gives it. Every call is
    /// counted when it reaches the proxy, whether or not the node accepted it.
    pub fn sent_transactions(&self) -> HashMap<String, u64> {
        self.shared
            .sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Counts the `eth_sendRawTransaction` calls of one request (a call or a batch) by raw bytes.
fn record_sends(shared: &Shared, request: &Value) {
    let calls = match request {
        Value::Array(batch) => batch.iter().collect::<Vec<_>>(),
        single => vec![single],
    };
    let raws: Vec<String> = calls
        .into_iter()
        .filter(|c| c.get("method").and_then(Value::as_str) == Some("eth_sendRawTransaction"))
        .filter_map(|c| c.pointer("/params/0").and_then(Value::as_str))
        .map(|raw| raw.trim_start_matches("0x").to_ascii_lowercase())
        .collect();
    if raws.is_empty() {
        return;
    }
    let mut sent = shared.sent.lock().unwrap_or_else(PoisonError::into_inner);
    for raw in raws {
        *sent.entry(raw).or_default() += 1;
    }
}

impl Drop for RpcProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn handle(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let mode = *shared.mode.lock().unwrap_or_else(PoisonError::into_inner);
    if mode == RpcMode::Down {
        return (StatusCode::SERVICE_UNAVAILABLE, "node down").into_response();
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not json").into_response();
    };
    let calls = request.as_array().map_or(1, Vec::len);
    shared.calls.fetch_add(calls as u64, Ordering::Relaxed);
    record_sends(&shared, &request);
    let answer = match mode {
        RpcMode::Honest => forward_raw(&shared, body).await,
        _ => {
            let node = Node {
                shared: &shared,
                mode,
                head: OnceCell::new(),
            };
            match request {
                Value::Array(batch) => {
                    futures::future::try_join_all(batch.into_iter().map(|c| node.answer(c)))
                        .await
                        .map(|answers| (StatusCode::OK, Value::Array(answers).to_string()))
                }
                single => node
                    .answer(single)
                    .await
                    .map(|answer| (StatusCode::OK, answer.to_string())),
            }
            .map(|(status, text)| (status, text.into_bytes()))
        }
    };
    match answer {
        Ok((status, body)) => json_response(status, body),
        Err(e) => (StatusCode::BAD_GATEWAY, format!("upstream failed: {e:#}")).into_response(),
    }
}

async fn forward_raw(shared: &Shared, body: Bytes) -> anyhow::Result<(StatusCode, Vec<u8>)> {
    let response = shared
        .client
        .post(&shared.upstream)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await?;
    let status = StatusCode::from_u16(response.status().as_u16())?;
    Ok((status, response.bytes().await?.to_vec()))
}

fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

fn header_not_found(id: &Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32000, "message": "header not found" } })
}

fn quantity(value: &Value) -> Option<u64> {
    u64::from_str_radix(value.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// Sets positional parameter `index` (padding with `null`), if the parameters are positional.
fn set_param(params: &mut Value, index: usize, value: Value) {
    if let Value::Array(list) = params {
        if list.len() <= index {
            list.resize(index + 1, Value::Null);
        }
        list[index] = value;
    }
}

/// `0x`-prefixed hex with every digit inverted (`0` <-> `f`), or `None` if it is not hex.
fn inverted(hash: &str) -> Option<String> {
    let digits = hash.strip_prefix("0x")?;
    let flipped: Option<String> = digits
        .chars()
        .map(|c| c.to_digit(16).and_then(|d| char::from_digit(15 - d, 16)))
        .collect();
    Some(format!("0x{}", flipped?))
}

fn hex(n: u64) -> Value {
    Value::String(format!("{n:#x}"))
}

/// One HTTP request's view of the upstream in a lying mode.
struct Node<'a> {
    shared: &'a Shared,
    mode: RpcMode,
    /// The upstream's head, read once per request when a lag needs it.
    head: OnceCell<u64>,
}

/// A block named in a call's parameters, resolved against the pretend head.
enum BlockParam {
    Number(u64),
    Hash(String),
}

impl Node<'_> {
    async fn upstream(&self, method: &str, params: Value, id: &Value) -> anyhow::Result<Value> {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = self
            .shared
            .client
            .post(&self.shared.upstream)
            .json(&body)
            .send()
            .await?;
        Ok(response.json().await?)
    }

    async fn upstream_result(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let answer = self.upstream(method, params, &json!(0)).await?;
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| anyhow!("{method} answered {answer}"))
    }

    async fn pretend_head(&self, lag: u64) -> anyhow::Result<u64> {
        let head = self
            .head
            .get_or_try_init(|| async {
                let head = self.upstream_result("eth_blockNumber", json!([])).await?;
                quantity(&head).ok_or_else(|| anyhow!("eth_blockNumber answered {head}"))
            })
            .await?;
        Ok(head.saturating_sub(lag))
    }

    async fn answer(&self, call: Value) -> anyhow::Result<Value> {
        let id = call.get("id").cloned().unwrap_or(Value::Null);
        let method = call
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let params = call.get("params").cloned().unwrap_or_else(|| json!([]));
        match self.mode {
            RpcMode::Honest | RpcMode::Down => self.upstream(&method, params, &id).await,
            RpcMode::HideReceipts if method == "eth_getTransactionReceipt" => {
                Ok(result(&id, Value::Null))
            }
            RpcMode::HideReceipts => self.upstream(&method, params, &id).await,
            RpcMode::ForkedReceipts => {
                let mut answer = self.upstream(&method, params, &id).await?;
                if method == "eth_getTransactionReceipt"
                    && let Some(found) = answer.pointer_mut("/result/blockHash")
                    && let Some(forked) = found.as_str().and_then(inverted)
                {
                    *found = Value::String(forked);
                }
                Ok(answer)
            }
            RpcMode::RewriteNonce(delta) => {
                let mut answer = self.upstream(&method, params, &id).await?;
                if method == "eth_getTransactionCount"
                    && let Some(found) = answer.get_mut("result")
                    && let Some(count) = quantity(found)
                {
                    let rewritten = i128::from(count) + i128::from(delta);
                    *found = hex(u64::try_from(rewritten.max(0)).unwrap_or(u64::MAX));
                }
                Ok(answer)
            }
            RpcMode::Lag(lag) => self.lagging(lag, &method, params, &id).await,
        }
    }

    async fn lagging(
        &self,
        lag: u64,
        method: &str,
        mut params: Value,
        id: &Value,
    ) -> anyhow::Result<Value> {
        let head = self.pretend_head(lag).await?;
        match method {
            "eth_blockNumber" => Ok(result(id, hex(head))),
            "eth_getBlockByNumber" => {
                let Some(BlockParam::Number(number)) = self.block_param(lag, &params[0]).await?
                else {
                    return Ok(header_not_found(id));
                };
                if number > head {
                    return Ok(result(id, Value::Null));
                }
                set_param(&mut params, 0, hex(number));
                self.upstream(method, params, id).await
            }
            "eth_getBlockByHash"
            | "eth_getTransactionReceipt"
            | "eth_getTransactionByHash"
            | "eth_getBlockReceipts" => {
                let mut answer = self.upstream(method, params, id).await?;
                let number = match &answer["result"] {
                    Value::Object(found) => found
                        .get("blockNumber")
                        .or_else(|| found.get("number"))
                        .and_then(quantity),
                    _ => None,
                };
                if number.is_some_and(|n| n > head)
                    && let Some(found) = answer.get_mut("result")
                {
                    *found = Value::Null;
                }
                Ok(answer)
            }
            "eth_getTransactionCount"
            | "eth_getBalance"
            | "eth_getCode"
            | "eth_call"
            | "eth_getStorageAt" => {
                let index = if method == "eth_getStorageAt" { 2 } else { 1 };
                match self.block_param(lag, &params[index]).await? {
                    Some(BlockParam::Number(number)) if number <= head => {
                        set_param(&mut params, index, hex(number));
                        self.upstream(method, params, id).await
                    }
                    Some(BlockParam::Hash(hash)) => {
                        let block = self
                            .upstream_result("eth_getBlockByHash", json!([hash, false]))
                            .await?;
                        match block.get("number").and_then(quantity) {
                            Some(number) if number <= head => {
                                self.upstream(method, params, id).await
                            }
                            // Unknown to the lagging node.
                            _ => Ok(header_not_found(id)),
                        }
                    }
                    _ => Ok(header_not_found(id)),
                }
            }
            _ => self.upstream(method, params, id).await,
        }
    }

    /// The block a parameter names, as the lagging node sees it (`None`: unparsable).
    async fn block_param(&self, lag: u64, param: &Value) -> anyhow::Result<Option<BlockParam>> {
        let head = self.pretend_head(lag).await?;
        let named = match param {
            Value::Null => "latest",
            Value::String(s) => s.as_str(),
            Value::Object(o) => {
                if let Some(hash) = o.get("blockHash").and_then(Value::as_str) {
                    return Ok(Some(BlockParam::Hash(hash.to_owned())));
                }
                match o.get("blockNumber") {
                    Some(inner) => return Box::pin(self.block_param(lag, inner)).await,
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        Ok(match named {
            "latest" | "pending" => Some(BlockParam::Number(head)),
            "earliest" => Some(BlockParam::Number(0)),
            "safe" | "finalized" => {
                let block = self
                    .upstream_result("eth_getBlockByNumber", json!([named, false]))
                    .await?;
                block
                    .get("number")
                    .and_then(quantity)
                    .map(|n| BlockParam::Number(n.saturating_sub(lag)))
            }
            hash if hash.len() == 66 => Some(BlockParam::Hash(hash.to_owned())),
            number => quantity(&Value::String(number.to_owned())).map(BlockParam::Number),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn post(url: &str, body: Value) -> anyhow::Result<(u16, Value)> {
        let response = crate::http_client()
            .no_proxy()
            .build()?
            .post(url)
            .json(&body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    fn call(id: u64, method: &str, params: Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
    }

    #[tokio::test]
    async fn modes_rewrite_single_and_batched_calls() -> anyhow::Result<()> {
        let anvil = crate::Anvil::start().await?;
        anvil.mine(5).await?;
        let proxy = RpcProxy::start(&anvil.rpc_url()).await?;
        let url = proxy.url();
        let (from, _) = crate::DEV_KEYS[0];

        let (status, honest) = post(&url, call(7, "eth_blockNumber", json!([]))).await?;
        assert_eq!(
            (status, &honest["result"], &honest["id"]),
            (200, &json!("0x5"), &json!(7))
        );

        proxy.set_mode(RpcMode::Lag(2));
        let batch = json!([
            call(1, "eth_blockNumber", json!([])),
            call(2, "eth_getBlockByNumber", json!(["0x4", false])),
            call(3, "eth_getBlockByNumber", json!(["latest", false])),
            call(4, "eth_getTransactionCount", json!([from, "0x5"])),
        ]);
        let (status, answers) = post(&url, batch).await?;
        assert_eq!(status, 200);
        assert_eq!(answers[0]["result"], json!("0x3"));
        assert_eq!(answers[1]["result"], Value::Null);
        assert_eq!(answers[2]["result"]["number"], json!("0x3"));
        assert_eq!(answers[3]["error"]["code"], json!(-32000));
        assert_eq!(
            answers
                .as_array()
                .map(|a| a.iter().map(|x| x["id"].clone()).collect::<Vec<_>>()),
            Some(vec![json!(1), json!(2), json!(3), json!(4)])
        );

        proxy.set_mode(RpcMode::RewriteNonce(3));
        let (_, count) = post(
            &url,
            call(1, "eth_getTransactionCount", json!([from, "latest"])),
        )
        .await?;
        assert_eq!(count["result"], json!("0x3"));

        // Submissions are counted by their raw bytes, accepted or not (these do not decode).
        let sends = json!([
            call(1, "eth_sendRawTransaction", json!(["0xDEAD"])),
            call(2, "eth_sendRawTransaction", json!(["0xdead"])),
            call(3, "eth_blockNumber", json!([])),
        ]);
        let (status, _) = post(&url, sends).await?;
        assert_eq!(status, 200);
        assert_eq!(
            proxy.sent_transactions(),
            std::collections::HashMap::from([("dead".to_owned(), 2)])
        );

        proxy.set_mode(RpcMode::Down);
        let (status, _) = post(&url, call(1, "eth_blockNumber", json!([]))).await?;
        assert_eq!(status, 503);
        assert_eq!(proxy.requests(), 5);
        assert_eq!(proxy.calls(), 9);
        Ok(())
    }
}
