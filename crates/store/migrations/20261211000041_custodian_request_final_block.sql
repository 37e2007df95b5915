-- A custodian payout is bound to after its request: when the executor stores a request for a
-- withdrawal on a network it watches, it stores with it the newest block its own evidence counted
-- final at that moment. A final block never changes, so a transfer made after the request is
-- included only in a later block; a transaction a provider names that is included at or below it
-- (an earlier transfer from the custodian's wallet of the same asset and amount to the same
-- destination) paid something else, and settles nothing (PAYOUT_BEFORE_REQUEST). NULL: the
-- network was not watched when the request was stored, or it was stored before this migration.
-- The row stays append-only (custodian_requests_append_only): the bound is never moved.

ALTER TABLE custodian_requests
    ADD COLUMN final_block_before bigint CHECK (final_block_before >= 0);
