//! Generated protobuf and gRPC types of the opledger API (`proto/opledger/v1`).
//!
//! Only the gRPC edge of each service and its clients use these types; domain and store code never
//! does. Conversions live in each service's `convert` module.

#![allow(missing_docs, clippy::all, missing_debug_implementations)]

/// `opledger.v1`: messages, enums, clients and servers.
pub mod v1 {
    tonic::include_proto!("opledger.v1");
}

/// The encoded `FileDescriptorSet` of every opledger proto, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/opledger_descriptor.bin"));

/// The `google.rpc.ErrorInfo` domain of every opledger error.
pub const ERROR_DOMAIN: &str = "opledger";

/// The canonical name of a gRPC code (`INVALID_ARGUMENT`), as clients and reports print it.
pub fn code_name(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::Unknown => "UNKNOWN",
        tonic::Code::InvalidArgument => "INVALID_ARGUMENT",
        tonic::Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::PermissionDenied => "PERMISSION_DENIED",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::FailedPrecondition => "FAILED_PRECONDITION",
        tonic::Code::Aborted => "ABORTED",
        tonic::Code::OutOfRange => "OUT_OF_RANGE",
        tonic::Code::Unimplemented => "UNIMPLEMENTED",
        tonic::Code::Internal => "INTERNAL",
        tonic::Code::Unavailable => "UNAVAILABLE",
        tonic::Code::DataLoss => "DATA_LOSS",
        tonic::Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
