-- Refusals end, and never block others (issue 9).
--
-- An operation the broadcaster could not move on a pass (the signer refused it, was unavailable,
-- was interrupted, or another signer held its claim; no RPC endpoint for its network) waits in
-- back-off before it is tried again: exponential from the broadcaster's `backoff_base_ms`, capped
-- at `backoff_max_ms`. The queue (crates/store/src/queue.rs) skips rows whose back-off has not
-- expired and takes each tenant's due operations in turn, so one tenant's refusals cannot delay
-- another tenant's withdrawals.
--
-- Only the broadcaster's role writes it. A row is cleared when the broadcaster moves the
-- operation on, and, by the trigger below, whenever the operation leaves APPROVED, SIGNING and
-- SIGNED, whoever moved it (the signer ending it, a webhook reporting its broadcast, a
-- submission).
CREATE TABLE broadcast_backoff (
    tenant_id       uuid        NOT NULL,
    op_id           uuid        NOT NULL,
    -- Consecutive passes that did not move the operation.
    failures        integer     NOT NULL CHECK (failures >= 1),
    next_attempt_at timestamptz NOT NULL,
    -- Why the latest pass did not move it: a fixed vocabulary of the broadcaster (gRPC code or
    -- ErrorInfo reason), never a message, an address or a key.
    last_reason     text        NOT NULL CHECK (last_reason ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops ON DELETE CASCADE
);
CREATE INDEX broadcast_backoff_waiting ON broadcast_backoff (next_attempt_at);
GRANT SELECT, INSERT, UPDATE, DELETE ON broadcast_backoff TO opledger_broadcaster;

-- Clears the back-off of an operation that left the broadcaster's states. SECURITY DEFINER: it
-- runs in the transaction of whichever service made the move (the signer, the inbox, the
-- broadcaster), none of which but the broadcaster may write the table itself. Tables are named
-- with their schema, so a session's temporary table cannot stand in for them.
CREATE FUNCTION opledger_clear_broadcast_backoff() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM public.broadcast_backoff b
     WHERE b.tenant_id = NEW.tenant_id AND b.op_id = NEW.op_id;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION opledger_clear_broadcast_backoff() FROM PUBLIC;
CREATE TRIGGER withdrawal_ops_clear_broadcast_backoff AFTER UPDATE OF state ON withdrawal_ops
    FOR EACH ROW
    WHEN (OLD.state IN ('APPROVED', 'SIGNING', 'SIGNED')
          AND NEW.state NOT IN ('APPROVED', 'SIGNING', 'SIGNED'))
    EXECUTE FUNCTION opledger_clear_broadcast_backoff();
