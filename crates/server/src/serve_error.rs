//! Why a service could not start or stopped with an error.

use std::net::SocketAddr;

/// Why a service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The database could not be reached at start (the URL is never printed).
    #[error("cannot connect to the database: {0}")]
    Database(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The reflection service could not be built from the descriptors.
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The gRPC server failed.
    #[error("grpc server: {0}")]
    Transport(#[from] tonic::transport::Error),
}
