-- Login roles for a deployment. Run as a superuser once per cluster, after `opledger-admin migrate`
-- (the migrations create the NOLOGIN group roles opledger_app and opledger_signer).
--
--   * the owner: the role that runs `opledger-admin migrate` and the admin CLI; owns every object;
--     never used by a long-running service;
--   * one login role per service, each a member of opledger_app, so that a leaked service password
--     cannot alter history, payloads or hashes (see the GRANTs in crates/store/migrations);
--   * the signer (issue 3) gets its own login role in opledger_signer only.
--
-- Replace the passwords (or use your platform's secret store / IAM auth) before running.

CREATE ROLE opledger_owner LOGIN PASSWORD 'change-me-owner';
GRANT CREATE ON DATABASE opledger TO opledger_owner;

CREATE ROLE opledger_operations LOGIN PASSWORD 'change-me-operations' IN ROLE opledger_app;
ALTER ROLE opledger_operations SET statement_timeout = '10s';
ALTER ROLE opledger_operations SET idle_in_transaction_session_timeout = '30s';

-- The signer: a member of opledger_signer only. Its grants allow reading what it verifies and
-- writing only signing columns, attempts and nonces (crates/store/migrations/*_signing.sql).
CREATE ROLE opledger_signer_svc LOGIN PASSWORD 'change-me-signer' IN ROLE opledger_signer;
ALTER ROLE opledger_signer_svc SET statement_timeout = '10s';

-- The approvals service, like the operations service, is a member of opledger_app.
CREATE ROLE opledger_approvals LOGIN PASSWORD 'change-me-approvals' IN ROLE opledger_app;

-- The workers and the inbox are members of opledger_app too: they move operations only through
-- the transition function and its conditional updates, like the APIs.
CREATE ROLE opledger_broadcaster LOGIN PASSWORD 'change-me-broadcaster' IN ROLE opledger_app;
ALTER ROLE opledger_broadcaster SET statement_timeout = '10s';
CREATE ROLE opledger_reconciler LOGIN PASSWORD 'change-me-reconciler' IN ROLE opledger_app;
ALTER ROLE opledger_reconciler SET statement_timeout = '10s';
CREATE ROLE opledger_inbox LOGIN PASSWORD 'change-me-inbox' IN ROLE opledger_app;
ALTER ROLE opledger_inbox SET statement_timeout = '10s';
ALTER ROLE opledger_inbox SET idle_in_transaction_session_timeout = '30s';
