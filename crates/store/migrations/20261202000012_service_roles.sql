-- One least-privilege role per service, enforced by the database.
--
-- Until now every service but the signer shared `opledger_app`, whose grants allowed inserting an
-- operation in any state, writing approvals, and updating balances directly. From here on:
--   * each service has its own NOLOGIN group role (deployments create login users in it:
--     deploy/postgres/roles.sql), granted only what its code does;
--   * an operation is inserted only in REQUESTED, and only together with its OPEN hold in the same
--     transaction (a deferred constraint trigger checks at commit);
--   * every state change names its actor (`last_actor`) and is refused unless the move is in the
--     transition table for that actor and the database role may act as that actor;
--   * balances, holds, journal entries and credits change only through the SECURITY DEFINER
--     ledger functions below, which keep the double-entry invariants and check the operation's
--     state; no service role may UPDATE `available` or `held` or write the journal directly;
--   * approvals are written by the approvals role only; the inbox credits only through
--     `opledger_credit` (its deposit path) and never holds or releases outside a transition.
-- The owner role (migrations, `opledger-admin`) is not restricted by these checks.
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['opledger_operations', 'opledger_approvals', 'opledger_broadcaster',
                             'opledger_reconciler', 'opledger_inbox'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$$;

-- The shared role keeps nothing.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM opledger_app;

-- The transition table of crates/domain/src/state/mod.rs (TRANSITIONS), checked by the database
-- for service roles; tests/store/roles.rs fails when the two differ.
CREATE TABLE opledger_transition_rules (
    from_state  text NOT NULL,
    to_state    text NOT NULL,
    actor       text NOT NULL,
    hold_effect text NOT NULL CHECK (hold_effect IN ('KEEP', 'RELEASE', 'SETTLE', 'REOPEN')),
    PRIMARY KEY (from_state, to_state, actor)
);
INSERT INTO opledger_transition_rules (from_state, to_state, actor, hold_effect) VALUES
    ('REQUESTED', 'APPROVED', 'approvals', 'KEEP'),
    ('REQUESTED', 'REJECTED', 'approvals', 'RELEASE'),
    ('REQUESTED', 'REJECTED', 'risk', 'RELEASE'),
    ('REQUESTED', 'REJECTED', 'operator', 'RELEASE'),
    ('REQUESTED', 'REJECTED', 'webhook_processor', 'RELEASE'),
    ('APPROVED', 'SIGNING', 'signer', 'KEEP'),
    ('SIGNING', 'SIGNED', 'signer', 'KEEP'),
    ('SIGNING', 'APPROVED', 'signer', 'KEEP'),
    ('SIGNED', 'BROADCAST', 'broadcaster', 'KEEP'),
    ('SIGNED', 'BROADCAST', 'webhook_processor', 'KEEP'),
    ('SIGNED', 'UNKNOWN', 'broadcaster', 'KEEP'),
    ('BROADCAST', 'CONFIRMED', 'chain_watcher', 'SETTLE'),
    ('BROADCAST', 'CONFIRMED', 'reconciler', 'SETTLE'),
    ('BROADCAST', 'CONFIRMED', 'webhook_processor', 'SETTLE'),
    ('BROADCAST', 'UNKNOWN', 'broadcaster', 'KEEP'),
    ('BROADCAST', 'UNKNOWN', 'chain_watcher', 'KEEP'),
    ('BROADCAST', 'UNKNOWN', 'reconciler', 'KEEP'),
    ('BROADCAST', 'FAILED_TERMINAL', 'chain_watcher', 'KEEP'),
    ('BROADCAST', 'FAILED_TERMINAL', 'reconciler', 'KEEP'),
    ('UNKNOWN', 'BROADCAST', 'reconciler', 'KEEP'),
    ('UNKNOWN', 'BROADCAST', 'operator', 'KEEP'),
    ('UNKNOWN', 'CONFIRMED', 'reconciler', 'SETTLE'),
    ('UNKNOWN', 'CONFIRMED', 'operator', 'SETTLE'),
    ('UNKNOWN', 'VERIFIED_NOT_SENT', 'reconciler', 'RELEASE'),
    ('UNKNOWN', 'VERIFIED_NOT_SENT', 'operator', 'RELEASE'),
    ('UNKNOWN', 'FAILED_TERMINAL', 'reconciler', 'KEEP'),
    ('CONFIRMED', 'BROADCAST', 'chain_watcher', 'REOPEN'),
    ('FAILED_TERMINAL', 'BROADCAST', 'operator', 'KEEP'),
    ('FAILED_TERMINAL', 'CONFIRMED', 'operator', 'SETTLE'),
    ('FAILED_TERMINAL', 'VERIFIED_NOT_SENT', 'operator', 'RELEASE');
CREATE TRIGGER opledger_transition_rules_immutable BEFORE UPDATE OR DELETE ON opledger_transition_rules
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- Which actors each service role may act as (the operator's moves are made by the reconciler's
-- operator API; the approvals service rejects as `approvals`).
CREATE TABLE opledger_role_actors (
    role_name text NOT NULL,
    actor     text PRIMARY KEY
);
INSERT INTO opledger_role_actors (role_name, actor) VALUES
    ('opledger_approvals', 'approvals'),
    ('opledger_signer', 'signer'),
    ('opledger_broadcaster', 'broadcaster'),
    ('opledger_broadcaster', 'chain_watcher'),
    ('opledger_reconciler', 'reconciler'),
    ('opledger_reconciler', 'operator'),
    ('opledger_inbox', 'webhook_processor');
CREATE TRIGGER opledger_role_actors_immutable BEFORE UPDATE OR DELETE ON opledger_role_actors
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- Every service role (the signer's and the former shared one included) is a member of
-- opledger_services, so one membership check tells a service from the owner.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_services') THEN
        CREATE ROLE opledger_services NOLOGIN;
    END IF;
END
$$;
GRANT opledger_services TO opledger_operations, opledger_approvals, opledger_broadcaster,
    opledger_reconciler, opledger_inbox, opledger_signer, opledger_app;

-- True when the current role is one of the services' (the owner and superusers are not).
-- PL/pgSQL, not SQL: a non-inlined SQL function is planned again at every call, and this runs in
-- the triggers of every create and every state change.
CREATE FUNCTION opledger_is_service() RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN current_setting('is_superuser') = 'off'
       AND pg_has_role(current_user, 'opledger_services', 'MEMBER');
END
$$;

-- The actor of the latest state change, written by the transition function.
ALTER TABLE withdrawal_ops ADD COLUMN last_actor text;

-- Trigger functions run with the caller's search_path, in which the session's temporary schema
-- comes first for relations: every table they read is named with its schema, so a temporary table
-- of the same name cannot stand in for it (tests/redteam plays that). Functions and operators are
-- never looked up in pg_temp.
--
-- Every state change by a service role must be a move of the transition table, by an actor that
-- role may act as. This replaces the signer-only trigger of the signing migration.
DROP TRIGGER withdrawal_ops_signer_moves ON withdrawal_ops;
DROP FUNCTION opledger_guard_signer_moves();
CREATE FUNCTION opledger_guard_moves() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF opledger_is_service()
       AND NOT (EXISTS (SELECT 1 FROM public.opledger_transition_rules r
                        WHERE r.from_state = OLD.state AND r.to_state = NEW.state
                          AND r.actor = NEW.last_actor)
                AND coalesce(pg_has_role(current_user,
                                         (SELECT a.role_name FROM public.opledger_role_actors a
                                          WHERE a.actor = NEW.last_actor), 'MEMBER'),
                             false)) THEN
        RAISE EXCEPTION 'opledger: this role may not move an operation from % to % as %',
            OLD.state, NEW.state, coalesce(NEW.last_actor, 'nobody')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER withdrawal_ops_guard_moves BEFORE UPDATE ON withdrawal_ops
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION opledger_guard_moves();

-- A service inserts an operation only in REQUESTED...
CREATE FUNCTION opledger_guard_new_operation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF opledger_is_service() AND NEW.state IS DISTINCT FROM 'REQUESTED' THEN
        RAISE EXCEPTION 'opledger: an operation is created only in REQUESTED'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER withdrawal_ops_created_requested BEFORE INSERT ON withdrawal_ops
    FOR EACH ROW EXECUTE FUNCTION opledger_guard_new_operation();

-- ...and only together with its OPEN hold of the payload's account, asset and amount, in the same
-- transaction (checked at commit).
CREATE FUNCTION opledger_check_new_operation_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF opledger_is_service() AND NOT EXISTS (
           SELECT 1 FROM public.ledger_holds h
           JOIN public.withdrawal_payloads p USING (tenant_id, op_id)
           WHERE h.tenant_id = NEW.tenant_id AND h.op_id = NEW.op_id
             AND h.account = p.source_account AND h.asset = p.asset AND h.amount = p.amount) THEN
        RAISE EXCEPTION 'opledger: an operation must be created with its hold'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER withdrawal_ops_created_with_hold AFTER INSERT ON withdrawal_ops
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION opledger_check_new_operation_hold();

-- Ledger functions: the only way a service changes balances, holds and the journal.

-- Moves the amount of a REQUESTED operation's payload from available to held and records the
-- hold, its entry and postings. False (nothing changed) when available does not cover it.
CREATE FUNCTION opledger_place_hold(p_tenant uuid, p_op uuid, p_account text, p_asset text,
                                    p_amount numeric)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE moved integer;
BEGIN
    -- One statement: the balance moves only for a REQUESTED operation whose payload is this
    -- account, asset and amount (nothing happens otherwise, and the caller's create fails).
    WITH op AS (
           SELECT 1 FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id)
           WHERE o.tenant_id = p_tenant AND o.op_id = p_op AND o.state = 'REQUESTED'
             AND p.source_account = p_account AND p.asset = p_asset AND p.amount = p_amount),
         acct AS (
           UPDATE ledger_accounts SET available = available - p_amount, held = held + p_amount,
             version = version + 1
           WHERE tenant_id = p_tenant AND account = p_account AND asset = p_asset
             AND available >= p_amount AND EXISTS (SELECT 1 FROM op)
           RETURNING tenant_id),
         hold AS (
           INSERT INTO ledger_holds (tenant_id, op_id, account, asset, amount, status)
           SELECT p_tenant, p_op, p_account, p_asset, p_amount, 'OPEN' FROM acct),
         entry AS (
           INSERT INTO ledger_entries (tenant_id, kind, op_id) SELECT p_tenant, 'HOLD', p_op FROM acct
           RETURNING entry_id)
    INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount)
    SELECT entry.entry_id, l.line, p_tenant, p_account, p_asset, l.bucket, l.amount FROM entry,
      (VALUES (1::smallint, 'available', -p_amount), (2::smallint, 'held', p_amount))
      AS l(line, bucket, amount);
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved = 2;
END
$$;

-- Resolves an operation's hold as its current state requires: RELEASE (REJECTED or
-- VERIFIED_NOT_SENT: held back to available), SETTLE (CONFIRMED: held leaves the platform) or
-- REOPEN (BROADCAST after a reorg: the settlement is held again). False when the hold is not in
-- the status the effect starts from.
CREATE FUNCTION opledger_resolve_hold(p_tenant uuid, p_op uuid, p_effect text)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE moved integer;
BEGIN
    -- One statement: the hold moves only when the operation's state calls for the effect
    -- (RELEASE: REJECTED or VERIFIED_NOT_SENT; SETTLE: CONFIRMED; REOPEN: BROADCAST); otherwise
    -- nothing changes and false is returned (the caller's transition fails).
    WITH e (from_status, to_status, held_sign, available_sign, first_bucket, second_bucket, states) AS (
           VALUES ('OPEN', 'RELEASED', -1::numeric, 1::numeric, 'held', 'available',
                   ARRAY['REJECTED', 'VERIFIED_NOT_SENT']),
                  ('OPEN', 'SETTLED', -1::numeric, 0::numeric, 'held', 'external', ARRAY['CONFIRMED']),
                  ('SETTLED', 'OPEN', 1::numeric, 0::numeric, 'external', 'held', ARRAY['BROADCAST'])),
         effect AS (
           SELECT e.* FROM e
           WHERE e.to_status = CASE p_effect WHEN 'RELEASE' THEN 'RELEASED'
                                             WHEN 'SETTLE' THEN 'SETTLED'
                                             WHEN 'REOPEN' THEN 'OPEN' END
             AND EXISTS (SELECT 1 FROM withdrawal_ops o WHERE o.tenant_id = p_tenant
                           AND o.op_id = p_op AND o.state = ANY (e.states))),
         h AS (
           UPDATE ledger_holds SET status = effect.to_status,
             resolved_at = CASE WHEN effect.to_status = 'OPEN' THEN NULL ELSE now() END
           FROM effect
           WHERE tenant_id = p_tenant AND op_id = p_op AND status = effect.from_status
           RETURNING account, asset, amount, effect.held_sign, effect.available_sign,
             effect.first_bucket, effect.second_bucket),
         acct AS (
           UPDATE ledger_accounts a SET held = a.held + h.held_sign * h.amount,
             available = a.available + h.available_sign * h.amount, version = a.version + 1
           FROM h WHERE a.tenant_id = p_tenant AND a.account = h.account AND a.asset = h.asset
           RETURNING h.account, h.asset, h.amount, h.first_bucket, h.second_bucket),
         entry AS (
           INSERT INTO ledger_entries (tenant_id, kind, op_id) SELECT p_tenant, p_effect, p_op FROM acct
           RETURNING entry_id)
    INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount)
    SELECT entry.entry_id, l.line, p_tenant, acct.account, acct.asset,
      CASE l.line WHEN 1 THEN acct.first_bucket ELSE acct.second_bucket END, l.sign * acct.amount
    FROM entry, acct, (VALUES (1::smallint, -1::numeric), (2::smallint, 1::numeric)) AS l(line, sign);
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved = 2;
END
$$;

-- Credits an account once per (tenant, key digest), creating the account when missing: one
-- entry, two postings, one credit row. NULL (nothing written) when the key already credited.
CREATE FUNCTION opledger_credit(p_tenant uuid, p_key bytea, p_account text, p_asset text,
                                p_amount numeric)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE new_entry bigint;
BEGIN
    IF p_amount IS NULL OR p_amount <= 0 THEN
        RAISE EXCEPTION 'opledger: a credit is positive' USING ERRCODE = 'check_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM ledger_credits WHERE tenant_id = p_tenant AND idempotency_key_hash = p_key) THEN
        RETURN NULL;
    END IF;
    BEGIN
        INSERT INTO ledger_accounts (tenant_id, account, asset, available)
        VALUES (p_tenant, p_account, p_asset, p_amount)
        ON CONFLICT (tenant_id, account, asset) DO UPDATE
          SET available = ledger_accounts.available + EXCLUDED.available,
              version = ledger_accounts.version + 1;
        INSERT INTO ledger_entries (tenant_id, kind) VALUES (p_tenant, 'CREDIT')
        RETURNING entry_id INTO new_entry;
        INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount)
        VALUES (new_entry, 1, p_tenant, p_account, p_asset, 'external', -p_amount),
               (new_entry, 2, p_tenant, p_account, p_asset, 'available', p_amount);
        INSERT INTO ledger_credits (tenant_id, idempotency_key_hash, account, asset, amount, entry_id)
        VALUES (p_tenant, p_key, p_account, p_asset, p_amount, new_entry);
    EXCEPTION WHEN unique_violation THEN
        -- A concurrent credit with the same key committed first: this one writes nothing.
        RETURN NULL;
    END;
    RETURN new_entry;
END
$$;

REVOKE ALL ON FUNCTION opledger_place_hold(uuid, uuid, text, text, numeric),
    opledger_resolve_hold(uuid, uuid, text),
    opledger_credit(uuid, bytea, text, text, numeric) FROM PUBLIC;

-- What every service reads.
GRANT SELECT ON tenants, api_keys, withdrawal_ops, withdrawal_payloads, operation_transitions,
    ledger_accounts, ledger_holds, ledger_entries, ledger_postings, ledger_credits, approvals,
    security_events, tx_attempts, inclusions, escalations, trust_statements, kyt_screenings,
    opledger_transition_rules, opledger_role_actors
    TO opledger_operations, opledger_approvals, opledger_broadcaster, opledger_reconciler,
       opledger_inbox;
GRANT SELECT ON opledger_transition_rules, opledger_role_actors TO opledger_signer;
-- Every service appends transition-log rows and security events.
GRANT INSERT ON operation_transitions, security_events
    TO opledger_operations, opledger_approvals, opledger_broadcaster, opledger_reconciler,
       opledger_inbox;
-- State changes (checked by opledger_guard_moves) by the services that move operations.
GRANT UPDATE (state, lease_owner, lease_expires_at, signed_tx_ref, version, updated_at, last_actor)
    ON withdrawal_ops TO opledger_approvals, opledger_broadcaster, opledger_reconciler,
       opledger_inbox;
GRANT UPDATE (last_actor) ON withdrawal_ops TO opledger_signer;
GRANT EXECUTE ON FUNCTION opledger_resolve_hold(uuid, uuid, text)
    TO opledger_approvals, opledger_broadcaster, opledger_reconciler, opledger_inbox;

-- operations: creates withdrawals with their holds; operators' credits.
GRANT INSERT ON withdrawal_ops, withdrawal_payloads TO opledger_operations;
GRANT EXECUTE ON FUNCTION opledger_place_hold(uuid, uuid, text, text, numeric),
    opledger_credit(uuid, bytea, text, text, numeric) TO opledger_operations;

-- approvals: the only writer of approval decisions.
GRANT INSERT ON approvals TO opledger_approvals;

-- broadcaster: inclusions seen by its watcher, reorgs.
GRANT INSERT ON inclusions TO opledger_broadcaster, opledger_reconciler;
GRANT UPDATE (reorged_at) ON inclusions TO opledger_broadcaster, opledger_reconciler;

-- reconciler: escalations with their owners.
GRANT INSERT ON escalations TO opledger_reconciler;

-- inbox: its own tables, KYT results, and credits through its deposit path.
GRANT SELECT ON webhook_endpoints, webhook_secrets TO opledger_inbox;
GRANT SELECT, INSERT ON inbox_events, inbox_quarantine TO opledger_inbox;
GRANT UPDATE (body_key_id, body_nonce, body_ciphertext, body_purged_at, resolved_at, resolved_by,
    resolution) ON inbox_events, inbox_quarantine TO opledger_inbox;
GRANT SELECT, INSERT, UPDATE ON inbox_work TO opledger_inbox;
GRANT SELECT, INSERT ON inbox_actions, webhook_rejections, kyt_screenings TO opledger_inbox;
GRANT EXECUTE ON FUNCTION opledger_credit(uuid, bytea, text, text, numeric) TO opledger_inbox;
