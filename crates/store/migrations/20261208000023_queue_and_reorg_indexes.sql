-- Two reads the broadcaster makes many times a second stop growing with the tables.
--
-- 1. The fair due queue (`next_due`) asks for APPROVED and SIGNED operations, or SIGNING ones
--    whose lease expired. `withdrawal_ops_due` covered only the first two states, so the OR
--    could not be answered from an index and every read scanned the whole operations table
--    (3.2 ms of a 6.5 ms read at 8,100 operations, and growing with every withdrawal ever made).
--    The index now holds SIGNING rows too: both arms of the OR come from it.
DROP INDEX withdrawal_ops_due;
CREATE INDEX withdrawal_ops_due ON withdrawal_ops (state, updated_at)
    WHERE state IN ('APPROVED', 'SIGNING', 'SIGNED');

-- 2. The watcher's reorganization check asks for the distinct (number, hash) blocks holding live
--    inclusions in its window. It read every inclusion in the window (all of a busy chain's
--    transfers) and deduplicated them: 27 ms a pass at about 100 transfers a block. With the
--    hash in the index, the store walks the distinct blocks one index probe each
--    (`Store::recent_inclusion_blocks`). The index also serves `inclusions_in` (number and hash)
--    and every read of `inclusions_live` (number first), which it replaces.
CREATE INDEX inclusions_live_blocks ON inclusions (block_number, block_hash)
    WHERE reorged_at IS NULL;
DROP INDEX inclusions_live;
