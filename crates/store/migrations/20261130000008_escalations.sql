-- Operations that automation could not resolve: who owns them now and why. The hold stays until
-- a person (or a verified reconciliation) resolves the operation.
CREATE TABLE escalations (
    escalation_id bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     uuid        NOT NULL,
    op_id         uuid        NOT NULL,
    owner         text        NOT NULL CHECK (owner ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    reason_code   text        NOT NULL CHECK (reason_code ~ '^[A-Z][A-Z0-9_]{0,62}$'),
    escalated_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);
CREATE INDEX escalations_by_op ON escalations (tenant_id, op_id);
CREATE TRIGGER escalations_append_only BEFORE UPDATE OR DELETE ON escalations
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
GRANT SELECT, INSERT ON escalations TO opledger_app;
