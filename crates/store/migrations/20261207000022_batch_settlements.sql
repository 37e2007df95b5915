-- A watcher pass's settlements, one tenant at a time, with each balance row updated once.
--
-- `confirm_many` settled a pass's holds by calling `opledger_resolve_hold` once per operation in
-- one statement: every call updated the same source account row again (one row version each), so
-- the row stayed locked from the first settlement of the pass to its commit (that statement
-- averaged 57 ms a pass, waiting included, at 4000 withdrawals of one tenant: pg_stat_statements),
-- while every create of that account waits for that lock to place its hold.
-- `opledger_resolve_holds` resolves a tenant's holds, journal entries and postings in one
-- statement, then moves each account's balances by the sum of its holds, last: the account rows
-- are locked for one update each and the commit only. A hold moves only when its operation's state
-- calls for the effect and the hold is in the status the effect starts from; one entry with two
-- postings per hold moved. Answers the number of holds moved (the caller compares it with the
-- number asked for, and rolls back on a difference). `opledger_resolve_hold` becomes its one-hold
-- form, so the table of effects stands in one place.
CREATE FUNCTION opledger_resolve_holds(p_tenant uuid, p_ops uuid[], p_effects text[])
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    moved integer;
    accounts text[];
    assets text[];
    held_deltas numeric[];
    available_deltas numeric[];
BEGIN
    IF cardinality(p_ops) IS DISTINCT FROM cardinality(p_effects) THEN
        RAISE EXCEPTION 'opledger: % operations and % effects', cardinality(p_ops),
            cardinality(p_effects) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH e (effect, from_status, to_status, held_sign, available_sign, first_bucket, second_bucket,
            states) AS (
           VALUES ('RELEASE', 'OPEN', 'RELEASED', -1::numeric, 1::numeric, 'held', 'available',
                   ARRAY['REJECTED', 'VERIFIED_NOT_SENT']),
                  ('SETTLE', 'OPEN', 'SETTLED', -1::numeric, 0::numeric, 'held', 'external',
                   ARRAY['CONFIRMED']),
                  ('REOPEN', 'SETTLED', 'OPEN', 1::numeric, 0::numeric, 'external', 'held',
                   ARRAY['BROADCAST'])),
         wanted AS (
           SELECT w.op_id, e.* FROM unnest(p_ops, p_effects) AS w(op_id, effect)
           JOIN e USING (effect)
           WHERE EXISTS (SELECT 1 FROM withdrawal_ops o WHERE o.tenant_id = p_tenant
                           AND o.op_id = w.op_id AND o.state = ANY (e.states))),
         h AS (
           UPDATE ledger_holds lh SET status = wanted.to_status,
             resolved_at = CASE WHEN wanted.to_status = 'OPEN' THEN NULL ELSE now() END
           FROM wanted
           WHERE lh.tenant_id = p_tenant AND lh.op_id = wanted.op_id
             AND lh.status = wanted.from_status
           RETURNING lh.op_id, lh.account, lh.asset, lh.amount, wanted.effect, wanted.held_sign,
             wanted.available_sign, wanted.first_bucket, wanted.second_bucket),
         entry AS (
           INSERT INTO ledger_entries (tenant_id, kind, op_id)
           SELECT p_tenant, h.effect, h.op_id FROM h
           RETURNING entry_id, op_id),
         posting AS (
           INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount)
           SELECT entry.entry_id, l.line, p_tenant, h.account, h.asset,
             CASE l.line WHEN 1 THEN h.first_bucket ELSE h.second_bucket END, l.sign * h.amount
           FROM entry JOIN h USING (op_id),
             (VALUES (1::smallint, -1::numeric), (2::smallint, 1::numeric)) AS l(line, sign)),
         delta AS (
           SELECT h.account, h.asset, sum(h.held_sign * h.amount) AS held,
             sum(h.available_sign * h.amount) AS available, count(*) AS n
           FROM h GROUP BY h.account, h.asset)
    SELECT coalesce(sum(n), 0)::integer, array_agg(account ORDER BY account, asset),
           array_agg(asset ORDER BY account, asset), array_agg(held ORDER BY account, asset),
           array_agg(available ORDER BY account, asset)
      INTO moved, accounts, assets, held_deltas, available_deltas
      FROM delta;
    -- Last: the balance rows, one update each, in (account, asset) order so that two batches
    -- cannot deadlock on them.
    FOR i IN 1 .. coalesce(cardinality(accounts), 0) LOOP
        UPDATE ledger_accounts a SET held = a.held + held_deltas[i],
          available = a.available + available_deltas[i], version = a.version + 1
        WHERE a.tenant_id = p_tenant AND a.account = accounts[i] AND a.asset = assets[i];
        IF NOT FOUND THEN
            RAISE EXCEPTION 'opledger: a hold names an account that does not exist'
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END LOOP;
    RETURN moved;
END
$$;
REVOKE ALL ON FUNCTION opledger_resolve_holds(uuid, uuid[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_resolve_holds(uuid, uuid[], text[])
    TO opledger_approvals, opledger_broadcaster, opledger_reconciler, opledger_inbox;

-- The one-hold form (migration 12's signature, grants and SECURITY DEFINER kept): true when the
-- hold moved.
CREATE OR REPLACE FUNCTION opledger_resolve_hold(p_tenant uuid, p_op uuid, p_effect text)
RETURNS boolean LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT opledger_resolve_holds(p_tenant, ARRAY[p_op], ARRAY[p_effect]) = 1
$$;
