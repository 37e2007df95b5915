-- Two independent principals for every release that could pay twice (issue 25).
--
-- Until now the reconciler's login alone could move a signed, broadcast withdrawal BROADCAST ->
-- UNKNOWN -> VERIFIED_NOT_SENT and release its hold: the money already sent was spendable again.
-- From here on, the hold of a withdrawal with a signed attempt is released only when two rows
-- name the same evidence (the attempt whose inclusion at final depth proves no transfer can
-- happen, and the including block):
--   * a proposal, insertable only by the reconciler's role (the reconciler service, or an operator
--     through its operator API);
--   * an attestation, insertable only by the witness's role: a separate service with its own
--     login and its own evidence endpoints, which reads the chain again and attests only what its
--     own verdict establishes (opledger_domain::witness::attest_release).
-- `opledger_resolve_holds` applies the rule of opledger_domain::witness::release_allowed (tests/
-- store checks the two agree): a RELEASE of an operation that has any row in tx_attempts needs a
-- proposal and an attestation of the same evidence, whose attempt is one of the operation's.
-- Both tables are append-only; a reorganization that moves the proof yields a new pair.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_witness') THEN
        CREATE ROLE opledger_witness NOLOGIN;
    END IF;
END
$$;
GRANT opledger_services TO opledger_witness;

CREATE TABLE release_proposals (
    tenant_id    uuid        NOT NULL,
    op_id        uuid        NOT NULL,
    tx_hash      text        NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    block_hash   text        NOT NULL CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
    principal    text        NOT NULL CHECK (principal IN ('reconciler', 'operator')),
    -- The worker id or operator; never personal data.
    principal_id text        NOT NULL CHECK (length(principal_id) BETWEEN 1 AND 128),
    -- The database login that inserted the row (set by the database, not the caller).
    login        text        NOT NULL DEFAULT session_user,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, tx_hash, block_number, block_hash),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);

CREATE TABLE release_attestations (
    tenant_id    uuid        NOT NULL,
    op_id        uuid        NOT NULL,
    tx_hash      text        NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    block_hash   text        NOT NULL CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
    witness_id   text        NOT NULL CHECK (length(witness_id) BETWEEN 1 AND 128),
    login        text        NOT NULL DEFAULT session_user,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, tx_hash, block_number, block_hash),
    FOREIGN KEY (tenant_id, op_id, tx_hash, block_number, block_hash)
        REFERENCES release_proposals (tenant_id, op_id, tx_hash, block_number, block_hash)
);

-- What the witness refused and why (non-transient refusals only: a proposal its own evidence
-- contradicts). A security signal: an honest proposer never makes such a proposal.
CREATE TABLE witness_refusals (
    tenant_id    uuid        NOT NULL,
    refusal_id   bigint      GENERATED ALWAYS AS IDENTITY,
    op_id        uuid        NOT NULL,
    tx_hash      text        NOT NULL,
    block_number bigint      NOT NULL,
    block_hash   text        NOT NULL,
    reason       text        NOT NULL CHECK (reason ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    witness_id   text        NOT NULL CHECK (length(witness_id) BETWEEN 1 AND 128),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, refusal_id),
    FOREIGN KEY (tenant_id, op_id, tx_hash, block_number, block_hash)
        REFERENCES release_proposals (tenant_id, op_id, tx_hash, block_number, block_hash)
);

-- The inserting login is the database's word, not the caller's.
CREATE FUNCTION opledger_stamp_login() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.login := session_user;
    NEW.created_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER release_proposals_stamp BEFORE INSERT ON release_proposals
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER release_attestations_stamp BEFORE INSERT ON release_attestations
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER release_proposals_append_only BEFORE UPDATE OR DELETE ON release_proposals
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER release_attestations_append_only BEFORE UPDATE OR DELETE ON release_attestations
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER witness_refusals_append_only BEFORE UPDATE OR DELETE ON witness_refusals
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- The witness's queue: proposals with no attestation yet, oldest first.
CREATE INDEX release_proposals_created ON release_proposals (created_at);

-- Each table insertable by its own role only; everyone who decides reads both.
REVOKE ALL ON release_proposals, release_attestations, witness_refusals FROM PUBLIC;
GRANT SELECT, INSERT ON release_proposals TO opledger_reconciler;
GRANT SELECT ON release_attestations, witness_refusals TO opledger_reconciler;
GRANT SELECT ON release_proposals TO opledger_witness;
GRANT SELECT, INSERT ON release_attestations, witness_refusals TO opledger_witness;

-- What the witness reads to judge a proposal: the operation, its payload, its attempts and
-- their releases, its hold. Nothing else, and it writes nothing else.
GRANT SELECT ON withdrawal_ops, withdrawal_payloads, attempt_releases, ledger_holds
    TO opledger_witness;
-- Attempts as every worker reads them (migration 27): the bytes of released attempts only.
SELECT opledger_grant_attempt_reader('opledger_witness');

-- The rule of opledger_domain::witness::release_allowed for one operation's hold.
CREATE FUNCTION opledger_release_witnessed(p_tenant uuid, p_op uuid) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT NOT EXISTS (SELECT 1 FROM public.tx_attempts a
                       WHERE a.tenant_id = p_tenant AND a.op_id = p_op)
        OR EXISTS (SELECT 1 FROM public.release_proposals p
                   JOIN public.release_attestations t
                     USING (tenant_id, op_id, tx_hash, block_number, block_hash)
                   JOIN public.tx_attempts a
                     ON a.tenant_id = p.tenant_id AND a.op_id = p.op_id AND a.tx_hash = p.tx_hash
                   WHERE p.tenant_id = p_tenant AND p.op_id = p_op)
$$;
REVOKE ALL ON FUNCTION opledger_release_witnessed(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_release_witnessed(uuid, uuid)
    TO opledger_reconciler, opledger_witness;

-- The state must agree with the hold: a service may leave an operation REJECTED or
-- VERIFIED_NOT_SENT only in a transaction that also released its hold (checked at commit). Without
-- this, the reconciler's login could declare a signed withdrawal VERIFIED_NOT_SENT (a final "not
-- sent" for the tenant) with the hold still open, and nothing could settle it once the transfer
-- mined (VERIFIED_NOT_SENT has no way out). The store moves the state and applies the hold effect
-- in one transaction, so honest moves are unaffected.
CREATE FUNCTION opledger_check_released_with_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF opledger_is_service() AND NOT EXISTS (
           SELECT 1 FROM public.ledger_holds h
           WHERE h.tenant_id = NEW.tenant_id AND h.op_id = NEW.op_id AND h.status = 'RELEASED') THEN
        RAISE EXCEPTION 'opledger: an operation is % only with its hold released', NEW.state
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER withdrawal_ops_released_with_hold AFTER UPDATE OF state ON withdrawal_ops
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.state IN ('REJECTED', 'VERIFIED_NOT_SENT') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION opledger_check_released_with_hold();

-- Migration 22's function with the rule: a RELEASE moves a hold only when
-- opledger_release_witnessed says so. Everything else is unchanged.
CREATE OR REPLACE FUNCTION opledger_resolve_holds(p_tenant uuid, p_ops uuid[], p_effects text[])
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
                           AND o.op_id = w.op_id AND o.state = ANY (e.states))
             AND (e.effect <> 'RELEASE' OR opledger_release_witnessed(p_tenant, w.op_id))),
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
