-- Evidence that cannot mislead (issue 13).

-- Every replacement comes from the original attempt's sender, at its nonce, on its network and
-- chain: a transaction signed by another account at that nonce could not replace the original,
-- and could be mined beside it (paid twice). The signer and the store check this too; the
-- database holds whatever code writes the row. Tables are named with their schema so that a
-- session's temporary table cannot stand in for them.
CREATE FUNCTION opledger_check_replacement() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    original record;
BEGIN
    IF NEW.attempt = 1 THEN
        RETURN NEW;
    END IF;
    SELECT a.sender, a.nonce, a.network, a.chain_id INTO original FROM public.tx_attempts a
     WHERE a.tenant_id = NEW.tenant_id AND a.op_id = NEW.op_id AND a.attempt = 1;
    IF NOT FOUND OR original.sender <> NEW.sender OR original.nonce <> NEW.nonce
       OR original.network <> NEW.network OR original.chain_id <> NEW.chain_id THEN
        RAISE EXCEPTION 'a replacement must come from the original attempt''s sender at its nonce'
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER tx_attempts_same_sender BEFORE INSERT ON tx_attempts
    FOR EACH ROW EXECUTE FUNCTION opledger_check_replacement();

-- The hot wallets the signer holds, as it registers them at start: ACTIVE signs new withdrawals
-- (one per tenant and network), RETIRING only replacements of its own in-flight nonces. The
-- operations service reads it to refuse, at create, a withdrawal no signer could execute.
CREATE TABLE signer_wallets (
    tenant_id  uuid        NOT NULL,
    network    text        NOT NULL,
    sender     text        NOT NULL,
    status     text        NOT NULL CHECK (status IN ('ACTIVE', 'RETIRING')),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, network, sender)
);
CREATE UNIQUE INDEX signer_wallets_one_active ON signer_wallets (tenant_id, network)
    WHERE status = 'ACTIVE';
GRANT SELECT, INSERT, UPDATE, DELETE ON signer_wallets TO opledger_signer;
GRANT SELECT ON signer_wallets
    TO opledger_operations, opledger_approvals, opledger_broadcaster, opledger_reconciler,
       opledger_inbox;

-- The watcher escalates what it sees at final depth (a reverted attempt, a moved nonce, an
-- attempt whose content contradicts its row) with an owner, like the reconciler.
GRANT INSERT ON escalations TO opledger_broadcaster;

-- A signer refusal that is evidence of tampering (the recomputed hash or the approvals do not
-- verify) or a configuration fault (no wallet or network for the withdrawal) ends the operation:
-- APPROVED -> FAILED_TERMINAL by the signer, with an escalation naming its owner, hold kept. It
-- is no longer retried and no longer sits at the head of the broadcaster's queue.
INSERT INTO opledger_transition_rules (from_state, to_state, actor, hold_effect) VALUES
    ('APPROVED', 'FAILED_TERMINAL', 'signer', 'KEEP');
GRANT INSERT ON escalations TO opledger_signer;
