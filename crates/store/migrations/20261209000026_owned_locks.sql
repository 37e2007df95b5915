-- No login can freeze another (issue 25, findings 3 and 4).
--
-- Until now the watcher lease and the pass locks were advisory locks whose keys any login could
-- compute, and `pg_try_advisory_lock` is open to every role: the inbox's login held the watcher's
-- key and nothing was watched. And every service role could insert into operation_transitions,
-- `OVERRIDING SYSTEM VALUE` included: the inbox's login filled the next identity values and
-- every later move failed on the primary key.
--
-- Revoking the advisory-lock functions from PUBLIC would close both lock findings at once, but
-- only a superuser may change pg_catalog's grants: the migrating owner of a production database
-- is not one, and managed PostgreSQL offers none. So each lock here is one that needs no
-- superuser to own (deploy/postgres/roles.sql still revokes the advisory functions where a
-- superuser exists, as hardening):
--
-- 1. A pass lock (the broadcaster's and the reconciler's, shared: both examine the same
--    operations) is a row lock, FOR NO KEY UPDATE SKIP LOCKED, on the operation's
--    withdrawal_payloads row: immutable, so no role is granted UPDATE on it, and without UPDATE
--    no login can lock its rows (FOR UPDATE/NO KEY UPDATE/SHARE/KEY SHARE), take a table lock
--    that conflicts (every mode beyond ROW EXCLUSIVE needs table-level UPDATE, DELETE or
--    TRUNCATE), and no table references it (a foreign key's KEY SHARE would not conflict with
--    NO KEY UPDATE anyway). Only `opledger_pass_lock` (SECURITY DEFINER, EXECUTE granted to those
--    two roles) locks it, in the caller's transaction: the caller sends `BEGIN` with the call
--    (one round trip, as before) and ends the pass with ROLLBACK; a session that dies ends its
--    transaction and the lock. Row locks are not listed by key in pg_locks, and two operations
--    never share one. The pass's transaction holds an xid for the pass only (seconds), and sets
--    idle_in_transaction_session_timeout to 0 for itself, so a login-wide timeout cannot end a
--    lock under its pass.
--
-- 2. The watcher lease of a network (the broadcaster's alone) stays a session advisory lock in
--    class 'watc', session-long and lost with its session, but its key is random and kept in
--    opledger_watch_leases, a table no service role may read. `opledger_watch_lease` (SECURITY
--    DEFINER, EXECUTE granted to the broadcaster role only) takes it; when the key is held by a
--    session whose role may not call that function (a foreign login that read the key in
--    pg_locks and took it when the holder's session ended, or took it shared, or holds it from a
--    prepared transaction), the caller takes a fresh random key first and only then publishes it
--    in place of the squatted one, so no other session can know it before it is held. A lease
--    row, rather than a long transaction holding a row lock, because such a transaction would
--    hold back vacuum's horizon for as long as the lease is held.
--
-- 3. Transition-log rows are written by the database only: an AFTER INSERT trigger (the creation
--    row) and an AFTER UPDATE OF state trigger (every move) on withdrawal_ops, SECURITY DEFINER,
--    insert the row from the operation row as written: from OLD.state to NEW.state at
--    NEW.version, by `last_actor` with `last_actor_id` and `last_reason`, which the mover sets in
--    the same UPDATE (or INSERT) that changes the state (new columns, the latest change's actor id
--    and reason, kept with `last_actor`). INSERT on operation_transitions is revoked from every
--    service role, so no caller writes a log row or chooses a transition id (GENERATED ALWAYS;
--    OVERRIDING SYSTEM VALUE needs INSERT). A state change made outside the store that sets no
--    actor (the owner's hand) is logged as `owner`, by the session's login, reason `unstated`;
--    one that leaves the attribution columns as they were is logged with them as they were.
--
-- A role added later is granted nothing here by default. It must never be granted INSERT on
-- operation_transitions, UPDATE on withdrawal_payloads, EXECUTE on opledger_pass_lock or
-- opledger_watch_lease, or any privilege on opledger_watch_leases; a role that moves
-- operations needs UPDATE (last_actor_id, last_reason) on withdrawal_ops with its other
-- state-change columns (opledger_grant_mover below).

-- 1. Pass locks.
DROP FUNCTION opledger_pass_lock(integer, integer, uuid, uuid);
-- The pass lock of an operation, taken without waiting, and (only when taken) its state and its
-- latest attempt's age read after it; no row when there is no such operation. Call it in a
-- transaction block: the lock lasts until that transaction ends.
CREATE FUNCTION opledger_pass_lock(p_tenant uuid, p_op uuid)
RETURNS TABLE (locked boolean, state text, attempt_age float8)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    -- An operation is never deleted: one seen here still exists after the lock.
    IF NOT EXISTS (SELECT 1 FROM public.withdrawal_ops o
                   WHERE o.tenant_id = p_tenant AND o.op_id = p_op) THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('idle_in_transaction_session_timeout', '0', true);
    PERFORM 1 FROM public.withdrawal_payloads p
     WHERE p.tenant_id = p_tenant AND p.op_id = p_op
       FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, NULL::text, NULL::float8;
        RETURN;
    END IF;
    -- A statement of its own: in READ COMMITTED it sees what the previous holder committed.
    RETURN QUERY
        SELECT true, o.state,
               (SELECT extract(epoch FROM now() - max(a.created_at))::float8
                  FROM public.tx_attempts a
                 WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id)
        FROM public.withdrawal_ops o WHERE o.tenant_id = p_tenant AND o.op_id = p_op;
END
$$;
REVOKE ALL ON FUNCTION opledger_pass_lock(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_pass_lock(uuid, uuid) TO opledger_broadcaster, opledger_reconciler;

-- 2. Watcher leases.
CREATE TABLE opledger_watch_leases (
    network    text        PRIMARY KEY,
    lock_key   integer     NOT NULL,
    rotated_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON opledger_watch_leases FROM PUBLIC;

-- The key this session holds as `p_network`'s watcher lease (class 'watc'), or NULL while another
-- instance holds it. `p_held`: the key this session took at its last call (NULL at first). Call it
-- outside a transaction block: the key it publishes must be committed for the next caller.
CREATE FUNCTION opledger_watch_lease(p_network text, p_held integer)
RETURNS integer LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    lease_class constant integer := 2002875491; -- 'watc'
    current_key integer;
    fresh integer;
BEGIN
    SELECT l.lock_key INTO current_key FROM public.opledger_watch_leases l
     WHERE l.network = p_network;
    IF p_held IS NOT NULL THEN
        IF p_held = current_key THEN
            -- Kept: a session lock lasts as long as its session, and only it can give it back.
            RETURN current_key;
        END IF;
        PERFORM pg_advisory_unlock(lease_class, p_held);
    END IF;
    IF current_key IS NOT NULL THEN
        IF pg_try_advisory_lock(lease_class, current_key) THEN
            RETURN current_key;
        END IF;
        -- Held: by an instance that may lead (a standby waits), or squatted.
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_locks k
                   JOIN pg_catalog.pg_stat_activity a ON a.pid = k.pid
                   WHERE k.locktype = 'advisory' AND k.granted AND k.mode = 'ExclusiveLock'
                     AND k.database = (SELECT d.oid FROM pg_catalog.pg_database d
                                       WHERE d.datname = pg_catalog.current_database())
                     AND k.classid = lease_class::oid AND k.objid = current_key::oid
                     AND k.objsubid = 2
                     AND pg_catalog.has_function_privilege(
                           a.usesysid, 'public.opledger_watch_lease(text, integer)', 'EXECUTE'))
        THEN
            RETURN NULL;
        END IF;
    END IF;
    -- No key yet, or a squatted one: a fresh random key, held before it is published.
    FOR attempt IN 1..8 LOOP
        fresh := ('x' || pg_catalog.left(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 8))
                 ::bit(32)::integer;
        CONTINUE WHEN NOT pg_try_advisory_lock(lease_class, fresh);
        IF current_key IS NULL THEN
            INSERT INTO public.opledger_watch_leases (network, lock_key)
            VALUES (p_network, fresh) ON CONFLICT (network) DO NOTHING;
        ELSE
            UPDATE public.opledger_watch_leases SET lock_key = fresh, rotated_at = now()
             WHERE network = p_network AND lock_key = current_key;
        END IF;
        IF FOUND THEN
            RETURN fresh;
        END IF;
        -- Another instance published its key first: it leads.
        PERFORM pg_advisory_unlock(lease_class, fresh);
        RETURN NULL;
    END LOOP;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION opledger_watch_lease(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_watch_lease(text, integer) TO opledger_broadcaster;

-- 3. The transition log, written by the database.
ALTER TABLE withdrawal_ops ADD COLUMN last_actor_id text, ADD COLUMN last_reason text;

CREATE FUNCTION opledger_log_transition() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp AS $$
DECLARE
    from_state text;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        from_state := OLD.state;
    END IF;
    INSERT INTO public.operation_transitions
           (tenant_id, op_id, from_state, to_state, actor, actor_id, reason, version)
    VALUES (NEW.tenant_id, NEW.op_id, from_state, NEW.state, coalesce(NEW.last_actor, 'owner'),
            coalesce(NEW.last_actor_id, session_user::text),
            coalesce(NEW.last_reason, 'unstated'), NEW.version);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION opledger_log_transition() FROM PUBLIC;
CREATE TRIGGER withdrawal_ops_log_created AFTER INSERT ON withdrawal_ops
    FOR EACH ROW EXECUTE FUNCTION opledger_log_transition();
CREATE TRIGGER withdrawal_ops_log_moved AFTER UPDATE OF state ON withdrawal_ops
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION opledger_log_transition();

REVOKE INSERT ON operation_transitions FROM opledger_operations, opledger_approvals,
    opledger_broadcaster, opledger_reconciler, opledger_inbox, opledger_signer, opledger_app;

-- What a role that moves operations is granted besides its state-change columns: the columns
-- the log trigger reads. A later role that moves operations calls it in its own migration.
CREATE FUNCTION opledger_grant_mover(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    EXECUTE format('GRANT UPDATE (last_actor, last_actor_id, last_reason) '
                   'ON public.withdrawal_ops TO %I', p_role);
END
$$;
REVOKE ALL ON FUNCTION opledger_grant_mover(name) FROM PUBLIC;
SELECT opledger_grant_mover(r)
FROM unnest(ARRAY['opledger_approvals', 'opledger_broadcaster', 'opledger_reconciler',
                  'opledger_inbox', 'opledger_signer']::name[]) AS r;
