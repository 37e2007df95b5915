-- The block at and below which the chain watcher no longer re-checks inclusions for
-- reorganizations (its pinned block minus `reorg_window_blocks`), per network, written by the
-- watcher at each pass on a new head. A retiring wallet is kept while a withdrawal it signed is
-- CONFIRMED with a live inclusion above it, or while its network has no row yet: the watcher may
-- still reopen that withdrawal, and its fee bump or cancel then needs the wallet's key. A watcher
-- that stops leaves the floor where it was, so the wallet is kept however long it stays stopped.
-- Shared (one row per network, not a tenant's), like `signer_nonces`.
CREATE TABLE chain_reorg_floors (
    network     text        PRIMARY KEY,
    floor_block bigint      NOT NULL CHECK (floor_block >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE ON chain_reorg_floors TO opledger_broadcaster;
GRANT SELECT ON chain_reorg_floors TO opledger_signer;
-- The signer reads whether a withdrawal's inclusion is still within the watcher's window.
GRANT SELECT (tenant_id, op_id, block_number, reorged_at) ON inclusions TO opledger_signer;
