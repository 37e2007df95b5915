-- A no_lookup provider's accepted answer names the transaction it created (Coinbase Prime's
-- transaction_id): the executor follows that transaction by its id, as it follows one an
-- operator bound, and the witness attests a release only from its own read of the same
-- transaction. The witness reads the answers for it; both look answers up by provider id (the
-- transactions our other withdrawals account for, and the binding trigger's check).

GRANT SELECT ON custodian_answers TO opledger_witness;

CREATE INDEX custodian_answers_provider_id ON custodian_answers (provider_id)
    WHERE provider_id IS NOT NULL;
