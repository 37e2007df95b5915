//! EVM chain access for the services that talk to nodes (broadcaster, reconciler): submitting
//! stored signed bytes with every result classified, and reading heads, receipts and nonces.
//!
//! It never signs or builds transactions, and it never turns a missing answer into a verdict:
//! every read distinguishes "the node says no" from "the node did not answer".

pub mod classify;
pub mod evidence;
mod http;
pub mod links;
pub mod rpc;

pub use classify::{SubmitClass, Verdict};
pub use evidence::{
    EvidenceConfig, EvidenceReader, EvidenceSetupError, Finality, NetworkEvidence, PinError, Pinned,
};
pub use http::{ClientError, client as http_client, install_crypto_provider};
pub use links::{ChainLinks, LinksError, NetworkLinks};
pub use rpc::{Rpc, RpcSetupError};
