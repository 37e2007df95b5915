-- Database roles. Roles are cluster-wide, so they are created only when missing.
--   * the owner role is whoever runs the migrations (`opledger-admin migrate`): it owns every object;
--   * opledger_app: the services' group role; login users are granted it (`IN ROLE opledger_app`);
--   * opledger_signer: the signer's group role; its column-level grants come with the signer.
-- Group roles cannot log in; deployments create login users that inherit them.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_app') THEN
        CREATE ROLE opledger_app NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'opledger_signer') THEN
        CREATE ROLE opledger_signer NOLOGIN;
    END IF;
END
$$;
