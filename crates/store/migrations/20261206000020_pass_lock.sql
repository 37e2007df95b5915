-- A worker's pass lock in one round trip (issue 14): the session advisory lock of an operation
-- taken without waiting, and, only when it was taken, the operation's state and its latest
-- attempt's age read AFTER it. The function is VOLATILE, so in READ COMMITTED its second query
-- takes a new snapshot: it sees what a pass that released the lock just before had committed.
-- (One statement holding both would read a snapshot from before the lock and could start a pass
-- from a state another replica already moved on.) SECURITY INVOKER: callers read only what
-- their own grants allow.
CREATE FUNCTION opledger_pass_lock(p_class integer, p_key integer, p_tenant uuid, p_op uuid)
RETURNS TABLE (locked boolean, state text, attempt_age float8)
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $$
BEGIN
    IF NOT pg_try_advisory_lock(p_class, p_key) THEN
        RETURN QUERY SELECT false, NULL::text, NULL::float8;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT true, o.state,
               (SELECT extract(epoch FROM now() - max(a.created_at))::float8
                  FROM tx_attempts a WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id)
        FROM withdrawal_ops o WHERE o.tenant_id = p_tenant AND o.op_id = p_op;
END
$$;
REVOKE ALL ON FUNCTION opledger_pass_lock(integer, integer, uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_pass_lock(integer, integer, uuid, uuid)
    TO opledger_broadcaster, opledger_reconciler;
