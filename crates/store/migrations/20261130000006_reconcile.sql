-- The reconciler finds UNKNOWN and stale BROADCAST operations.
CREATE INDEX withdrawal_ops_unresolved ON withdrawal_ops (state, updated_at)
    WHERE state IN ('UNKNOWN', 'BROADCAST');
