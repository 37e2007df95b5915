-- The witness attests custodian releases from its own lookup (issue 27).
--
-- The witness (role opledger_witness) looks the provider's record of our reference up itself,
-- with its own read-only credentials at the provider, and attests the executor's proposed
-- terminal record without a hash only when its own record agrees
-- (opledger_domain::custodian::witness_release); migration 32 gave it what it reads and the
-- attestations. A proposal its own lookup contradicts (a hash, a record in flight, another
-- status, a record that differs from the request) is refused for good here: a security signal,
-- one row per proposal, which leaves the witness's queue (the executor's next record of the
-- withdrawal is a new proposal). A refusal releases nothing and blocks nothing: the release rule
-- (opledger_release_witnessed) reads proposals and attestations only.

CREATE TABLE custodian_witness_refusals (
    tenant_id     uuid        NOT NULL,
    op_id         uuid        NOT NULL,
    record_id     bigint      NOT NULL,
    reason        text        NOT NULL CHECK (reason ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    -- What the witness's own lookup found, when it found a record: its status and the SHA-256 of
    -- the provider's answer.
    status        text        CHECK (status ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    answer_sha256 bytea       CHECK (octet_length(answer_sha256) = 32),
    witness_id    text        NOT NULL CHECK (length(witness_id) BETWEEN 1 AND 128),
    login         text        NOT NULL DEFAULT session_user,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, record_id),
    FOREIGN KEY (tenant_id, op_id, record_id)
        REFERENCES custodian_release_proposals (tenant_id, op_id, record_id)
);

-- The inserting login and the time are the database's word, not the caller's.
CREATE TRIGGER custodian_witness_refusals_stamp BEFORE INSERT ON custodian_witness_refusals
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER custodian_witness_refusals_append_only
    BEFORE UPDATE OR DELETE ON custodian_witness_refusals
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

REVOKE ALL ON custodian_witness_refusals FROM PUBLIC;
GRANT SELECT, INSERT ON custodian_witness_refusals TO opledger_witness;
-- The executor, the reconciler and operators see what the witness refused.
GRANT SELECT ON custodian_witness_refusals
    TO opledger_custodian, opledger_reconciler, opledger_operations;
