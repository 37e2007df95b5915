-- A custodian payout is bound to after its request: when the executor stores a request for a
-- withdrawal on a network it watches, it stores with it what its own evidence showed just before
-- the claim: the newest final block, and the pinned head by number and hash. A payout included at
-- or below that final block was made before the request (a final block never changes); one
-- included at or below that head, while that head is still canonical, too: either is an earlier
-- transfer of the custodian's wallet of the same asset and amount to the same destination, and
-- settles nothing (PAYOUT_BEFORE_REQUEST). All NULL: the network was not watched when the request
-- was stored, or it was stored before this migration; on a network watched now such a request is
-- escalated (CUSTODIAN_PAYOUT_UNBOUND), never settled on a transaction alone.
-- The row stays append-only (custodian_requests_append_only): the bound is never moved.

ALTER TABLE custodian_requests
    ADD COLUMN final_block_before bigint,
    ADD COLUMN head_block_before  bigint,
    ADD COLUMN head_hash_before   bytea,
    ADD CONSTRAINT custodian_requests_bound CHECK (
        (final_block_before IS NULL AND head_block_before IS NULL AND head_hash_before IS NULL)
        OR (final_block_before >= 0 AND head_block_before >= final_block_before
            AND octet_length(head_hash_before) = 32));
