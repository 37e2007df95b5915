-- Tenants and their API keys. Only the owner role (admin CLI) writes these.
CREATE TABLE tenants (
    tenant_id  uuid        PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    key_id      text        PRIMARY KEY,                -- public half of the key
    tenant_id   uuid        NOT NULL REFERENCES tenants,
    role        text        NOT NULL CHECK (role IN ('client', 'approver', 'operator', 'service')),
    secret_hash bytea       NOT NULL CHECK (octet_length(secret_hash) = 32), -- SHA-256; the secret is never stored
    label       text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- The immutable core of an operation: identity, payload hash, state. No personal data here:
-- the idempotency key is stored only as a domain-separated SHA-256 digest.
CREATE TABLE withdrawal_ops (
    tenant_id            uuid        NOT NULL REFERENCES tenants,
    op_id                uuid        NOT NULL,
    idempotency_key_hash bytea       NOT NULL CHECK (octet_length(idempotency_key_hash) = 32),
    payload_hash         bytea       NOT NULL CHECK (octet_length(payload_hash) = 32),
    state                text        NOT NULL CHECK (state IN ('REQUESTED', 'APPROVED', 'SIGNING',
                             'SIGNED', 'BROADCAST', 'UNKNOWN', 'CONFIRMED', 'VERIFIED_NOT_SENT',
                             'FAILED_TERMINAL', 'REJECTED')),
    risk_flags           text[]      NOT NULL DEFAULT '{}',
    lease_owner          text,
    lease_expires_at     timestamptz,
    signed_tx_ref        text,
    version              bigint      NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id),
    UNIQUE (tenant_id, idempotency_key_hash)
);
CREATE INDEX withdrawal_ops_by_state ON withdrawal_ops (tenant_id, state, op_id);

-- Payload content, kept apart from the core so personal data can be governed separately.
CREATE TABLE withdrawal_payloads (
    tenant_id      uuid          NOT NULL,
    op_id          uuid          NOT NULL,
    source_account text          NOT NULL,
    asset          text          NOT NULL,
    network        text          NOT NULL,
    destination    text          NOT NULL,
    memo           text,
    amount         numeric(78,0) NOT NULL CHECK (amount > 0),
    fee_cap        numeric(78,0) NOT NULL CHECK (fee_cap >= 0),
    policy_version bigint        NOT NULL CHECK (policy_version >= 0 AND policy_version <= 4294967295),
    created_at     timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);
-- Serves the "same destination and amount recently" risk signal (a flag, never a dedupe rule).
CREATE INDEX withdrawal_payloads_risk
    ON withdrawal_payloads (tenant_id, destination, asset, network, amount, created_at);

-- Append-only history of every state change: who, from, to, when, why.
CREATE TABLE operation_transitions (
    transition_id bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     uuid        NOT NULL,
    op_id         uuid        NOT NULL,
    from_state    text,
    to_state      text        NOT NULL,
    actor         text        NOT NULL,
    actor_id      text        NOT NULL,
    reason        text        NOT NULL,
    version       bigint      NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);
CREATE INDEX operation_transitions_by_op ON operation_transitions (tenant_id, op_id, transition_id);

-- Ledger: one account per (tenant, account name, asset), with available and held balances.
CREATE TABLE ledger_accounts (
    tenant_id uuid          NOT NULL REFERENCES tenants,
    account   text          NOT NULL,
    asset     text          NOT NULL,
    available numeric(78,0) NOT NULL DEFAULT 0 CHECK (available >= 0),
    held      numeric(78,0) NOT NULL DEFAULT 0 CHECK (held >= 0),
    version   bigint        NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, account, asset)
);

-- One hold per operation, resolved at most once (OPEN -> SETTLED or OPEN -> RELEASED).
CREATE TABLE ledger_holds (
    tenant_id   uuid          NOT NULL,
    op_id       uuid          NOT NULL,
    account     text          NOT NULL,
    asset       text          NOT NULL,
    amount      numeric(78,0) NOT NULL CHECK (amount > 0),
    status      text          NOT NULL CHECK (status IN ('OPEN', 'SETTLED', 'RELEASED')),
    created_at  timestamptz   NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    PRIMARY KEY (tenant_id, op_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id),
    FOREIGN KEY (tenant_id, account, asset) REFERENCES ledger_accounts (tenant_id, account, asset)
);

-- Double-entry journal: every entry's postings sum to zero. Buckets: an account's 'available' and
-- 'held' balances, and 'external' (money entering or leaving the platform).
CREATE TABLE ledger_entries (
    entry_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('CREDIT', 'HOLD', 'RELEASE', 'SETTLE', 'REOPEN')),
    op_id      uuid,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ledger_postings (
    entry_id  bigint        NOT NULL REFERENCES ledger_entries,
    line      smallint      NOT NULL,
    tenant_id uuid          NOT NULL,
    account   text          NOT NULL,
    asset     text          NOT NULL,
    bucket    text          NOT NULL CHECK (bucket IN ('available', 'held', 'external')),
    amount    numeric(78,0) NOT NULL CHECK (amount <> 0),
    PRIMARY KEY (entry_id, line)
);
CREATE INDEX ledger_postings_by_account ON ledger_postings (tenant_id, account, asset);

-- Idempotent funding of accounts (later fed by deposit webhooks), keyed like withdrawals.
CREATE TABLE ledger_credits (
    tenant_id            uuid          NOT NULL REFERENCES tenants,
    idempotency_key_hash bytea         NOT NULL CHECK (octet_length(idempotency_key_hash) = 32),
    account              text          NOT NULL,
    asset                text          NOT NULL,
    amount               numeric(78,0) NOT NULL CHECK (amount > 0),
    entry_id             bigint        NOT NULL REFERENCES ledger_entries,
    created_at           timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, idempotency_key_hash)
);

-- Immutability, enforced by the database for every role (the grants below narrow it further).
CREATE FUNCTION opledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'opledger: % on % is not allowed (append-only or immutable)', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'raise_exception';
END
$$;

CREATE FUNCTION opledger_guard_operation_core() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
       OR NEW.op_id IS DISTINCT FROM OLD.op_id
       OR NEW.idempotency_key_hash IS DISTINCT FROM OLD.idempotency_key_hash
       OR NEW.payload_hash IS DISTINCT FROM OLD.payload_hash
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'opledger: the identity and payload hash of an operation are immutable'
            USING ERRCODE = 'raise_exception';
    END IF;
    IF NEW.version <> OLD.version + 1 THEN
        RAISE EXCEPTION 'opledger: every change of an operation must advance its version by one'
            USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER withdrawal_ops_immutable_core BEFORE UPDATE ON withdrawal_ops
    FOR EACH ROW EXECUTE FUNCTION opledger_guard_operation_core();
CREATE TRIGGER withdrawal_ops_no_delete BEFORE DELETE ON withdrawal_ops
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER withdrawal_payloads_immutable BEFORE UPDATE OR DELETE ON withdrawal_payloads
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER operation_transitions_append_only BEFORE UPDATE OR DELETE ON operation_transitions
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER ledger_postings_append_only BEFORE UPDATE OR DELETE ON ledger_postings
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER ledger_credits_append_only BEFORE UPDATE OR DELETE ON ledger_credits
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- A hold resolves at most once: OPEN -> SETTLED | RELEASED, and a reorg may reopen SETTLED.
CREATE FUNCTION opledger_guard_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.op_id IS DISTINCT FROM OLD.op_id
       OR NEW.account IS DISTINCT FROM OLD.account OR NEW.asset IS DISTINCT FROM OLD.asset
       OR NEW.amount IS DISTINCT FROM OLD.amount THEN
        RAISE EXCEPTION 'opledger: a hold''s account and amount are immutable' USING ERRCODE = 'raise_exception';
    END IF;
    IF NOT ((OLD.status = 'OPEN' AND NEW.status IN ('SETTLED', 'RELEASED'))
            OR (OLD.status = 'SETTLED' AND NEW.status = 'OPEN')) THEN
        RAISE EXCEPTION 'opledger: hold % -> % is not allowed', OLD.status, NEW.status
            USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER ledger_holds_resolve_once BEFORE UPDATE ON ledger_holds
    FOR EACH ROW EXECUTE FUNCTION opledger_guard_hold();
CREATE TRIGGER ledger_holds_no_delete BEFORE DELETE ON ledger_holds
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- Grants for the services' role: read everything they need, insert history, update only the
-- mutable columns. No DELETE anywhere, no UPDATE of identities, hashes or payloads.
GRANT SELECT ON tenants, api_keys TO opledger_app;
GRANT SELECT, INSERT ON withdrawal_ops, withdrawal_payloads, operation_transitions,
    ledger_accounts, ledger_holds, ledger_entries, ledger_postings, ledger_credits TO opledger_app;
GRANT UPDATE (state, risk_flags, lease_owner, lease_expires_at, signed_tx_ref, version, updated_at)
    ON withdrawal_ops TO opledger_app;
GRANT UPDATE (available, held, version) ON ledger_accounts TO opledger_app;
GRANT UPDATE (status, resolved_at) ON ledger_holds TO opledger_app;
