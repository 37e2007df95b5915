-- The W3C trace context (`traceparent`: version, random trace id, random span id, flags) of the
-- call that created a withdrawal, so the background steps the operation causes later (signing,
-- submission, confirmation, reconciliation) join the same distributed trace. Written once with the
-- operation, only when tracing is on; NULL otherwise. It holds no payload data.
-- The services' role reads and inserts it through its table-level grants; it is not updatable
-- (no UPDATE grant) and the signer's column grants do not include it.
ALTER TABLE withdrawal_ops ADD COLUMN trace_context text
    CHECK (trace_context IS NULL OR octet_length(trace_context) <= 512);
