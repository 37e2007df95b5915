-- Approval policy: per tenant and asset, withdrawals of at least min_amount need
-- required_approvals distinct approvers. Without rows one approver is required.
CREATE TABLE approval_rules (
    tenant_id          uuid          NOT NULL REFERENCES tenants,
    asset              text          NOT NULL,
    min_amount         numeric(78,0) NOT NULL CHECK (min_amount >= 0),
    required_approvals integer       NOT NULL CHECK (required_approvals BETWEEN 1 AND 10),
    created_at         timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, asset, min_amount)
);

-- One immutable record per approver and operation: who approved which payload hash, when, and
-- which risk flags they acknowledged.
CREATE TABLE approvals (
    tenant_id          uuid        NOT NULL,
    op_id              uuid        NOT NULL,
    approver_id        text        NOT NULL,
    payload_hash       bytea       NOT NULL CHECK (octet_length(payload_hash) = 32),
    acknowledged_flags text[]      NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, approver_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);
CREATE TRIGGER approvals_immutable BEFORE UPDATE OR DELETE ON approvals
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- Security-relevant refusals (hash mismatches and the like), append-only, for monitoring.
-- `detail` is a fixed description, never a payload value.
CREATE TABLE security_events (
    event_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    op_id      uuid,
    kind       text        NOT NULL,
    actor      text        NOT NULL,
    actor_id   text        NOT NULL,
    detail     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX security_events_by_op ON security_events (tenant_id, op_id);
CREATE TRIGGER security_events_append_only BEFORE UPDATE OR DELETE ON security_events
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

GRANT SELECT, INSERT ON approvals, security_events TO opledger_app;
-- Replacing a policy deletes the asset's rules and inserts the new ones in one transaction.
GRANT SELECT, INSERT, DELETE ON approval_rules TO opledger_app;
