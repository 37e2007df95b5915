-- The webhook inbox: verified inbound events, recorded together with their work in one
-- transaction before the sender gets a 2xx. Nothing here is ever deleted: bodies are purged after
-- their retention, metadata stays.

-- An endpoint is what a provider posts to (`/webhooks/{source}/{endpoint_id}`). It names the
-- tenant: nothing in a body does. `allowed_types` limits what this provider may tell us (a KYT
-- vendor cannot credit deposits).
CREATE TABLE webhook_endpoints (
    endpoint_id   text        PRIMARY KEY CHECK (endpoint_id ~ '^whe_[0-9a-f]{32}$'),
    tenant_id     uuid        NOT NULL REFERENCES tenants,
    source        text        NOT NULL CHECK (source ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    allowed_types text[]      NOT NULL CHECK (cardinality(allowed_types) > 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);
CREATE INDEX webhook_endpoints_by_tenant ON webhook_endpoints (tenant_id);

-- Verification keys of an endpoint; several may be active at once (rotation). HMAC secrets are
-- stored sealed (AEAD, key id + nonce), never in clear; Ed25519 public keys need no sealing.
CREATE TABLE webhook_secrets (
    secret_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id text        NOT NULL REFERENCES webhook_endpoints,
    kind        text        NOT NULL CHECK (kind IN ('hmac', 'ed25519')),
    key_id      smallint,
    nonce       bytea,
    material    bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz,
    CHECK ((kind = 'hmac') = (key_id IS NOT NULL AND nonce IS NOT NULL))
);
CREATE INDEX webhook_secrets_by_endpoint ON webhook_secrets (endpoint_id) WHERE retired_at IS NULL;

-- One row per (tenant, source, event id): the dedup key of the inbox pattern. `kind` is EVENT
-- (a known, allowed event with a work item) or UNHANDLED (stored, alerted, never applied).
-- The body is sealed with the tenant, source and event id as associated data.
CREATE TABLE inbox_events (
    inbox_id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id         uuid        NOT NULL REFERENCES tenants,
    source            text        NOT NULL,
    event_id          text        NOT NULL CHECK (length(event_id) BETWEEN 1 AND 256),
    endpoint_id       text        NOT NULL REFERENCES webhook_endpoints,
    body_hash         bytea       NOT NULL CHECK (octet_length(body_hash) = 32),
    event_type        text        CHECK (length(event_type) <= 64),
    kind              text        NOT NULL CHECK (kind IN ('EVENT', 'UNHANDLED')),
    unhandled_reason  text,
    sent_at           timestamptz NOT NULL,
    received_at       timestamptz NOT NULL DEFAULT now(),
    body_key_id       smallint,
    body_nonce        bytea,
    body_ciphertext   bytea,
    body_purged_at    timestamptz,
    resolved_at       timestamptz,
    resolved_by       text,
    resolution        text,
    UNIQUE (tenant_id, source, event_id),
    CHECK ((kind = 'UNHANDLED') = (unhandled_reason IS NOT NULL)),
    CHECK ((body_ciphertext IS NULL) = (body_purged_at IS NOT NULL))
);
CREATE INDEX inbox_events_unhandled ON inbox_events (received_at)
    WHERE kind = 'UNHANDLED' AND resolved_at IS NULL;

-- Same event id, different body: quarantined, paged, never applied. One row per distinct body.
CREATE TABLE inbox_quarantine (
    quarantine_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    inbox_id        bigint      NOT NULL REFERENCES inbox_events,
    tenant_id       uuid        NOT NULL,
    body_hash       bytea       NOT NULL CHECK (octet_length(body_hash) = 32),
    received_at     timestamptz NOT NULL DEFAULT now(),
    body_key_id     smallint,
    body_nonce      bytea,
    body_ciphertext bytea,
    body_purged_at  timestamptz,
    resolved_at     timestamptz,
    resolved_by     text,
    resolution      text,
    UNIQUE (inbox_id, body_hash),
    CHECK ((body_ciphertext IS NULL) = (body_purged_at IS NOT NULL))
);
CREATE INDEX inbox_quarantine_open ON inbox_quarantine (received_at) WHERE resolved_at IS NULL;

-- The work item the processor consumes. PENDING (due at due_at), PARKED (the state machine does
-- not allow it yet: woken when the operation's version moves past parked_version), DONE, DEAD
-- (poison: owned by a team until an operator replays or resolves it), RESOLVED.
CREATE TABLE inbox_work (
    inbox_id         bigint      PRIMARY KEY REFERENCES inbox_events,
    tenant_id        uuid        NOT NULL,
    op_id            uuid,
    status           text        NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING', 'PARKED', 'DONE', 'DEAD', 'RESOLVED')),
    attempts         integer     NOT NULL DEFAULT 0,
    due_at           timestamptz NOT NULL DEFAULT now(),
    parked_version   bigint,
    outcome          text,
    last_error       text,
    owner            text        CHECK (owner ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'PARKED') = (parked_version IS NOT NULL)),
    CHECK ((status = 'DEAD') <= (owner IS NOT NULL))
);
CREATE INDEX inbox_work_due ON inbox_work (due_at) WHERE status = 'PENDING';
CREATE INDEX inbox_work_parked ON inbox_work (tenant_id, op_id) WHERE status = 'PARKED';
CREATE INDEX inbox_work_dead ON inbox_work (tenant_id, updated_at) WHERE status = 'DEAD';

-- Every operator action on the inbox (replay, resolve): append-only.
CREATE TABLE inbox_actions (
    action_id  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    inbox_id   bigint      NOT NULL REFERENCES inbox_events,
    action     text        NOT NULL CHECK (action IN ('REPLAY', 'RESOLVE')),
    actor_id   text        NOT NULL,
    reason     text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    acted_at   timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER inbox_actions_append_only BEFORE UPDATE OR DELETE ON inbox_actions
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- Requests refused before anything was trusted (bad signature, unknown endpoint): minimal
-- metadata for security monitoring. No body, no headers, no endpoint id in clear.
CREATE TABLE webhook_rejections (
    rejection_id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id          uuid,
    source             text        NOT NULL CHECK (length(source) <= 64),
    endpoint_id_prefix text        NOT NULL CHECK (length(endpoint_id_prefix) <= 12),
    reason             text        NOT NULL CHECK (reason ~ '^[a-z_]{1,40}$'),
    received_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_rejections_recent ON webhook_rejections (received_at);

-- KYT screening results recorded on an operation (one per provider reference).
CREATE TABLE kyt_screenings (
    tenant_id     uuid        NOT NULL,
    op_id         uuid        NOT NULL,
    source        text        NOT NULL,
    provider_ref  text        NOT NULL,
    result        text        NOT NULL CHECK (result IN ('PASS', 'FAIL')),
    inbox_id      bigint      NOT NULL REFERENCES inbox_events,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id, source, provider_ref),
    FOREIGN KEY (tenant_id, op_id) REFERENCES withdrawal_ops (tenant_id, op_id)
);
CREATE TRIGGER kyt_screenings_append_only BEFORE UPDATE OR DELETE ON kyt_screenings
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

GRANT SELECT ON webhook_endpoints, webhook_secrets TO opledger_app;
GRANT SELECT, INSERT ON inbox_events, inbox_quarantine TO opledger_app;
-- Identity and content hash of a recorded event never change; only purge and resolution do.
GRANT UPDATE (body_key_id, body_nonce, body_ciphertext, body_purged_at, resolved_at, resolved_by,
    resolution) ON inbox_events, inbox_quarantine TO opledger_app;
GRANT SELECT, INSERT, UPDATE ON inbox_work TO opledger_app;
GRANT SELECT, INSERT ON inbox_actions, webhook_rejections, kyt_screenings TO opledger_app;
