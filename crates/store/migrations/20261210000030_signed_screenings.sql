-- KYT results and risk acknowledgements reach the signer as signed facts (issue 25, item 6).
--
-- Until now the signer checked neither: a KYT pass was a row the inbox's login writes
-- (kyt_screenings.result = 'PASS'), and an approver's acknowledgement of a withdrawal's risk flags
-- was a column the approvals login writes (approvals.acknowledged_flags) beside a signature that
-- did not cover it. From here on:
--   * an approval statement carries the acknowledged flags in its signed bytes (field 7,
--     crates/domain/testdata/SIGNED_STATEMENTS.md); the signer rebuilds the statement from the
--     stored columns, acknowledged_flags included, so a flag added or removed after signing
--     breaks the signature, and an approval that does not acknowledge every risk flag of the
--     withdrawal does not count (opledger_domain::approval::quorum);
--   * a KYT result counts only when the provider's Standard Webhooks `v1a` (Ed25519) signature
--     over `{event id}.{timestamp}.{body}` verifies with a KYT key of the tenant's signed trust
--     statement (opledger_webhook::screening::judge). The inbox keeps, with each event, the `v1a`
--     signature that verified, and copies the delivery whole into the screening row.
-- Rows recorded before this migration carry no signature: they no longer count as a pass.

ALTER TABLE inbox_events
    ADD COLUMN signature bytea CHECK (signature IS NULL OR octet_length(signature) = 64);

ALTER TABLE kyt_screenings
    ADD COLUMN event_id  text,
    ADD COLUMN signed_at bigint,
    ADD COLUMN body      bytea,
    ADD COLUMN signature bytea,
    -- A signature travels with everything it covers.
    ADD CONSTRAINT kyt_screenings_signed_delivery CHECK (
        signature IS NULL
        OR (octet_length(signature) = 64 AND event_id IS NOT NULL AND signed_at IS NOT NULL
            AND body IS NOT NULL AND octet_length(body) <= 1048576));

-- The signer reads the screening results and the acknowledgements it verifies.
GRANT SELECT (tenant_id, op_id, result, event_id, signed_at, body, signature)
    ON kyt_screenings TO opledger_signer;
GRANT SELECT (acknowledged_flags) ON approvals TO opledger_signer;
