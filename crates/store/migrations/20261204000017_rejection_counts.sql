-- Bounded records of unauthenticated traffic (issue 15): a refused webhook request (bad
-- signature, unknown endpoint, bad headers) no longer adds a row of its own. Refusals are counted
-- per minute, tenant, source label, endpoint id prefix and reason. For requests naming no known
-- endpoint (no tenant) the label and prefix are the sender's own choice, so at most 32
-- (`opledger_rejection_unknown_cap()`) distinct (source, prefix) rows are kept per minute and
-- reason; beyond that they count under source and prefix 'other'. The inbox's retention job deletes counts
-- older than `retention_rejections_days`. 10,000 bad requests within a minute therefore leave at
-- most a few dozen rows, and the in-process counters (`opledger_inbox_requests_total`) still
-- count every one.
CREATE TABLE webhook_rejection_counts (
    minute             timestamptz NOT NULL,
    tenant_id          uuid,
    source             text        NOT NULL CHECK (length(source) <= 64),
    endpoint_id_prefix text        NOT NULL CHECK (length(endpoint_id_prefix) <= 12),
    reason             text        NOT NULL CHECK (reason ~ '^[a-z_]{1,40}$'),
    count              bigint      NOT NULL CHECK (count > 0),
    UNIQUE NULLS NOT DISTINCT (minute, tenant_id, source, endpoint_id_prefix, reason)
);
CREATE INDEX webhook_rejection_counts_by_minute ON webhook_rejection_counts (minute);

INSERT INTO webhook_rejection_counts (minute, tenant_id, source, endpoint_id_prefix, reason, count)
SELECT date_trunc('minute', received_at), tenant_id, source, endpoint_id_prefix, reason, count(*)
  FROM webhook_rejections
 GROUP BY 1, 2, 3, 4, 5;
DROP TABLE webhook_rejections;

CREATE FUNCTION opledger_rejection_unknown_cap() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 32';

-- Counts one refused request. Runs with the caller's rights (the inbox's).
CREATE FUNCTION opledger_count_rejection(p_tenant uuid, p_source text, p_prefix text, p_reason text)
RETURNS void LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
DECLARE
    m timestamptz := date_trunc('minute', now());
    src text := p_source;
    pre text := p_prefix;
BEGIN
    UPDATE public.webhook_rejection_counts SET count = count + 1
     WHERE minute = m AND tenant_id IS NOT DISTINCT FROM p_tenant AND source = src
       AND endpoint_id_prefix = pre AND reason = p_reason;
    IF FOUND THEN
        RETURN;
    END IF;
    IF p_tenant IS NULL AND (SELECT count(*) FROM public.webhook_rejection_counts
                              WHERE minute = m AND tenant_id IS NULL AND reason = p_reason)
                            >= opledger_rejection_unknown_cap() THEN
        src := 'other';
        pre := 'other';
    END IF;
    INSERT INTO public.webhook_rejection_counts AS c
           (minute, tenant_id, source, endpoint_id_prefix, reason, count)
    VALUES (m, p_tenant, src, pre, p_reason, 1)
    ON CONFLICT (minute, tenant_id, source, endpoint_id_prefix, reason)
    DO UPDATE SET count = c.count + 1;
END
$$;
REVOKE ALL ON FUNCTION opledger_count_rejection(uuid, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION opledger_count_rejection(uuid, text, text, text) TO opledger_inbox;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_rejection_counts TO opledger_inbox;
