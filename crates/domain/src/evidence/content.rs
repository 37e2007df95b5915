//! What an attempt is, from its content. The signer stores a kind beside each attempt
//! (`ORIGINAL`, `FEE_BUMP`, `CANCEL`), but a stored label is only a claim: the role that counts is
//! the one the decoded, signature-recovered bytes express against the approved payload. A transfer
//! pays the payload's amount of the payload's asset to the payload's recipient; a cancel is a
//! zero-value self-transfer at the same nonce. Anything else is a mismatch: evidence of tampering.

use super::Address;
use std::fmt;

/// What a decoded transaction calls, beyond its target and value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// No calldata: a plain value transfer.
    Empty,
    /// `transfer(recipient, amount)` of an ERC-20 token (the target is the token).
    Erc20Transfer {
        /// The token recipient.
        recipient: Address,
        /// The amount, or `None` when it does not fit 128 bits.
        amount: Option<u128>,
    },
    /// Any other calldata.
    Other,
}

/// The content of one signed attempt: decoded from its bytes, its sender recovered from the
/// signature. Addresses are never shown by `Debug`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TxContent {
    /// The EIP-155 chain id.
    pub chain_id: u64,
    /// The signer recovered from the signature.
    pub sender: Address,
    /// The sender's nonce.
    pub nonce: u64,
    /// The called account.
    pub to: Address,
    /// Native value, or `None` when it does not fit 128 bits.
    pub value: Option<u128>,
    /// The calldata, decoded.
    pub call: Call,
}

impl fmt::Debug for TxContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxContent")
            .field("chain_id", &self.chain_id)
            .field("nonce", &self.nonce)
            .finish_non_exhaustive()
    }
}

/// The asset a payload moves, resolved against the network's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asset {
    /// The network's native coin.
    Native,
    /// An ERC-20 token at this contract address.
    Token(Address),
}

/// What the approved payload, once planned, must be executed as: the transfer every non-cancel
/// attempt of the operation must express. `sender` and `nonce` are those of the original attempt.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ExpectedTransfer {
    /// The network's chain id.
    pub chain_id: u64,
    /// The original attempt's sender: every replacement must come from it.
    pub sender: Address,
    /// The original attempt's nonce: every replacement uses it.
    pub nonce: u64,
    /// The payload's recipient.
    pub recipient: Address,
    /// The payload's asset.
    pub asset: Asset,
    /// The payload's amount, in minimal units.
    pub amount: u128,
}

impl fmt::Debug for ExpectedTransfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpectedTransfer")
            .field("chain_id", &self.chain_id)
            .field("nonce", &self.nonce)
            .finish_non_exhaustive()
    }
}

/// What an attempt does, derived from its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// It pays the approved transfer.
    Transfer,
    /// It consumes the nonce and moves no value (a zero-value self-transfer).
    Cancel,
}

/// Why an attempt's content is neither the approved transfer nor a cancel of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ContentMismatch {
    /// Signed for another chain.
    #[error("attempt is signed for another chain")]
    ChainId,
    /// Signed by another account than the original's sender.
    #[error("attempt is signed by another sender than the original")]
    Sender,
    /// At another nonce than the original's.
    #[error("attempt uses another nonce than the original")]
    Nonce,
    /// Neither the approved transfer (recipient, asset, amount) nor a zero-value self-transfer.
    #[error("attempt is neither the approved transfer nor a cancel")]
    Neither,
}

/// The role of an attempt whose content is `content`, for the approved `expected` transfer.
pub fn role_of(content: &TxContent, expected: &ExpectedTransfer) -> Result<Role, ContentMismatch> {
    if content.chain_id != expected.chain_id {
        return Err(ContentMismatch::ChainId);
    }
    if content.sender != expected.sender {
        return Err(ContentMismatch::Sender);
    }
    if content.nonce != expected.nonce {
        return Err(ContentMismatch::Nonce);
    }
    let transfer = match expected.asset {
        Asset::Native => {
            content.call == Call::Empty
                && content.to == expected.recipient
                && content.value == Some(expected.amount)
        }
        Asset::Token(token) => {
            content.to == token
                && content.value == Some(0)
                && content.call
                    == Call::Erc20Transfer {
                        recipient: expected.recipient,
                        amount: Some(expected.amount),
                    }
        }
    };
    // A zero-amount payload would make a transfer and a cancel look alike: it is never a transfer.
    if transfer && expected.amount > 0 {
        return Ok(Role::Transfer);
    }
    let cancel =
        content.call == Call::Empty && content.to == content.sender && content.value == Some(0);
    if cancel {
        return Ok(Role::Cancel);
    }
    Err(ContentMismatch::Neither)
}

/// One stored attempt as a reader of the chain needs it: its bytes, its stored kind and its stored
/// hash (a claim checked against the bytes).
#[derive(Debug, Clone, Copy)]
pub struct StoredAttempt<'a> {
    /// The signed bytes.
    pub raw: &'a [u8],
    /// The kind stored beside them.
    pub kind: AttemptKind,
    /// The hash stored beside them (`0x`, lowercase).
    pub tx_hash: &'a str,
}

/// Which transaction an attempt is, as stored beside its bytes (`tx_attempts.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptKind {
    /// The withdrawal's transfer: the first attempt.
    Original,
    /// A replacement of a transfer at the same nonce, recipient and amount, with higher fees.
    FeeBump,
    /// A zero-value self-transfer replacing a transfer at the same nonce.
    Cancel,
}

/// A stored attempt kind that is none of the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not an attempt kind")]
pub struct UnknownAttemptKind;

impl std::str::FromStr for AttemptKind {
    type Err = UnknownAttemptKind;

    /// The stored name (`ORIGINAL`, `FEE_BUMP`, `CANCEL`).
    fn from_str(s: &str) -> Result<AttemptKind, UnknownAttemptKind> {
        match s {
            "ORIGINAL" => Ok(AttemptKind::Original),
            "FEE_BUMP" => Ok(AttemptKind::FeeBump),
            "CANCEL" => Ok(AttemptKind::Cancel),
            _ => Err(UnknownAttemptKind),
        }
    }
}

impl AttemptKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Original => "ORIGINAL",
            AttemptKind::FeeBump => "FEE_BUMP",
            AttemptKind::Cancel => "CANCEL",
        }
    }

    /// The role an attempt of this kind must have.
    pub fn role(self) -> Role {
        match self {
            AttemptKind::Original | AttemptKind::FeeBump => Role::Transfer,
            AttemptKind::Cancel => Role::Cancel,
        }
    }

    /// Checks the stored kind against the role derived from content.
    pub fn check(self, derived: Role) -> Result<Role, KindMismatch> {
        if self.role() == derived {
            Ok(derived)
        } else {
            Err(KindMismatch {
                stored: self,
                derived,
            })
        }
    }
}

/// The stored kind of an attempt contradicts its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("attempt stored as {stored:?} is a {derived:?} by its content")]
pub struct KindMismatch {
    /// What the row says.
    pub stored: AttemptKind,
    /// What the bytes say.
    pub derived: Role,
}

/// A replacement a caller asks the signer for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplacementRequest {
    /// The same attempt with higher fees.
    FeeBump,
    /// A zero-value self-transfer at the same nonce.
    Cancel,
}

/// The kind a replacement is stored as, given the role of the attempt it replaces: a fee bump of
/// a cancel is a cancel (its bytes are a zero-value self-transfer), never a transfer.
pub fn replacement_kind(requested: ReplacementRequest, latest: Role) -> AttemptKind {
    match (requested, latest) {
        (ReplacementRequest::FeeBump, Role::Transfer) => AttemptKind::FeeBump,
        (ReplacementRequest::FeeBump, Role::Cancel) | (ReplacementRequest::Cancel, _) => {
            AttemptKind::Cancel
        }
    }
}

/// Why no key may sign a replacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no configured wallet is the original attempt's sender")]
pub struct NoKeyForSender;

/// The account that must sign a replacement of an attempt sent by `original`: always `original`
/// itself, whichever wallet is the tenant's current one. `available` lists the accounts the signer
/// holds keys for (the current wallet and the retired ones still finishing their nonces); a
/// replacement whose sender's key is gone is refused rather than signed by another account (whose
/// transaction at that nonce could not replace the original, and could be mined besides it).
pub fn replacement_sender(
    original: Address,
    available: &[Address],
) -> Result<Address, NoKeyForSender> {
    if available.contains(&original) {
        Ok(original)
    } else {
        Err(NoKeyForSender)
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::Empty => f.write_str("Empty"),
            Call::Erc20Transfer { .. } => f.write_str("Erc20Transfer { .. }"),
            Call::Other => f.write_str("Other"),
        }
    }
}

impl ExpectedTransfer {
    /// The transfer every attempt of an operation must express, for a reader that does not hold
    /// the signer's network configuration (the watcher, the reconciler): chain, sender, nonce and
    /// asset from the original attempt (the signer verified it against the payload and its own
    /// configuration before signing), recipient and amount from the approved payload, so an
    /// original that pays anyone else or any other amount is still a mismatch.
    pub fn from_original(
        original: &TxContent,
        recipient: Address,
        amount: u128,
    ) -> ExpectedTransfer {
        let asset = match original.call {
            Call::Erc20Transfer { .. } => Asset::Token(original.to),
            Call::Empty | Call::Other => Asset::Native,
        };
        ExpectedTransfer {
            chain_id: original.chain_id,
            sender: original.sender,
            nonce: original.nonce,
            recipient,
            asset,
            amount,
        }
    }
}

/// Parses a `0x`-prefixed 40-hex-digit address (either case).
pub fn parse_address(text: &str) -> Option<Address> {
    let hex_part = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))?;
    if hex_part.len() != 40 {
        return None;
    }
    let mut out = [0_u8; 20];
    hex::decode_to_slice(hex_part, &mut out).ok()?;
    Some(out)
}
