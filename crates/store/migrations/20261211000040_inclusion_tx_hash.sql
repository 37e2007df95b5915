-- One transaction settles one withdrawal, whoever executed it: before a custodian withdrawal
-- settles on a transaction its provider names, the executor checks that no live inclusion of
-- another withdrawal (a local signer's or another custodian withdrawal's) names it, as it checks
-- the other withdrawals' provider records. The check reads live inclusions by transaction hash.

CREATE INDEX inclusions_live_tx_hash ON inclusions (tx_hash) WHERE reorged_at IS NULL;
