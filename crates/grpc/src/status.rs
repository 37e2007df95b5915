//! Building statuses that carry `google.rpc.ErrorInfo` (AIP-193).

use std::collections::HashMap;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

pub use opledger_proto::v1::ErrorReason;

/// A status with `ErrorInfo { reason, domain: "opledger", metadata }`. Metadata values must never
/// hold keys, addresses, memos or other sensitive identifiers.
pub fn error_status(
    code: Code,
    reason: ErrorReason,
    message: impl Into<String>,
    metadata: &[(&str, &str)],
) -> Status {
    error_status_with(code, reason, message, metadata, ErrorDetails::new())
}

/// Like [`error_status`], with further standard details (for example a `PreconditionFailure`).
pub fn error_status_with(
    code: Code,
    reason: ErrorReason,
    message: impl Into<String>,
    metadata: &[(&str, &str)],
    mut details: ErrorDetails,
) -> Status {
    let metadata: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    details.set_error_info(reason.as_str_name(), opledger_proto::ERROR_DOMAIN, metadata);
    Status::with_error_details(code, message, details)
}

/// The `INVALID_FIELD` status for a missing or malformed request field.
pub fn invalid_field(field: &str, problem: &str) -> Status {
    let mut details = ErrorDetails::new();
    details.add_bad_request_violation(field, problem);
    error_status_with(
        Code::InvalidArgument,
        ErrorReason::InvalidField,
        format!("{field}: {problem}"),
        &[("field", field)],
        details,
    )
}

/// The reason carried by a status, if it has opledger `ErrorInfo`.
pub fn reason_of(status: &Status) -> Option<String> {
    status
        .get_error_details()
        .error_info()
        .filter(|info| info.domain == opledger_proto::ERROR_DOMAIN)
        .map(|info| info.reason.clone())
}
