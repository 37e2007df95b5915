-- Signed attempts: every transaction the signer produced, persisted before anyone may broadcast.
-- Only these bytes are ever broadcast. A replacement (fee bump, cancel) reuses its original's nonce.
CREATE TABLE tx_attempts (
    tenant_id                uuid          NOT NULL,
    op_id                    uuid          NOT NULL,
    attempt                  integer       NOT NULL CHECK (attempt >= 1),
    kind                     text          NOT NULL CHECK (kind IN ('ORIGINAL', 'FEE_BUMP', 'CANCEL')),
    network                  text          NOT NULL,
    chain_id                 bigint        NOT NULL,
    sender                   text          NOT NULL,
    nonce                    bigint        NOT NULL CHECK (nonce >= 0),
    tx_hash                  text          NOT NULL UNIQUE,
    raw_tx                   bytea         NOT NULL,
    gas_limit                bigint        NOT NULL CHECK (gas_limit > 0),
    max_fee_per_gas          numeric(78,0) NOT NULL,
    max_priority_fee_per_gas numeric(78,0) NOT NULL,
    created_at               timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, attempt),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id),
    CHECK ((kind = 'ORIGINAL') = (attempt = 1))
);
-- Each nonce of a sender belongs to one operation: no two originals share it.
CREATE UNIQUE INDEX tx_attempts_nonce_owner ON tx_attempts (network, sender, nonce)
    WHERE kind = 'ORIGINAL';
CREATE TRIGGER tx_attempts_immutable BEFORE UPDATE OR DELETE ON tx_attempts
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- The next nonce per (network, sender), advanced in the same transaction that persists the
-- attempt using it: the counter can never run ahead of what was persisted.
CREATE TABLE signer_nonces (
    network    text   NOT NULL,
    sender     text   NOT NULL,
    next_nonce bigint NOT NULL CHECK (next_nonce >= 0),
    PRIMARY KEY (network, sender)
);

-- The signer's role reads what it must verify and writes only signing columns and attempts.
GRANT SELECT (tenant_id, op_id, payload_hash, state, risk_flags, version, lease_owner, lease_expires_at,
              signed_tx_ref, created_at, updated_at) ON withdrawal_ops TO opledger_signer;
GRANT UPDATE (state, lease_owner, lease_expires_at, signed_tx_ref, version, updated_at)
    ON withdrawal_ops TO opledger_signer;
GRANT SELECT ON withdrawal_payloads TO opledger_signer;
GRANT SELECT (tenant_id, op_id, payload_hash) ON approvals TO opledger_signer;
GRANT INSERT ON operation_transitions, security_events TO opledger_signer;
GRANT SELECT, INSERT ON tx_attempts TO opledger_signer;
GRANT SELECT, INSERT ON signer_nonces TO opledger_signer;
GRANT UPDATE (next_nonce) ON signer_nonces TO opledger_signer;

-- The other services may read attempts (the broadcaster sends their bytes) but never write them.
GRANT SELECT ON tx_attempts TO opledger_app;

-- Defense in depth: whatever the signer's code does, its role can only make the signer's moves.
CREATE FUNCTION opledger_guard_signer_moves() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state
       AND pg_has_role(current_user, 'opledger_signer', 'MEMBER')
       AND NOT pg_has_role(current_user, 'opledger_app', 'MEMBER')
       AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       AND (OLD.state, NEW.state) NOT IN (('APPROVED', 'SIGNING'), ('SIGNING', 'SIGNED'),
                                          ('SIGNING', 'APPROVED')) THEN
        RAISE EXCEPTION 'opledger: the signer role may not move an operation from % to %',
            OLD.state, NEW.state USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER withdrawal_ops_signer_moves BEFORE UPDATE ON withdrawal_ops
    FOR EACH ROW EXECUTE FUNCTION opledger_guard_signer_moves();
