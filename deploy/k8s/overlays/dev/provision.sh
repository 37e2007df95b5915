#!/bin/sh
# Development provisioning, run by the opledger-dev-provision Job once `opledger-admin migrate`
# has created the services' group roles (opledger_operations ... opledger_witness,
# opledger_custodian, opledger_signer) (until then it fails and the Job retries). Idempotent.
#
# * One login role per service (production: deploy/postgres/roles.sql), with the user and password
#   of the database URL that service is given, so each password is written in one place.
# * The demo tenant with the fixed id that signer.toml gives the hot wallet.
set -eu

# login_role <database url> <group role>
login_role() {
    credentials="${1#postgres://}"
    credentials="${credentials%%@*}"
    user="${credentials%%:*}"
    password="${credentials#*:}"
    psql -v ON_ERROR_STOP=1 -q -v role="$user" -v password="$password" -v grp="$2" <<'SQL'
SET client_min_messages = warning;
SELECT format('CREATE ROLE %I LOGIN', :'role')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I PASSWORD %L', :'role', :'password') \gexec
SELECT format('GRANT %I TO %I', :'grp', :'role') \gexec
SQL
    echo "login role $user in $2"
}

login_role "$OPERATIONS_DATABASE_URL" opledger_operations
login_role "$APPROVALS_DATABASE_URL" opledger_approvals
login_role "$BROADCASTER_DATABASE_URL" opledger_broadcaster
login_role "$RECONCILER_DATABASE_URL" opledger_reconciler
login_role "$INBOX_DATABASE_URL" opledger_inbox
# The witness's role is in opledger_witness only: it reads what a release rests on and records
# attestations and refusals, nothing else.
login_role "$WITNESS_DATABASE_URL" opledger_witness
# The custodian executor's role is in opledger_custodian only: it moves custodian withdrawals,
# stores their requests and the provider's records, and proposes releases the witness attests.
login_role "$CUSTODIAN_DATABASE_URL" opledger_custodian
# The signer's role is in opledger_signer only: its grants and trigger allow only signing moves.
login_role "$SIGNER_DATABASE_URL" opledger_signer

psql -v ON_ERROR_STOP=1 -q <<'SQL'
INSERT INTO tenants (tenant_id, name)
VALUES ('de000000-0000-4000-8000-000000000001', 'demo')
ON CONFLICT DO NOTHING;
SQL
echo "tenant demo"
