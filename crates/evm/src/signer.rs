//! Signing transfer requests, and decoding what was signed.
//!
//! The key sits behind [`KeyProvider`] so that KMS or HSM backends can be
//! added later; the key never leaves its provider. [`sign`] builds the
//! EIP-1559 transaction, asks the provider to sign its signature hash,
//! encodes the EIP-2718 type-2 envelope and then decodes those very bytes:
//! it returns them only if they recover to the provider's address and
//! describe exactly the request.

use std::fmt;
use std::io::Read;
use std::path::Path;

use alloy_consensus::{SignableTransaction, TxEnvelope};
use alloy_eips::eip2718::{Decodable2718, Eip2718Error, Encodable2718};
use alloy_primitives::{Address, B256, Bytes, Signature, SignatureError, TxKind, U256, keccak256};
use k256::ecdsa::SigningKey;
use zeroize::Zeroizing;

use crate::keystore;
pub use crate::keystore::{KdfCost, KeystoreError, encrypt_keystore};
use crate::tx::{self, TransferKind, TransferRequest, TxError};

/// Largest keystore file read from disk, in bytes.
const MAX_KEYSTORE_FILE: u64 = 64 * 1024;

/// Why a transaction could not be signed or decoded.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The transfer request is invalid.
    #[error("invalid transfer request: {0}")]
    Request(#[from] TxError),
    /// The key provider failed; the reason must not contain key material.
    #[error("key provider failed to sign: {0}")]
    Provider(String),
    /// The signed bytes recover to an address other than the provider's.
    #[error("signature does not recover to the signing key's address")]
    SignerMismatch,
    /// The encoded transaction does not describe the request it was built from.
    #[error("encoded transaction does not match the transfer request")]
    EncodingMismatch,
    /// The bytes are not a well-formed EIP-2718 transaction.
    #[error("raw transaction cannot be decoded: {0}")]
    Decode(#[source] Eip2718Error),
    /// A valid transaction of a shape this crate never produces.
    #[error("unsupported transaction: {0}")]
    Unsupported(&'static str),
    /// No signer can be recovered from the signature.
    #[error("cannot recover the signer: {0}")]
    Recovery(#[source] SignatureError),
}

/// A holder of one secp256k1 key that signs 32-byte hashes.
pub trait KeyProvider: Send + Sync + fmt::Debug {
    /// The Ethereum address of the key.
    fn address(&self) -> Address;
    /// Signs a prehashed message (here: an EIP-1559 signature hash).
    fn sign_hash(&self, hash: &B256) -> Result<Signature, SignError>;
}

/// A key held in this process's memory, loaded from a keystore file.
///
/// The secret is zeroized on drop (k256's `SigningKey` does it), never
/// returned by any method, and `Debug` prints only the address.
pub struct LocalKey {
    key: SigningKey,
    address: Address,
}

impl LocalKey {
    /// Reads and decrypts a keystore v3 file.
    pub fn from_keystore_file(path: &Path, passphrase: &[u8]) -> Result<Self, KeystoreError> {
        let file = std::fs::File::open(path).map_err(KeystoreError::Io)?;
        let mut json = String::new();
        file.take(MAX_KEYSTORE_FILE + 1)
            .read_to_string(&mut json)
            .map_err(KeystoreError::Io)?;
        if json.len() as u64 > MAX_KEYSTORE_FILE {
            return Err(KeystoreError::TooLarge);
        }
        Self::from_keystore_json(&json, passphrase)
    }

    /// Decrypts keystore v3 JSON.
    pub fn from_keystore_json(json: &str, passphrase: &[u8]) -> Result<Self, KeystoreError> {
        Ok(Self::from_signing_key(keystore::decrypt_signing_key(
            json, passphrase,
        )?))
    }

    /// Wraps raw secret bytes. Meant for tests and dev tooling: production
    /// keys come from keystore files.
    pub fn from_secret_bytes(secret: Zeroizing<[u8; 32]>) -> Result<Self, KeystoreError> {
        Ok(Self::from_signing_key(keystore::signing_key(&secret)?))
    }

    fn from_signing_key(key: SigningKey) -> Self {
        let address = Address::from_private_key(&key);
        Self { key, address }
    }
}

impl fmt::Debug for LocalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl KeyProvider for LocalKey {
    fn address(&self) -> Address {
        self.address
    }

    fn sign_hash(&self, hash: &B256) -> Result<Signature, SignError> {
        let (signature, recovery_id) = self
            .key
            .sign_prehash_recoverable(hash.as_slice())
            .map_err(|_| SignError::Provider("local ecdsa signing failed".to_owned()))?;
        Ok(Signature::from((signature, recovery_id)))
    }
}

/// A signed, encoded transaction ready to be persisted and broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTransaction {
    /// EIP-2718 encoding (type byte 0x02 followed by the RLP payload).
    pub raw: Vec<u8>,
    /// Transaction hash: keccak256 of `raw`.
    pub hash: B256,
    /// The signer's address (recovered from `raw`).
    pub from: Address,
    /// Sender account nonce.
    pub nonce: u64,
    /// EIP-1559 fee cap per gas, in wei.
    pub max_fee_per_gas: u128,
    /// EIP-1559 tip cap per gas, in wei.
    pub max_priority_fee_per_gas: u128,
    /// Gas limit.
    pub gas_limit: u64,
}

/// What a raw EIP-1559 transaction says, with its recovered signer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedTransaction {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// Sender account nonce.
    pub nonce: u64,
    /// The called account (the token contract for ERC-20 transfers).
    pub to: Address,
    /// Native value in wei.
    pub value: U256,
    /// Calldata.
    pub input: Bytes,
    /// Gas limit.
    pub gas_limit: u64,
    /// EIP-1559 fee cap per gas, in wei.
    pub max_fee_per_gas: u128,
    /// EIP-1559 tip cap per gas, in wei.
    pub max_priority_fee_per_gas: u128,
    /// The signer recovered from the signature.
    pub from: Address,
    /// Transaction hash: keccak256 of the raw bytes.
    pub hash: B256,
}

impl DecodedTransaction {
    /// What the transaction does, in the domain's terms (for deciding an attempt's role from its
    /// content: `opledger_domain::evidence::role_of`).
    pub fn content(&self) -> opledger_domain::evidence::TxContent {
        use opledger_domain::evidence::{Call, TxContent};
        let call = if self.input.is_empty() {
            Call::Empty
        } else if let Some((recipient, amount)) = tx::parse_erc20_transfer(&self.input) {
            Call::Erc20Transfer {
                recipient: recipient.into_array(),
                amount: u128::try_from(amount).ok(),
            }
        } else {
            Call::Other
        };
        TxContent {
            chain_id: self.chain_id,
            sender: self.from.into_array(),
            nonce: self.nonce,
            to: self.to.into_array(),
            value: u128::try_from(self.value).ok(),
            call,
        }
    }

    /// The transfer request this transaction expresses: a native transfer
    /// for empty calldata, an ERC-20 transfer for 0-value `transfer` calldata,
    /// `None` for anything else.
    pub fn transfer_request(&self) -> Option<TransferRequest> {
        let (to, kind) = if self.input.is_empty() {
            (self.to, TransferKind::Native { value: self.value })
        } else if self.value.is_zero() {
            let (recipient, amount) = tx::parse_erc20_transfer(&self.input)?;
            let token = self.to;
            (recipient, TransferKind::Erc20 { token, amount })
        } else {
            return None;
        };
        Some(TransferRequest {
            chain_id: self.chain_id,
            nonce: self.nonce,
            to,
            kind,
            gas_limit: self.gas_limit,
            max_fee_per_gas: self.max_fee_per_gas,
            max_priority_fee_per_gas: self.max_priority_fee_per_gas,
        })
    }
}

/// Builds, signs and encodes `request` with `key`, then verifies the
/// encoding: the bytes must recover to `key.address()` and decode back to
/// exactly `request`, otherwise nothing is returned.
pub fn sign(
    request: &TransferRequest,
    key: &dyn KeyProvider,
) -> Result<SignedTransaction, SignError> {
    let unsigned = tx::build(request)?;
    let signature = key.sign_hash(&unsigned.signature_hash())?;
    let raw = TxEnvelope::from(unsigned.into_signed(signature)).encoded_2718();
    let decoded = decode(&raw)?;
    if decoded.from != key.address() {
        return Err(SignError::SignerMismatch);
    }
    if decoded.transfer_request().as_ref() != Some(request) {
        return Err(SignError::EncodingMismatch);
    }
    Ok(SignedTransaction {
        hash: decoded.hash,
        from: decoded.from,
        nonce: decoded.nonce,
        max_fee_per_gas: decoded.max_fee_per_gas,
        max_priority_fee_per_gas: decoded.max_priority_fee_per_gas,
        gas_limit: decoded.gas_limit,
        raw,
    })
}

/// Decodes a raw EIP-2718 transaction and recovers its signer.
///
/// Only the shape this crate produces is accepted: a type-2 (EIP-1559)
/// call with an empty access list, and no trailing bytes.
pub fn decode(raw: &[u8]) -> Result<DecodedTransaction, SignError> {
    let envelope = TxEnvelope::decode_2718_exact(raw).map_err(SignError::Decode)?;
    let TxEnvelope::Eip1559(signed) = envelope else {
        return Err(SignError::Unsupported(
            "only eip-1559 (type 2) transactions",
        ));
    };
    let from = signed.recover_signer().map_err(SignError::Recovery)?;
    let tx = signed.tx();
    let TxKind::Call(to) = tx.to else {
        return Err(SignError::Unsupported("contract creation"));
    };
    if !tx.access_list.is_empty() {
        return Err(SignError::Unsupported("non-empty access list"));
    }
    Ok(DecodedTransaction {
        chain_id: tx.chain_id,
        nonce: tx.nonce,
        to,
        value: tx.value,
        input: tx.input.clone(),
        gas_limit: tx.gas_limit,
        max_fee_per_gas: tx.max_fee_per_gas,
        max_priority_fee_per_gas: tx.max_priority_fee_per_gas,
        from,
        hash: keccak256(raw),
    })
}

#[cfg(test)]
mod tests;
