use super::*;
use alloy_primitives::{address, keccak256};

const RECIPIENT: Address = address!("70997970C51812dc3A010C7d01b50e0d17dc79C8");
const TOKEN: Address = address!("A0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48");
const SENDER: Address = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");

fn native(value: u64) -> TransferRequest {
    TransferRequest {
        chain_id: 1,
        nonce: 7,
        to: RECIPIENT,
        kind: TransferKind::Native {
            value: U256::from(value),
        },
        gas_limit: 21_000,
        max_fee_per_gas: 101,
        max_priority_fee_per_gas: 11,
    }
}

#[test]
fn selector_is_keccak_of_transfer_signature() {
    let hash = keccak256("transfer(address,uint256)");
    assert_eq!(hash[..4], ERC20_TRANSFER_SELECTOR);
}

#[test]
fn erc20_calldata_is_byte_exact() {
    let data = erc20_transfer_calldata(RECIPIENT, U256::from(1_000_000u64));
    let expected = concat!(
        "a9059cbb",
        "00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8",
        "00000000000000000000000000000000000000000000000000000000000f4240",
    );
    assert_eq!(hex::encode(data), expected);
    assert_eq!(
        parse_erc20_transfer(&data),
        Some((RECIPIENT, U256::from(1_000_000u64)))
    );
}

#[test]
fn erc20_calldata_max_amount_and_parse_rejects_garbage() {
    let data = erc20_transfer_calldata(RECIPIENT, U256::MAX);
    assert!(data[36..].iter().all(|&b| b == 0xff));
    let mut dirty = data;
    dirty[4] = 1;
    assert_eq!(parse_erc20_transfer(&dirty), None);
    assert_eq!(parse_erc20_transfer(&data[..67]), None);
    let mut wrong_selector = data;
    wrong_selector[0] = 0;
    assert_eq!(parse_erc20_transfer(&wrong_selector), None);
}

#[test]
fn build_native() -> Result<(), TxError> {
    let tx = build(&native(5))?;
    assert_eq!(tx.to, TxKind::Call(RECIPIENT));
    assert_eq!(tx.value, U256::from(5u64));
    assert!(tx.input.is_empty());
    assert_eq!((tx.chain_id, tx.nonce, tx.gas_limit), (1, 7, 21_000));
    assert_eq!((tx.max_fee_per_gas, tx.max_priority_fee_per_gas), (101, 11));
    assert!(tx.access_list.is_empty());
    Ok(())
}

#[test]
fn build_erc20_goes_to_token_with_zero_value() -> Result<(), TxError> {
    let request = TransferRequest {
        kind: TransferKind::Erc20 {
            token: TOKEN,
            amount: U256::from(42u64),
        },
        gas_limit: 65_000,
        ..native(0)
    };
    let tx = build(&request)?;
    assert_eq!(tx.to, TxKind::Call(TOKEN));
    assert_eq!(tx.value, U256::ZERO);
    assert_eq!(
        tx.input.as_ref(),
        &erc20_transfer_calldata(RECIPIENT, U256::from(42u64))[..]
    );
    Ok(())
}

#[test]
fn build_refuses_bad_requests() {
    let priority_too_high = TransferRequest {
        max_priority_fee_per_gas: 102,
        ..native(1)
    };
    assert_eq!(
        build(&priority_too_high),
        Err(TxError::PriorityAboveMaxFee {
            priority: 102,
            max: 101
        })
    );
    let no_gas = TransferRequest {
        gas_limit: 0,
        ..native(1)
    };
    assert_eq!(build(&no_gas), Err(TxError::ZeroGasLimit));
    let overflow = TransferRequest {
        gas_limit: 2,
        max_fee_per_gas: u128::MAX / 2 + 1,
        ..native(1)
    };
    assert_eq!(build(&overflow), Err(TxError::FeeOverflow));
    assert_eq!(max_network_fee(&overflow), u128::MAX);
    let no_chain = TransferRequest {
        chain_id: 0,
        ..native(1)
    };
    assert_eq!(build(&no_chain), Err(TxError::ZeroChainId));
}

#[test]
fn max_network_fee_is_gas_times_max_fee() {
    assert_eq!(max_network_fee(&native(1)), 21_000 * 101);
}

#[test]
fn cancel_is_zero_value_self_transfer_at_same_nonce() -> Result<(), TxError> {
    let request = cancel(1, 7, SENDER, 21_000, 200, 20);
    assert_eq!(request.to, SENDER);
    assert_eq!(request.nonce, 7);
    assert_eq!(request.kind, TransferKind::Native { value: U256::ZERO });
    let tx = build(&request)?;
    assert_eq!(tx.to, TxKind::Call(SENDER));
    assert_eq!(tx.value, U256::ZERO);
    assert!(tx.input.is_empty());
    Ok(())
}

#[test]
fn bump_raises_both_fees_rounding_up() -> Result<(), TxError> {
    let original = native(9);
    let bumped = bump(&original, 10, u128::MAX)?;
    // 101 * 1.1 = 111.1 -> 112; 11 * 1.1 = 12.1 -> 13.
    assert_eq!(bumped.max_fee_per_gas, 112);
    assert_eq!(bumped.max_priority_fee_per_gas, 13);
    assert_eq!(
        (bumped.nonce, bumped.to, bumped.kind, bumped.gas_limit),
        (
            original.nonce,
            original.to,
            original.kind,
            original.gas_limit
        )
    );
    let exact = TransferRequest {
        max_fee_per_gas: 1_000,
        max_priority_fee_per_gas: 100,
        ..original
    };
    let bumped = bump(&exact, 25, u128::MAX)?;
    assert_eq!(
        (bumped.max_fee_per_gas, bumped.max_priority_fee_per_gas),
        (1_250, 125)
    );
    Ok(())
}

#[test]
fn bump_refuses_small_factor_and_fee_cap() -> Result<(), TxError> {
    let original = native(9);
    assert_eq!(
        bump(&original, 9, u128::MAX),
        Err(TxError::BumpTooSmall { factor_percent: 9 })
    );
    let required = 21_000 * 112;
    assert_eq!(
        bump(&original, 10, required - 1),
        Err(TxError::FeeCapExceeded {
            required,
            fee_cap: required - 1
        })
    );
    assert_eq!(bump(&original, 10, required)?.max_fee_per_gas, 112);
    Ok(())
}

#[test]
fn bump_overflow_is_refused() {
    let huge = TransferRequest {
        gas_limit: 1,
        max_fee_per_gas: u128::MAX - 1,
        max_priority_fee_per_gas: 0,
        ..native(1)
    };
    assert_eq!(bump(&huge, 10, u128::MAX), Err(TxError::FeeOverflow));
}

#[test]
fn raise_by_percent_matches_ceiling_formula() -> Result<(), TxError> {
    for fee in [0u128, 1, 9, 10, 99, 100, 101, 12_345, 30_000_000_000] {
        for percent in [10u32, 11, 12, 50, 100, 333] {
            let expected = (fee * (100 + u128::from(percent))).div_ceil(100);
            assert_eq!(raise_by_percent(fee, percent)?, expected, "{fee} {percent}");
        }
    }
    Ok(())
}

#[test]
fn error_messages_do_not_name_the_destination() {
    let errors = [
        build(&TransferRequest {
            gas_limit: 0,
            ..native(1)
        })
        .err(),
        build(&TransferRequest {
            max_priority_fee_per_gas: 1_000,
            ..native(1)
        })
        .err(),
        bump(&native(1), 10, 0).err(),
    ];
    let needle = hex::encode(RECIPIENT);
    for error in errors.into_iter().flatten() {
        let message = error.to_string().to_lowercase();
        assert!(!message.contains(&needle), "{message}");
        assert_eq!(message, error.to_string(), "messages are lowercase");
    }
}
