-- Signed bytes leave the signer only once released (issue 25, finding 7).
--
-- Until now every service role could read tx_attempts.raw_tx, held-back attempts included: the
-- signed-bytes gate (migration 18) held only while every caller chose to honour it. From here on
-- a worker role reads every column of tx_attempts but raw_tx, and reads signed bytes only through
-- released_attempts: every attempt (a held-back one too, with its hash, nonce and kind), whose
-- raw_tx is NULL until the attempt's release row is released. The signer keeps its own grants on
-- tx_attempts: it alone reads held-back bytes.
--
-- The view runs with its owner's rights (no security_invoker) and filters no rows: the bytes are
-- masked in its select list, so a caller's condition sees only the masked value whatever the
-- planner does with it, and the view is flattened into the caller's query (its indexes used as
-- before: no round trip, one join to attempt_releases, which the readers made already).
CREATE VIEW released_attempts AS
SELECT a.tenant_id, a.op_id, a.attempt, a.kind, a.network, a.chain_id, a.sender, a.nonce,
       a.tx_hash,
       CASE WHEN r.released_at IS NOT NULL THEN a.raw_tx END AS raw_tx,
       a.gas_limit, a.max_fee_per_gas, a.max_priority_fee_per_gas, a.created_at,
       r.released_at IS NOT NULL AS released
FROM public.tx_attempts a
LEFT JOIN public.attempt_releases r USING (tenant_id, op_id, attempt);
COMMENT ON VIEW released_attempts IS
    'tx_attempts for worker roles: raw_tx only of released attempts (NULL while held back)';

-- What a worker role may read of signed attempts: every column of tx_attempts but raw_tx, and
-- released_attempts. Granting it to a role added later is one line in that role's migration:
--     SELECT opledger_grant_attempt_reader('opledger_witness');
-- (after any table-wide grant on tx_attempts to that role: this takes it back).
CREATE FUNCTION opledger_grant_attempt_reader(p_role name) RETURNS void
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    EXECUTE format('REVOKE SELECT ON public.tx_attempts FROM %I', p_role);
    EXECUTE format('GRANT SELECT (tenant_id, op_id, attempt, kind, network, chain_id, sender, '
                   'nonce, tx_hash, gas_limit, max_fee_per_gas, max_priority_fee_per_gas, '
                   'created_at) ON public.tx_attempts TO %I', p_role);
    EXECUTE format('GRANT SELECT ON public.released_attempts TO %I', p_role);
END
$$;
REVOKE ALL ON FUNCTION opledger_grant_attempt_reader(name) FROM PUBLIC;

SELECT opledger_grant_attempt_reader(r)
FROM unnest(ARRAY['opledger_operations', 'opledger_approvals', 'opledger_broadcaster',
                  'opledger_reconciler', 'opledger_inbox']::name[]) AS r;

-- The signer reads tx_attempts whole (it verifies held-back attempts before it replaces them) and
-- the view as every reader does.
GRANT SELECT ON released_attempts TO opledger_signer;
