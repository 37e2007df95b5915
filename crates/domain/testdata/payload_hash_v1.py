#!/usr/bin/env python3
"""Independent reference implementation of the opledger withdrawal payload
canonical encoding, version 1. Standard library only.

Writes payload_hash_v1.json next to this file. The Rust crate
opledger-domain checks its own encoder against that file, so this script must
never import or call anything from the Rust side.

Run: python3 crates/domain/testdata/payload_hash_v1.py
"""

import hashlib
import json
import pathlib
import re

DOMAIN = "opledger/withdrawal-payload/v1"

# (tag, field name) in canonical order.
FIELDS = [
    (1, "tenant_id"),
    (2, "source_account"),
    (3, "asset"),
    (4, "network"),
    (5, "destination"),
    (6, "memo"),
    (7, "amount"),
    (8, "fee_cap"),
    (9, "policy_version"),
]

U128_MAX = 2**128 - 1
U32_MAX = 2**32 - 1


def check(payload):
    """Refuse anything the Rust types would refuse, so vectors stay valid."""
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                        payload["tenant_id"]), "tenant_id"
    assert re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}", payload["source_account"]), "account"
    assert re.fullmatch(r"[A-Z0-9]{1,16}", payload["asset"]), "asset"
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", payload["network"]), "network"
    assert re.fullmatch(r"0x[0-9a-f]{40}", payload["destination"]), "destination"
    memo = payload["memo"]
    if memo is not None:
        assert 1 <= len(memo.encode("utf-8")) <= 128, "memo length"
        assert all(not (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F) for c in memo), "memo control"
    for name in ("amount", "fee_cap"):
        text = payload[name]
        assert re.fullmatch(r"0|[1-9][0-9]*", text), name
        assert int(text) <= U128_MAX, name
    assert int(payload["amount"]) > 0, "amount"
    assert isinstance(payload["policy_version"], int)
    assert 0 <= payload["policy_version"] <= U32_MAX, "policy_version"


def field_text(payload, name):
    value = payload[name]
    if value is None:
        return None
    if name == "policy_version":
        return str(value)
    return value


def canonical_bytes(payload):
    out = bytearray(DOMAIN.encode("ascii"))
    out.append(0x00)
    for tag, name in FIELDS:
        out.append(tag)
        text = field_text(payload, name)
        if text is None:
            assert name == "memo", "only memo may be absent"
            out.append(0x00)
            continue
        data = text.encode("utf-8")
        out.append(0x01)
        out += len(data).to_bytes(4, "big")
        out += data
    return bytes(out)


BASE = {
    "tenant_id": "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    "source_account": "treasury",
    "asset": "ETH",
    "network": "anvil",
    "destination": "0x52908400098527886e0f7030069857d2e4169ee7",
    "memo": None,
    "amount": "1000000000000000000",
    "fee_cap": "21000000000000",
    "policy_version": 1,
}


def variant(**changes):
    payload = dict(BASE)
    payload.update(changes)
    return payload


MIXED_CASE_DESTINATION = "0x52908400098527886E0F7030069857D2E4169EE7"

VECTORS = [
    ("memo_absent", BASE, None),
    ("memo_present_ascii", variant(memo="invoice 2024-0042"), None),
    ("memo_non_ascii_utf8", variant(memo="café – ✓ 支払い 🚀"), None),
    ("amount_u128_max", variant(amount=str(U128_MAX)), None),
    ("fee_cap_zero", variant(fee_cap="0"), None),
    ("destination_mixed_case_normalised",
     variant(destination=MIXED_CASE_DESTINATION.lower(),
             asset="USDC", network="ethereum-mainnet", amount="2500000"),
     "destination_input is what a client sent; Destination::parse stores it "
     "lowercase, and the lowercase form is what is encoded"),
    ("policy_version_u32_max", variant(policy_version=U32_MAX), None),
    ("pair_a_amount_1", variant(amount="1", memo="pair"), None),
    ("pair_b_amount_10", variant(amount="10", memo="pair"),
     "differs from pair_a_amount_1 only in amount"),
    ("max_length_fields",
     variant(source_account="a" + "_-9" * 20 + "zz",
             asset="A1B2C3D4E5F6G7H8",
             network="n" + "-0" * 31,
             memo="é" * 64,
             tenant_id="ffffffff-ffff-4fff-bfff-ffffffffffff",
             destination="0xffffffffffffffffffffffffffffffffffffffff"),
     "longest allowed account, asset, network and a 128-byte memo"),
    ("policy_version_zero_single_char_memo", variant(policy_version=0, memo=" "), None),
]


def main():
    vectors = []
    for name, payload, note in VECTORS:
        check(payload)
        data = canonical_bytes(payload)
        entry = {"name": name}
        if note is not None:
            entry["note"] = note
        entry["payload"] = payload
        if name == "destination_mixed_case_normalised":
            entry["destination_input"] = MIXED_CASE_DESTINATION
        entry["canonical_hex"] = data.hex()
        entry["sha256"] = hashlib.sha256(data).hexdigest()
        vectors.append(entry)
    doc = {"version": 1, "domain": DOMAIN, "vectors": vectors}
    target = pathlib.Path(__file__).with_name("payload_hash_v1.json")
    target.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(vectors)} vectors to {target}")


if __name__ == "__main__":
    main()
