-- The signed-bytes gate (issue 14): signed bytes may be broadcast only once their commit is known
-- to be durable, i.e. acknowledged by the primary with its synchronous standby.
--
-- A backend whose wait for the synchronous standby is cancelled or terminated leaves its commit
-- visible on the primary but unreplicated: lost if that primary is then failed over. Bytes sent
-- from such a commit would leave a transfer on the chain that the promoted database never signed;
-- its nonce would be allocated again and the withdrawal signed again: paid twice.
--
-- So every attempt gets a release row in the very transaction that persists it, with
-- `released_at` NULL. The signer sets `released_at` in a LATER transaction, and only after it saw
-- one of its own commits acknowledged that was written after the attempt's (the signing commit
-- itself, or for an attempt whose acknowledgement was lost, a probe: `probed_at` written and
-- committed first). WAL is replicated in order, so that acknowledgement proves the attempt's
-- commit reached the standby. Broadcaster and reconciler submit only attempts whose
-- `released_at` is set. Losing a release (not replicated, or never written) is harmless: the
-- signer's sweep probes and releases any attempt left unreleased.
CREATE TABLE attempt_releases (
    tenant_id   uuid        NOT NULL,
    op_id       uuid        NOT NULL,
    attempt     integer     NOT NULL,
    probed_at   timestamptz,
    released_at timestamptz,
    PRIMARY KEY (tenant_id, op_id, attempt),
    FOREIGN KEY (tenant_id, op_id, attempt) REFERENCES tx_attempts (tenant_id, op_id, attempt)
);
-- The signer's sweep reads only what is still held back.
CREATE INDEX attempt_releases_held ON attempt_releases (tenant_id, op_id, attempt)
    WHERE released_at IS NULL;

-- A release is never taken back, moved or removed; a probe only while it is held back.
CREATE FUNCTION opledger_guard_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'attempt releases are never deleted' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.tenant_id, NEW.op_id, NEW.attempt) IS DISTINCT FROM (OLD.tenant_id, OLD.op_id, OLD.attempt)
       OR (OLD.released_at IS NOT NULL
           AND (NEW.released_at IS DISTINCT FROM OLD.released_at
                OR NEW.probed_at IS DISTINCT FROM OLD.probed_at)) THEN
        RAISE EXCEPTION 'a released attempt stays released' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER attempt_releases_guard BEFORE UPDATE OR DELETE ON attempt_releases
    FOR EACH ROW EXECUTE FUNCTION opledger_guard_release();

-- Attempts persisted before this migration were committed long before it ran (the migration
-- itself commits with the standby's acknowledgement): released.
INSERT INTO attempt_releases (tenant_id, op_id, attempt, released_at)
SELECT tenant_id, op_id, attempt, now() FROM tx_attempts;

-- Only the signer writes releases; the services that submit bytes read them.
GRANT SELECT, INSERT ON attempt_releases TO opledger_signer;
GRANT UPDATE (probed_at, released_at) ON attempt_releases TO opledger_signer;
GRANT SELECT ON attempt_releases
    TO opledger_operations, opledger_approvals, opledger_broadcaster, opledger_reconciler,
       opledger_inbox;
