//! The pgbench script of the webhook benchmark's ceiling: the ingress's own transaction as raw SQL.

use crate::pgbench;
use opledger_store::inbox::RECORD_DELIVERY_SQL;
use opledger_webhook::seal::{NONCE_LEN, TAG_LEN};
use rand::RngCore;

use super::options::PGBENCH_SOURCE;

/// The pgbench script of one new delivery: `RECORD_DELIVERY_SQL` as one statement (its own
/// transaction), exactly as [`Store::record_delivery`] runs it on the new-event path, with literals of the sizes the
/// ingress binds (36-character event id, 32-byte hash, 24-byte nonce, body + 16-byte tag) and a
/// new event id per transaction.
pub(super) fn record_delivery_script(endpoint_id: &str, body_len: usize) -> anyhow::Result<String> {
    let mut nonce = [0_u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    let mut ciphertext = vec![0_u8; body_len + TAG_LEN];
    rand::rng().fill_bytes(&mut ciphertext);
    let event_id =
        "('msg_' || lpad(to_hex(:r1::bigint), 16, '0') || lpad(to_hex(:r2::bigint), 16, '0'))";
    let body_hash = "sha256(('b' || :r1::text || ':' || :r2::text)::bytea)";
    let endpoint = format!("'{endpoint_id}'");
    let source = format!("'{PGBENCH_SOURCE}'");
    let nonce = format!("'\\x{}'::bytea", hex::encode(nonce));
    let ciphertext = format!("'\\x{}'::bytea", hex::encode(ciphertext));
    let record = pgbench::substitute(
        RECORD_DELIVERY_SQL,
        &[
            ":tenant::uuid",
            &source,
            event_id,
            &endpoint,
            body_hash,
            "'deposit.confirmed'",
            "'EVENT'",
            "NULL::text",
            "now()",
            "1::smallint",
            &nonce,
            &ciphertext,
            "NULL::uuid",
            // A `v1` (shared-secret) delivery keeps no signature.
            "NULL::bytea",
        ],
    )?;
    Ok(format!(
        "\\set r1 random(1, 4000000000000000000)\n\\set r2 random(1, 4000000000000000000)\n\
         {record};\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::options::BODY_LEN;

    #[test]
    fn the_script_has_no_unsubstituted_parameter() {
        let script =
            record_delivery_script(&format!("whe_{}", "0".repeat(32)), BODY_LEN).expect("script");
        assert!(!script.contains('$'), "{script}");
        assert!(
            !script.contains("BEGIN;"),
            "one statement is its own transaction"
        );
    }
}
