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
