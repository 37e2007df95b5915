-- Ready for a tenant-distributed engine (issue 14; docs/distribution.md).
--
-- In a multi-tenant distributed deployment (Citus: tenant tables distributed by `tenant_id`,
-- co-located; shared tables replicated to every node as reference tables), a unique constraint
-- can only be enforced within one shard, and a foreign key between two distributed tables only
-- between rows of the same tenant. So every tenant table has `tenant_id NOT NULL`, it leads every
-- primary key and unique constraint, and every foreign key between tenant tables carries it
-- first. tests/store/distribution.rs checks these rules over the catalog, with the list of shared
-- tables; this migration brings the tables that broke them into line. No column is added, so
-- the services' table and column grants stay as they were.
--
-- Identity values (entry_id, inbox_id, ...) stay unique on their own: each key below only gains
-- tenant_id in front. Applying it fails on a row whose tenant differs from its parent's (a
-- posting of another tenant's entry, an inbox work item of another tenant's event): such a row
-- is a defect to be corrected by hand first.

-- Refused webhook requests that name no known endpoint have no tenant: they count under the
-- nil UUID, which no tenant can have (tenant ids are random version-4 UUIDs, and the check
-- below refuses it), so all of them live with one shard of their own.
ALTER TABLE tenants
    ADD CONSTRAINT tenants_not_the_unknown_tenant
    CHECK (tenant_id <> '00000000-0000-0000-0000-000000000000');

UPDATE webhook_rejection_counts SET tenant_id = '00000000-0000-0000-0000-000000000000'
 WHERE tenant_id IS NULL;
ALTER TABLE webhook_rejection_counts
    ALTER COLUMN tenant_id SET NOT NULL,
    DROP CONSTRAINT webhook_rejection_counts_minute_tenant_id_source_endpoint_i_key,
    ADD PRIMARY KEY (tenant_id, minute, source, endpoint_id_prefix, reason);

-- Counts one refused request (as before; `p_tenant` NULL: no known endpoint, the nil tenant).
CREATE OR REPLACE FUNCTION opledger_count_rejection(p_tenant uuid, p_source text, p_prefix text,
                                                    p_reason text)
RETURNS void LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
DECLARE
    m timestamptz := date_trunc('minute', now());
    t uuid := coalesce(p_tenant, '00000000-0000-0000-0000-000000000000');
    src text := p_source;
    pre text := p_prefix;
BEGIN
    UPDATE public.webhook_rejection_counts SET count = count + 1
     WHERE tenant_id = t AND minute = m AND source = src AND endpoint_id_prefix = pre
       AND reason = p_reason;
    IF FOUND THEN
        RETURN;
    END IF;
    IF p_tenant IS NULL AND (SELECT count(*) FROM public.webhook_rejection_counts
                              WHERE tenant_id = t AND minute = m AND reason = p_reason)
                            >= opledger_rejection_unknown_cap() THEN
        src := 'other';
        pre := 'other';
    END IF;
    INSERT INTO public.webhook_rejection_counts AS c
           (minute, tenant_id, source, endpoint_id_prefix, reason, count)
    VALUES (m, t, src, pre, p_reason, 1)
    ON CONFLICT (tenant_id, minute, source, endpoint_id_prefix, reason)
    DO UPDATE SET count = c.count + 1;
END
$$;

-- The journal: entries and their postings and credits, keyed within the tenant.
ALTER TABLE ledger_postings DROP CONSTRAINT ledger_postings_entry_id_fkey;
ALTER TABLE ledger_credits DROP CONSTRAINT ledger_credits_entry_id_fkey;
ALTER TABLE ledger_entries
    DROP CONSTRAINT ledger_entries_pkey,
    ADD PRIMARY KEY (tenant_id, entry_id);
ALTER TABLE ledger_postings
    DROP CONSTRAINT ledger_postings_pkey,
    ADD PRIMARY KEY (tenant_id, entry_id, line),
    ADD CONSTRAINT ledger_postings_entry_fkey
        FOREIGN KEY (tenant_id, entry_id) REFERENCES ledger_entries (tenant_id, entry_id);
ALTER TABLE ledger_credits
    ADD CONSTRAINT ledger_credits_entry_fkey
        FOREIGN KEY (tenant_id, entry_id) REFERENCES ledger_entries (tenant_id, entry_id);

-- Append-only histories of an operation.
ALTER TABLE operation_transitions
    DROP CONSTRAINT operation_transitions_pkey,
    ADD PRIMARY KEY (tenant_id, transition_id);
ALTER TABLE security_events
    DROP CONSTRAINT security_events_pkey,
    ADD PRIMARY KEY (tenant_id, event_id);
ALTER TABLE inclusions
    DROP CONSTRAINT inclusions_pkey,
    ADD PRIMARY KEY (tenant_id, inclusion_id);
ALTER TABLE escalations
    DROP CONSTRAINT escalations_pkey,
    ADD PRIMARY KEY (tenant_id, escalation_id);

-- Signed attempts: a transaction hash, and an original's nonce of a sender, are unique within
-- the tenant. Across tenants a nonce is still taken once: signer_nonces (a shared table, one
-- row per wallet) hands out each nonce of a sender once, locked until the attempt commits.
ALTER TABLE tx_attempts
    DROP CONSTRAINT tx_attempts_tx_hash_key,
    ADD CONSTRAINT tx_attempts_tx_hash_key UNIQUE (tenant_id, tx_hash);
DROP INDEX tx_attempts_nonce_owner;
CREATE UNIQUE INDEX tx_attempts_nonce_owner ON tx_attempts (tenant_id, network, sender, nonce)
    WHERE kind = 'ORIGINAL';

-- The inbox: an event and everything that hangs off it, keyed within the tenant.
ALTER TABLE inbox_quarantine DROP CONSTRAINT inbox_quarantine_inbox_id_fkey;
ALTER TABLE inbox_work DROP CONSTRAINT inbox_work_inbox_id_fkey;
ALTER TABLE inbox_actions DROP CONSTRAINT inbox_actions_inbox_id_fkey;
ALTER TABLE kyt_screenings DROP CONSTRAINT kyt_screenings_inbox_id_fkey;
ALTER TABLE inbox_events
    DROP CONSTRAINT inbox_events_pkey,
    ADD PRIMARY KEY (tenant_id, inbox_id);
ALTER TABLE inbox_quarantine
    DROP CONSTRAINT inbox_quarantine_pkey,
    ADD PRIMARY KEY (tenant_id, quarantine_id),
    DROP CONSTRAINT inbox_quarantine_inbox_id_body_hash_key,
    ADD CONSTRAINT inbox_quarantine_inbox_id_body_hash_key UNIQUE (tenant_id, inbox_id, body_hash),
    ADD CONSTRAINT inbox_quarantine_event_fkey
        FOREIGN KEY (tenant_id, inbox_id) REFERENCES inbox_events (tenant_id, inbox_id);
ALTER TABLE inbox_work
    DROP CONSTRAINT inbox_work_pkey,
    ADD PRIMARY KEY (tenant_id, inbox_id),
    ADD CONSTRAINT inbox_work_event_fkey
        FOREIGN KEY (tenant_id, inbox_id) REFERENCES inbox_events (tenant_id, inbox_id);
ALTER TABLE inbox_actions
    DROP CONSTRAINT inbox_actions_pkey,
    ADD PRIMARY KEY (tenant_id, action_id),
    ADD CONSTRAINT inbox_actions_event_fkey
        FOREIGN KEY (tenant_id, inbox_id) REFERENCES inbox_events (tenant_id, inbox_id);
ALTER TABLE kyt_screenings
    ADD CONSTRAINT kyt_screenings_event_fkey
        FOREIGN KEY (tenant_id, inbox_id) REFERENCES inbox_events (tenant_id, inbox_id);

-- The processor claims within one tenant (crates/store/src/inbox.rs, `claim_work`): first the
-- tenants of the oldest due items (inbox_work_due), then that tenant's oldest due item.
CREATE INDEX inbox_work_due_by_tenant ON inbox_work (tenant_id, due_at, inbox_id)
    WHERE status = 'PENDING';
