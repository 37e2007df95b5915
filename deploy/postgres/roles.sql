-- Login roles for a deployment. Run as a superuser once per cluster, after `opledger-admin migrate`
-- (the migrations create the NOLOGIN group roles of the services: opledger_operations,
-- opledger_approvals, opledger_broadcaster, opledger_reconciler, opledger_inbox, opledger_witness,
-- opledger_custodian, opledger_signer).
--
--   * the owner: the role that runs `opledger-admin migrate` and the admin CLI; owns every object;
--     never used by a long-running service;
--   * one login role per service, each a member of that service's group role ONLY: the grants of
--     each group are what that service's code does and no more (crates/store/migrations
--     *_service_roles.sql): an operation is inserted only in REQUESTED together with its hold,
--     a state changes only along the transition table and only as that service's own actors,
--     balances change only through the ledger functions, approvals are written by the approvals
--     role only. A leaked service password is bounded by its role (docs/threat-model.md).
--
-- Replace the passwords (or use your platform's secret store / IAM auth) before running.

CREATE ROLE opledger_owner LOGIN PASSWORD 'change-me-owner';
-- No service needs temporary tables; without them none can shadow a table in a session of its own.
REVOKE TEMPORARY ON DATABASE opledger FROM PUBLIC;
GRANT CREATE ON DATABASE opledger TO opledger_owner;

-- Hardening, where a superuser exists (managed PostgreSQL may offer none; nothing depends on it):
-- advisory locks only for the owner (the migrator's lock, and the lease and pass-lock functions
-- it owns) and the inbox (its rejection counts' turn, migration 21). No service login can then
-- take an advisory lock of another's class, nor fill the lock table with advisory locks. The
-- watcher lease and the pass locks do not rest on this (migration 26). Connected to the opledger
-- database: these grants are per database. Idempotent: run it again after a restore.
DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname ~ '^pg_.*advisory'
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO opledger_owner', f);
    END LOOP;
END
$$;
GRANT EXECUTE ON FUNCTION pg_advisory_xact_lock(integer, integer) TO opledger_inbox;

CREATE ROLE opledger_operations_svc LOGIN PASSWORD 'change-me-operations' IN ROLE opledger_operations;
ALTER ROLE opledger_operations_svc SET statement_timeout = '10s';
ALTER ROLE opledger_operations_svc SET idle_in_transaction_session_timeout = '30s';

CREATE ROLE opledger_approvals_svc LOGIN PASSWORD 'change-me-approvals' IN ROLE opledger_approvals;
ALTER ROLE opledger_approvals_svc SET statement_timeout = '10s';

-- The signer: a member of opledger_signer only. Its grants allow reading what it verifies and
-- writing only signing columns, attempts and nonces (crates/store/migrations/*_signing.sql).
CREATE ROLE opledger_signer_svc LOGIN PASSWORD 'change-me-signer' IN ROLE opledger_signer;
ALTER ROLE opledger_signer_svc SET statement_timeout = '10s';

CREATE ROLE opledger_broadcaster_svc LOGIN PASSWORD 'change-me-broadcaster' IN ROLE opledger_broadcaster;
ALTER ROLE opledger_broadcaster_svc SET statement_timeout = '10s';
CREATE ROLE opledger_reconciler_svc LOGIN PASSWORD 'change-me-reconciler' IN ROLE opledger_reconciler;
ALTER ROLE opledger_reconciler_svc SET statement_timeout = '10s';
CREATE ROLE opledger_inbox_svc LOGIN PASSWORD 'change-me-inbox' IN ROLE opledger_inbox;
ALTER ROLE opledger_inbox_svc SET statement_timeout = '10s';
ALTER ROLE opledger_inbox_svc SET idle_in_transaction_session_timeout = '30s';
-- The witness: a member of opledger_witness only (reads what a release rests on, inserts
-- attestations and refusals). Its password belongs on the witness's own host, apart from the
-- reconciler's: one login holding both would be both principals of a release.
CREATE ROLE opledger_witness_svc LOGIN PASSWORD 'change-me-witness' IN ROLE opledger_witness;
ALTER ROLE opledger_witness_svc SET statement_timeout = '10s';
-- The custodian executor: a member of opledger_custodian only (moves the withdrawals a custodian
-- executes, stores their requests and the provider's records, proposes releases the witness must
-- attest). Only where a tenant's network is routed to a custodian.
CREATE ROLE opledger_custodian_svc LOGIN PASSWORD 'change-me-custodian' IN ROLE opledger_custodian;
ALTER ROLE opledger_custodian_svc SET statement_timeout = '10s';
