//! The database's release rule (`opledger_release_witnessed`, migration 28) and the domain's
//! (`opledger_domain::witness::release_allowed`) agree: at every step of a sequence of
//! proposals and attestations (foreign evidence, other blocks, the real one), the database
//! releases exactly when some recorded proposal and attestation pair is allowed by the domain.

use opledger_domain::evidence::{BlockRef, Hash32};
use opledger_domain::witness::{Principal, Record, ReleaseEvidence, release_allowed};
use opledger_store::witness::hash_text;
use opledger_tests::signer::{InProcessSigner, approve, client, sign_request};
use opledger_tests::{ALICE, Stack};

fn evidence(tx_hash: Hash32, number: u64, block: u8) -> ReleaseEvidence {
    ReleaseEvidence {
        tx_hash,
        block: BlockRef {
            number,
            hash: [block; 32],
        },
    }
}

/// The domain's answer over every recorded (proposal, attestation) pair.
fn domain_allows(attempts: &[Hash32], proposals: &[Record], attestations: &[Record]) -> bool {
    if attempts.is_empty() {
        return release_allowed(attempts, None, None).is_ok();
    }
    proposals.iter().any(|p| {
        attestations
            .iter()
            .any(|a| release_allowed(attempts, Some(p), Some(a)).is_ok())
    })
}

async fn database_allows(stack: &Stack, op: uuid::Uuid) -> anyhow::Result<bool> {
    let (witnessed,): (bool,) = sqlx::query_as(
        "SELECT opledger_release_witnessed(tenant_id, op_id) FROM withdrawal_ops WHERE op_id = $1",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?;
    Ok(witnessed)
}

async fn insert(
    stack: &Stack,
    table: &str,
    op: uuid::Uuid,
    e: &ReleaseEvidence,
) -> anyhow::Result<()> {
    let (who, extra) = match table {
        "release_proposals" => ("principal, principal_id", "'reconciler', 'test'"),
        _ => ("witness_id", "'test'"),
    };
    let sql = format!(
        "INSERT INTO {table} (tenant_id, op_id, tx_hash, block_number, block_hash, {who}) \
         SELECT tenant_id, op_id, $2, $3, $4, {extra} FROM withdrawal_ops WHERE op_id = $1"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(op)
        .bind(hash_text(&e.tx_hash))
        .bind(i64::try_from(e.block.number)?)
        .bind(hash_text(&e.block.hash))
        .execute(stack.admin.pool())
        .await?;
    Ok(())
}

#[tokio::test]
async fn the_database_release_rule_is_the_domain_rule() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let signed = stack.withdraw(&acme, "1000", ALICE).await?;
    let never_signed = stack.withdraw(&acme, "2000", ALICE).await?;
    approve(&stack, &acme, &signed).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &signed.withdrawal_id))
        .await?;
    let op: uuid::Uuid = signed.withdrawal_id.parse()?;
    let (hash,): (String,) =
        sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(op)
            .fetch_one(stack.admin.pool())
            .await?;
    let mut ours = [0_u8; 32];
    hex::decode_to_slice(hash.trim_start_matches("0x"), &mut ours)?;
    let attempts = [ours];

    // Never signed: released on one principal's word, as before.
    assert!(domain_allows(&[], &[], &[]));
    assert!(database_allows(&stack, never_signed.withdrawal_id.parse()?).await?);

    let foreign = evidence([9; 32], 10, 7);
    let real = evidence(ours, 10, 7);
    let other_block = evidence(ours, 11, 7);
    let steps: [(&str, ReleaseEvidence); 6] = [
        ("release_proposals", foreign),
        ("release_attestations", foreign),
        ("release_proposals", real),
        ("release_proposals", other_block),
        ("release_attestations", other_block),
        ("release_attestations", real),
    ];
    let (mut proposals, mut attestations) = (Vec::new(), Vec::new());
    assert_eq!(
        database_allows(&stack, op).await?,
        domain_allows(&attempts, &proposals, &attestations)
    );
    for (i, (table, e)) in steps.iter().enumerate() {
        insert(&stack, table, op, e).await?;
        match *table {
            "release_proposals" => proposals.push(Record {
                principal: Principal::Reconciler,
                evidence: *e,
            }),
            _ => attestations.push(Record {
                principal: Principal::Witness,
                evidence: *e,
            }),
        }
        let domain = domain_allows(&attempts, &proposals, &attestations);
        assert_eq!(
            database_allows(&stack, op).await?,
            domain,
            "step {i}: {table} {e:?}"
        );
        // Foreign evidence attested never releases; the first matching pair of our attempt does.
        assert_eq!(domain, i >= 4, "step {i}");
    }
    Ok(())
}

#[tokio::test]
async fn the_witness_reads_its_release_queue_a_page_at_a_time_round_robin() -> anyhow::Result<()> {
    // Proposals the witness cannot decide yet (their endpoints lag, their attempt is not final)
    // stay in its queue; read oldest first with a limit, a page of them would hide every later
    // proposal for good. The queue is paged after the last proposal read instead.
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let mut ops = Vec::new();
    for _ in 0..5 {
        let w = stack.withdraw(&acme, "1000", ALICE).await?;
        let op: uuid::Uuid = w.withdrawal_id.parse()?;
        insert(&stack, "release_proposals", op, &evidence([7; 32], 10, 1)).await?;
        ops.push(op);
    }
    let mut read = Vec::new();
    let mut after = None;
    for _ in 0..3 {
        let page = stack.admin.releases_to_witness(after.as_ref(), 2).await?;
        read.extend(page.iter().map(|p| p.op_id.as_uuid()));
        after = page.last().cloned();
    }
    assert_eq!(read, ops, "every proposal once, in proposal order");
    assert!(
        stack
            .admin
            .releases_to_witness(after.as_ref(), 2)
            .await?
            .is_empty()
    );
    let first = stack.admin.releases_to_witness(None, 2).await?;
    assert_eq!(
        first.iter().map(|p| p.op_id.as_uuid()).collect::<Vec<_>>(),
        ops[..2]
    );
    Ok(())
}
