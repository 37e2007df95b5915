//! Opaque page tokens bound to the query they came from (AIP-158).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use opledger_domain::ids::OperationId;
use opledger_domain::state::OperationState;
use opledger_grpc::status::{ErrorReason, error_status};
use tonic::{Code, Status};

/// Default and maximum page sizes.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// The largest page a caller can ask for; larger requests are capped.
pub const MAX_PAGE_SIZE: u32 = 500;

fn filter_fingerprint(states: &[OperationState]) -> String {
    let mut names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names.join(",")
}

/// Encodes the cursor after `last` for this filter.
pub fn encode(last: OperationId, states: &[OperationState]) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1|{last}|{}", filter_fingerprint(states)))
}

/// Decodes a token; refuses tokens that are malformed or were made for another filter.
pub fn decode(token: &str, states: &[OperationState]) -> Result<Option<OperationId>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    let invalid = || {
        error_status(
            Code::InvalidArgument,
            ErrorReason::InvalidPageToken,
            "page_token is malformed or belongs to a different query",
            &[],
        )
    };
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(raw).map_err(|_| invalid())?;
    let mut parts = text.splitn(3, '|');
    let (Some("v1"), Some(id), Some(filter)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(invalid());
    };
    if filter != filter_fingerprint(states) {
        return Err(invalid());
    }
    id.parse().map(Some).map_err(|_| invalid())
}

/// The effective page size.
pub fn page_size(requested: i32) -> Result<u32, Status> {
    match requested {
        0 => Ok(DEFAULT_PAGE_SIZE),
        n if n < 0 => Err(opledger_grpc::status::invalid_field(
            "page_size",
            "must not be negative",
        )),
        n => Ok(u32::try_from(n).unwrap_or(MAX_PAGE_SIZE).min(MAX_PAGE_SIZE)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_are_bound_to_the_filter() {
        let id = OperationId::new();
        let states = [OperationState::Requested];
        let token = encode(id, &states);
        assert_eq!(decode(&token, &states).ok(), Some(Some(id)));
        assert!(decode(&token, &[]).is_err());
        assert!(decode("garbage!", &states).is_err());
        assert_eq!(decode("", &states).ok(), Some(None));
    }

    #[test]
    fn page_size_defaults_and_caps() {
        assert_eq!(page_size(0).ok(), Some(DEFAULT_PAGE_SIZE));
        assert_eq!(page_size(10_000).ok(), Some(MAX_PAGE_SIZE));
        assert!(page_size(-1).is_err());
    }
}
