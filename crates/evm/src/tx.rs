//! EIP-1559 transfer transactions: building, fee arithmetic and replacements.
//!
//! A [`TransferRequest`] is the caller's full description of one payout
//! attempt (chain, nonce, recipient, asset, fees). [`build`] turns it into an
//! unsigned [`TxEip1559`]; [`cancel`] and [`bump`] derive replacement
//! requests at the same nonce. Nothing here knows about keys or networks.

use alloy_consensus::TxEip1559;
use alloy_primitives::{Address, Bytes, TxKind, U256};

/// Selector of `transfer(address,uint256)`: the first four bytes of its keccak256.
pub const ERC20_TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];

/// Length of ERC-20 `transfer` calldata: selector plus two 32-byte words.
pub const ERC20_TRANSFER_CALLDATA_LEN: usize = 4 + 32 + 32;

/// Smallest fee increase, in percent, that nodes accept for a replacement.
pub const MIN_BUMP_PERCENT: u32 = 10;

/// What a transfer moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferKind {
    /// The chain's native coin; `value` is in wei.
    Native {
        /// Amount in wei.
        value: U256,
    },
    /// An ERC-20 token; the transaction calls `token.transfer(to, amount)`.
    Erc20 {
        /// The token contract.
        token: Address,
        /// Amount in the token's smallest unit.
        amount: U256,
    },
}

/// Everything needed to build one EIP-1559 transfer transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TransferRequest {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// Sender account nonce.
    pub nonce: u64,
    /// The final recipient (for ERC-20, the token recipient, not the contract).
    pub to: Address,
    /// Asset and amount.
    pub kind: TransferKind,
    /// Gas limit of the transaction.
    pub gas_limit: u64,
    /// EIP-1559 fee cap per gas, in wei.
    pub max_fee_per_gas: u128,
    /// EIP-1559 tip cap per gas, in wei.
    pub max_priority_fee_per_gas: u128,
}

/// Why a transfer request cannot be built or replaced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    /// Chain id 0 gives no replay protection and is refused.
    #[error("chain id must be non-zero")]
    ZeroChainId,
    /// A transaction with a zero gas limit can never execute.
    #[error("gas limit must be non-zero")]
    ZeroGasLimit,
    /// The tip cap is above the fee cap, which nodes reject.
    #[error("max priority fee per gas ({priority}) exceeds max fee per gas ({max})")]
    PriorityAboveMaxFee {
        /// The requested tip cap per gas.
        priority: u128,
        /// The requested fee cap per gas.
        max: u128,
    },
    /// A fee computation does not fit in 128 bits.
    #[error("fee arithmetic overflows 128 bits")]
    FeeOverflow,
    /// A replacement must raise fees by at least [`MIN_BUMP_PERCENT`].
    #[error("fee bump of {factor_percent}% is below the required minimum of 10%")]
    BumpTooSmall {
        /// The requested increase in percent.
        factor_percent: u32,
    },
    /// The replacement's worst-case network fee is above the allowed cap.
    #[error("bumped max network fee {required} wei exceeds the fee cap {fee_cap} wei")]
    FeeCapExceeded {
        /// gas_limit * bumped max_fee_per_gas.
        required: u128,
        /// The cap the caller allowed.
        fee_cap: u128,
    },
}

/// Builds the unsigned EIP-1559 transaction for `request`.
///
/// Native transfers send `value` to `to` with empty calldata. ERC-20
/// transfers go to the token contract with value 0 and
/// `transfer(to, amount)` calldata. The access list is always empty.
pub fn build(request: &TransferRequest) -> Result<TxEip1559, TxError> {
    validate(request)?;
    let (target, value, input) = match request.kind {
        TransferKind::Native { value } => (request.to, value, Bytes::new()),
        TransferKind::Erc20 { token, amount } => (
            token,
            U256::ZERO,
            Bytes::copy_from_slice(&erc20_transfer_calldata(request.to, amount)),
        ),
    };
    Ok(TxEip1559 {
        chain_id: request.chain_id,
        nonce: request.nonce,
        gas_limit: request.gas_limit,
        max_fee_per_gas: request.max_fee_per_gas,
        max_priority_fee_per_gas: request.max_priority_fee_per_gas,
        to: TxKind::Call(target),
        value,
        access_list: Default::default(),
        input,
    })
}

/// Worst-case network fee in wei: `gas_limit * max_fee_per_gas`.
///
/// Saturates at `u128::MAX` on overflow, so an overflowing request never
/// compares as cheaper than a fee cap ([`build`] refuses such requests).
pub fn max_network_fee(request: &TransferRequest) -> u128 {
    u128::from(request.gas_limit).saturating_mul(request.max_fee_per_gas)
}

/// A cancel replacement: a 0-value native transfer from `from` to itself at
/// `nonce`, which frees the nonce once mined.
pub fn cancel(
    chain_id: u64,
    nonce: u64,
    from: Address,
    gas_limit: u64,
    max_fee_per_gas: u128,
    max_priority_fee_per_gas: u128,
) -> TransferRequest {
    TransferRequest {
        chain_id,
        nonce,
        to: from,
        kind: TransferKind::Native { value: U256::ZERO },
        gas_limit,
        max_fee_per_gas,
        max_priority_fee_per_gas,
    }
}

/// A fee-bump replacement of `original`: same chain, nonce, recipient, kind
/// and gas limit, with both fee caps raised by `factor_percent` (rounded up).
///
/// Refuses factors below [`MIN_BUMP_PERCENT`], and bumps whose worst-case
/// network fee (`gas_limit * new max_fee_per_gas`) would exceed `fee_cap`.
pub fn bump(
    original: &TransferRequest,
    factor_percent: u32,
    fee_cap: u128,
) -> Result<TransferRequest, TxError> {
    if factor_percent < MIN_BUMP_PERCENT {
        return Err(TxError::BumpTooSmall { factor_percent });
    }
    validate(original)?;
    let bumped = TransferRequest {
        max_fee_per_gas: raise_by_percent(original.max_fee_per_gas, factor_percent)?,
        max_priority_fee_per_gas: raise_by_percent(
            original.max_priority_fee_per_gas,
            factor_percent,
        )?,
        ..original.clone()
    };
    let required = u128::from(bumped.gas_limit)
        .checked_mul(bumped.max_fee_per_gas)
        .ok_or(TxError::FeeOverflow)?;
    if required > fee_cap {
        return Err(TxError::FeeCapExceeded { required, fee_cap });
    }
    validate(&bumped)?;
    Ok(bumped)
}

/// The 68-byte calldata of `transfer(recipient, amount)`.
pub fn erc20_transfer_calldata(
    recipient: Address,
    amount: U256,
) -> [u8; ERC20_TRANSFER_CALLDATA_LEN] {
    let mut data = [0u8; ERC20_TRANSFER_CALLDATA_LEN];
    data[..4].copy_from_slice(&ERC20_TRANSFER_SELECTOR);
    // First word: the address, left-padded with 12 zero bytes.
    data[16..36].copy_from_slice(recipient.as_slice());
    // Second word: the amount, big-endian.
    data[36..].copy_from_slice(&amount.to_be_bytes::<32>());
    data
}

/// Parses calldata produced by [`erc20_transfer_calldata`] back into
/// `(recipient, amount)`. Returns `None` for anything else, including an
/// address word with non-zero padding.
pub fn parse_erc20_transfer(input: &[u8]) -> Option<(Address, U256)> {
    if input.len() != ERC20_TRANSFER_CALLDATA_LEN || input[..4] != ERC20_TRANSFER_SELECTOR {
        return None;
    }
    if input[4..16].iter().any(|&b| b != 0) {
        return None;
    }
    let recipient = Address::from_slice(&input[16..36]);
    let amount = U256::from_be_slice(&input[36..]);
    Some((recipient, amount))
}

fn validate(request: &TransferRequest) -> Result<(), TxError> {
    if request.chain_id == 0 {
        return Err(TxError::ZeroChainId);
    }
    if request.gas_limit == 0 {
        return Err(TxError::ZeroGasLimit);
    }
    if request.max_priority_fee_per_gas > request.max_fee_per_gas {
        return Err(TxError::PriorityAboveMaxFee {
            priority: request.max_priority_fee_per_gas,
            max: request.max_fee_per_gas,
        });
    }
    u128::from(request.gas_limit)
        .checked_mul(request.max_fee_per_gas)
        .ok_or(TxError::FeeOverflow)?;
    Ok(())
}

/// `fee * (100 + percent) / 100`, rounded up, without intermediate overflow.
fn raise_by_percent(fee: u128, percent: u32) -> Result<u128, TxError> {
    let percent = u128::from(percent);
    // fee = 100q + r, so fee * p / 100 = q * p + r * p / 100 and only the
    // second term can have a fractional part.
    let (q, r) = (fee / 100, fee % 100);
    let increase = q
        .checked_mul(percent)
        .and_then(|whole| whole.checked_add((r * percent).div_ceil(100)))
        .ok_or(TxError::FeeOverflow)?;
    fee.checked_add(increase).ok_or(TxError::FeeOverflow)
}

#[cfg(test)]
mod tests;
