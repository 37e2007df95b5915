-- Withdrawals a custodian executes (issue 27).
--
-- Each operation names its executor at creation: `local_signer` (our signer signs, the
-- broadcaster sends the stored bytes) or `custodian` (a provider account signs and broadcasts,
-- keyed by our operation id). No service may change it afterwards (no role has UPDATE on it).
--
-- The custodian executor (role opledger_custodian, actor `custodian`) moves only custodian
-- withdrawals, and the signer and broadcaster only local ones, so that no login can take or stall
-- the other path's work. Before its first call to the provider, the executor persists the exact
-- request (its body and the body's SHA-256, bound to the operation's payload hash) in the same
-- transaction that moves SIGNING -> SIGNED: from then on the request may have reached the
-- provider and the operation never becomes payable again. Every send of that same request and
-- every record of the provider's (from a lookup by our reference) is appended, never changed.
--
-- A custodian withdrawal whose request exists is released only on a terminal record of the
-- provider without a transaction hash, proposed by the executor and attested by the witness from
-- its own lookup (two logins, two principals), and only while no record of the operation ever
-- carried a hash (a broadcast transaction is the chain's to decide). The rule replaces
-- opledger_release_witnessed for such operations; local withdrawals keep their rule unchanged.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_custodian') THEN
        CREATE ROLE opledger_custodian NOLOGIN;
    END IF;
END
$$;
GRANT opledger_services TO opledger_custodian;

ALTER TABLE withdrawal_ops ADD COLUMN executor text NOT NULL DEFAULT 'local_signer'
    CHECK (executor IN ('local_signer', 'custodian'));

-- The signer reads it (it refuses to sign a custodian's withdrawal).
GRANT SELECT (executor) ON withdrawal_ops TO opledger_signer;

INSERT INTO opledger_role_actors (role_name, actor) VALUES ('opledger_custodian', 'custodian');

-- The rows of crates/domain/src/state/mod.rs for the custodian actor (tests/store/roles.rs
-- compares the two tables).
INSERT INTO opledger_transition_rules (from_state, to_state, actor, hold_effect) VALUES
    ('APPROVED', 'SIGNING', 'custodian', 'KEEP'),
    ('SIGNING', 'SIGNED', 'custodian', 'KEEP'),
    ('SIGNING', 'APPROVED', 'custodian', 'KEEP'),
    ('APPROVED', 'FAILED_TERMINAL', 'custodian', 'KEEP'),
    ('SIGNED', 'BROADCAST', 'custodian', 'KEEP'),
    ('SIGNED', 'UNKNOWN', 'custodian', 'KEEP'),
    ('SIGNED', 'FAILED_TERMINAL', 'custodian', 'KEEP'),
    ('BROADCAST', 'UNKNOWN', 'custodian', 'KEEP'),
    ('UNKNOWN', 'BROADCAST', 'custodian', 'KEEP'),
    ('UNKNOWN', 'VERIFIED_NOT_SENT', 'custodian', 'RELEASE'),
    ('UNKNOWN', 'FAILED_TERMINAL', 'custodian', 'KEEP');

-- Each path's own actors move only its own withdrawals.
CREATE FUNCTION opledger_guard_executor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF opledger_is_service()
       AND ((NEW.last_actor = 'custodian' AND OLD.executor <> 'custodian')
            OR (NEW.last_actor IN ('signer', 'broadcaster') AND OLD.executor <> 'local_signer')) THEN
        RAISE EXCEPTION 'opledger: % may not move a withdrawal the % executes',
            NEW.last_actor, OLD.executor USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER withdrawal_ops_guard_executor BEFORE UPDATE OF state ON withdrawal_ops
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION opledger_guard_executor();

-- The request, persisted before the first call; our operation id is its reference.
CREATE TABLE custodian_requests (
    tenant_id    uuid        NOT NULL,
    op_id        uuid        NOT NULL,
    -- The configured provider account (a name, never a credential).
    account      text        NOT NULL CHECK (account ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    profile      text        NOT NULL
        CHECK (profile IN ('lookup_by_reference', 'one_send_per_reference', 'no_lookup')),
    body         bytea       NOT NULL CHECK (octet_length(body) BETWEEN 1 AND 16384),
    body_sha256  bytea       NOT NULL CHECK (body_sha256 = sha256(body)),
    payload_hash bytea       NOT NULL,
    executor_id  text        NOT NULL CHECK (length(executor_id) BETWEEN 1 AND 128),
    login        text        NOT NULL DEFAULT session_user,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);

-- Only for a custodian withdrawal that its executor holds in SIGNING, bound to its payload hash.
CREATE FUNCTION opledger_check_custodian_request() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.withdrawal_ops o
                   WHERE o.tenant_id = NEW.tenant_id AND o.op_id = NEW.op_id
                     AND o.executor = 'custodian' AND o.state = 'SIGNING'
                     AND o.payload_hash = NEW.payload_hash) THEN
        RAISE EXCEPTION 'opledger: a custodian request is stored only for a custodian withdrawal in SIGNING, with its payload hash'
            USING ERRCODE = 'check_violation';
    END IF;
    NEW.login := session_user;
    NEW.created_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER custodian_requests_check BEFORE INSERT ON custodian_requests
    FOR EACH ROW EXECUTE FUNCTION opledger_check_custodian_request();
CREATE TRIGGER custodian_requests_append_only BEFORE UPDATE OR DELETE ON custodian_requests
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- Every send of the stored request (the first and each resend after the consistency window),
-- recorded before the call; its answer class after it.
CREATE TABLE custodian_sends (
    tenant_id   uuid        NOT NULL,
    op_id       uuid        NOT NULL,
    send_no     integer     NOT NULL CHECK (send_no BETWEEN 1 AND 1000),
    executor_id text        NOT NULL CHECK (length(executor_id) BETWEEN 1 AND 128),
    login       text        NOT NULL DEFAULT session_user,
    sent_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, send_no),
    FOREIGN KEY (tenant_id, op_id) REFERENCES custodian_requests (tenant_id, op_id)
);
CREATE TABLE custodian_answers (
    tenant_id   uuid        NOT NULL,
    op_id       uuid        NOT NULL,
    send_no     integer     NOT NULL,
    answer      text        NOT NULL CHECK (answer IN ('ACCEPTED', 'REFUSED', 'TIMEOUT',
                    'CONNECTION_LOST', 'SERVER_ERROR', 'RATE_LIMITED', 'DUPLICATE', 'UNREADABLE')),
    -- The provider's id of the transaction, when the answer carried one.
    provider_id text        CHECK (length(provider_id) BETWEEN 1 AND 128),
    login       text        NOT NULL DEFAULT session_user,
    answered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, send_no),
    FOREIGN KEY (tenant_id, op_id, send_no) REFERENCES custodian_sends (tenant_id, op_id, send_no)
);

-- The provider's records of our reference, as each lookup found them.
CREATE TABLE custodian_records (
    tenant_id       uuid        NOT NULL,
    record_id       bigint      GENERATED ALWAYS AS IDENTITY,
    op_id           uuid        NOT NULL,
    -- Our status names (Fireblocks' for that profile; each adapter maps its provider's states).
    status          text        NOT NULL CHECK (status ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    sub_status      text        CHECK (length(sub_status) <= 128),
    tx_hash         text        CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    replaced_hashes text[]      NOT NULL DEFAULT '{}',
    provider_id     text        CHECK (length(provider_id) BETWEEN 1 AND 128),
    -- SHA-256 of the provider's answer as received: what the decision rests on.
    answer_sha256   bytea       NOT NULL CHECK (octet_length(answer_sha256) = 32),
    executor_id     text        NOT NULL CHECK (length(executor_id) BETWEEN 1 AND 128),
    login           text        NOT NULL DEFAULT session_user,
    observed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, record_id),
    UNIQUE (tenant_id, op_id, record_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES custodian_requests (tenant_id, op_id)
);
CREATE INDEX custodian_records_op ON custodian_records (tenant_id, op_id);

-- Which executor instance follows a withdrawal (sends, looks up) until when, and when it was last
-- followed: one instance at a time, at most once per `follow_every`. Kept apart from the
-- operation row, whose every change is a logged move.
CREATE TABLE custodian_follows (
    tenant_id    uuid        NOT NULL,
    op_id        uuid        NOT NULL,
    owner        text        NOT NULL CHECK (length(owner) BETWEEN 1 AND 128),
    leased_until timestamptz NOT NULL,
    followed_at  timestamptz,
    PRIMARY KEY (tenant_id, op_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);

-- The executor's proposal to release on one record, and the witness's attestation of the same
-- record from its own lookup (the provider's record seen by a second principal).
CREATE TABLE custodian_release_proposals (
    tenant_id   uuid        NOT NULL,
    op_id       uuid        NOT NULL,
    record_id   bigint      NOT NULL,
    executor_id text        NOT NULL CHECK (length(executor_id) BETWEEN 1 AND 128),
    login       text        NOT NULL DEFAULT session_user,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, record_id),
    FOREIGN KEY (tenant_id, op_id, record_id)
        REFERENCES custodian_records (tenant_id, op_id, record_id)
);
CREATE TABLE custodian_release_attestations (
    tenant_id     uuid        NOT NULL,
    op_id         uuid        NOT NULL,
    record_id     bigint      NOT NULL,
    -- What the witness's own lookup found: a terminal status without a hash.
    status        text        NOT NULL CHECK (status IN ('CANCELLED', 'BLOCKED', 'REJECTED', 'FAILED')),
    answer_sha256 bytea       NOT NULL CHECK (octet_length(answer_sha256) = 32),
    witness_id    text        NOT NULL CHECK (length(witness_id) BETWEEN 1 AND 128),
    login         text        NOT NULL DEFAULT session_user,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, record_id),
    FOREIGN KEY (tenant_id, op_id, record_id)
        REFERENCES custodian_release_proposals (tenant_id, op_id, record_id)
);

-- The inserting login and the time are the database's word, not the caller's.
CREATE TRIGGER custodian_release_proposals_stamp BEFORE INSERT ON custodian_release_proposals
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER custodian_release_attestations_stamp BEFORE INSERT ON custodian_release_attestations
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE FUNCTION opledger_stamp_answer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.login := session_user;
    NEW.answered_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER custodian_answers_stamp BEFORE INSERT ON custodian_answers
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_answer();
CREATE FUNCTION opledger_stamp_observed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.login := session_user;
    NEW.observed_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER custodian_records_stamp BEFORE INSERT ON custodian_records
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_observed();
CREATE FUNCTION opledger_stamp_sent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.login := session_user;
    NEW.sent_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER custodian_sends_stamp BEFORE INSERT ON custodian_sends
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_sent();

CREATE TRIGGER custodian_sends_append_only BEFORE UPDATE OR DELETE ON custodian_sends
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER custodian_answers_append_only BEFORE UPDATE OR DELETE ON custodian_answers
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER custodian_records_append_only BEFORE UPDATE OR DELETE ON custodian_records
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER custodian_release_proposals_append_only
    BEFORE UPDATE OR DELETE ON custodian_release_proposals
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER custodian_release_attestations_append_only
    BEFORE UPDATE OR DELETE ON custodian_release_attestations
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- The rule of opledger_domain::custodian::release_allowed for a custodian withdrawal whose
-- request exists; migration 31's rule for every other operation.
CREATE OR REPLACE FUNCTION opledger_release_witnessed(p_tenant uuid, p_op uuid) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT CASE
      WHEN EXISTS (SELECT 1 FROM public.custodian_requests q
                   WHERE q.tenant_id = p_tenant AND q.op_id = p_op) THEN
        NOT EXISTS (SELECT 1 FROM public.custodian_records r
                    WHERE r.tenant_id = p_tenant AND r.op_id = p_op
                      AND (r.tx_hash IS NOT NULL OR cardinality(r.replaced_hashes) > 0))
        AND EXISTS (SELECT 1 FROM public.custodian_release_proposals p
                    JOIN public.custodian_release_attestations t USING (tenant_id, op_id, record_id)
                    JOIN public.custodian_records r USING (tenant_id, op_id, record_id)
                    WHERE p.tenant_id = p_tenant AND p.op_id = p_op AND r.tx_hash IS NULL
                      AND r.status IN ('CANCELLED', 'BLOCKED', 'REJECTED', 'FAILED')
                      AND t.status = r.status)
      ELSE
        NOT EXISTS (SELECT 1 FROM public.tx_attempts a
                    WHERE a.tenant_id = p_tenant AND a.op_id = p_op)
        OR EXISTS (SELECT 1 FROM public.release_proposals p
                   JOIN public.release_attestations t
                     USING (tenant_id, op_id, tx_hash, block_number, block_hash)
                   JOIN public.tx_attempts a
                     ON a.tenant_id = p.tenant_id AND a.op_id = p.op_id AND a.tx_hash = p.tx_hash
                   WHERE p.tenant_id = p_tenant AND p.op_id = p_op
                     AND NOT EXISTS (
                       SELECT 1 FROM public.release_reorgs r
                       WHERE (r.tenant_id, r.op_id, r.tx_hash, r.block_number, r.block_hash)
                           = (p.tenant_id, p.op_id, p.tx_hash, p.block_number, p.block_hash)))
    END
$$;

REVOKE ALL ON custodian_follows, custodian_requests, custodian_sends, custodian_answers, custodian_records,
    custodian_release_proposals, custodian_release_attestations FROM PUBLIC;

-- The executor: reads what it executes, moves custodian withdrawals, writes its own tables.
-- It verifies the approvals as the signer does (the same signing input: decisions, signed
-- screenings, the tenant's trust statement and the newest version a signer accepted).
GRANT SELECT ON tenants, withdrawal_ops, withdrawal_payloads, ledger_holds, approvals,
    kyt_screenings, trust_statements, signer_trust_versions, opledger_transition_rules,
    opledger_role_actors TO opledger_custodian;
GRANT UPDATE (state, lease_owner, lease_expires_at, signed_tx_ref, version, updated_at, last_actor)
    ON withdrawal_ops TO opledger_custodian;
SELECT opledger_grant_mover('opledger_custodian');
GRANT EXECUTE ON FUNCTION opledger_resolve_holds(uuid, uuid[], text[]),
    opledger_release_witnessed(uuid, uuid) TO opledger_custodian;
GRANT SELECT, INSERT ON custodian_requests, custodian_sends, custodian_answers, custodian_records,
    custodian_release_proposals TO opledger_custodian;
GRANT SELECT, INSERT, UPDATE ON custodian_follows TO opledger_custodian;
GRANT SELECT ON custodian_release_attestations TO opledger_custodian;
GRANT INSERT ON security_events TO opledger_custodian;
GRANT SELECT, INSERT ON escalations TO opledger_custodian;

-- The witness: reads the evidence and attests from its own lookup; writes nothing else.
GRANT SELECT ON custodian_requests, custodian_records, custodian_release_proposals
    TO opledger_witness;
GRANT SELECT, INSERT ON custodian_release_attestations TO opledger_witness;

-- Operators and the reconciler see the custodian's evidence.
GRANT SELECT ON custodian_requests, custodian_sends, custodian_answers, custodian_records,
    custodian_release_proposals, custodian_release_attestations
    TO opledger_reconciler, opledger_operations;
