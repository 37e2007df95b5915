-- Signed approvals (crates/domain/testdata/SIGNED_STATEMENTS.md).
--
-- An approval row is now a claim carrying its evidence: the approval statement's fields and the
-- approver's Ed25519 signature over them. The signer counts a row only when that signature
-- verifies against the tenant's trust statement, itself signed by an administrator key pinned in
-- the signer's own configuration. Rows written before this migration carry no signature and never
-- count for the signer.
ALTER TABLE approvals
    ADD COLUMN approver_key_id text CHECK (approver_key_id ~ '^[0-9a-f]{32}$'),
    ADD COLUMN decision        text NOT NULL DEFAULT 'APPROVE' CHECK (decision IN ('APPROVE', 'REJECT')),
    ADD COLUMN policy_version  bigint CHECK (policy_version >= 1),
    ADD COLUMN signature       bytea CHECK (octet_length(signature) = 64);
-- One decision per approver key and operation, whichever API key submitted it.
CREATE UNIQUE INDEX approvals_one_per_key ON approvals (tenant_id, op_id, approver_key_id)
    WHERE approver_key_id IS NOT NULL;

-- The tenant's trust statements (approver registry and approval policy), every version kept.
-- Written by the owner role only (`opledger-admin trust publish`); the bytes are what the
-- administrator signed, so nothing here needs to be trusted: the signer verifies them.
CREATE TABLE trust_statements (
    tenant_id    uuid        NOT NULL REFERENCES tenants,
    version      bigint      NOT NULL CHECK (version >= 1),
    statement    bytea       NOT NULL,
    signature    bytea       NOT NULL CHECK (octet_length(signature) = 64),
    published_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, version)
);
CREATE TRIGGER trust_statements_append_only BEFORE UPDATE OR DELETE ON trust_statements
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- The newest trust statement version the signer accepted per tenant, so a restarted signer still
-- refuses an older one (rollback). Only the signer's role reads or writes it.
CREATE TABLE signer_trust_versions (
    tenant_id uuid   PRIMARY KEY,
    version   bigint NOT NULL CHECK (version >= 1)
);

-- The policy now lives in the signed trust statement: the unsigned rules go.
DROP TABLE approval_rules;

GRANT SELECT ON trust_statements TO opledger_app, opledger_signer;
GRANT SELECT (approver_key_id, decision, policy_version, signature, created_at) ON approvals
    TO opledger_signer;
GRANT SELECT, INSERT, UPDATE ON signer_trust_versions TO opledger_signer;
