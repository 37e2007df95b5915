-- Releases re-checked like settlements (issue 25, finding 6).
--
-- A release of a signed withdrawal rests on a proof: our own cancel (or a reverted attempt of
-- ours) included at final depth, named by a proposal and an attestation (migration 28). A
-- reorganization deeper than the confirmations but inside the watcher's window can drop that
-- block; the original transfer may then be mined after its funds went back to `available`:
-- paid twice. From here on the chain watcher re-checks, through the quorum of its evidence
-- endpoints, the blocks named by the proofs of applied releases, as it does the blocks of
-- settlements; when the quorum agrees such a block is no longer canonical it calls
-- `opledger_reopen_release`, which in one transaction:
--   * marks the proof reorganized (`release_reorgs`): a marked proof never releases again
--     (`opledger_release_witnessed` leaves it out); a new release needs a new proposal and a new
--     attestation naming new evidence;
--   * if no other witnessed proof of the operation stands, moves the operation
--     VERIFIED_NOT_SENT -> UNKNOWN as the chain watcher (a row of the transition table, checked
--     here as the trigger would), re-opens the hold (RELEASED -> OPEN) and moves its amount from
--     `available` back to `held` (a REOPEN entry, two postings), and records an escalation
--     (reason RELEASE_REORGANIZED) for the owner the watcher names. The reconciler then decides
--     again from evidence, as for any UNKNOWN: the transfer mined at final depth settles the
--     hold; the cancel mined again at final depth is proposed anew and witnessed anew.
--
-- `available` may be short: the tenant may have spent the released funds (a new withdrawal held
-- them, and it may have been paid). The funds are never left available while the transfer can
-- still be mined: the whole amount is held again and `available` goes negative by the
-- shortfall. A negative `available` is a debt of the account to the platform, visible in its
-- balance: `opledger_place_hold` needs `available >= amount`, so the account places no new hold
-- until it is funded again. Only this function lowers `available` below zero (the CHECK that
-- kept it non-negative becomes a trigger that allows a decrease below zero only while this
-- function runs); every other function keeps refusing it.
--
-- Only the broadcaster's role (the watcher runs in the broadcaster) may call it. What that login
-- can do with it: re-hold funds a release made available (a freeze of those funds until the
-- reconciler and the witness decide again from the chain), never release, never credit. It
-- refuses unless the operation is VERIFIED_NOT_SENT with its hold RELEASED and the proof is an
-- attested, unmarked proposal of one of the operation's attempts; calling it again for a marked
-- proof changes nothing (two watcher instances, a retry after a lost answer).

CREATE TABLE release_reorgs (
    tenant_id    uuid        NOT NULL,
    op_id        uuid        NOT NULL,
    tx_hash      text        NOT NULL,
    block_number bigint      NOT NULL,
    block_hash   text        NOT NULL,
    -- The watcher instance that found the block gone; never personal data.
    watcher_id   text        NOT NULL CHECK (length(watcher_id) BETWEEN 1 AND 128),
    login        text        NOT NULL DEFAULT session_user,
    reorged_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, tx_hash, block_number, block_hash),
    FOREIGN KEY (tenant_id, op_id, tx_hash, block_number, block_hash)
        REFERENCES release_attestations (tenant_id, op_id, tx_hash, block_number, block_hash)
);
CREATE TRIGGER release_reorgs_append_only BEFORE UPDATE OR DELETE ON release_reorgs
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
REVOKE ALL ON release_reorgs FROM PUBLIC;
-- Written only by opledger_reopen_release; read by whoever decides or watches.
GRANT SELECT ON release_reorgs TO opledger_broadcaster, opledger_reconciler, opledger_witness;
-- The watcher reads the proofs of applied releases to re-check their blocks.
GRANT SELECT ON release_attestations TO opledger_broadcaster;
-- The watcher's window scan.
CREATE INDEX release_attestations_block ON release_attestations (block_number);

-- The transition, mirrored from crates/domain/src/state/mod.rs (tests/store/roles.rs compares).
INSERT INTO opledger_transition_rules (from_state, to_state, actor, hold_effect)
VALUES ('VERIFIED_NOT_SENT', 'UNKNOWN', 'chain_watcher', 'REOPEN');

-- ...but a service never makes it by a plain update, which would leave the funds available with
-- the operation UNKNOWN: an operation leaves VERIFIED_NOT_SENT only in a transaction that also
-- re-opened its hold (checked at commit), which only opledger_reopen_release does. (A check of
-- the role inside the trigger cannot tell the function from its caller: the function's owner
-- may be a superuser, a member of every role.)
CREATE FUNCTION opledger_check_reopened_with_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF opledger_is_service() AND NOT EXISTS (
           SELECT 1 FROM public.ledger_holds h
           WHERE h.tenant_id = NEW.tenant_id AND h.op_id = NEW.op_id AND h.status = 'OPEN') THEN
        RAISE EXCEPTION 'opledger: a release is reopened only with its hold, by opledger_reopen_release'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER withdrawal_ops_reopened_with_hold AFTER UPDATE OF state ON withdrawal_ops
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.state = 'VERIFIED_NOT_SENT' AND NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION opledger_check_reopened_with_hold();

-- A hold resolves at most once per proof: OPEN -> SETTLED | RELEASED; a reorganization may
-- reopen SETTLED (migration 2) and now RELEASED (only opledger_reopen_release does: no service
-- role may update ledger_holds).
CREATE OR REPLACE FUNCTION opledger_guard_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.op_id IS DISTINCT FROM OLD.op_id
       OR NEW.account IS DISTINCT FROM OLD.account OR NEW.asset IS DISTINCT FROM OLD.asset
       OR NEW.amount IS DISTINCT FROM OLD.amount THEN
        RAISE EXCEPTION 'opledger: a hold''s account and amount are immutable' USING ERRCODE = 'raise_exception';
    END IF;
    IF NOT ((OLD.status = 'OPEN' AND NEW.status IN ('SETTLED', 'RELEASED'))
            OR (OLD.status IN ('SETTLED', 'RELEASED') AND NEW.status = 'OPEN')) THEN
        RAISE EXCEPTION 'opledger: hold % -> % is not allowed', OLD.status, NEW.status
            USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END
$$;

-- `available` below zero only while opledger_reopen_release runs (see above).
ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_available_check;
CREATE FUNCTION opledger_guard_available() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.available < 0
       AND (TG_OP = 'INSERT' OR NEW.available < OLD.available)
       AND pg_catalog.current_setting('opledger.reholding', true) IS DISTINCT FROM 'on' THEN
        RAISE EXCEPTION 'opledger: available may not go below zero'
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER ledger_accounts_available_guard BEFORE INSERT OR UPDATE OF available
    ON ledger_accounts FOR EACH ROW EXECUTE FUNCTION opledger_guard_available();

-- Migration 28's rule, with marked proofs left out.
CREATE OR REPLACE FUNCTION opledger_release_witnessed(p_tenant uuid, p_op uuid) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT NOT EXISTS (SELECT 1 FROM public.tx_attempts a
                       WHERE a.tenant_id = p_tenant AND a.op_id = p_op)
        OR EXISTS (SELECT 1 FROM public.release_proposals p
                   JOIN public.release_attestations t
                     USING (tenant_id, op_id, tx_hash, block_number, block_hash)
                   JOIN public.tx_attempts a
                     ON a.tenant_id = p.tenant_id AND a.op_id = p.op_id AND a.tx_hash = p.tx_hash
                   WHERE p.tenant_id = p_tenant AND p.op_id = p_op
                     AND NOT EXISTS (
                       SELECT 1 FROM public.release_reorgs r
                       WHERE (r.tenant_id, r.op_id, r.tx_hash, r.block_number, r.block_hash)
                           = (p.tenant_id, p.op_id, p.tx_hash, p.block_number, p.block_hash)))
$$;

-- Reopens the release of `p_op` whose proof names this attempt and block. Answers 'REOPENED'
-- (state, hold, ledger and escalation moved), 'PROOF_MARKED' (the proof is marked, but another
-- witnessed proof of the operation stands, so the release stands on it) or 'ALREADY' (the proof
-- was marked before: nothing changed). Raises (nothing changed) when the operation is not
-- VERIFIED_NOT_SENT with its hold RELEASED, or the proof is no attested proposal of one of its
-- attempts.
CREATE FUNCTION opledger_reopen_release(p_tenant uuid, p_op uuid, p_tx_hash text,
                                        p_block_number bigint, p_block_hash text,
                                        p_watcher_id text, p_owner text)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    op_state text;
    h record;
    reopened_entry bigint;
BEGIN
    -- The operation's row first, as every move locks it: a concurrent reopen waits here.
    SELECT o.state INTO op_state FROM withdrawal_ops o
     WHERE o.tenant_id = p_tenant AND o.op_id = p_op FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'opledger: no such operation' USING ERRCODE = 'no_data_found';
    END IF;
    IF EXISTS (SELECT 1 FROM release_reorgs r
               WHERE r.tenant_id = p_tenant AND r.op_id = p_op AND r.tx_hash = p_tx_hash
                 AND r.block_number = p_block_number AND r.block_hash = p_block_hash) THEN
        RETURN 'ALREADY';
    END IF;
    SELECT * INTO h FROM ledger_holds lh
     WHERE lh.tenant_id = p_tenant AND lh.op_id = p_op FOR UPDATE;
    IF op_state IS DISTINCT FROM 'VERIFIED_NOT_SENT' OR h.status IS DISTINCT FROM 'RELEASED' THEN
        RAISE EXCEPTION 'opledger: no applied release to reopen (state %)', op_state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM release_attestations t
                   JOIN tx_attempts a
                     ON a.tenant_id = t.tenant_id AND a.op_id = t.op_id AND a.tx_hash = t.tx_hash
                   WHERE t.tenant_id = p_tenant AND t.op_id = p_op AND t.tx_hash = p_tx_hash
                     AND t.block_number = p_block_number AND t.block_hash = p_block_hash) THEN
        RAISE EXCEPTION 'opledger: the proof is no witnessed release of this operation'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    INSERT INTO release_reorgs (tenant_id, op_id, tx_hash, block_number, block_hash, watcher_id)
    VALUES (p_tenant, p_op, p_tx_hash, p_block_number, p_block_hash, p_watcher_id);
    IF opledger_release_witnessed(p_tenant, p_op) THEN
        RETURN 'PROOF_MARKED';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM opledger_transition_rules r
                   WHERE r.from_state = 'VERIFIED_NOT_SENT' AND r.to_state = 'UNKNOWN'
                     AND r.actor = 'chain_watcher' AND r.hold_effect = 'REOPEN') THEN
        RAISE EXCEPTION 'opledger: the transition table has no reopening of a release'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- The move (the log trigger writes its transition row from these columns).
    UPDATE withdrawal_ops SET state = 'UNKNOWN', version = version + 1, updated_at = now(),
        last_actor = 'chain_watcher', last_actor_id = p_watcher_id,
        last_reason = 'the release''s proof is no longer canonical (reorganization)',
        lease_owner = NULL, lease_expires_at = NULL
     WHERE tenant_id = p_tenant AND op_id = p_op AND state = 'VERIFIED_NOT_SENT';
    -- The hold again, its whole amount, whatever `available` holds.
    UPDATE ledger_holds SET status = 'OPEN', resolved_at = NULL
     WHERE tenant_id = p_tenant AND op_id = p_op AND status = 'RELEASED';
    PERFORM pg_catalog.set_config('opledger.reholding', 'on', true);
    UPDATE ledger_accounts a SET available = a.available - h.amount, held = a.held + h.amount,
        version = a.version + 1
     WHERE a.tenant_id = p_tenant AND a.account = h.account AND a.asset = h.asset;
    PERFORM pg_catalog.set_config('opledger.reholding', '', true);
    INSERT INTO ledger_entries (tenant_id, kind, op_id) VALUES (p_tenant, 'REOPEN', p_op)
    RETURNING entry_id INTO reopened_entry;
    INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount)
    VALUES (reopened_entry, 1, p_tenant, h.account, h.asset, 'available', -h.amount),
           (reopened_entry, 2, p_tenant, h.account, h.asset, 'held', h.amount);
    INSERT INTO escalations (tenant_id, op_id, owner, reason_code)
    VALUES (p_tenant, p_op, p_owner, 'RELEASE_REORGANIZED');
    RETURN 'REOPENED';
END
$$;
REVOKE ALL ON FUNCTION opledger_reopen_release(uuid, uuid, text, bigint, text, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_reopen_release(uuid, uuid, text, bigint, text, text, text)
    TO opledger_broadcaster;
