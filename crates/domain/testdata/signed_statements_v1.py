#!/usr/bin/env python3
"""Independent reference implementation of the opledger signed statements,
version 1 (SIGNED_STATEMENTS.md): approval statements, tenant trust
statements, operator credit statements, key ids, and the witness's evaluation
of a credit's operator signatures. Python 3 with the `cryptography` package
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
- A trust statement in JSON form may omit "credit_rules" (the vectors written
  before field 8 existed do); omitted and empty encode the same bytes.
- A credit statement's account is canonical as the payload's source account:
  `[a-z0-9][a-z0-9_-]{0,62}`.
- Credit evaluation checks each signature in list order, and within one
  signature in this order: key id form, policy version, revoked, listed,
  kind, signature, duplicate. The first failure is the reason. Vectors with
  a refusal have exactly one failing signature, so only the reason matters.

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
CREDIT_DOMAIN = "opledger/credit-statement/v1"
IDEMPOTENCY_DOMAIN = "opledger/idempotency-key/v1"
KEY_ID_DOMAIN = "opledger/approver-key/v1"

U128_MAX = 2**128 - 1
U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1

DECISIONS = ("APPROVE", "REJECT")
KINDS = ("APPROVER", "SERVICE", "OPERATOR", "KYT")
RISK_FLAGS = ("SAME_DESTINATION_AND_AMOUNT",)

UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
KEY_ID_RE = r"[0-9a-f]{32}"
ASSET_RE = r"[A-Z0-9]{1,16}"
ACCOUNT_RE = r"[a-z0-9][a-z0-9_-]{0,62}"
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


def check_account(value, what):
    assert isinstance(value, str) and re.fullmatch(ACCOUNT_RE, value), what


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
    required = {"tenant_id", "operation_id", "payload_hash_hex", "decision", "approver_key_id",
                "policy_version"}
    assert required <= set(statement) <= required | {"acknowledged"}, "approval fields"
    check_acknowledged(statement.get("acknowledged", []))
    check_uuid(statement["tenant_id"], "tenant_id")
    check_uuid(statement["operation_id"], "operation_id")
    assert isinstance(statement["payload_hash_hex"], str) and re.fullmatch(
        r"[0-9a-f]{64}", statement["payload_hash_hex"]), "payload_hash_hex"
    assert statement["decision"] in DECISIONS, "decision"
    check_key_id(statement["approver_key_id"], "approver_key_id")
    check_int(statement["policy_version"], 1, U64_MAX, "policy_version")


def check_acknowledged(flags):
    """Acknowledged risk flags: known names, ascending, each once."""
    assert isinstance(flags, list), "acknowledged"
    for flag in flags:
        assert flag in RISK_FLAGS, "acknowledged flag"
    strictly_ascending(flags, "acknowledged")


def check_credit(statement):
    """Refuse any credit statement the spec refuses."""
    assert set(statement) == {"tenant_id", "credit_id_hex", "account", "asset", "amount",
                              "operator_key_id", "policy_version"}, "credit fields"
    check_uuid(statement["tenant_id"], "tenant_id")
    assert isinstance(statement["credit_id_hex"], str) and re.fullmatch(
        r"[0-9a-f]{64}", statement["credit_id_hex"]), "credit_id_hex"
    check_account(statement["account"], "account")
    check_asset(statement["asset"], "asset")
    parse_decimal(statement["amount"], 1, U128_MAX, "amount")
    check_key_id(statement["operator_key_id"], "operator_key_id")
    check_int(statement["policy_version"], 1, U64_MAX, "policy_version")


TRUST_FIELDS = {"tenant_id", "version", "keys", "revoked", "rules", "automated",
                "kyt_required"}


def canonical_trust(statement):
    """Validate a trust statement given in JSON form (lists in any order) and
    return its items sorted in canonical order, as Python values."""
    assert TRUST_FIELDS <= set(statement) <= TRUST_FIELDS | {"credit_rules"}, "trust fields"
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

    credit_rules = []
    for entry in statement.get("credit_rules", []):
        assert set(entry) == {"asset", "min_amount", "required_operators"}, "credit rule fields"
        check_asset(entry["asset"], "credit_rule.asset")
        min_amount = parse_decimal(entry["min_amount"], 0, U128_MAX, "credit_rule.min_amount")
        check_int(entry["required_operators"], 1, 10, "credit_rule.required_operators")
        credit_rules.append((entry["asset"], min_amount, entry["required_operators"]))
    credit_rules.sort(key=lambda r: (r[0].encode("ascii"), r[1]))
    strictly_ascending([(r[0].encode("ascii"), r[1]) for r in credit_rules], "credit rule")
    for asset in {r[0] for r in credit_rules}:
        assert (asset, 0) in {(r[0], r[1]) for r in credit_rules}, \
            "asset %s has no base credit rule" % asset

    return {
        "tenant_id": statement["tenant_id"],
        "version": statement["version"],
        "keys": keys,
        "revoked": revoked,
        "rules": rules,
        "automated": automated,
        "kyt_required": kyt,
        "credit_rules": credit_rules,
    }


# ---------------------------------------------------------------- encoders

def approval_statement(tenant_id, operation_id, payload_hash, decision, approver_key_id,
                       policy_version, acknowledged=()):
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
    check_acknowledged(list(acknowledged))
    for flag in acknowledged:
        out += field(7, text(flag))
    return bytes(out)


def credit_statement(tenant_id, credit_id, account, asset, amount, operator_key_id,
                     policy_version):
    check_uuid(tenant_id, "tenant_id")
    assert isinstance(credit_id, bytes) and len(credit_id) == 32, "credit_id"
    check_account(account, "account")
    check_asset(asset, "asset")
    check_int(amount, 1, U128_MAX, "amount")
    check_key_id(operator_key_id, "operator_key_id")
    check_int(policy_version, 1, U64_MAX, "policy_version")
    out = bytearray(CREDIT_DOMAIN.encode("ascii") + b"\x00")
    out += field(1, text(tenant_id))
    out += field(2, credit_id)
    out += field(3, text(account))
    out += field(4, text(asset))
    out += field(5, decimal(amount))
    out += field(6, text(operator_key_id))
    out += field(7, decimal(policy_version))
    return bytes(out)


def trust_statement(tenant_id, version, keys, revoked, rules, automated, kyt_required,
                    credit_rules=()):
    """Arguments are in JSON form (see canonical_trust); lists may be unsorted."""
    c = canonical_trust({
        "tenant_id": tenant_id, "version": version, "keys": keys, "revoked": revoked,
        "rules": rules, "automated": automated, "kyt_required": kyt_required,
        "credit_rules": list(credit_rules),
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
    for asset, min_amount, required in c["credit_rules"]:
        out += field(8, field(1, text(asset)) + field(2, decimal(min_amount))
                     + field(3, decimal(required)))
    return bytes(out)


def approval_from_json(statement):
    check_approval(statement)
    return approval_statement(statement["tenant_id"], statement["operation_id"],
                              bytes.fromhex(statement["payload_hash_hex"]),
                              statement["decision"], statement["approver_key_id"],
                              statement["policy_version"], statement.get("acknowledged", []))


def credit_from_json(statement):
    check_credit(statement)
    return credit_statement(statement["tenant_id"], bytes.fromhex(statement["credit_id_hex"]),
                            statement["account"], statement["asset"],
                            parse_decimal(statement["amount"], 1, U128_MAX, "amount"),
                            statement["operator_key_id"], statement["policy_version"])


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
    fields = split_fields(strip_domain(data, APPROVAL_DOMAIN))
    acknowledged = [v.decode("utf-8") for t, v in fields[6:] if t == 7]
    values = expect_tags(fields, [1, 2, 3, 4, 5, 6] + [7] * len(acknowledged), "approval")
    statement = {
        "tenant_id": values[0].decode("utf-8"),
        "operation_id": values[1].decode("utf-8"),
        "payload_hash_hex": values[2].hex(),
        "decision": values[3].decode("utf-8"),
        "approver_key_id": values[4].decode("utf-8"),
        "policy_version": decode_decimal(values[5], 1, U64_MAX, "policy_version"),
    }
    if acknowledged:
        statement["acknowledged"] = acknowledged
    assert len(values[2]) == 32, "payload hash length"
    assert approval_from_json(statement) == data, "approval not canonical"
    return statement


def decode_credit(data):
    values = expect_tags(split_fields(strip_domain(data, CREDIT_DOMAIN)),
                         [1, 2, 3, 4, 5, 6, 7], "credit")
    assert len(values[1]) == 32, "credit id length"
    statement = {
        "tenant_id": values[0].decode("utf-8"),
        "credit_id_hex": values[1].hex(),
        "account": values[2].decode("utf-8"),
        "asset": values[3].decode("utf-8"),
        "amount": values[4].decode("ascii"),
        "operator_key_id": values[5].decode("utf-8"),
        "policy_version": decode_decimal(values[6], 1, U64_MAX, "policy_version"),
    }
    assert credit_from_json(statement) == data, "credit statement not canonical"
    return statement


def decode_trust(data):
    fields = split_fields(strip_domain(data, TRUST_DOMAIN))
    tags = [t for t, _ in fields]
    assert tags[:2] == [1, 2], "trust header tags"
    assert tags == sorted(tags), "trust fields out of order"
    assert set(tags) <= {1, 2, 3, 4, 5, 6, 7, 8} and tags.count(1) == 1 \
        and tags.count(2) == 1, "trust tags"
    statement = {"tenant_id": fields[0][1].decode("utf-8"),
                 "version": decode_decimal(fields[1][1], 1, U64_MAX, "version"),
                 "keys": [], "revoked": [], "rules": [], "automated": [], "kyt_required": [],
                 "credit_rules": []}
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
        elif tag == 7:
            statement["kyt_required"].append(value.decode("utf-8"))
        else:
            asset, min_amount, required = expect_tags(split_fields(value), [1, 2, 3],
                                                      "credit rule")
            required = decode_decimal(required, 1, 10, "required_operators")
            statement["credit_rules"].append({"asset": asset.decode("utf-8"),
                                              "min_amount": min_amount.decode("ascii"),
                                              "required_operators": required})
    assert trust_from_json(statement) == data, "trust statement not canonical"
    return statement


# ---------------------------------------------------------------- credit evaluation

def verifies(public_key, signature, data):
    if len(signature) != 64:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except InvalidSignature:
        return False
    return True


def required_operators(canonical, asset, amount):
    """The credit rule of the asset with the highest min_amount not above the
    amount; 1 when the asset has no credit rules."""
    need = 1
    for rule_asset, min_amount, required in canonical["credit_rules"]:
        if rule_asset == asset and min_amount <= amount:
            need = required  # rules are sorted by min_amount
    return need


def evaluate_credit(trust, credit, signatures):
    """What the witness decides, from a trust statement (JSON form), a credit's
    fields (JSON form, without operator_key_id and policy_version) and its
    operator signatures. Every statement is rebuilt from the credit's fields."""
    c = canonical_trust(trust)
    if credit["tenant_id"] != c["tenant_id"]:
        return {"verdict": "REFUSED", "reason": "CREDIT_TRUST_OTHER_TENANT"}
    amount = parse_decimal(credit["amount"], 0, U128_MAX, "amount")
    if amount == 0:
        return {"verdict": "REFUSED", "reason": "CREDIT_AMOUNT_ZERO"}
    active = {kid: (public_key, kind) for kid, public_key, kind in c["keys"]}
    seen = []
    for entry in signatures:
        kid = entry["operator_key_id"]
        version = entry["policy_version"]
        if not re.fullmatch(KEY_ID_RE, kid):
            return {"verdict": "REFUSED", "reason": "CREDIT_KEY_ID_MALFORMED"}
        if not 1 <= version <= c["version"]:
            return {"verdict": "REFUSED", "reason": "CREDIT_POLICY_VERSION_UNKNOWN"}
        if kid in c["revoked"]:
            return {"verdict": "REFUSED", "reason": "CREDIT_KEY_REVOKED"}
        if kid not in active:
            return {"verdict": "REFUSED", "reason": "CREDIT_KEY_UNKNOWN"}
        public_key, kind = active[kid]
        if kind != "OPERATOR":
            return {"verdict": "REFUSED", "reason": "CREDIT_KEY_NOT_OPERATOR"}
        data = credit_from_json(dict(credit, operator_key_id=kid, policy_version=version))
        if not verifies(public_key, bytes.fromhex(entry["signature_hex"]), data):
            return {"verdict": "REFUSED", "reason": "CREDIT_SIGNATURE_INVALID"}
        if kid in seen:
            return {"verdict": "REFUSED", "reason": "CREDIT_DUPLICATE_OPERATOR"}
        seen.append(kid)
    need = required_operators(c, credit["asset"], amount)
    if len(seen) >= need:
        return {"verdict": "MET", "operators": sorted(seen)}
    return {"verdict": "PENDING", "have": len(seen), "need": need}


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
    ("erin", "OPERATOR"),
    ("frank", "OPERATOR"),
    ("screener", "KYT"),
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


def approval(tenant, operation, label, decision, signer, policy_version, acknowledged=None):
    statement = {"tenant_id": tenant, "operation_id": operation,
                 "payload_hash_hex": payload_hash(label), "decision": decision,
                 "approver_key_id": KEY_ID[signer], "policy_version": policy_version}
    if acknowledged is not None:
        statement["acknowledged"] = acknowledged
    return statement


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
    ("approve_bob_acknowledging_risk", "bob",
     approval(TENANT_A, OPERATION_2, "op2", "APPROVE", "bob", 4,
              acknowledged=["SAME_DESTINATION_AND_AMOUNT"])),
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
    # A KYT provider's key: it signs screening results, and the signer counts a pass only when
    # it verifies with a KYT key of the statement.
    ("kyt_provider", {
        "tenant_id": TENANT_A, "version": 6,
        "keys": [listed(n) for n in by_key_id(["alice", "bob", "screener"])],
        "revoked": [],
        "rules": [{"asset": "ETH", "min_amount": "0", "required_approvals": 2}],
        "automated": [], "kyt_required": ["ETH"],
    }),
]


IDEMPOTENCY_KEY = "credit-7c9e6679-7425-40de-944b-e07fc1f90ae7"


def idempotency_digest(key):
    return hashlib.sha256(IDEMPOTENCY_DOMAIN.encode("ascii") + b"\x00"
                          + key.encode("ascii")).hexdigest()


def deposit_digest(label):
    # Any 32 bytes: the store's deposit digest is opaque to the statement.
    return hashlib.sha256(b"opledger test deposit " + label.encode("ascii")).hexdigest()


def credit(tenant, credit_id_hex, account, asset, amount, signer, policy_version):
    return {"tenant_id": tenant, "credit_id_hex": credit_id_hex, "account": account,
            "asset": asset, "amount": amount, "operator_key_id": KEY_ID[signer],
            "policy_version": policy_version}


OPERATOR_CREDIT = idempotency_digest(IDEMPOTENCY_KEY)

# (name, signer, statement, idempotency key the credit id is the digest of, or None)
CREDITS = [
    ("operator_credit_erin", "erin",
     credit(TENANT_A, OPERATOR_CREDIT, "treasury", "ETH", "2500000000000000000", "erin", 6),
     IDEMPOTENCY_KEY),
    ("operator_credit_frank_same_credit", "frank",
     credit(TENANT_A, OPERATOR_CREDIT, "treasury", "ETH", "2500000000000000000", "frank", 6),
     IDEMPOTENCY_KEY),
    ("deposit_credit_minimal_amount", "frank",
     credit(TENANT_A, deposit_digest("1"), "cust_0042-a", "USDC", "1", "frank", 1), None),
    ("amount_u128_max_policy_version_u64_max", "erin",
     credit(TENANT_A, deposit_digest("2"), "9", "1INCH", str(U128_MAX), "erin", U64_MAX), None),
    ("second_tenant", "erin",
     credit(TENANT_B, deposit_digest("3"), "treasury", "ETH", "10", "erin", 1), None),
]

# Keys and lists out of canonical order; field 7 present so field 8 follows it.
OPERATOR_TRUST = {
    "tenant_id": TENANT_A, "version": 6,
    "keys": [listed(n) for n in by_key_id(["alice", "bob", "risk", "erin", "frank"],
                                          reverse=True)],
    "revoked": [KEY_ID["dave"]],
    "rules": [{"asset": "ETH", "min_amount": "0", "required_approvals": 1}],
    "automated": [{"asset": "ETH", "key_id": KEY_ID["risk"], "below": "1000"}],
    "kyt_required": ["ETH"],
    "credit_rules": [
        {"asset": "USDC", "min_amount": "100000000000", "required_operators": 3},
        {"asset": "USDC", "min_amount": "0", "required_operators": 1},
        {"asset": "ETH", "min_amount": "1000000000000000000", "required_operators": 2},
        {"asset": "ETH", "min_amount": "10", "required_operators": 1},
        {"asset": "ETH", "min_amount": "9", "required_operators": 1},
        {"asset": "ETH", "min_amount": "0", "required_operators": 1},
        {"asset": "1INCH", "min_amount": "0", "required_operators": 2},
    ],
}

TRUST.append(("operators_and_credit_rules", OPERATOR_TRUST))


def credit_fields(statement):
    return {k: v for k, v in statement.items() if k not in ("operator_key_id", "policy_version")}


def signature_of(signer, statement, **change):
    """`signer`'s signature entry over `statement` changed by `change`, listed
    under the statement's own key id and version."""
    signed_statement = dict(statement, operator_key_id=KEY_ID[signer], **change)
    data = credit_from_json(signed_statement)
    return {"operator_key_id": KEY_ID[signer],
            "policy_version": signed_statement["policy_version"],
            "signature_hex": PRIVATE[signer].sign(data).hex()}


def evaluations():
    """(name, credit fields, signatures) against OPERATOR_TRUST."""
    large = credit_fields(CREDITS[0][2])
    small = dict(large, amount="9")
    deposit = credit_fields(CREDITS[2][2])
    sig = lambda signer, fields=large, **change: signature_of(
        signer, dict(fields, operator_key_id=KEY_ID[signer], policy_version=6), **change)
    forged = sig("erin")
    forged["signature_hex"] = ("%02x" % (int(forged["signature_hex"][:2], 16) ^ 1)) \
        + forged["signature_hex"][2:]
    relabelled = sig("erin")
    relabelled["policy_version"] = 5
    return [
        ("one_operator_below_the_threshold", small, [sig("erin", small)]),
        ("one_operator_above_the_threshold_is_pending", large, [sig("erin")]),
        ("two_operators_above_the_threshold", large, [sig("frank"), sig("erin")]),
        ("older_policy_version_counts", large, [sig("frank", policy_version=1), sig("erin")]),
        ("no_credit_rules_one_operator", dict(large, asset="DAI", amount=str(U128_MAX)),
         [sig("frank", dict(large, asset="DAI", amount=str(U128_MAX)))]),
        ("deposit_usdc_one_operator", deposit, [sig("frank", deposit)]),
        ("same_operator_twice", large, [sig("erin"), sig("erin", policy_version=5)]),
        ("approver_key", small, [sig("alice", small)]),
        ("service_key", small, [sig("risk", small)]),
        ("revoked_key", small, [sig("dave", small)]),
        ("unlisted_key", small, [sig("carol", small)]),
        ("signature_over_another_amount", small, [sig("erin", small, amount="10")]),
        ("signature_over_another_account", large, [sig("erin", account="attacker")]),
        ("signature_over_another_credit_id", large,
         [sig("erin", credit_id_hex=deposit_digest("9"))]),
        ("forged_signature", large, [sig("frank"), forged]),
        ("signature_relabelled_to_another_policy_version", large, [relabelled]),
        ("policy_version_above_the_newest", large, [sig("erin", policy_version=7)]),
        ("uppercase_key_id", large, [dict(sig("erin"),
                                          operator_key_id=KEY_ID["erin"].upper())]),
        ("credit_of_another_tenant", dict(large, tenant_id=TENANT_B),
         [sig("erin", dict(large, tenant_id=TENANT_B))]),
        ("no_signature_is_pending", large, []),
        ("zero_amount", dict(large, amount="0"), []),
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
        {"acknowledged": ["SAME_DESTINATION_AND_AMOUNT", "SAME_DESTINATION_AND_AMOUNT"]},
        {"acknowledged": ["same_destination_and_amount"]},
        {"acknowledged": ["NEW_DESTINATION"]},
        {"acknowledged": "SAME_DESTINATION_AND_AMOUNT"},
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

    # Operator keys and credit rules.
    credit_rule = lambda asset, amount, n=1: {"asset": asset, "min_amount": amount,
                                              "required_operators": n}
    operators = dict(OPERATOR_TRUST)
    bad_operator_trust = [
        {"keys": [dict(listed("erin"), kind="operator")]},
        {"automated": [{"asset": "ETH", "key_id": KEY_ID["erin"], "below": "5"}]},
        {"credit_rules": [credit_rule("ETH", "5")]},
        {"credit_rules": [credit_rule("ETH", "0"), credit_rule("ETH", "0", 2)]},
        {"credit_rules": [credit_rule("ETH", "0", 0)]},
        {"credit_rules": [credit_rule("ETH", "0", 11)]},
        {"credit_rules": [credit_rule("ETH", "0", True)]},
        {"credit_rules": [credit_rule("ETH", "00")]},
        {"credit_rules": [credit_rule("ETH", "0"), credit_rule("ETH", str(U128_MAX + 1))]},
        {"credit_rules": [credit_rule("eth", "0")]},
        {"credit_rules": [credit_rule("ETH", "0"), credit_rule("USDC", "1")]},
        {"credit_rules": [{"asset": "ETH", "min_amount": "0", "required_approvals": 1}]},
    ]
    for change in bad_operator_trust:
        assert refused(lambda: trust_from_json({**operators, **change})), change
    good = trust_from_json(operators)
    fields = split_fields(strip_domain(good, TRUST_DOMAIN))
    assert fields[-1][0] == 8 and fields[-2][0] == 8
    swapped = fields[:-2] + [fields[-1], fields[-2]]
    assert refused(lambda: decode_trust(join(swapped)))
    assert refused(lambda: decode_trust(join(fields + [(9, b"")])))
    assert refused(lambda: decode_trust(join([f for f in fields if f[0] != 7] + [
        f for f in fields if f[0] == 7])))
    # Without field 8, the JSON form with and without "credit_rules" is the same statement.
    assert trust_from_json(full) == trust_from_json(dict(full, credit_rules=[]))

    base_credit = CREDITS[0][2]
    bad_credits = [
        {"amount": "0"},
        {"amount": "01"},
        {"amount": str(U128_MAX + 1)},
        {"amount": 5},
        {"account": "Treasury"},
        {"account": ""},
        {"account": "_treasury"},
        {"account": "a" * 64},
        {"asset": "eth"},
        {"credit_id_hex": "00" * 31},
        {"credit_id_hex": "AB" * 32},
        {"tenant_id": TENANT_A.upper()},
        {"operator_key_id": KEY_ID["erin"].upper()},
        {"policy_version": 0},
        {"policy_version": U64_MAX + 1},
        {"policy_version": True},
    ]
    for change in bad_credits:
        assert refused(lambda: credit_from_json({**base_credit, **change})), change
    assert credit_from_json({**base_credit, "account": "a" * 63})
    credit_bytes = credit_from_json(base_credit)
    assert decode_credit(credit_bytes) == base_credit
    credit_fields_ = split_fields(strip_domain(credit_bytes, CREDIT_DOMAIN))
    credit_join = lambda fs: CREDIT_DOMAIN.encode("ascii") + b"\x00" + b"".join(
        field(t, v) for t, v in fs)
    assert credit_join(credit_fields_) == credit_bytes
    assert refused(lambda: decode_credit(credit_bytes + b"\x00"))
    assert refused(lambda: decode_credit(credit_bytes[:-1]))
    assert refused(lambda: decode_credit(credit_join(credit_fields_[1:])))
    assert refused(lambda: decode_credit(credit_join(
        [credit_fields_[0], credit_fields_[2], credit_fields_[1]] + credit_fields_[3:])))
    assert refused(lambda: decode_credit(credit_join(credit_fields_ + [(8, b"")])))
    assert refused(lambda: decode_credit(credit_join(
        credit_fields_[:1] + [(2, b"\x00" * 33)] + credit_fields_[2:])))
    assert refused(lambda: decode_credit(APPROVAL_DOMAIN.encode("ascii")
                                         + credit_bytes[len(CREDIT_DOMAIN):]))


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

    credits = []
    for name, signer, statement, idempotency_key in CREDITS:
        check_credit(statement)
        assert statement["operator_key_id"] == KEY_ID[signer], "signer is not the named key"
        if idempotency_key is not None:
            assert statement["credit_id_hex"] == idempotency_digest(idempotency_key)
        data = credit_from_json(statement)
        assert decode_credit(data) == statement
        entry = {"name": name, "signer": signer, "statement": statement,
                 "canonical_hex": data.hex(), "signature_hex": signed(signer, data).hex()}
        if idempotency_key is not None:
            entry["idempotency_key"] = idempotency_key
        credits.append(entry)

    credit_evaluations = []
    for name, fields, signatures in evaluations():
        credit_evaluations.append({"name": name, "trust": "operators_and_credit_rules",
                                   "credit": fields, "signatures": signatures,
                                   "expected": evaluate_credit(OPERATOR_TRUST, fields,
                                                               signatures)})
    outcomes = {e["expected"]["verdict"] for e in credit_evaluations}
    reasons = {e["expected"].get("reason") for e in credit_evaluations} - {None}
    assert outcomes == {"MET", "PENDING", "REFUSED"}, outcomes
    assert len(reasons) == 9, reasons

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
        "credit_domain": CREDIT_DOMAIN,
        "credits": credits,
        "credit_evaluations": credit_evaluations,
    }
    target = pathlib.Path(__file__).with_name("signed_statements_v1.json")
    target.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(keys)} keys, {len(approvals)} approvals, {len(trust)} trust statements, "
          f"{len(credits)} credit statements, {len(credit_evaluations)} credit evaluations "
          f"to {target}")


if __name__ == "__main__":
    main()
