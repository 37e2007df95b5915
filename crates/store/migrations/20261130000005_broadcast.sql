-- The broadcaster finds work by state, oldest change first.
CREATE INDEX withdrawal_ops_due ON withdrawal_ops (state, updated_at)
    WHERE state IN ('APPROVED', 'SIGNED');
