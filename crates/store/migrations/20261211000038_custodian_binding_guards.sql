-- Guards a review of the no_lookup binding (migration 37) asked for:
-- 1. A custodian settlement looks for another withdrawal's provider record naming the same
--    transaction (one transfer never settles two withdrawals: `Store::confirm_custodian`); the
--    index keeps that look-up to the custodian's own records.
-- 2. The witness reads when the last send of a withdrawal was made: a bound transaction that
--    says nothing was broadcast is read as such only once the provider's consistency window has
--    passed since (its list may not show every transaction before).
-- 3. The binding check reads other withdrawals' rows after taking the provider transaction's
--    lock: under a snapshot older than the lock (REPEATABLE READ, SERIALIZABLE) it would miss a
--    binding committed meanwhile, so only READ COMMITTED (every service's level) may bind.
CREATE INDEX custodian_records_tx_hash ON custodian_records (tx_hash) WHERE tx_hash IS NOT NULL;

CREATE OR REPLACE FUNCTION opledger_check_custodian_binding() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'custodian binding: only under READ COMMITTED'
            USING ERRCODE = 'check_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM custodian_requests q
                   JOIN withdrawal_ops o USING (tenant_id, op_id)
                   WHERE q.tenant_id = NEW.tenant_id AND q.op_id = NEW.op_id
                     AND q.profile = 'no_lookup' AND o.executor = 'custodian'
                     AND o.state IN ('BROADCAST', 'UNKNOWN')) THEN
        RAISE EXCEPTION 'custodian binding: not a no_lookup withdrawal BROADCAST or UNKNOWN'
            USING ERRCODE = 'check_violation';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('custodian_binding:' || NEW.provider_id, 0));
    IF EXISTS (SELECT 1 FROM custodian_bindings b
               WHERE b.provider_id = NEW.provider_id
                 AND (b.tenant_id, b.op_id) <> (NEW.tenant_id, NEW.op_id)) THEN
        RAISE EXCEPTION 'custodian binding: the provider transaction is bound to another withdrawal'
            USING ERRCODE = 'unique_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM custodian_answers a
               WHERE a.provider_id = NEW.provider_id
                 AND (a.tenant_id, a.op_id) <> (NEW.tenant_id, NEW.op_id))
       OR EXISTS (SELECT 1 FROM custodian_records r
                  WHERE r.provider_id = NEW.provider_id
                    AND (r.tenant_id, r.op_id) <> (NEW.tenant_id, NEW.op_id)) THEN
        RAISE EXCEPTION 'custodian binding: the provider transaction is another withdrawal''s'
            USING ERRCODE = 'unique_violation';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION opledger_check_custodian_binding() FROM PUBLIC;
GRANT SELECT ON custodian_sends TO opledger_witness;
