#!/usr/bin/env python3
"""Independent reference implementation of the opledger signed statements,
version 1 (SIGNED_STATEMENTS.md): approval statements, tenant trust
statements and approver key ids. Python 3 with the `cryptography` package
(Ed25519 only); everything else is the standard library.

Writes signed_statements_v1.json next to this file. The Rust crate
opledger-domain checks its own encoder, key ids and signatures against that
file, so this script must never import or call anything from the Rust side.

Keys are test-only: each seed is SHA-256(b"opledger test key " + name).
Ed25519 (RFC 8032) signatures are deterministic, so a rerun writes the same
file byte for byte.

Resolutions of points the spec leaves open (the Rust side must agree):
- `field(tag, value)` has no presence byte (unlike the payload-hash
  encoding): tag byte, u32 big-endian length, value bytes.
- A key id is encoded as its 32 ASCII hex characters, not 16 raw bytes.
- policy_version and trust version are bounded to u64 (1 ..= 2^64 - 1).
- "By asset bytes" is lexicographic order of the raw asset bytes (a proper
  prefix sorts first), not order of the length-prefixed field.
- Duplicates are judged on the sort key: two rules with the same asset and
  min_amount, or two automated entries with the same asset and key id, are
  refused even if the rest of the record differs.
- A repeated field with zero items is simply absent; no repeated field is
  required to be non-empty (field 3 included). No vector relies on this.

Run: python3 crates/domain/testdata/signed_statements_v1.py
"""

import hashlib
import json
import pathlib
import re

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

APPROVAL_DOMAIN = "opledger/approval-statement/v1"
TRUST_DOMAIN = "opledger/trust-statement/v1"
KEY_ID_DOMAIN = "opledger/approver-key/v1"

U128_MAX = 2**128 - 1
U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1

DECISIONS = ("APPROVE", "REJECT")
KINDS = ("APPROVER", "SERVICE")

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
KEY_ID_RE = r"[0-9a-f]{32}"
ASSET_RE = r"[A-Z0-9]{1,16}"
DECIMAL_RE = r"0|[1-9][0-9]*"


# ---------------------------------------------------------------- primitives

def field(tag, value):
    """Tag byte, value length as u32 big-endian, value bytes."""
    assert isinstance(value, (bytes, bytearray)), "field value must be bytes"
    assert 0 <= tag <= 0xFF, "tag"
    assert len(value) <= U32_MAX, "field length"
    return bytes([tag]) + len(value).to_bytes(4, "big") + bytes(value)


def text(value):
    return value.encode("utf-8")


def decimal(value):
    """Canonical decimal text of a non-negative Python int."""
    assert type(value) is int and value >= 0, "decimal"
    return str(value).encode("ascii")


def key_id(public_key):
    """Lowercase hex of the first 16 bytes of SHA-256(domain || 0x00 || pk)."""
    assert isinstance(public_key, bytes) and len(public_key) == 32, "public key"
    digest = hashlib.sha256(KEY_ID_DOMAIN.encode("ascii") + b"\x00" + public_key).digest()
    return digest[:16].hex()


def public_key_bytes(private_key):
    return private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


# ---------------------------------------------------------------- validation

def check_uuid(value, what):
    assert isinstance(value, str) and re.fullmatch(UUID_RE, value), what


def check_key_id(value, what):
    assert isinstance(value, str) and re.fullmatch(KEY_ID_RE, value), what


def check_asset(value, what):
    assert isinstance(value, str) and re.fullmatch(ASSET_RE, value), what


def check_int(value, low, high, what):
    # bool is an int subclass in Python; refuse it explicitly.
    assert type(value) is int and low <= value <= high, what


def parse_decimal(value, low, high, what):
    """A canonical decimal string within [low, high], returned as an int."""
    assert isinstance(value, str) and re.fullmatch(DECIMAL_RE, value), what + " not canonical"
    number = int(value)
    assert low <= number <= high, what + " out of range"
    return number


def strictly_ascending(keys, what):
    for earlier, later in zip(keys, keys[1:]):
        assert earlier != later, what + " duplicated"
        assert earlier < later, what + " out of order"


def check_approval(statement):
    """Refuse any approval statement the spec refuses."""
    assert set(statement) == {"tenant_id", "operation_id", "payload_hash_hex", "decision",
                              "approver_key_id", "policy_version"}, "approval fields"
    check_uuid(statement["tenant_id"], "tenant_id")
    check_uuid(statement["operation_id"], "operation_id")
    assert isinstance(statement["payload_hash_hex"], str) and re.fullmatch(
        r"[0-9a-f]{64}", statement["payload_hash_hex"]), "payload_hash_hex"
    assert statement["decision"] in DECISIONS, "decision"
    check_key_id(statement["approver_key_id"], "approver_key_id")
    check_int(statement["policy_version"], 1, U64_MAX, "policy_version")


def canonical_trust(statement):
    """Validate a trust statement given in JSON form (lists in any order) and
    return its items sorted in canonical order, as Python values."""
    assert set(statement) == {"tenant_id", "version", "keys", "revoked", "rules",
                              "automated", "kyt_required"}, "trust fields"
    check_uuid(statement["tenant_id"], "tenant_id")
    check_int(statement["version"], 1, U64_MAX, "version")

    keys = []
    for entry in statement["keys"]:
        assert set(entry) == {"key_id", "public_key_hex", "kind"}, "key fields"
        check_key_id(entry["key_id"], "key.key_id")
        assert isinstance(entry["public_key_hex"], str) and re.fullmatch(
            r"[0-9a-f]{64}", entry["public_key_hex"]), "key.public_key_hex"
        public_key = bytes.fromhex(entry["public_key_hex"])
        assert key_id(public_key) == entry["key_id"], "key id does not match public key"
        assert entry["kind"] in KINDS, "key.kind"
        keys.append((entry["key_id"], public_key, entry["kind"]))
    keys.sort(key=lambda k: k[0].encode("ascii"))
    strictly_ascending([k[0].encode("ascii") for k in keys], "key")
    active = {k[0]: k[2] for k in keys}

    revoked = []
    for entry in statement["revoked"]:
        check_key_id(entry, "revoked key id")
        assert entry not in active, "revoked key is also active"
        revoked.append(entry)
    revoked.sort(key=lambda r: r.encode("ascii"))
    strictly_ascending([r.encode("ascii") for r in revoked], "revoked key id")

    rules = []
    for entry in statement["rules"]:
        assert set(entry) == {"asset", "min_amount", "required_approvals"}, "rule fields"
        check_asset(entry["asset"], "rule.asset")
        min_amount = parse_decimal(entry["min_amount"], 0, U128_MAX, "rule.min_amount")
        check_int(entry["required_approvals"], 1, 10, "rule.required_approvals")
        rules.append((entry["asset"], min_amount, entry["required_approvals"]))
    rules.sort(key=lambda r: (r[0].encode("ascii"), r[1]))
    strictly_ascending([(r[0].encode("ascii"), r[1]) for r in rules], "rule")
    for asset in {r[0] for r in rules}:
        assert (asset, 0) in {(r[0], r[1]) for r in rules}, "asset %s has no base rule" % asset

    automated = []
    for entry in statement["automated"]:
        assert set(entry) == {"asset", "key_id", "below"}, "automated fields"
        check_asset(entry["asset"], "automated.asset")
        check_key_id(entry["key_id"], "automated.key_id")
        assert active.get(entry["key_id"]) == "SERVICE", "automated key is not an active SERVICE key"
        below = parse_decimal(entry["below"], 1, U128_MAX, "automated.below")
        automated.append((entry["asset"], entry["key_id"], below))
    automated.sort(key=lambda a: (a[0].encode("ascii"), a[1].encode("ascii")))
    strictly_ascending([(a[0].encode("ascii"), a[1].encode("ascii")) for a in automated],
                       "automated approver")

    kyt = []
    for entry in statement["kyt_required"]:
        check_asset(entry, "kyt asset")
        kyt.append(entry)
    kyt.sort(key=lambda a: a.encode("ascii"))
    strictly_ascending([a.encode("ascii") for a in kyt], "kyt asset")

    return {
        "tenant_id": statement["tenant_id"],
        "version": statement["version"],
        "keys": keys,
        "revoked": revoked,
        "rules": rules,
        "automated": automated,
        "kyt_required": kyt,
    }


# ---------------------------------------------------------------- encoders

def approval_statement(tenant_id, operation_id, payload_hash, decision, approver_key_id,
                       policy_version):
    check_uuid(tenant_id, "tenant_id")
    check_uuid(operation_id, "operation_id")
    assert isinstance(payload_hash, bytes) and len(payload_hash) == 32, "payload_hash"
    assert decision in DECISIONS, "decision"
    check_key_id(approver_key_id, "approver_key_id")
    check_int(policy_version, 1, U64_MAX, "policy_version")
    out = bytearray(APPROVAL_DOMAIN.encode("ascii") + b"\x00")
    out += field(1, text(tenant_id))
    out += field(2, text(operation_id))
    out += field(3, payload_hash)
    out += field(4, text(decision))
    out += field(5, text(approver_key_id))
    out += field(6, decimal(policy_version))
    return bytes(out)


def trust_statement(tenant_id, version, keys, revoked, rules, automated, kyt_required):
    """Arguments are in JSON form (see canonical_trust); lists may be unsorted."""
    c = canonical_trust({
        "tenant_id": tenant_id, "version": version, "keys": keys, "revoked": revoked,
        "rules": rules, "automated": automated, "kyt_required": kyt_required,
    })
    out = bytearray(TRUST_DOMAIN.encode("ascii") + b"\x00")
    out += field(1, text(c["tenant_id"]))
    out += field(2, decimal(c["version"]))
    for kid, public_key, kind in c["keys"]:
        out += field(3, field(1, text(kid)) + field(2, public_key) + field(3, text(kind)))
    for kid in c["revoked"]:
        out += field(4, text(kid))
    for asset, min_amount, required in c["rules"]:
        out += field(5, field(1, text(asset)) + field(2, decimal(min_amount))
                     + field(3, decimal(required)))
    for asset, kid, below in c["automated"]:
        out += field(6, field(1, text(asset)) + field(2, text(kid)) + field(3, decimal(below)))
    for asset in c["kyt_required"]:
        out += field(7, text(asset))
    return bytes(out)


def approval_from_json(statement):
    check_approval(statement)
    return approval_statement(statement["tenant_id"], statement["operation_id"],
                              bytes.fromhex(statement["payload_hash_hex"]),
                              statement["decision"], statement["approver_key_id"],
                              statement["policy_version"])


def trust_from_json(statement):
    return trust_statement(**statement)


# ---------------------------------------------------------------- decoder
# Used only to cross-check the encoder: bytes are accepted iff they parse and
# re-encode to exactly themselves (which refuses reordered or duplicated
# items, non-canonical decimals and trailing bytes).

def split_fields(data):
    fields = []
    at = 0
    while at < len(data):
        assert len(data) - at >= 5, "truncated field header"
        tag = data[at]
        length = int.from_bytes(data[at + 1:at + 5], "big")
        at += 5
        assert len(data) - at >= length, "truncated field value"
        fields.append((tag, data[at:at + length]))
        at += length
    return fields


def strip_domain(data, domain):
    prefix = domain.encode("ascii") + b"\x00"
    assert data.startswith(prefix), "domain"
    return data[len(prefix):]


def expect_tags(fields, tags, what):
    assert [t for t, _ in fields] == list(tags), what + " tags"
    return [v for _, v in fields]


def decode_decimal(value, low, high, what):
    return parse_decimal(value.decode("ascii"), low, high, what)


def decode_approval(data):
    values = expect_tags(split_fields(strip_domain(data, APPROVAL_DOMAIN)),
                         [1, 2, 3, 4, 5, 6], "approval")
    statement = {
        "tenant_id": values[0].decode("utf-8"),
        "operation_id": values[1].decode("utf-8"),
        "payload_hash_hex": values[2].hex(),
        "decision": values[3].decode("utf-8"),
        "approver_key_id": values[4].decode("utf-8"),
        "policy_version": decode_decimal(values[5], 1, U64_MAX, "policy_version"),
    }
    assert len(values[2]) == 32, "payload hash length"
    assert approval_from_json(statement) == data, "approval not canonical"
    return statement


def decode_trust(data):
    fields = split_fields(strip_domain(data, TRUST_DOMAIN))
    tags = [t for t, _ in fields]
    assert tags[:2] == [1, 2], "trust header tags"
    assert tags == sorted(tags), "trust fields out of order"
    assert set(tags) <= {1, 2, 3, 4, 5, 6, 7} and tags.count(1) == 1 and tags.count(2) == 1, \
        "trust tags"
    statement = {"tenant_id": fields[0][1].decode("utf-8"),
                 "version": decode_decimal(fields[1][1], 1, U64_MAX, "version"),
                 "keys": [], "revoked": [], "rules": [], "automated": [], "kyt_required": []}
    for tag, value in fields[2:]:
        if tag == 3:
            kid, public_key, kind = expect_tags(split_fields(value), [1, 2, 3], "key record")
            statement["keys"].append({"key_id": kid.decode("utf-8"),
                                      "public_key_hex": public_key.hex(),
                                      "kind": kind.decode("utf-8")})
        elif tag == 4:
            statement["revoked"].append(value.decode("utf-8"))
        elif tag == 5:
            asset, min_amount, required = expect_tags(split_fields(value), [1, 2, 3], "rule")
            required = decode_decimal(required, 1, 10, "required_approvals")
            statement["rules"].append({"asset": asset.decode("utf-8"),
                                       "min_amount": min_amount.decode("ascii"),
                                       "required_approvals": required})
        elif tag == 6:
            asset, kid, below = expect_tags(split_fields(value), [1, 2, 3], "automated")
            statement["automated"].append({"asset": asset.decode("utf-8"),
                                           "key_id": kid.decode("utf-8"),
                                           "below": below.decode("ascii")})
        else:
            statement["kyt_required"].append(value.decode("utf-8"))
    assert trust_from_json(statement) == data, "trust statement not canonical"
    return statement


# ---------------------------------------------------------------- keys

KEY_NAMES = [
    # (name, kind when listed in a trust statement; None for the admin key)
    ("admin", None),
    ("alice", "APPROVER"),
    ("bob", "APPROVER"),
    ("carol", "APPROVER"),
    ("risk", "SERVICE"),
    ("sentinel", "SERVICE"),
    ("dave", "APPROVER"),  # only ever appears revoked
]


def seed(name):
    return hashlib.sha256(b"opledger test key " + name.encode("ascii")).digest()


PRIVATE = {name: Ed25519PrivateKey.from_private_bytes(seed(name)) for name, _ in KEY_NAMES}
PUBLIC = {name: public_key_bytes(key) for name, key in PRIVATE.items()}
KEY_ID = {name: key_id(pk) for name, pk in PUBLIC.items()}
KIND = dict(KEY_NAMES)


def listed(name):
    return {"key_id": KEY_ID[name], "public_key_hex": PUBLIC[name].hex(), "kind": KIND[name]}


def by_key_id(names, reverse=False):
    return sorted(names, key=lambda n: KEY_ID[n], reverse=reverse)


# ---------------------------------------------------------------- vectors

TENANT_A = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
TENANT_B = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4b6c"
OPERATION_1 = "0190a1b3-0000-7000-8000-000000000001"
OPERATION_2 = "0190a1b3-0000-7000-8000-000000000002"
OPERATION_3 = "0190a1b3-0000-7000-8000-00000000000f"


def payload_hash(label):
    return hashlib.sha256(b"opledger test payload " + label.encode("ascii")).hexdigest()


def approval(tenant, operation, label, decision, signer, policy_version):
    return {"tenant_id": tenant, "operation_id": operation, "payload_hash_hex": payload_hash(label),
            "decision": decision, "approver_key_id": KEY_ID[signer],
            "policy_version": policy_version}


APPROVALS = [
    ("approve_alice", "alice", approval(TENANT_A, OPERATION_1, "op1", "APPROVE", "alice", 2)),
    ("approve_bob_same_operation", "bob",
     approval(TENANT_A, OPERATION_1, "op1", "APPROVE", "bob", 2)),
    ("reject_carol_same_operation", "carol",
     approval(TENANT_A, OPERATION_1, "op1", "REJECT", "carol", 2)),
    ("approve_service_key_risk", "risk",
     approval(TENANT_A, OPERATION_3, "op3", "APPROVE", "risk", 1)),
    ("policy_version_u64_max", "alice",
     approval(TENANT_A, OPERATION_1, "op1", "APPROVE", "alice", U64_MAX)),
    ("second_tenant", "alice", approval(TENANT_B, OPERATION_2, "op2", "APPROVE", "alice", 1)),
]

# Keys listed in reverse key-id order so that the input is certainly unsorted.
UNSORTED_KEYS = [listed(n) for n in by_key_id(["alice", "bob", "risk", "sentinel"],
                                               reverse=True)]

TRUST = [
    ("minimal", {
        "tenant_id": TENANT_A, "version": 1,
        "keys": [listed("alice")],
        "revoked": [], "rules": [], "automated": [], "kyt_required": [],
    }),
    ("full", {
        "tenant_id": TENANT_A, "version": 2,
        "keys": [listed(n) for n in by_key_id(["alice", "bob", "risk"])],
        "revoked": [KEY_ID["carol"]],
        "rules": [
            {"asset": "ETH", "min_amount": "0", "required_approvals": 1},
            {"asset": "ETH", "min_amount": "1000000000000000000", "required_approvals": 2},
            {"asset": "ETH", "min_amount": str(U128_MAX), "required_approvals": 10},
            {"asset": "USDC", "min_amount": "0", "required_approvals": 1},
            {"asset": "USDC", "min_amount": "10000000000", "required_approvals": 2},
        ],
        "automated": [{"asset": "ETH", "key_id": KEY_ID["risk"], "below": "100000000000000000"}],
        "kyt_required": ["ETH", "USDC"],
    }),
    # Every list out of canonical order. Assets "1INCH" < "ETH" < "USDC" in
    # byte order but ETH(3) < USDC(4) < 1INCH(5) by length, so sorting the
    # length-prefixed field instead of the raw asset bytes gives other bytes.
    ("unsorted_inputs", {
        "tenant_id": TENANT_A, "version": 3,
        "keys": UNSORTED_KEYS,
        "revoked": [KEY_ID[n] for n in by_key_id(["carol", "dave"], reverse=True)],
        "rules": [
            {"asset": "USDC", "min_amount": "1000", "required_approvals": 3},
            {"asset": "USDC", "min_amount": "20", "required_approvals": 2},
            {"asset": "USDC", "min_amount": "0", "required_approvals": 1},
            {"asset": "ETH", "min_amount": "1000", "required_approvals": 3},
            {"asset": "ETH", "min_amount": "20", "required_approvals": 2},
            {"asset": "ETH", "min_amount": "0", "required_approvals": 1},
            {"asset": "1INCH", "min_amount": "0", "required_approvals": 2},
        ],
        "automated": [
            {"asset": "USDC", "key_id": KEY_ID["risk"], "below": str(U128_MAX)},
            {"asset": "ETH", "key_id": KEY_ID[by_key_id(["risk", "sentinel"])[1]], "below": "20"},
            {"asset": "ETH", "key_id": KEY_ID[by_key_id(["risk", "sentinel"])[0]], "below": "1"},
        ],
        "kyt_required": ["USDC", "ETH", "1INCH"],
    }),
    # "10" sorts before "9" as a string, after it as a number.
    ("min_amount_numeric_not_string_order", {
        "tenant_id": TENANT_B, "version": 5,
        "keys": [listed(n) for n in ["carol", "bob", "alice"]],
        "revoked": [],
        "rules": [
            {"asset": "ETH", "min_amount": "10", "required_approvals": 3},
            {"asset": "ETH", "min_amount": "9", "required_approvals": 2},
            {"asset": "ETH", "min_amount": "0", "required_approvals": 1},
        ],
        "automated": [], "kyt_required": [],
    }),
]


# ---------------------------------------------------------------- self-test

def refused(build):
    try:
        build()
    except (AssertionError, ValueError):
        return True
    return False


def self_test():
    """The checks must refuse what the spec refuses; fail loudly otherwise."""
    base_approval = APPROVALS[0][2]
    bad_approvals = [
        {"policy_version": 0},
        {"policy_version": U64_MAX + 1},
        {"policy_version": True},
        {"policy_version": "1"},
        {"decision": "approve"},
        {"tenant_id": TENANT_A.upper()},
        {"operation_id": OPERATION_1.replace("-", "")},
        {"approver_key_id": KEY_ID["alice"].upper()},
        {"approver_key_id": KEY_ID["alice"][:30]},
        {"payload_hash_hex": "00" * 31},
    ]
    for change in bad_approvals:
        assert refused(lambda: approval_from_json({**base_approval, **change})), change

    full = dict(TRUST[1][1])
    rule = lambda asset, amount, n=1: {"asset": asset, "min_amount": amount,
                                       "required_approvals": n}
    bad_key = dict(listed("alice"), key_id=KEY_ID["bob"])
    bad_trust = [
        {"version": 0},
        {"version": U64_MAX + 1},
        {"tenant_id": "not-a-uuid"},
        {"keys": [listed("alice"), listed("alice")]},
        {"keys": [bad_key]},
        {"keys": [dict(listed("alice"), kind="ADMIN")]},
        {"revoked": [KEY_ID["alice"]]},
        {"revoked": [KEY_ID["carol"], KEY_ID["carol"]]},
        {"rules": full["rules"] + [rule("ETH", "0", 2)]},
        {"rules": [rule("ETH", "01")]},
        {"rules": [rule("ETH", "0"), rule("ETH", "+5")]},
        {"rules": [rule("ETH", "0"), rule("ETH", str(U128_MAX + 1))]},
        {"rules": [rule("ETH", "5")]},
        {"rules": [rule("ETH", "0", 0)]},
        {"rules": [rule("ETH", "0", 11)]},
        {"rules": [rule("eth", "0")]},
        {"rules": [rule("", "0")]},
        {"rules": [rule("A" * 17, "0")]},
        {"rules": [rule("ÉTH", "0")]},
        {"automated": [{"asset": "ETH", "key_id": KEY_ID["alice"], "below": "5"}]},
        {"automated": [{"asset": "ETH", "key_id": KEY_ID["carol"], "below": "5"}]},
        {"automated": [{"asset": "ETH", "key_id": KEY_ID["risk"], "below": "0"}]},
        {"automated": [{"asset": "ETH", "key_id": KEY_ID["risk"], "below": str(U128_MAX + 1)}]},
        {"automated": full["automated"] * 2},
        {"kyt_required": ["ETH", "ETH"]},
        {"kyt_required": ["eth"]},
    ]
    for change in bad_trust:
        assert refused(lambda: trust_from_json({**full, **change})), change

    # The decoder refuses reordered repeated items, swapped fields, a missing
    # field, non-canonical decimals, another domain and trailing bytes.
    good = trust_from_json(full)
    fields = split_fields(strip_domain(good, TRUST_DOMAIN))
    prefix = TRUST_DOMAIN.encode("ascii") + b"\x00"
    join = lambda fs: prefix + b"".join(field(t, v) for t, v in fs)
    assert decode_trust(join(fields)) and join(fields) == good
    rules_at = [i for i, (t, _) in enumerate(fields) if t == 5]
    swapped = list(fields)
    swapped[rules_at[0]], swapped[rules_at[1]] = swapped[rules_at[1]], swapped[rules_at[0]]
    assert refused(lambda: decode_trust(join(swapped)))
    assert refused(lambda: decode_trust(join([fields[1], fields[0]] + fields[2:])))
    assert refused(lambda: decode_trust(join(fields[1:])))
    assert refused(lambda: decode_trust(join([fields[0], (2, b"02")] + fields[2:])))
    assert refused(lambda: decode_trust(join(fields + [fields[-1]])))
    assert refused(lambda: decode_trust(good + b"\x00"))
    assert refused(lambda: decode_trust(APPROVAL_DOMAIN.encode("ascii") + good[len(TRUST_DOMAIN):]))
    approval_bytes = approval_from_json(base_approval)
    assert decode_approval(approval_bytes) == base_approval
    assert refused(lambda: decode_approval(approval_bytes + b"\x00"))
    assert refused(lambda: decode_approval(approval_bytes[:-1] + b"\x00"))


# ---------------------------------------------------------------- output

def signed(private_name, data):
    signature = PRIVATE[private_name].sign(data)
    assert len(signature) == 64
    verifier = Ed25519PublicKey.from_public_bytes(PUBLIC[private_name])
    try:
        verifier.verify(signature, data)
    except InvalidSignature:
        raise AssertionError("signature does not verify")
    try:
        verifier.verify(signature, data + b"\x00")
        raise AssertionError("signature verifies over other bytes")
    except InvalidSignature:
        pass
    return signature


def main():
    self_test()

    keys = [{"name": name, "seed_hex": seed(name).hex(), "public_key_hex": PUBLIC[name].hex(),
             "key_id": KEY_ID[name]} for name, _ in KEY_NAMES]

    approvals = []
    for name, signer, statement in APPROVALS:
        check_approval(statement)
        assert statement["approver_key_id"] == KEY_ID[signer], "signer is not the named key"
        data = approval_from_json(statement)
        assert decode_approval(data) == statement
        approvals.append({"name": name, "signer": signer, "statement": statement,
                          "canonical_hex": data.hex(),
                          "signature_hex": signed(signer, data).hex()})

    trust = []
    for name, statement in TRUST:
        data = trust_from_json(statement)
        decoded = decode_trust(data)
        assert trust_from_json(decoded) == data
        trust.append({"name": name, "signer": "admin", "statement": statement,
                      "canonical_hex": data.hex(),
                      "signature_hex": signed("admin", data).hex()})

    doc = {
        "version": 1,
        "approval_domain": APPROVAL_DOMAIN,
        "trust_domain": TRUST_DOMAIN,
        "key_id_domain": KEY_ID_DOMAIN,
        "keys": keys,
        "approvals": approvals,
        "trust": trust,
    }
    target = pathlib.Path(__file__).with_name("signed_statements_v1.json")
    target.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(keys)} keys, {len(approvals)} approvals, {len(trust)} trust statements "
          f"to {target}")


if __name__ == "__main__":
    main()
