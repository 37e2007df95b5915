-- The executor guard of migration 32 ran its PL/pgSQL function on every state change: one more
-- function call per move of every withdrawal (the pipeline benchmark measured about 0.8 CPU-s of
-- PostgreSQL per 1,000 withdrawals more, five moves each). The same rule now sits in the
-- trigger's WHEN clause, evaluated inline; the function runs only for a move the rule refuses
-- (and still lets the owner through).
DROP TRIGGER withdrawal_ops_guard_executor ON withdrawal_ops;
CREATE TRIGGER withdrawal_ops_guard_executor BEFORE UPDATE OF state ON withdrawal_ops
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state
          AND ((NEW.last_actor = 'custodian' AND OLD.executor <> 'custodian')
               OR (NEW.last_actor IN ('signer', 'broadcaster')
                   AND OLD.executor <> 'local_signer')))
    EXECUTE FUNCTION opledger_guard_executor();
