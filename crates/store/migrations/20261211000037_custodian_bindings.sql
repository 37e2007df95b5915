-- An operator's binding of a provider transaction to a custodian withdrawal whose provider cannot
-- be asked for our reference (the no_lookup profile): after an ambiguous answer the withdrawal is
-- UNKNOWN, never sent again; an operator lists the provider's transactions with its destination
-- and amount and binds one, with a reason. The executor then reads that transaction from the
-- provider's list and decides on it as on any record of the provider's (custodian_records); the
-- witness attests a release only from its own listing of the same transaction.
--
-- One binding per withdrawal, never changed; one withdrawal per provider transaction, and never a
-- transaction the provider answered another withdrawal's request with (so that one transfer never
-- settles two withdrawals).

CREATE TABLE custodian_bindings (
    tenant_id       uuid        NOT NULL,
    op_id           uuid        NOT NULL,
    provider_id     text        NOT NULL CHECK (length(provider_id) BETWEEN 1 AND 128),
    -- The transaction as the list showed it when bound, and the SHA-256 of that list answer.
    status          text        NOT NULL CHECK (length(status) BETWEEN 1 AND 64),
    tx_hashes       text[]      NOT NULL DEFAULT '{}'
        CHECK (array_to_string(tx_hashes, ',') ~ '^(0x[0-9a-f]{64}(,0x[0-9a-f]{64})*)?$'),
    answer_sha256   bytea       NOT NULL CHECK (octet_length(answer_sha256) = 32),
    -- The operator's API key id (its public half) and why.
    operator_key_id text        NOT NULL CHECK (length(operator_key_id) BETWEEN 1 AND 128),
    reason          text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 200),
    executor_id     text        NOT NULL CHECK (length(executor_id) BETWEEN 1 AND 128),
    login           text        NOT NULL DEFAULT session_user,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, op_id),
    UNIQUE (tenant_id, provider_id),
    FOREIGN KEY (tenant_id, op_id) REFERENCES custodian_requests (tenant_id, op_id)
);

-- The rule is the database's: a no_lookup request, a withdrawal BROADCAST or UNKNOWN, and a
-- provider transaction no other withdrawal's answer, record or binding names, in any tenant (two
-- tenants' accounts may be one at the provider). Bindings of one provider transaction are taken
-- one at a time (a transaction-scoped advisory lock on it), so two cannot pass the check at once.
CREATE FUNCTION opledger_check_custodian_binding() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM custodian_requests q
                   JOIN withdrawal_ops o USING (tenant_id, op_id)
                   WHERE q.tenant_id = NEW.tenant_id AND q.op_id = NEW.op_id
                     AND q.profile = 'no_lookup' AND o.executor = 'custodian'
                     AND o.state IN ('BROADCAST', 'UNKNOWN')) THEN
        RAISE EXCEPTION 'custodian binding: not a no_lookup withdrawal BROADCAST or UNKNOWN'
            USING ERRCODE = 'check_violation';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('custodian_binding:' || NEW.provider_id, 0));
    IF EXISTS (SELECT 1 FROM custodian_bindings b
               WHERE b.provider_id = NEW.provider_id
                 AND (b.tenant_id, b.op_id) <> (NEW.tenant_id, NEW.op_id)) THEN
        RAISE EXCEPTION 'custodian binding: the provider transaction is bound to another withdrawal'
            USING ERRCODE = 'unique_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM custodian_answers a
               WHERE a.provider_id = NEW.provider_id
                 AND (a.tenant_id, a.op_id) <> (NEW.tenant_id, NEW.op_id))
       OR EXISTS (SELECT 1 FROM custodian_records r
                  WHERE r.provider_id = NEW.provider_id
                    AND (r.tenant_id, r.op_id) <> (NEW.tenant_id, NEW.op_id)) THEN
        RAISE EXCEPTION 'custodian binding: the provider transaction is another withdrawal''s'
            USING ERRCODE = 'unique_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER custodian_bindings_check BEFORE INSERT ON custodian_bindings
    FOR EACH ROW EXECUTE FUNCTION opledger_check_custodian_binding();
-- The inserting login and the time are the database's word, not the caller's.
CREATE TRIGGER custodian_bindings_stamp BEFORE INSERT ON custodian_bindings
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER custodian_bindings_append_only BEFORE UPDATE OR DELETE ON custodian_bindings
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

REVOKE ALL ON custodian_bindings FROM PUBLIC;
REVOKE ALL ON FUNCTION opledger_check_custodian_binding() FROM PUBLIC;
GRANT SELECT, INSERT ON custodian_bindings TO opledger_custodian;
GRANT SELECT ON custodian_bindings
    TO opledger_witness, opledger_reconciler, opledger_operations;
-- The executor authenticates the operators who call its API.
GRANT SELECT ON api_keys TO opledger_custodian;
