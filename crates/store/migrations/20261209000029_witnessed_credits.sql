-- Two independent principals for every credit (issue 25).
--
-- Until now the operations and inbox logins could credit any account through `opledger_credit`
-- with no evidence at all: money created by one login. From here on a service login only
-- *proposes* a credit, and the account moves only when the witness (its own login, its own chain
-- endpoints, the tenants' pinned trust roots) attests it:
--   * a deposit, proposed by the inbox from a verified `deposit.confirmed`, with its chain
--     evidence (network, transaction, log index for a token, recipient): the witness reads the
--     chain again with the quorum rules and attests only that exact transfer at final depth, to
--     an address registered to that tenant's account (`deposit_addresses`, written by the
--     database owner only). A deposit without chain evidence stays pending until operators'
--     signed statements witness it;
--   * an operator credit, proposed through the operations API with an operator's Ed25519-signed
--     credit statement: the witness verifies the statements against the tenant's trust statement
--     (signed by a pinned administrator key) and attests once enough distinct operators signed.
-- A proposal is not spendable: the balance shows it as pending. `opledger_attest_credit` (the
-- witness's only way in) records the attestation and applies the credit in one transaction, once,
-- and only when the proposer's login is not the witness's. `opledger_credit` (a credit with no
-- second principal) is left to the database owner: `opledger-admin credit`, opening balances.

CREATE TABLE deposit_addresses (
    network    text        NOT NULL CHECK (network ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    address    text        NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
    tenant_id  uuid        NOT NULL REFERENCES tenants,
    account    text        NOT NULL CHECK (account ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (network, address)
);

CREATE TABLE credit_proposals (
    tenant_id  uuid        NOT NULL REFERENCES tenants,
    -- The credit's key digest (`ledger_credits.idempotency_key_hash` once applied).
    credit_id  bytea       NOT NULL CHECK (length(credit_id) = 32),
    kind       text        NOT NULL CHECK (kind IN ('DEPOSIT', 'OPERATOR')),
    account    text        NOT NULL CHECK (account ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    asset      text        NOT NULL CHECK (asset ~ '^[A-Z0-9]{1,16}$'),
    amount     numeric     NOT NULL CONSTRAINT credit_proposals_amount_range
                           CHECK (amount > 0 AND amount <= 340282366920938463463374607431768211455
                                  AND amount = trunc(amount)),
    -- A deposit's chain evidence: all or nothing (log_index only for a token transfer).
    network    text        CHECK (network ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    tx_hash    text        CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    log_index  integer     CHECK (log_index >= 0),
    recipient  text        CHECK (recipient ~ '^0x[0-9a-f]{40}$'),
    login      text        NOT NULL DEFAULT session_user,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, credit_id),
    CHECK ((network IS NULL) = (tx_hash IS NULL) AND (tx_hash IS NULL) = (recipient IS NULL)
           AND (log_index IS NULL OR tx_hash IS NOT NULL)),
    CHECK (kind = 'DEPOSIT' OR tx_hash IS NULL)
);

-- Operators' signed credit statements (the statement is rebuilt from the proposal's fields by
-- whoever verifies it; only the signature and what the fields cannot say are stored).
CREATE TABLE credit_statements (
    tenant_id       uuid        NOT NULL,
    credit_id       bytea       NOT NULL,
    operator_key_id text        NOT NULL CHECK (operator_key_id ~ '^[0-9a-f]{32}$'),
    policy_version  bigint      NOT NULL CHECK (policy_version >= 1),
    signature       bytea       NOT NULL CHECK (length(signature) = 64),
    login           text        NOT NULL DEFAULT session_user,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, credit_id, operator_key_id),
    FOREIGN KEY (tenant_id, credit_id) REFERENCES credit_proposals (tenant_id, credit_id)
);

CREATE TABLE credit_attestations (
    tenant_id    uuid        NOT NULL,
    credit_id    bytea       NOT NULL,
    -- What the witness verified: the including block of a deposit, or operators' statements.
    basis        text        NOT NULL CHECK (basis IN ('CHAIN', 'OPERATORS')),
    block_number bigint      CHECK (block_number >= 0),
    block_hash   text        CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
    witness_id   text        NOT NULL CHECK (length(witness_id) BETWEEN 1 AND 128),
    entry_id     bigint      NOT NULL,
    login        text        NOT NULL DEFAULT session_user,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, credit_id),
    FOREIGN KEY (tenant_id, credit_id) REFERENCES credit_proposals (tenant_id, credit_id),
    CHECK ((basis = 'CHAIN') = (block_hash IS NOT NULL) AND (block_hash IS NULL) = (block_number IS NULL))
);

-- A chain transfer credits once, whoever proposed it. Per tenant is enough: a transfer credits
-- only the tenant its recipient is registered to, and an address is registered to one tenant.
CREATE TABLE credited_deposits (
    tenant_id uuid    NOT NULL,
    network   text    NOT NULL,
    tx_hash   text    NOT NULL,
    log_index integer NOT NULL,
    credit_id bytea   NOT NULL,
    PRIMARY KEY (tenant_id, network, tx_hash, log_index),
    FOREIGN KEY (tenant_id, credit_id) REFERENCES credit_attestations (tenant_id, credit_id)
        DEFERRABLE INITIALLY DEFERRED
);

-- Refused for good (a proposal the witness's evidence contradicts, a statement that does not
-- verify): a security signal, and the credit never applies.
CREATE TABLE credit_refusals (
    tenant_id  uuid        NOT NULL,
    credit_id  bytea       NOT NULL,
    reason     text        NOT NULL CHECK (reason ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    witness_id text        NOT NULL CHECK (length(witness_id) BETWEEN 1 AND 128),
    login      text        NOT NULL DEFAULT session_user,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, credit_id),
    FOREIGN KEY (tenant_id, credit_id) REFERENCES credit_proposals (tenant_id, credit_id)
);

CREATE TRIGGER credit_proposals_stamp BEFORE INSERT ON credit_proposals
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER credit_statements_stamp BEFORE INSERT ON credit_statements
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER credit_attestations_stamp BEFORE INSERT ON credit_attestations
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER credit_refusals_stamp BEFORE INSERT ON credit_refusals
    FOR EACH ROW EXECUTE FUNCTION opledger_stamp_login();
CREATE TRIGGER deposit_addresses_append_only BEFORE UPDATE OR DELETE ON deposit_addresses
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER credit_proposals_append_only BEFORE UPDATE OR DELETE ON credit_proposals
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER credit_statements_append_only BEFORE UPDATE OR DELETE ON credit_statements
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER credit_attestations_append_only BEFORE UPDATE OR DELETE ON credit_attestations
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER credited_deposits_append_only BEFORE UPDATE OR DELETE ON credited_deposits
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();
CREATE TRIGGER credit_refusals_append_only BEFORE UPDATE OR DELETE ON credit_refusals
    FOR EACH ROW EXECUTE FUNCTION opledger_refuse_change();

-- Which kind each proposer may propose: the inbox deposits, the operations API operator credits.
CREATE FUNCTION opledger_check_credit_proposer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF opledger_is_service() AND NOT (
           (NEW.kind = 'DEPOSIT' AND pg_has_role(session_user, 'opledger_inbox', 'MEMBER'))
        OR (NEW.kind = 'OPERATOR' AND pg_has_role(session_user, 'opledger_operations', 'MEMBER'))) THEN
        RAISE EXCEPTION 'opledger: this login may not propose a % credit', NEW.kind
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER credit_proposals_proposer BEFORE INSERT ON credit_proposals
    FOR EACH ROW EXECUTE FUNCTION opledger_check_credit_proposer();

-- Pending credits per account (the balance's `pending`), and the witness's queue, oldest first.
CREATE INDEX credit_proposals_account ON credit_proposals (tenant_id, account, asset);
CREATE INDEX credit_proposals_created ON credit_proposals (created_at);

REVOKE ALL ON deposit_addresses, credit_proposals, credit_statements, credit_attestations,
    credited_deposits, credit_refusals FROM PUBLIC;
GRANT SELECT, INSERT ON credit_proposals TO opledger_inbox, opledger_operations;
GRANT SELECT, INSERT ON credit_statements TO opledger_operations;
GRANT SELECT ON credit_statements TO opledger_inbox;
GRANT SELECT ON credit_attestations, credit_refusals
    TO opledger_inbox, opledger_operations, opledger_witness;
GRANT SELECT ON credit_proposals, credit_statements, deposit_addresses, trust_statements
    TO opledger_witness;
GRANT INSERT ON credit_refusals TO opledger_witness;

-- The witness's attestation, and the credit it allows, in one transaction: NULL (nothing written)
-- when the proposal is missing, already attested or refused, was proposed by a witness login, or
-- (for a deposit with chain evidence) its recipient is not registered to its account or the
-- transfer already credited; otherwise the new ledger entry.
CREATE FUNCTION opledger_attest_credit(p_tenant uuid, p_credit bytea, p_witness text,
                                       p_block_number bigint, p_block_hash text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    p public.credit_proposals%ROWTYPE;
    new_entry bigint;
BEGIN
    SELECT * INTO p FROM public.credit_proposals
    WHERE tenant_id = p_tenant AND credit_id = p_credit FOR UPDATE;
    IF NOT FOUND
       OR pg_has_role(p.login, 'opledger_witness', 'MEMBER')
       OR EXISTS (SELECT 1 FROM public.credit_attestations
                  WHERE tenant_id = p_tenant AND credit_id = p_credit)
       OR EXISTS (SELECT 1 FROM public.credit_refusals
                  WHERE tenant_id = p_tenant AND credit_id = p_credit)
       OR EXISTS (SELECT 1 FROM public.ledger_credits
                  WHERE tenant_id = p_tenant AND idempotency_key_hash = p_credit) THEN
        RETURN NULL;
    END IF;
    IF p.tx_hash IS NOT NULL THEN
        -- Chain evidence: the block it was found in, the registered recipient, once per transfer.
        IF p_block_hash IS NULL OR p_block_number IS NULL OR NOT EXISTS (
               SELECT 1 FROM public.deposit_addresses d
               WHERE d.network = p.network AND d.address = p.recipient
                 AND d.tenant_id = p.tenant_id AND d.account = p.account) THEN
            RETURN NULL;
        END IF;
        INSERT INTO public.credited_deposits (tenant_id, network, tx_hash, log_index, credit_id)
        VALUES (p.tenant_id, p.network, p.tx_hash, coalesce(p.log_index, -1), p.credit_id)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    ELSIF p_block_hash IS NOT NULL OR NOT EXISTS (
              SELECT 1 FROM public.credit_statements s
              WHERE s.tenant_id = p_tenant AND s.credit_id = p_credit) THEN
        -- No chain evidence: only operators' statements can witness it.
        RETURN NULL;
    END IF;
    INSERT INTO public.ledger_accounts (tenant_id, account, asset, available)
    VALUES (p.tenant_id, p.account, p.asset, p.amount)
    ON CONFLICT (tenant_id, account, asset) DO UPDATE
      SET available = ledger_accounts.available + EXCLUDED.available,
          version = ledger_accounts.version + 1;
    INSERT INTO public.ledger_entries (tenant_id, kind) VALUES (p.tenant_id, 'CREDIT')
    RETURNING entry_id INTO new_entry;
    INSERT INTO public.ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount)
    VALUES (new_entry, 1, p.tenant_id, p.account, p.asset, 'external', -p.amount),
           (new_entry, 2, p.tenant_id, p.account, p.asset, 'available', p.amount);
    INSERT INTO public.ledger_credits (tenant_id, idempotency_key_hash, account, asset, amount,
                                       entry_id)
    VALUES (p.tenant_id, p.credit_id, p.account, p.asset, p.amount, new_entry);
    INSERT INTO public.credit_attestations (tenant_id, credit_id, basis, block_number, block_hash,
                                            witness_id, entry_id)
    VALUES (p.tenant_id, p.credit_id, CASE WHEN p.tx_hash IS NULL THEN 'OPERATORS' ELSE 'CHAIN' END,
            p_block_number, p_block_hash, p_witness, new_entry);
    RETURN new_entry;
END
$$;
REVOKE ALL ON FUNCTION opledger_attest_credit(uuid, bytea, text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_attest_credit(uuid, bytea, text, bigint, text)
    TO opledger_witness;

-- No service login credits on its own any more.
REVOKE EXECUTE ON FUNCTION opledger_credit(uuid, bytea, text, text, numeric)
    FROM opledger_operations, opledger_inbox;
