-- Two reads the broadcaster makes many times a second stop growing with the tables.
--
-- 1. The fair due queue (`next_due`) asks for APPROVED and SIGNED operations, or SIGNING ones
--    whose lease expired. `withdrawal_ops_due` covered only the first two states, so the OR
--    could not be answered from an index and every read scanned the whole operations table
--    (3.2 ms of a 6.5 ms read at 8,100 operations, and growing with every withdrawal ever made).
--    `withdrawal_ops_due_states` holds SIGNING rows too: both arms of the OR come from it.
--
-- 2. The watcher's reorganization check asks for the distinct (number, hash) blocks holding live
--    inclusions in its window. It read every inclusion in the window (all of a busy chain's
--    transfers) and deduplicated them: 21-27 ms a pass at about 100 transfers a block. With the
--    hash in the index, the store walks the distinct blocks one index probe each
--    (`Store::recent_inclusion_blocks`). The index also serves `inclusions_in` (number and hash)
--    and every read of `inclusions_live` (number first), which it replaces.
--
-- Each build scans its table and blocks writes to it meanwhile. On large tables, build the two
-- indexes beforehand without blocking (the migration keeps an index of the same name):
--   CREATE INDEX CONCURRENTLY withdrawal_ops_due_states ON withdrawal_ops (state, updated_at)
--       WHERE state IN ('APPROVED', 'SIGNING', 'SIGNED');
--   CREATE INDEX CONCURRENTLY inclusions_live_blocks ON inclusions (block_number, block_hash)
--       WHERE reorged_at IS NULL;
-- (A concurrent build that failed leaves an invalid index of that name: drop it first.)
CREATE INDEX IF NOT EXISTS withdrawal_ops_due_states ON withdrawal_ops (state, updated_at)
    WHERE state IN ('APPROVED', 'SIGNING', 'SIGNED');
DROP INDEX IF EXISTS withdrawal_ops_due;

CREATE INDEX IF NOT EXISTS inclusions_live_blocks ON inclusions (block_number, block_hash)
    WHERE reorged_at IS NULL;
DROP INDEX IF EXISTS inclusions_live;
