//! A raw gRPC-over-HTTP/2 client (the `h2` crate, prior knowledge, no TLS) that sends exactly the
//! frames a case asks for, even ones no gRPC library would send, and classifies what comes back:
//! the gRPC status of the response headers (trailers-only) or trailers with its
//! `google.rpc.ErrorInfo`, an HTTP status without a gRPC one, a stream reset or a closed
//! connection.

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use h2::client::SendRequest;
use http::HeaderMap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tonic::Code;
use tonic_types::StatusExt;

/// How long one call may take before it counts as a hang.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The canonical name of a gRPC code, the class of its answers.
pub use opledger_proto::code_name;

/// A gRPC message frame: the compression flag, a declared length and the bytes that follow
/// (which may be shorter or longer than declared).
pub fn frame(flag: u8, declared: u32, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + body.len());
    out.put_u8(flag);
    out.put_u32(declared);
    out.put_slice(body);
    out.freeze()
}

/// A well-formed uncompressed frame of `message`.
pub fn message_frame(message: &[u8]) -> Bytes {
    let declared = u32::try_from(message.len()).unwrap_or(u32::MAX);
    frame(0, declared, message)
}

/// One request as it goes on the wire.
#[derive(Debug, Clone)]
pub struct Call {
    /// The `:path`, `/package.Service/Method`.
    pub path: String,
    /// Extra request headers (metadata), in order.
    pub metadata: Vec<(String, String)>,
    /// The DATA frames, the last one with END_STREAM; `None` ends the stream on HEADERS.
    pub data: Option<Vec<Bytes>>,
}

impl Call {
    /// A unary call carrying `message` in one well-formed frame.
    pub fn unary(path: &str, message: &[u8]) -> Call {
        Call::frames(path, vec![message_frame(message)])
    }

    /// A call whose body is exactly these DATA frames.
    pub fn frames(path: &str, data: Vec<Bytes>) -> Call {
        Call {
            path: path.to_owned(),
            metadata: Vec::new(),
            data: Some(data),
        }
    }

    /// HEADERS with END_STREAM and no DATA at all.
    pub fn headers_only(path: &str) -> Call {
        Call {
            path: path.to_owned(),
            metadata: Vec::new(),
            data: None,
        }
    }

    /// The same call with extra metadata.
    pub fn with_metadata(mut self, metadata: Vec<(String, String)>) -> Call {
        self.metadata = metadata;
        self
    }
}

/// What came back.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// A gRPC code name, `http_<status>`, `reset`, `closed`, `timeout` or `client_error`.
    pub class: String,
    /// The `ErrorInfo.reason`, or "".
    pub reason: String,
    /// The `ErrorInfo.domain`, or "".
    pub domain: String,
    /// The status message or the error, for failure reports.
    pub message: String,
}

impl Answer {
    fn of(class: &str, message: String) -> Answer {
        Answer {
            class: class.to_owned(),
            message,
            ..Answer::default()
        }
    }

    /// The contract's answer to an undecodable request or a framing fault: INVALID_ARGUMENT with
    /// ErrorInfo `opledger`/`MALFORMED_REQUEST`.
    pub fn is_malformed_request(&self) -> bool {
        self.class == "INVALID_ARGUMENT"
            && self.reason == "MALFORMED_REQUEST"
            && self.domain == opledger_proto::ERROR_DOMAIN
    }

    /// `class reason "message"`, for failure reports.
    pub fn describe(&self) -> String {
        let mut message = self.message.clone();
        message.truncate(160);
        format!("{} reason={:?} {message:?}", self.class, self.reason)
    }
}

/// The answer carried by a header block holding `grpc-status`, if it holds one.
fn grpc_answer(headers: &HeaderMap) -> Option<Answer> {
    let raw = headers.get("grpc-status")?;
    let number = raw.to_str().ok().and_then(|s| s.parse::<i32>().ok());
    let class = match number {
        Some(n) if (0..=16).contains(&n) => code_name(Code::from_i32(n)).to_owned(),
        _ => format!("grpc_status_{}", String::from_utf8_lossy(raw.as_bytes())),
    };
    let status = tonic::Status::from_header_map(headers);
    let info = status
        .as_ref()
        .and_then(|s| s.get_error_details().error_info().cloned());
    Some(Answer {
        class,
        reason: info.as_ref().map(|i| i.reason.clone()).unwrap_or_default(),
        domain: info.map(|i| i.domain).unwrap_or_default(),
        message: status.map(|s| s.message().to_owned()).unwrap_or_default(),
    })
}

fn h2_answer(e: &h2::Error) -> Answer {
    let class = if e.is_go_away() || e.is_io() {
        "closed"
    } else if e.reason().is_some() {
        "reset"
    } else {
        "client_error"
    };
    Answer::of(class, e.to_string())
}

/// One HTTP/2 connection to a port, re-opened after it breaks; calls may run concurrently.
#[derive(Debug)]
pub struct RawClient {
    addr: SocketAddr,
    send: Mutex<Option<SendRequest<Bytes>>>,
}

enum Failure {
    H2(h2::Error),
    Io(std::io::Error),
    Http(http::Error),
}

impl From<h2::Error> for Failure {
    fn from(e: h2::Error) -> Failure {
        Failure::H2(e)
    }
}

impl RawClient {
    /// A client of the gRPC port at `addr` (connects on first use).
    pub fn new(addr: SocketAddr) -> RawClient {
        RawClient {
            addr,
            send: Mutex::new(None),
        }
    }

    async fn sender(&self) -> Result<SendRequest<Bytes>, Failure> {
        let mut slot = self.send.lock().await;
        if let Some(send) = slot.as_ref() {
            return Ok(send.clone());
        }
        let tcp = TcpStream::connect(self.addr).await.map_err(Failure::Io)?;
        tcp.set_nodelay(true).map_err(Failure::Io)?;
        let (send, connection) = h2::client::Builder::new()
            .max_header_list_size(1 << 20)
            .handshake::<_, Bytes>(tcp)
            .await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        *slot = Some(send.clone());
        Ok(send)
    }

    /// Sends `call` and classifies the answer; a call that takes longer than [`CALL_TIMEOUT`] is a
    /// `timeout`.
    pub async fn call(&self, call: &Call) -> Answer {
        match tokio::time::timeout(CALL_TIMEOUT, self.exchange(call)).await {
            Err(_) => {
                self.reset().await;
                Answer::of("timeout", format!("no answer within {CALL_TIMEOUT:?}"))
            }
            Ok(Ok(answer)) => answer,
            Ok(Err(failure)) => {
                self.reset().await;
                match failure {
                    Failure::H2(e) => h2_answer(&e),
                    Failure::Io(e) => Answer::of("closed", e.to_string()),
                    Failure::Http(e) => Answer::of("client_error", e.to_string()),
                }
            }
        }
    }

    /// Sends every call, `concurrency` at a time, answers in the calls' order.
    pub async fn call_all(&self, calls: &[Call], concurrency: usize) -> Vec<Answer> {
        futures::stream::iter(calls)
            .map(|call| self.call(call))
            .buffered(concurrency)
            .collect()
            .await
    }

    async fn reset(&self) {
        *self.send.lock().await = None;
    }

    async fn exchange(&self, call: &Call) -> Result<Answer, Failure> {
        let send = self.sender().await?;
        let mut send = send.ready().await?;
        let mut request = http::Request::builder()
            .method(http::Method::POST)
            .uri(format!("http://{}{}", self.addr, call.path))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        for (name, value) in &call.metadata {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request.body(()).map_err(Failure::Http)?;
        let (response, mut stream) = send.send_request(request, call.data.is_none())?;
        if let Some(data) = &call.data {
            let last = data.len().saturating_sub(1);
            if data.is_empty() {
                // An empty DATA frame with END_STREAM: a body of no bytes at all.
                let _ = stream.send_data(Bytes::new(), true);
            }
            for (i, chunk) in data.iter().enumerate() {
                // The server may answer (and reset the stream) before it reads everything: the
                // answer, read below, is what counts.
                if stream.send_data(chunk.clone(), i == last).is_err() {
                    break;
                }
            }
        }
        let response = response.await?;
        let (parts, mut body) = response.into_parts();
        if let Some(answer) = grpc_answer(&parts.headers) {
            return Ok(answer);
        }
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body.trailers().await?;
        if let Some(answer) = trailers.as_ref().and_then(grpc_answer) {
            return Ok(answer);
        }
        Ok(if parts.status == http::StatusCode::OK {
            Answer::of("no_grpc_status", "neither headers nor trailers".to_owned())
        } else {
            Answer::of(
                &format!("http_{}", parts.status.as_u16()),
                "no grpc-status".to_owned(),
            )
        })
    }
}
