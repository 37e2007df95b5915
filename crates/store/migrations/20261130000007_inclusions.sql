-- Where a confirmed transfer was included, so a reorganization that removes that block can be
-- noticed within the watch window. A reorged inclusion is marked, never deleted.
CREATE TABLE inclusions (
    inclusion_id bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    op_id        uuid        NOT NULL,
    tx_hash      text        NOT NULL,
    block_number bigint      NOT NULL,
    block_hash   text        NOT NULL,
    confirmed_at timestamptz NOT NULL DEFAULT now(),
    reorged_at   timestamptz,
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);
CREATE INDEX inclusions_live ON inclusions (block_number) WHERE reorged_at IS NULL;

GRANT SELECT, INSERT ON inclusions TO opledger_app;
GRANT UPDATE (reorged_at) ON inclusions TO opledger_app;
