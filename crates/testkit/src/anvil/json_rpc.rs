//! JSON-RPC 2.0 on the wire to anvil: the error types of a call, the reply's `result` or
//! `error`, hex quantities, and the text of transport errors.

use std::fmt;

use anyhow::{Context, anyhow};
use serde_json::Value;

/// The `error` member of a JSON-RPC 2.0 response.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC error code (e.g. -32003 for a rejected transaction, -32602 for bad params).
    pub code: i64,
    /// The node's message, e.g. "nonce too low" or "transaction already imported".
    pub message: String,
    /// The optional `data` member (revert data, details).
    pub data: Option<Value>,
}

impl RpcError {
    /// The JSON-RPC error anywhere in the chain of an `anyhow` error (from an [`RpcCallError`]
    /// converted with `?`, with or without added context).
    pub fn find_in(error: &anyhow::Error) -> Option<&RpcError> {
        error.chain().find_map(|e| {
            e.downcast_ref::<RpcCallError>()
                .and_then(RpcCallError::rpc_error)
                .or_else(|| e.downcast_ref::<RpcError>())
        })
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error {}: {}", self.code, self.message)?;
        match &self.data {
            None | Some(Value::Null) => Ok(()),
            Some(data) => write!(f, " (data: {data})"),
        }
    }
}

impl std::error::Error for RpcError {}

/// Why a JSON-RPC call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcCallError {
    /// No JSON-RPC answer: connection refused, timeout, HTTP error without a JSON-RPC body, or a
    /// body that is neither a result nor an error.
    #[error("JSON-RPC {method} to {url} failed: {detail}")]
    Transport {
        /// The called method.
        method: String,
        /// The node's URL.
        url: String,
        /// What went wrong, with the underlying causes.
        detail: String,
    },
    /// The node answered with a JSON-RPC error.
    #[error("JSON-RPC {method} failed: {error}")]
    Rpc {
        /// The called method.
        method: String,
        /// The node's error: code and message.
        error: RpcError,
    },
}

impl RpcCallError {
    /// The node's error, for [`RpcCallError::Rpc`].
    pub fn rpc_error(&self) -> Option<&RpcError> {
        match self {
            RpcCallError::Rpc { error, .. } => Some(error),
            RpcCallError::Transport { .. } => None,
        }
    }

    /// The JSON-RPC error code, for [`RpcCallError::Rpc`].
    pub fn code(&self) -> Option<i64> {
        self.rpc_error().map(|e| e.code)
    }

    /// The node's error message, for [`RpcCallError::Rpc`].
    pub fn message(&self) -> Option<&str> {
        self.rpc_error().map(|e| e.message.as_str())
    }
}

pub(super) enum ReplyError {
    Rpc(RpcError),
    Malformed(String),
}

/// The `result` of a JSON-RPC 2.0 response, or its `error`.
pub(super) fn parse_reply(method: &str, reply: Value) -> Result<Value, ReplyError> {
    let Value::Object(mut members) = reply else {
        return Err(ReplyError::Malformed(format!(
            "the {method} response is not a JSON object: {}",
            truncate(&reply.to_string(), 500)
        )));
    };
    if let Some(error) = members.remove("error").filter(|e| !e.is_null()) {
        return Err(ReplyError::Rpc(RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: match error.get("message") {
                Some(Value::String(message)) => message.clone(),
                _ => error.to_string(),
            },
            data: error.get("data").cloned(),
        }));
    }
    members.remove("result").ok_or_else(|| {
        ReplyError::Malformed(format!(
            "the {method} response has neither result nor error: {}",
            truncate(&Value::Object(members).to_string(), 500)
        ))
    })
}

/// A JSON-RPC quantity (`"0x1a"`) as a number.
pub(super) fn quantity(value: &Value, what: &str) -> anyhow::Result<u128> {
    let text = value
        .as_str()
        .ok_or_else(|| anyhow!("{what}: expected a hex quantity, got {value}"))?;
    let digits = text
        .strip_prefix("0x")
        .filter(|d| !d.is_empty())
        .ok_or_else(|| anyhow!("{what}: expected a 0x-prefixed hex quantity, got {text}"))?;
    u128::from_str_radix(digits, 16)
        .with_context(|| format!("{what}: {text} is not a hex quantity that fits in 128 bits"))
}

pub(super) fn quantity_u64(value: &Value, what: &str) -> anyhow::Result<u64> {
    let n = quantity(value, what)?;
    u64::try_from(n).with_context(|| format!("{what}: {n} does not fit in 64 bits"))
}

/// An error and its causes, "a: b: c".
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub(super) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replies_and_quantities_parse() {
        let ok = parse_reply("m", json!({"jsonrpc": "2.0", "id": 1, "result": null}));
        assert!(matches!(ok, Ok(Value::Null)));
        let err = parse_reply(
            "m",
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32003, "message": "nonce too low"}}),
        );
        match err {
            Err(ReplyError::Rpc(e)) => {
                assert_eq!(e.code, -32003);
                assert_eq!(e.message, "nonce too low");
                assert_eq!(e.to_string(), "error -32003: nonce too low");
            }
            _ => panic!("expected an RPC error"),
        }
        assert!(matches!(
            parse_reply("m", json!({"jsonrpc": "2.0", "id": 1})),
            Err(ReplyError::Malformed(_))
        ));
        assert_eq!(quantity(&json!("0x0"), "q").ok(), Some(0));
        assert_eq!(quantity(&json!("0x1f"), "q").ok(), Some(31));
        assert!(quantity(&json!("0x"), "q").is_err());
        assert!(quantity(&json!("12"), "q").is_err());
        assert!(quantity(&json!(12), "q").is_err());
        assert!(quantity_u64(&json!("0x10000000000000000"), "q").is_err());
    }
}
