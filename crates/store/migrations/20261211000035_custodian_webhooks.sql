-- Custodian status webhooks through the inbox (issue 27, item 3): verified with the provider's own
-- signature scheme, recorded and deduplicated like every other delivery, and only ever a wake-up
-- for the custodian executor, whose lookup stays the authority.
--
-- An endpoint names how its deliveries are verified (`scheme`):
--   standard        Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`
--                   with the endpoint's HMAC secrets or Ed25519 keys), as before;
--   fireblocks_jws  Fireblocks webhooks v2: a detached JWS (RS512) over the raw body, verified
--                   against the provider's key set served at `jwks_url` (no secret is stored);
--   bitgo_hmac      BitGo: `x-signature-sha256`, hex HMAC-SHA256 of the body under the
--                   endpoint's HMAC secret (sealed in webhook_secrets as every HMAC secret);
--   prime_hmac      Coinbase Prime (as the conformance double sends it): `X-CB-SIGNATURE`,
--                   base64 HMAC-SHA256 of `X-CB-TIMESTAMP` + body, under the endpoint's secret.
ALTER TABLE webhook_endpoints
    ADD COLUMN scheme text NOT NULL DEFAULT 'standard'
        CHECK (scheme IN ('standard', 'fireblocks_jws', 'bitgo_hmac', 'prime_hmac')),
    ADD COLUMN jwks_url text
        CHECK (length(jwks_url) <= 2048 AND jwks_url ~ '^https?://[^[:space:]/]+(/[^[:space:]]*)?$'),
    ADD CONSTRAINT webhook_endpoints_jwks_url_for_jws
        CHECK ((scheme = 'fireblocks_jws') = (jwks_url IS NOT NULL));

-- A verified status event naming one of the endpoint tenant's custodian withdrawals asks the
-- executor to look it up at its next pass rather than after `follow_every`: one row per
-- withdrawal, `hinted_at` refreshed by each event. The executor's queue (`custodian_due`) takes a
-- withdrawal whose hint is newer than its last follow; following it consumes the hint. A hint moves
-- nothing: no state, no hold, no record; the event's status is never read into anything.
CREATE TABLE custodian_hints (
    tenant_id uuid        NOT NULL,
    op_id     uuid        NOT NULL,
    hinted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);

-- The database's clock, not the caller's (a hint dated in the future would keep a withdrawal at
-- the head of the executor's queue), and only for a custodian's withdrawal.
CREATE FUNCTION opledger_stamp_custodian_hint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.withdrawal_ops o
                   WHERE o.tenant_id = NEW.tenant_id AND o.op_id = NEW.op_id
                     AND o.executor = 'custodian') THEN
        RAISE EXCEPTION 'opledger: a custodian hint names a withdrawal a custodian executes'
            USING ERRCODE = 'check_violation';
    END IF;
    NEW.hinted_at := clock_timestamp();
    RETURN NEW;
END
$$;
CREATE TRIGGER custodian_hints_stamp BEFORE INSERT OR UPDATE ON custodian_hints
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_custodian_hint();

REVOKE ALL ON custodian_hints FROM PUBLIC;
-- The inbox alone writes hints; the executor reads them in its queue; operators see them.
GRANT SELECT, INSERT ON custodian_hints TO opledger_inbox;
GRANT UPDATE (hinted_at) ON custodian_hints TO opledger_inbox;
GRANT SELECT ON custodian_hints TO opledger_custodian, opledger_reconciler, opledger_operations;
-- The inbox sees whether an executor is following a withdrawal right now (a lookup begun before
-- an event must not absorb its hint: the event waits for the lookup's end); nothing else of it.
GRANT SELECT (tenant_id, op_id, leased_until) ON custodian_follows TO opledger_inbox;
