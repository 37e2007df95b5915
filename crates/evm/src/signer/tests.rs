use super::*;
use alloy_consensus::{Signed, TxLegacy};
use alloy_eips::eip2930::{AccessList, AccessListItem};
use alloy_primitives::{address, hex};
use proptest::prelude::*;

// Anvil/hardhat dev account 0: a public test key, never a real one.
const ANVIL_SECRET: [u8; 32] =
    hex!("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");
const ANVIL_ADDRESS: Address = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
const RECIPIENT: Address = address!("70997970C51812dc3A010C7d01b50e0d17dc79C8");
const TOKEN: Address = address!("A0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48");

fn anvil_key() -> LocalKey {
    LocalKey::from_secret_bytes(Zeroizing::new(ANVIL_SECRET)).expect("anvil key is valid")
}

fn native_request() -> TransferRequest {
    TransferRequest {
        chain_id: 31_337,
        nonce: 3,
        to: RECIPIENT,
        kind: TransferKind::Native {
            value: U256::from(1_000_000_000_000_000_000u128),
        },
        gas_limit: 21_000,
        max_fee_per_gas: 2_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
    }
}

#[test]
fn local_key_has_the_anvil_address_and_hides_the_secret() {
    let key = anvil_key();
    assert_eq!(key.address(), ANVIL_ADDRESS);
    let debug = format!("{key:?}");
    assert!(debug.contains("f39F") || debug.contains("f39f"), "{debug}");
    assert!(
        !debug.to_lowercase().contains("ac0974bec39a17e3"),
        "{debug}"
    );
}

#[test]
fn signs_and_decodes_a_native_transfer() -> Result<(), SignError> {
    let request = native_request();
    let signed = sign(&request, &anvil_key())?;
    assert_eq!(signed.raw[0], 0x02, "type 2 envelope");
    assert_eq!(signed.hash, keccak256(&signed.raw));
    assert_eq!(signed.from, ANVIL_ADDRESS);
    assert_eq!(
        (
            signed.nonce,
            signed.gas_limit,
            signed.max_fee_per_gas,
            signed.max_priority_fee_per_gas
        ),
        (3, 21_000, 2_000_000_000, 1_000_000_000)
    );

    let decoded = decode(&signed.raw)?;
    assert_eq!(decoded.to, RECIPIENT);
    assert_eq!(decoded.value, U256::from(1_000_000_000_000_000_000u128));
    assert!(decoded.input.is_empty());
    assert_eq!(
        (decoded.chain_id, decoded.nonce, decoded.gas_limit),
        (31_337, 3, 21_000)
    );
    assert_eq!(decoded.max_fee_per_gas, 2_000_000_000);
    assert_eq!(decoded.max_priority_fee_per_gas, 1_000_000_000);
    assert_eq!(decoded.from, ANVIL_ADDRESS);
    assert_eq!(decoded.hash, keccak256(&signed.raw));
    assert_eq!(decoded.transfer_request(), Some(request));
    Ok(())
}

#[test]
fn signs_and_decodes_an_erc20_transfer() -> Result<(), SignError> {
    let request = TransferRequest {
        chain_id: 1,
        nonce: 0,
        kind: TransferKind::Erc20 {
            token: TOKEN,
            amount: U256::from(250_000_000u64),
        },
        gas_limit: 65_000,
        ..native_request()
    };
    let signed = sign(&request, &anvil_key())?;
    let decoded = decode(&signed.raw)?;
    assert_eq!(decoded.to, TOKEN);
    assert_eq!(decoded.value, U256::ZERO);
    let expected_input = concat!(
        "a9059cbb",
        "00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8",
        "000000000000000000000000000000000000000000000000000000000ee6b280",
    );
    assert_eq!(hex::encode(&decoded.input), expected_input);
    assert_eq!(
        (decoded.chain_id, decoded.nonce, decoded.gas_limit),
        (1, 0, 65_000)
    );
    assert_eq!(decoded.from, ANVIL_ADDRESS);
    assert_eq!(decoded.hash, keccak256(&signed.raw));
    assert_eq!(decoded.transfer_request(), Some(request));
    Ok(())
}

#[test]
fn signing_is_deterministic() -> Result<(), SignError> {
    let a = sign(&native_request(), &anvil_key())?;
    let b = sign(&native_request(), &anvil_key())?;
    assert_eq!(a, b, "rfc6979 nonces make signatures deterministic");
    Ok(())
}

/// Claims one address but signs with another key.
#[derive(Debug)]
struct LyingProvider(LocalKey);

impl KeyProvider for LyingProvider {
    fn address(&self) -> Address {
        RECIPIENT
    }
    fn sign_hash(&self, hash: &B256) -> Result<Signature, SignError> {
        self.0.sign_hash(hash)
    }
}

#[test]
fn refuses_bytes_that_do_not_recover_to_the_provider() {
    let result = sign(&native_request(), &LyingProvider(anvil_key()));
    assert!(
        matches!(result, Err(SignError::SignerMismatch)),
        "{result:?}"
    );
}

#[test]
fn invalid_requests_are_not_signed() {
    let request = TransferRequest {
        gas_limit: 0,
        ..native_request()
    };
    let result = sign(&request, &anvil_key());
    assert!(matches!(
        result,
        Err(SignError::Request(TxError::ZeroGasLimit))
    ));
}

#[test]
fn decode_refuses_garbage_truncation_and_trailing_bytes() -> Result<(), SignError> {
    let raw = sign(&native_request(), &anvil_key())?.raw;
    assert!(matches!(
        decode(&raw[..raw.len() - 1]),
        Err(SignError::Decode(_))
    ));
    let mut trailing = raw.clone();
    trailing.push(0);
    assert!(matches!(decode(&trailing), Err(SignError::Decode(_))));
    assert!(matches!(decode(&[]), Err(SignError::Decode(_))));
    assert!(matches!(decode(&[0x02, 0xc0]), Err(SignError::Decode(_))));
    Ok(())
}

#[test]
fn decode_refuses_other_shapes() -> Result<(), SignError> {
    let key = anvil_key();
    let legacy = TxLegacy {
        chain_id: Some(1),
        nonce: 1,
        gas_price: 1,
        gas_limit: 21_000,
        to: TxKind::Call(RECIPIENT),
        value: U256::from(1u64),
        input: Bytes::new(),
    };
    let signature = key.sign_hash(&legacy.signature_hash())?;
    let raw = TxEnvelope::from(legacy.into_signed(signature)).encoded_2718();
    assert!(matches!(decode(&raw), Err(SignError::Unsupported(_))));

    let mut with_access_list = tx::build(&native_request())?;
    with_access_list.access_list = AccessList(vec![AccessListItem {
        address: TOKEN,
        storage_keys: vec![B256::ZERO],
    }]);
    let signature = key.sign_hash(&with_access_list.signature_hash())?;
    let signed: Signed<_> = with_access_list.into_signed(signature);
    let raw = TxEnvelope::from(signed).encoded_2718();
    assert!(matches!(decode(&raw), Err(SignError::Unsupported(_))));
    Ok(())
}

fn arb_request() -> impl Strategy<Value = TransferRequest> {
    let kind = prop_oneof![
        any::<[u8; 32]>().prop_map(|v| TransferKind::Native {
            value: U256::from_be_bytes(v)
        }),
        (any::<[u8; 20]>(), any::<[u8; 32]>()).prop_map(|(t, a)| TransferKind::Erc20 {
            token: Address::from(t),
            amount: U256::from_be_bytes(a),
        }),
    ];
    (
        1..=u64::MAX,
        any::<u64>(),
        any::<[u8; 20]>(),
        kind,
        1..=30_000_000u64,
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(chain_id, nonce, to, kind, gas_limit, fee_a, fee_b)| {
            // Fees up to 2^64 keep gas_limit * max_fee inside u128.
            let (low, high) = (fee_a.min(fee_b), fee_a.max(fee_b));
            TransferRequest {
                chain_id,
                nonce,
                to: Address::from(to),
                kind,
                gas_limit,
                max_fee_per_gas: u128::from(high),
                max_priority_fee_per_gas: u128::from(low),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn sign_then_decode_round_trips(request in arb_request()) {
        let key = anvil_key();
        let signed = sign(&request, &key).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded = decode(&signed.raw).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded.nonce, request.nonce);
        prop_assert_eq!(decoded.chain_id, request.chain_id);
        prop_assert_eq!(decoded.max_fee_per_gas, request.max_fee_per_gas);
        prop_assert_eq!(decoded.max_priority_fee_per_gas, request.max_priority_fee_per_gas);
        prop_assert_eq!(decoded.gas_limit, request.gas_limit);
        match request.kind {
            TransferKind::Native { value } => {
                prop_assert_eq!(decoded.value, value);
                prop_assert_eq!(decoded.to, request.to);
            }
            TransferKind::Erc20 { token, amount } => {
                prop_assert_eq!(decoded.value, U256::ZERO);
                prop_assert_eq!(decoded.to, token);
                prop_assert_eq!(tx::parse_erc20_transfer(&decoded.input), Some((request.to, amount)));
            }
        }
        prop_assert_eq!(decoded.from, ANVIL_ADDRESS);
        prop_assert_eq!(decoded.hash, keccak256(&signed.raw));
        prop_assert_eq!(decoded.transfer_request(), Some(request));
    }
}

/// The sender k256 recovers from `signature` over the request's signing hash (`None`: no
/// sender), the reference [`decode`]'s libsecp256k1 recovery must agree with.
fn k256_sender(request: &TransferRequest, signature: &Signature) -> Option<Address> {
    let hash = tx::build(request).ok()?.signature_hash();
    signature
        .recover_from_prehash(&hash)
        .ok()
        .map(|key| Address::from_public_key(&key))
}

/// The raw bytes of the request's transfer carrying `signature`, whatever it is.
fn with_signature(request: &TransferRequest, signature: Signature) -> Result<Vec<u8>, TxError> {
    Ok(TxEnvelope::from(tx::build(request)?.into_signed(signature)).encoded_2718())
}

/// secp256k1's order n.
const ORDER: U256 = U256::from_be_bytes(hex!(
    "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
));

#[test]
fn decode_recovers_what_k256_recovers_at_the_edges_of_r_and_s() -> Result<(), SignError> {
    let request = native_request();
    let good = anvil_key().sign_hash(&tx::build(&request)?.signature_hash())?;
    let (r, s) = (good.r(), good.s());
    let half = ORDER / U256::from(2);
    let one = U256::from(1);
    let edges = [
        (r, s, good.v()),
        // The same signature with s replaced by n - s and the parity flipped: both backends
        // normalize it back to the canonical one.
        (r, ORDER - s, !good.v()),
        (r, s, !good.v()),
        (U256::ZERO, s, good.v()),
        (r, U256::ZERO, good.v()),
        (ORDER, s, good.v()),
        (r, ORDER, good.v()),
        (ORDER + one, s, good.v()),
        (U256::MAX, U256::MAX, good.v()),
        // Around the low-s boundary (n / 2 is the highest canonical s) and the top of the range.
        (r, half, good.v()),
        (r, half, !good.v()),
        (r, half + one, good.v()),
        (r, half + one, !good.v()),
        (r, ORDER - one, good.v()),
        (r, ORDER - one, !good.v()),
        (r, one, good.v()),
        (ORDER - one, s, good.v()),
    ];
    for (r, s, parity) in edges {
        let signature = Signature::new(r, s, parity);
        let raw = with_signature(&request, signature)?;
        let decoded = decode(&raw).ok().map(|d| d.from);
        assert_eq!(
            decoded,
            k256_sender(&request, &signature),
            "r={r:#x} s={s:#x} parity={parity}"
        );
    }
    // The canonical signature and its malleated twin name the anvil account; the same r and s
    // with the other parity name some other account, never the anvil one.
    for (s, parity) in [(s, good.v()), (ORDER - s, !good.v())] {
        let raw = with_signature(&request, Signature::new(r, s, parity))?;
        assert_eq!(decode(&raw).map(|d| d.from).ok(), Some(ANVIL_ADDRESS));
    }
    let flipped = decode(&with_signature(&request, Signature::new(r, s, !good.v()))?)?;
    assert_ne!(flipped.from, ANVIL_ADDRESS);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `decode` recovers senders with libsecp256k1 (alloy's `secp256k1` feature, for speed): for
    /// any signature, valid or not, it names the sender k256 names, or refuses when k256 does.
    #[test]
    fn decode_agrees_with_k256_on_any_signature(
        request in arb_request(),
        r in any::<[u8; 32]>(),
        s in any::<[u8; 32]>(),
        parity in any::<bool>(),
    ) {
        let signature = Signature::new(U256::from_be_bytes(r), U256::from_be_bytes(s), parity);
        let raw = with_signature(&request, signature).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decode(&raw).ok().map(|d| d.from), k256_sender(&request, &signature));
    }

    /// Real signatures of random keys: the sender `decode` recovers is the key's address.
    #[test]
    fn decode_recovers_the_signing_key_of_any_key(
        request in arb_request(),
        secret in any::<[u8; 32]>(),
    ) {
        let Ok(key) = LocalKey::from_secret_bytes(Zeroizing::new(secret)) else {
            // Zero or not below the order: not a key.
            return Ok(());
        };
        let signed = sign(&request, &key).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded = decode(&signed.raw).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded.from, key.address());
        let hash = tx::build(&request).map_err(|e| TestCaseError::fail(e.to_string()))?.signature_hash();
        let signature = key.sign_hash(&hash).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(k256_sender(&request, &signature), Some(key.address()));
    }
}
