-- Amounts stay in their domain (issue 15): every amount the ledger stores fits the amount type
-- (unsigned 128 bits, 340282366920938463463374607431768211455), and so does an account's total,
-- available + held, so moving money between its buckets can never leave the range either. A
-- credit or deposit that would exceed it fails on these constraints and commits nothing (the
-- store answers OUT_OF_RANGE, the inbox dead-letters the deposit); a stored balance therefore
-- always reads back as an amount. Applying this migration fails on an account that is already
-- out of range: such an account must be corrected by hand first (it could not be read anyway).
ALTER TABLE ledger_accounts
    ADD CONSTRAINT ledger_accounts_amount_range
    CHECK (available + held <= 340282366920938463463374607431768211455);
ALTER TABLE ledger_holds
    ADD CONSTRAINT ledger_holds_amount_range
    CHECK (amount <= 340282366920938463463374607431768211455);
ALTER TABLE ledger_credits
    ADD CONSTRAINT ledger_credits_amount_range
    CHECK (amount <= 340282366920938463463374607431768211455);
ALTER TABLE ledger_postings
    ADD CONSTRAINT ledger_postings_amount_range
    CHECK (abs(amount) <= 340282366920938463463374607431768211455);
ALTER TABLE withdrawal_payloads
    ADD CONSTRAINT withdrawal_payloads_amount_range
    CHECK (amount <= 340282366920938463463374607431768211455
           AND fee_cap <= 340282366920938463463374607431768211455);
