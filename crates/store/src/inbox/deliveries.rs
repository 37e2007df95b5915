//! Recording verified deliveries: the inbox row and its work item in one statement (one at a time
//! or a batch), a repeated event id as a duplicate or a quarantined different body, and the counts
//! of refused requests.

use super::endpoints::Endpoint;
use super::sealed::SealedBody;
use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::ids::{OperationId, TenantId};

/// What kind of delivery the ingress verified.
#[derive(Debug, Clone, Copy)]
pub enum DeliveryClass<'a> {
    /// A known event type this endpoint may send: recorded with a work item.
    Event {
        /// The event type.
        event_type: &'a str,
        /// The operation it is about, if any (for waking parked items).
        op_id: Option<OperationId>,
    },
    /// Unknown type, unexpected schema or a type this endpoint may not send: stored, never applied.
    Unhandled {
        /// The declared type, if any (at most 64 characters).
        event_type: Option<&'a str>,
        /// A machine code (`unknown_type`, `schema`, `type_not_allowed`).
        reason: &'a str,
    },
}

impl DeliveryClass<'_> {
    /// The inbox row's `event_type`, `kind`, `unhandled_reason` and the work item's `op_id`.
    fn columns(&self) -> (Option<&str>, &'static str, Option<&str>, Option<uuid::Uuid>) {
        match *self {
            DeliveryClass::Event { event_type, op_id } => {
                (Some(event_type), "EVENT", None, op_id.map(|o| o.as_uuid()))
            }
            DeliveryClass::Unhandled { event_type, reason } => {
                (event_type, "UNHANDLED", Some(reason), None)
            }
        }
    }
}

/// A verified delivery to record.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The endpoint it arrived on.
    pub endpoint: &'a Endpoint,
    /// The sender's event id (`webhook-id`).
    pub event_id: &'a str,
    /// SHA-256 of the raw body.
    pub body_hash: [u8; 32],
    /// The sender's timestamp (`webhook-timestamp`).
    pub sent_at: DateTime<Utc>,
    /// The raw body, sealed with the tenant, source and event id as associated data.
    pub body: &'a SealedBody,
    /// What it is.
    pub class: DeliveryClass<'a>,
    /// The `v1a` signature that verified it, kept so that a third party can verify the delivery
    /// again (`opledger_webhook::Verified::signature`); `None` for `v1`.
    pub signature: Option<&'a [u8; 64]>,
}

/// What recording a delivery did; every variant is committed and may be acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// New event, recorded with its work item.
    Accepted {
        /// Its inbox row.
        inbox_id: i64,
    },
    /// New, stored as UNHANDLED (no work item).
    Unhandled {
        /// Its inbox row.
        inbox_id: i64,
    },
    /// The same event id with the same body was recorded before: nothing new.
    Duplicate {
        /// The existing row.
        inbox_id: i64,
    },
    /// The same event id with a different body: quarantined, never applied.
    Quarantined {
        /// The original row.
        inbox_id: i64,
        /// False when this very body was already quarantined.
        first_time: bool,
    },
}

/// The recording statement: inbox row and work item in one statement, nothing on a duplicate id.
/// `$1` tenant, `$2` source, `$3` event id, `$4` endpoint, `$5` body hash, `$6` event type,
/// `$7` kind, `$8` unhandled reason, `$9` sent at, `$10` key id, `$11` nonce, `$12` ciphertext,
/// `$13` operation id, `$14` the `v1a` signature. Public so the benchmark runs the exact same SQL
/// through pgbench.
pub const RECORD_DELIVERY_SQL: &str = "WITH ev AS ( \
       INSERT INTO inbox_events (tenant_id, source, event_id, endpoint_id, body_hash, event_type, \
         kind, unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, signature) \
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $14) \
       ON CONFLICT (tenant_id, source, event_id) DO NOTHING RETURNING inbox_id), \
     work AS ( \
       INSERT INTO inbox_work (inbox_id, tenant_id, op_id) \
       SELECT inbox_id, $1, $13 FROM ev WHERE $7 = 'EVENT') \
     SELECT inbox_id FROM ev";

/// [`RECORD_DELIVERY_SQL`] for several deliveries in one statement (so one transaction and one
/// commit): arrays of the same columns, one element per delivery, plus its position (`$14`) and
/// signature (`$15`).
/// Rows are inserted in key order (two concurrent batches lock the same keys in the same order)
/// and the positions of the new rows are returned; a known event id returns nothing for its
/// position.
pub const RECORD_DELIVERIES_SQL: &str = "WITH input AS ( \
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], \
         $6::text[], $7::text[], $8::text[], $9::timestamptz[], $10::int2[], $11::bytea[], \
         $12::bytea[], $13::uuid[], $14::int4[], $15::bytea[]) \
       AS i (tenant_id, source, event_id, endpoint_id, body_hash, event_type, kind, \
         unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, op_id, position, \
         signature)), \
     ev AS ( \
       INSERT INTO inbox_events (tenant_id, source, event_id, endpoint_id, body_hash, event_type, \
         kind, unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, signature) \
       SELECT tenant_id, source, event_id, endpoint_id, body_hash, event_type, kind, \
         unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, signature \
       FROM input ORDER BY tenant_id, source, event_id \
       ON CONFLICT (tenant_id, source, event_id) DO NOTHING \
       RETURNING inbox_id, tenant_id, source, event_id), \
     found AS ( \
       SELECT i.position, i.kind, i.op_id, ev.inbox_id, ev.tenant_id \
       FROM ev JOIN input i USING (tenant_id, source, event_id)), \
     work AS ( \
       INSERT INTO inbox_work (inbox_id, tenant_id, op_id) \
       SELECT inbox_id, tenant_id, op_id FROM found WHERE kind = 'EVENT') \
     SELECT position, inbox_id FROM found";

impl Store {
    /// Records a verified delivery: inbox row and work item in one statement (one transaction);
    /// on a known event id compares body hashes (duplicate, or quarantine of the different body).
    /// Returns only after commit: any error means nothing was acknowledged.
    pub async fn record_delivery(&self, delivery: &Delivery<'_>) -> Result<Recorded> {
        let endpoint = delivery.endpoint;
        let (event_type, kind, reason, op_id) = delivery.class.columns();
        // A new event is one statement, so one round trip: the inbox row and its work item commit
        // together or not at all (a single statement is its own transaction).
        opledger_failpoint::hit("webhook.before_commit");
        let inserted: Option<(i64,)> = sqlx::query_as(RECORD_DELIVERY_SQL)
            .bind(endpoint.tenant_id.as_uuid())
            .bind(&endpoint.source)
            .bind(delivery.event_id)
            .bind(&endpoint.endpoint_id)
            .bind(delivery.body_hash.as_slice())
            .bind(event_type)
            .bind(kind)
            .bind(reason)
            .bind(delivery.sent_at)
            .bind(delivery.body.key_id)
            .bind(delivery.body.nonce.as_slice())
            .bind(delivery.body.ciphertext.as_slice())
            .bind(op_id)
            .bind(delivery.signature.map(|s| s.as_slice()))
            .fetch_optional(&self.pool)
            .await?;
        let recorded = match inserted {
            Some((inbox_id,)) if kind == "EVENT" => Recorded::Accepted { inbox_id },
            Some((inbox_id,)) => Recorded::Unhandled { inbox_id },
            // A known event id: compare bodies; a different one is quarantined (idempotent too).
            None => self.record_repeat(delivery).await?,
        };
        opledger_failpoint::hit("webhook.after_commit");
        Ok(recorded)
    }

    /// [`Store::record_delivery`] for several deliveries with ONE statement and commit: the new
    /// ones are inserted together (inbox rows and work items), then each known event id is
    /// compared with what is stored (duplicate or quarantine), and a second delivery of an event
    /// id within the same call is a repeat of the first. Returns one result per delivery, in
    /// order, only after commit: on any error nothing of the statement was committed.
    pub async fn record_deliveries(&self, deliveries: &[Delivery<'_>]) -> Result<Vec<Recorded>> {
        let mut seen = std::collections::HashSet::new();
        // Only the first delivery of each event id goes into the statement.
        let first: Vec<bool> = deliveries
            .iter()
            .map(|d| seen.insert((d.endpoint.tenant_id, &d.endpoint.source, d.event_id)))
            .collect();
        let mut columns = DeliveryColumns::default();
        for (i, delivery) in deliveries.iter().enumerate().filter(|(i, _)| first[*i]) {
            columns.push(i, delivery)?;
        }
        opledger_failpoint::hit("webhook.before_commit");
        let c = columns; // moved into the binds, column by column
        let inserted: Vec<(i32, i64)> = sqlx::query_as(RECORD_DELIVERIES_SQL)
            .bind(c.tenant_id)
            .bind(c.source)
            .bind(c.event_id)
            .bind(c.endpoint_id)
            .bind(c.body_hash)
            .bind(c.event_type)
            .bind(c.kind)
            .bind(c.reason)
            .bind(c.sent_at)
            .bind(c.key_id)
            .bind(c.nonce)
            .bind(c.ciphertext)
            .bind(c.op_id)
            .bind(c.position)
            .bind(c.signature)
            .fetch_all(&self.pool)
            .await?;
        opledger_failpoint::hit("webhook.after_commit");
        let mut recorded: Vec<Option<Recorded>> = vec![None; deliveries.len()];
        for (position, inbox_id) in inserted {
            let i = usize::try_from(position).map_err(|_| StoreError::Corrupt { what: "batch" })?;
            let new = match deliveries.get(i).map(|d| d.class) {
                Some(DeliveryClass::Event { .. }) => Recorded::Accepted { inbox_id },
                Some(DeliveryClass::Unhandled { .. }) => Recorded::Unhandled { inbox_id },
                None => return Err(StoreError::Corrupt { what: "batch" }),
            };
            recorded[i] = Some(new);
        }
        let mut out = Vec::with_capacity(deliveries.len());
        for (delivery, done) in deliveries.iter().zip(recorded) {
            out.push(match done {
                Some(done) => done,
                // A known event id (stored earlier, or earlier in this call).
                None => self.record_repeat(delivery).await?,
            });
        }
        Ok(out)
    }

    async fn record_repeat(&self, delivery: &Delivery<'_>) -> Result<Recorded> {
        let endpoint = delivery.endpoint;
        let (inbox_id, stored_hash): (i64, Vec<u8>) = sqlx::query_as(
            "SELECT inbox_id, body_hash FROM inbox_events \
             WHERE tenant_id = $1 AND source = $2 AND event_id = $3",
        )
        .bind(endpoint.tenant_id.as_uuid())
        .bind(&endpoint.source)
        .bind(delivery.event_id)
        .fetch_one(&self.pool)
        .await?;
        if stored_hash == delivery.body_hash {
            return Ok(Recorded::Duplicate { inbox_id });
        }
        let new = sqlx::query(
            "INSERT INTO inbox_quarantine (inbox_id, tenant_id, body_hash, \
               body_key_id, body_nonce, body_ciphertext) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (tenant_id, inbox_id, body_hash) DO NOTHING",
        )
        .bind(inbox_id)
        .bind(endpoint.tenant_id.as_uuid())
        .bind(delivery.body_hash.as_slice())
        .bind(delivery.body.key_id)
        .bind(delivery.body.nonce.as_slice())
        .bind(delivery.body.ciphertext.as_slice())
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(Recorded::Quarantined {
            inbox_id,
            first_time: new == 1,
        })
    }

    /// Counts a refused request (bad signature, unknown endpoint) in this minute's row of
    /// `webhook_rejection_counts` for its tenant, source label, endpoint id prefix and reason:
    /// minimal metadata, and a bounded number of rows however many requests are refused (labels
    /// and prefixes naming no known endpoint are capped per minute, the rest count as `other`).
    pub async fn record_webhook_rejection(
        &self,
        tenant_id: Option<TenantId>,
        source: &str,
        endpoint_id_prefix: &str,
        reason: &str,
    ) -> Result<()> {
        sqlx::query("SELECT opledger_count_rejection($1, $2, $3, $4)")
            .bind(tenant_id.map(|t| t.as_uuid()))
            .bind(source)
            .bind(endpoint_id_prefix)
            .bind(reason)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Deliveries as the column arrays of [`RECORD_DELIVERIES_SQL`].
#[derive(Default)]
struct DeliveryColumns {
    tenant_id: Vec<uuid::Uuid>,
    source: Vec<String>,
    event_id: Vec<String>,
    endpoint_id: Vec<String>,
    body_hash: Vec<Vec<u8>>,
    event_type: Vec<Option<String>>,
    kind: Vec<&'static str>,
    reason: Vec<Option<String>>,
    sent_at: Vec<DateTime<Utc>>,
    key_id: Vec<i16>,
    nonce: Vec<Vec<u8>>,
    ciphertext: Vec<Vec<u8>>,
    op_id: Vec<Option<uuid::Uuid>>,
    position: Vec<i32>,
    signature: Vec<Option<Vec<u8>>>,
}

impl DeliveryColumns {
    fn push(&mut self, position: usize, d: &Delivery<'_>) -> Result<()> {
        let (event_type, kind, reason, op_id) = d.class.columns();
        self.position
            .push(i32::try_from(position).map_err(|_| StoreError::Corrupt { what: "batch" })?);
        self.tenant_id.push(d.endpoint.tenant_id.as_uuid());
        self.source.push(d.endpoint.source.clone());
        self.event_id.push(d.event_id.to_owned());
        self.endpoint_id.push(d.endpoint.endpoint_id.clone());
        self.body_hash.push(d.body_hash.to_vec());
        self.event_type.push(event_type.map(str::to_owned));
        self.kind.push(kind);
        self.reason.push(reason.map(str::to_owned));
        self.sent_at.push(d.sent_at);
        self.key_id.push(d.body.key_id);
        self.nonce.push(d.body.nonce.clone());
        self.ciphertext.push(d.body.ciphertext.clone());
        self.op_id.push(op_id);
        self.signature.push(d.signature.map(|s| s.to_vec()));
        Ok(())
    }
}
