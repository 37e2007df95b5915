//! A minimal EVM JSON-RPC client: submitting raw transactions, with every failure classified.

use crate::classify::SubmitClass;
use serde_json::{Value, json};
use std::time::Duration;

/// A JSON-RPC endpoint of one network.
#[derive(Debug, Clone)]
pub struct Rpc {
    http: reqwest::Client,
    url: String,
}

impl Rpc {
    /// A client of `url` whose calls give up after `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<Rpc, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(Rpc {
            http,
            url: url.to_owned(),
        })
    }

    /// `eth_sendRawTransaction` of exactly `raw`, classified.
    pub async fn send_raw_transaction(&self, raw: &[u8]) -> SubmitClass {
        let body = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "eth_sendRawTransaction",
            "params": [format!("0x{}", hex::encode(raw))],
        });
        let response = match self.http.post(&self.url).json(&body).send().await {
            Ok(response) => response,
            Err(e) if e.is_timeout() => return SubmitClass::Timeout,
            Err(_) => return SubmitClass::ConnectionFailed,
        };
        let value: Value = match response.json().await {
            Ok(value) => value,
            Err(e) if e.is_timeout() => return SubmitClass::Timeout,
            // The body was cut or is not JSON: the request may still have been accepted.
            Err(_) => return SubmitClass::ConnectionFailed,
        };
        if value.get("result").and_then(Value::as_str).is_some() {
            return SubmitClass::Accepted;
        }
        let message = value
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        SubmitClass::from_rpc_message(message)
    }
}
