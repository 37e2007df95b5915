//! Offline EVM transfer construction and signing for opledger.
//!
//! This crate turns a payout decision into the exact bytes that would be
//! broadcast to an EVM chain, and nothing more:
//!
//! - [`tx`] builds EIP-1559 (type 2) transactions for native-coin and ERC-20
//!   transfers, computes the worst-case network fee, and derives cancel and
//!   fee-bump replacements at the same nonce.
//! - [`signer`] holds the signing key behind the [`signer::KeyProvider`]
//!   trait, signs a [`tx::TransferRequest`], re-decodes the encoded bytes and
//!   refuses to return anything that does not recover to the key's address
//!   and describe exactly the request. It also reads and writes Ethereum
//!   keystore v3 files (scrypt or pbkdf2, aes-128-ctr, keccak MAC).
//! - [`evidence`] judges stored attempts by their decoded content (transfer or
//!   cancel), for the services that read chain evidence.
//!
//! # What this crate must never do
//!
//! It is linked into the signer process, whose only outbound connection is
//! its own database. Therefore this crate must never open a network socket,
//! talk to a database, embed an HTTP client, or depend on a chain client
//! (JSON-RPC provider, websocket, ...). Nonces, fees and chain ids come in
//! from the caller; raw signed bytes go out. Broadcasting is someone else's
//! job.
//!
//! It must also never expose key material: no public method returns a
//! secret, `Debug` output of key holders shows only the address, decrypted
//! secrets live in zeroizing memory, and error messages never contain key
//! material nor destination addresses.

pub mod evidence;
pub mod keystore;
pub mod signer;
pub mod tx;

pub use alloy_consensus::TxEip1559;
pub use alloy_primitives::{Address, B256, Bytes, Signature, U256};
