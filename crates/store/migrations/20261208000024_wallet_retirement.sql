-- A rotated-out wallet retires by itself: the signer marks a RETIRING wallet RETIRED, and drops
-- its key, once no operation whose original it signed is still in flight (SIGNED, BROADCAST,
-- UNKNOWN or FAILED_TERMINAL: not yet CONFIRMED at final depth, nor ended without a payout).
-- The row is kept as the record of which account once signed for the tenant.
ALTER TABLE signer_wallets DROP CONSTRAINT signer_wallets_status_check;
ALTER TABLE signer_wallets ADD CONSTRAINT signer_wallets_status_check
    CHECK (status IN ('ACTIVE', 'RETIRING', 'RETIRED'));
