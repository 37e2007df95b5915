-- Two races found by CI runs (both tests passed alone and failed under load).
--
-- 1. The cap on made-up (source, prefix) rows of unknown-endpoint rejections was a count and an
--    insert in two statements: concurrent first requests of new pairs all counted 31 and all
--    inserted, so a flood could leave more than 32 such rows in a minute (35 seen). A new pair's
--    row is now counted and inserted under a transaction advisory lock of its (minute, reason),
--    so those requests take turns; known pairs and known tenants still update without it. The
--    count after the lock is a statement of its own, so in READ COMMITTED it sees every row the
--    previous holder committed (the call runs in its own transaction, which ends the lock).
--
-- 2. `opledger_pass_lock` of an operation that does not exist took the lock and answered no row;
--    the caller closed its session to end it, but the close lands in the background, so for a
--    moment the key stayed locked ("held", not "not found", for the next caller). The function now
--    gives the lock back itself before answering no row.

CREATE OR REPLACE FUNCTION opledger_count_rejection(p_tenant uuid, p_source text, p_prefix text,
                                                    p_reason text)
RETURNS void LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
DECLARE
    m timestamptz := date_trunc('minute', now());
    t uuid := coalesce(p_tenant, '00000000-0000-0000-0000-000000000000');
    src text := p_source;
    pre text := p_prefix;
BEGIN
    UPDATE public.webhook_rejection_counts SET count = count + 1
     WHERE tenant_id = t AND minute = m AND source = src AND endpoint_id_prefix = pre
       AND reason = p_reason;
    IF FOUND THEN
        RETURN;
    END IF;
    IF p_tenant IS NULL THEN
        -- Class "rjct" in ASCII; one key per minute and reason.
        PERFORM pg_advisory_xact_lock(
            1919574900, hashtext(p_reason || '/' || extract(epoch FROM m)::bigint::text));
        IF (SELECT count(*) FROM public.webhook_rejection_counts
             WHERE tenant_id = t AND minute = m AND reason = p_reason
               AND NOT (source = 'other' AND endpoint_id_prefix = 'other')
               AND NOT (source = src AND endpoint_id_prefix = pre))
           >= opledger_rejection_unknown_cap() THEN
            src := 'other';
            pre := 'other';
        END IF;
    END IF;
    INSERT INTO public.webhook_rejection_counts AS c
           (minute, tenant_id, source, endpoint_id_prefix, reason, count)
    VALUES (m, t, src, pre, p_reason, 1)
    ON CONFLICT (tenant_id, minute, source, endpoint_id_prefix, reason)
    DO UPDATE SET count = c.count + 1;
END
$$;

CREATE OR REPLACE FUNCTION opledger_pass_lock(p_class integer, p_key integer, p_tenant uuid,
                                              p_op uuid)
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
    IF NOT FOUND THEN
        -- No such operation (or none this caller may read): no lock is left behind.
        PERFORM pg_advisory_unlock(p_class, p_key);
    END IF;
END
$$;
