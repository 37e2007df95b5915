-- Wallet rotation, to its end (issue 13).
--
-- 1. A rotated-out wallet retires by itself: the signer marks a RETIRING wallet RETIRED, and
--    drops its key, once none of the operations whose original it signed is still in flight
--    (SIGNED, BROADCAST, UNKNOWN, FAILED_TERMINAL, or CONFIRMED within the signer's grace, during
--    which the chain watcher may still reopen it after a reorganization). The row is kept as the
--    record of which account once signed for the tenant.
ALTER TABLE signer_wallets DROP CONSTRAINT signer_wallets_status_check;
ALTER TABLE signer_wallets ADD CONSTRAINT signer_wallets_status_check
    CHECK (status IN ('ACTIVE', 'RETIRING', 'RETIRED'));

-- 2. An original attempt comes only from its tenant's ACTIVE wallet on its network, whichever
--    signer writes it: a signer still running an old configuration (a rolling restart) cannot
--    start new withdrawals from a wallet another signer rotated out, and so cannot add in-flight
--    work to a wallet that may already be retired. The row is share-locked until the attempt
--    commits, so a rotation (ACTIVE -> RETIRING) waits for an original being written, and
--    retirement, which comes after it, sees that original. Signing is serialized per sender by
--    its nonce row, so one transaction at a time holds this lock.
CREATE FUNCTION opledger_check_original_sender() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM public.signer_wallets w
     WHERE w.tenant_id = NEW.tenant_id AND w.network = NEW.network AND w.sender = NEW.sender
       AND w.status = 'ACTIVE'
       FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'an original attempt must come from its tenant''s ACTIVE wallet on its network'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'signer_wallets_active_original';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER tx_attempts_active_original BEFORE INSERT ON tx_attempts
    FOR EACH ROW WHEN (NEW.kind = 'ORIGINAL') EXECUTE FUNCTION opledger_check_original_sender();
