-- A webhook about a self-signed transfer is a hint, never a settlement (issue 13): the inbox
-- records that the watcher should look at the operation now; the watcher settles only on chain
-- evidence at final depth, agreed by its quorum, and records the inclusion so the reorganization
-- check covers it. The webhook processor loses its settling moves, so its database login cannot
-- settle a withdrawal either. (A custodian's record, when a custodian executes a transfer, is the
-- custodian issue's.)
CREATE TABLE watch_hints (
    tenant_id uuid        NOT NULL,
    op_id     uuid        NOT NULL,
    hinted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);
GRANT SELECT, INSERT, UPDATE ON watch_hints TO opledger_inbox;
GRANT SELECT, DELETE ON watch_hints TO opledger_broadcaster;

ALTER TABLE opledger_transition_rules DISABLE TRIGGER opledger_transition_rules_immutable;
DELETE FROM opledger_transition_rules
 WHERE actor = 'webhook_processor'
   AND (from_state, to_state) IN (('SIGNED', 'BROADCAST'), ('BROADCAST', 'CONFIRMED'));
ALTER TABLE opledger_transition_rules ENABLE TRIGGER opledger_transition_rules_immutable;
