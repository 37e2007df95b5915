//! Answers in each provider's error format, and the note a handler leaves on its response for
//! the request log (reference, faults applied, whether to drop the connection).

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::profile::Profile;
use crate::record::StoredAnswer;

/// How an answer is withheld (fault 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropMode {
    /// Close the connection without answering.
    Close,
    /// Answer after this many real milliseconds.
    Delay(u64),
}

/// What a handler tells the request log and the connection loop.
#[derive(Debug, Clone, Default)]
pub struct Note {
    /// The profile served.
    pub profile: Option<Profile>,
    /// Our reference, when the request carried one.
    pub reference: Option<String>,
    /// Labels of the faults applied.
    pub faults: Vec<String>,
    /// Whether to withhold the answer.
    pub drop: Option<DropMode>,
}

impl Note {
    /// A note for a request of `profile`.
    pub fn of(profile: Profile) -> Note {
        Note {
            profile: Some(profile),
            ..Note::default()
        }
    }
}

/// A JSON answer.
pub fn answer(status: u16, body: &Value) -> StoredAnswer {
    StoredAnswer {
        status,
        body: body.to_string(),
    }
}

/// Fireblocks' error body.
pub fn fireblocks_error(status: u16, message: &str, code: i64) -> StoredAnswer {
    answer(status, &json!({"message": message, "code": code}))
}

/// BitGo's error body.
pub fn bitgo_error(status: u16, message: &str, name: &str) -> StoredAnswer {
    answer(status, &json!({"error": message, "name": name}))
}

/// Coinbase Prime's error body.
pub fn prime_error(status: u16, message: &str) -> StoredAnswer {
    answer(status, &json!({"message": message}))
}

/// An error in `profile`'s format with its default code or name for `status`.
pub fn error(profile: Profile, status: u16, message: &str) -> StoredAnswer {
    match profile {
        Profile::Fireblocks => {
            let code = match status {
                401 => -7,
                404 => 1401,
                429 => 1429,
                500.. => -1,
                _ => 1003,
            };
            fireblocks_error(status, message, code)
        }
        Profile::Bitgo => {
            let name = match status {
                401 => "Unauthorized",
                404 => "NotFound",
                429 => "TooManyRequests",
                500.. => "InternalServerError",
                _ => "InvalidRequest",
            };
            bitgo_error(status, message, name)
        }
        Profile::Prime => prime_error(status, message),
    }
}

/// The HTTP response of `answer`, with `note` attached.
pub fn respond(answer: &StoredAnswer, note: Note) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        answer.body.clone(),
    )
        .into_response();
    response.extensions_mut().insert(note);
    response
}

/// `429` in `profile`'s format with `Retry-After`.
pub fn rate_limited(profile: Profile, retry_after_secs: u64, note: Note) -> Response {
    let mut response = respond(&error(profile, 429, "Too many requests"), note);
    if let Ok(value) = HeaderValue::from_str(&retry_after_secs.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}
