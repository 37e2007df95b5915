//! How a call refused by a service becomes a [`Failure`]: the leaf every command module uses.

use crate::client::Service;
use crate::error::Failure;

/// The failure of a call to `service`.
pub(super) fn refused(service: Service) -> impl Fn(tonic::Status) -> Failure {
    move |status| Failure::from_status(service.name(), &status)
}
