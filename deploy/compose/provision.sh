#!/bin/sh
# Development provisioning, run by compose once `opledger-admin migrate` has created the schema and
# the services' group roles (opledger_operations, opledger_approvals, opledger_broadcaster,
# opledger_reconciler, opledger_inbox, opledger_witness, opledger_custodian, opledger_signer).
# Idempotent: every `docker compose up` runs it.
#
# * One login role per service (production: deploy/postgres/roles.sql). User and password come from
#   the database_url in that service's secret config, so each password is written in one file.
# * The demo tenant with the fixed id that secrets.example/signer.toml gives the hot wallet
#   (`opledger-admin tenant create` would pick a random id).
set -eu

export PGHOST=postgres PGUSER=postgres PGDATABASE=opledger
PGPASSWORD="$(cat /run/secrets/postgres_password)"
export PGPASSWORD

# login_role <secret config file> <group role>
login_role() {
    url="$(sed -n 's/^database_url *= *"\(.*\)"$/\1/p' "$1")"
    credentials="${url#postgres://}"
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

for service in operations approvals broadcaster reconciler inbox witness custodian; do
    # Each service's login is a member of its own role only: grants are per service.
    login_role "/run/secrets/${service}_config" "opledger_${service}"
done
# The signer's role is in opledger_signer only: its grants and trigger allow only signing moves.
login_role /run/secrets/signer_config opledger_signer

psql -v ON_ERROR_STOP=1 -q <<'SQL'
INSERT INTO tenants (tenant_id, name)
VALUES ('de000000-0000-4000-8000-000000000001', 'demo')
ON CONFLICT DO NOTHING;
SQL
echo "tenant demo"
