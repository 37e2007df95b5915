//! Releases re-checked like settlements (issue 25, finding 6), end to end on a real anvil node:
//! a signed, broadcast withdrawal is cancelled by our own cancel, the reconciler proposes the
//! release, the witness attests, the hold is released; then a reorganization deeper than the
//! confirmations drops the cancel's block. The watcher reopens the release (UNKNOWN, the funds
//! held again, escalated), and the reconciler decides again from evidence: the original mined
//! instead settles the hold once (paid once); the cancel mined again elsewhere needs a fresh
//! proposal and a fresh attestation before the hold is released again.

use opledger_reconciler::Finding;
use opledger_tests::BOB;
use opledger_tests::chain::{CONFIRMATIONS, Chain, broadcaster_config, reconciler_config, witness};
use opledger_tests::signer::approve;
use opledger_witness::Outcome;
use serde_json::json;

const AMOUNT: u128 = 7_000_000_000_000_000;
const FUNDED: u128 = 10_000_000_000_000_000_000;

/// A withdrawal released on our own mined cancel, with everything a test needs to reorganize it.
struct Released {
    chain: Chain,
    withdrawal_id: String,
    watcher: opledger_broadcaster::watcher::Watcher,
    reconciler: opledger_reconciler::Reconciler,
    witness: opledger_witness::Witness,
    original_raw: String,
    cancel_raw: String,
    /// The block that includes the cancel (the release's proof).
    cancel_block: u64,
    /// BOB's balance before the withdrawal.
    before: u128,
}

async fn raw_attempt(chain: &Chain, withdrawal_id: &str, attempt: i32) -> anyhow::Result<String> {
    let (raw,): (Vec<u8>,) =
        sqlx::query_as("SELECT raw_tx FROM tx_attempts WHERE op_id = $1 AND attempt = $2")
            .bind(withdrawal_id.parse::<uuid::Uuid>()?)
            .bind(attempt)
            .fetch_one(chain.stack.admin.pool())
            .await?;
    Ok(format!("0x{}", hex::encode(raw)))
}

async fn released() -> anyhow::Result<Released> {
    let chain = Chain::start().await?;
    let (stack, acme, node, signer) = (&chain.stack, &chain.acme, &chain.node, &chain.signer);
    node.set_automine(false).await?;
    let cfg = broadcaster_config(stack, signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let reconciler = opledger_reconciler::reconciler(
        &reconciler_config(stack, signer, &node.rpc_url()),
        stack.admin.reconciler(),
    )?;
    let witness = witness(stack, &[&node.rpc_url()], 1).await?;
    let before = node.balance(BOB).await?;
    let w = stack.withdraw(acme, &AMOUNT.to_string(), BOB).await?;
    approve(stack, acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    let original_raw = raw_attempt(&chain, &w.withdrawal_id, 1).await?;
    let (original_hash,): (String,) =
        sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert!(node.drop_transaction(&original_hash).await?, "dropped");
    node.mine(1).await?;
    // Not found, nonce unconsumed: our cancel at the same nonce.
    let findings = reconciler.tick(0, 64).await;
    assert!(
        matches!(findings.as_slice(), [Finding::CancelSubmitted(_)]),
        "{findings:?}"
    );
    let cancel_raw = raw_attempt(&chain, &w.withdrawal_id, 2).await?;
    node.mine(1).await?;
    let cancel_block = node.block_number().await?;
    node.mine(CONFIRMATIONS - 1).await?;
    // Final: proposed, attested by the witness, released.
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::AwaitingWitness]);
    assert_eq!(witness.tick(64).await, vec![Outcome::Attested]);
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::VerifiedNotSent]);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "VERIFIED_NOT_SENT");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (FUNDED, 0)
    );
    let (proof_block,): (i64,) =
        sqlx::query_as("SELECT block_number FROM release_attestations WHERE op_id = $1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(u64::try_from(proof_block)?, cancel_block);
    // While the proof's block is canonical, the watcher's re-check changes nothing.
    node.mine(1).await?;
    let pass = watcher.tick(64).await;
    assert_eq!((pass.new_heads, pass.releases_reopened), (1, 0), "{pass:?}");
    assert_eq!(stack.state(&w.withdrawal_id).await?, "VERIFIED_NOT_SENT");
    Ok(Released {
        withdrawal_id: w.withdrawal_id,
        watcher,
        reconciler,
        witness,
        original_raw,
        cancel_raw,
        cancel_block,
        before,
        chain,
    })
}

impl Released {
    /// Replaces every block from the cancel's up with as many new ones, `raw` included in the
    /// block `offset` above the cancel's: the cancel's block is gone, the head height the same.
    async fn reorganize(&self, raw: &str, offset: u64) -> anyhow::Result<()> {
        let node = &self.chain.node;
        let depth = node.block_number().await? - self.cancel_block + 1;
        node.rpc("anvil_reorg", json!([depth, [[raw, offset]]]))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }

    /// The watcher's pass after the reorganization: it reopens the release (UNKNOWN, the funds
    /// held again, escalated), once.
    async fn reopened(&self) -> anyhow::Result<()> {
        let stack = &self.chain.stack;
        let pass = self.watcher.tick(64).await;
        assert_eq!(pass.releases_reopened, 1, "{pass:?}");
        let (state, hold, reasons): (String, String, Vec<String>) = sqlx::query_as(
            "SELECT o.state, h.status, \
               ARRAY(SELECT reason_code FROM escalations e WHERE e.op_id = o.op_id) \
             FROM withdrawal_ops o JOIN ledger_holds h USING (tenant_id, op_id) \
             WHERE o.op_id = $1",
        )
        .bind(self.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(stack.admin.pool())
        .await?;
        assert_eq!(
            (state.as_str(), hold.as_str(), reasons),
            ("UNKNOWN", "OPEN", vec!["RELEASE_REORGANIZED".to_owned()])
        );
        assert_eq!(
            stack.balance(self.chain.acme.id, "treasury", "ETH").await?,
            (FUNDED - AMOUNT, AMOUNT),
            "held again, never available"
        );
        // Once: another pass (a new head) finds nothing more to reopen.
        self.chain.node.mine(1).await?;
        assert_eq!(self.watcher.tick(64).await.releases_reopened, 0);
        Ok(())
    }

    async fn count(&self, sql: &'static str) -> anyhow::Result<i64> {
        let (n,): (i64,) = sqlx::query_as(sql)
            .bind(self.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(self.chain.stack.admin.pool())
            .await?;
        Ok(n)
    }
}

#[tokio::test]
async fn a_reorganized_cancel_reopens_the_release_and_the_original_then_settles_once()
-> anyhow::Result<()> {
    let r = released().await?;
    let (stack, acme, node) = (&r.chain.stack, &r.chain.acme, &r.chain.node);
    // The reorganization drops the cancel; the original transfer is mined in its place (its
    // nonce is free again), at final depth.
    r.reorganize(&r.original_raw, 0).await?;
    assert_eq!(
        node.balance(BOB).await?,
        r.before + AMOUNT,
        "the chain paid BOB"
    );
    r.reopened().await?;
    // The reconciler decides again from evidence: our transfer at final depth settles the hold.
    assert_eq!(r.reconciler.tick(0, 64).await, vec![Finding::Confirmed]);
    assert_eq!(stack.state(&r.withdrawal_id).await?, "CONFIRMED");
    let (hold,): (String,) = sqlx::query_as("SELECT status FROM ledger_holds WHERE op_id = $1")
        .bind(r.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!(hold, "SETTLED");
    // Paid once, debited once: no double credit of the released amount.
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (FUNDED - AMOUNT, 0)
    );
    assert_eq!(node.balance(BOB).await?, r.before + AMOUNT);
    assert_eq!(
        (
            stack.entries(acme.id, "RELEASE").await?,
            stack.entries(acme.id, "REOPEN").await?,
            stack.entries(acme.id, "SETTLE").await?
        ),
        (1, 1, 1)
    );
    assert_eq!(r.witness.tick(64).await, Vec::<Outcome>::new());
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_cancel_mined_again_needs_a_fresh_proposal_and_attestation() -> anyhow::Result<()> {
    let r = released().await?;
    let (stack, acme, node) = (&r.chain.stack, &r.chain.acme, &r.chain.node);
    // The reorganization drops the cancel's block; the cancel is mined again one block higher
    // (another block, another hash), still at final depth.
    r.reorganize(&r.cancel_raw, 1).await?;
    r.reopened().await?;
    // The old proof is marked: it never releases again. The reconciler proposes the new
    // evidence; the hold stays until the witness attests it.
    assert_eq!(
        r.reconciler.tick(0, 64).await,
        vec![Finding::AwaitingWitness]
    );
    assert_eq!(stack.state(&r.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (FUNDED - AMOUNT, AMOUNT)
    );
    assert_eq!(
        r.count("SELECT count(*) FROM release_proposals WHERE op_id = $1")
            .await?,
        2
    );
    assert_eq!(r.witness.tick(64).await, vec![Outcome::Attested]);
    assert_eq!(
        r.reconciler.tick(0, 64).await,
        vec![Finding::VerifiedNotSent]
    );
    assert_eq!(stack.state(&r.withdrawal_id).await?, "VERIFIED_NOT_SENT");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (FUNDED, 0)
    );
    assert_eq!(
        (
            r.count("SELECT count(*) FROM release_attestations WHERE op_id = $1")
                .await?,
            r.count("SELECT count(*) FROM release_reorgs WHERE op_id = $1")
                .await?,
            stack.entries(acme.id, "RELEASE").await?,
            stack.entries(acme.id, "REOPEN").await?,
        ),
        (2, 1, 2, 1)
    );
    // The original can never be mined now: its nonce is taken by the cancel again.
    let original = hex::decode(r.original_raw.trim_start_matches("0x"))?;
    assert!(node.send_raw_transaction(&original).await.is_err());
    node.mine(1).await?;
    assert_eq!(node.balance(BOB).await?, r.before, "BOB was never paid");
    // The new proof is watched in turn: canonical, nothing reopened.
    assert_eq!(r.watcher.tick(64).await.releases_reopened, 0);
    let violations: Vec<_> = stack
        .admin
        .check_invariants()
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?
        .into_iter()
        // Bounds releases at one per hold; a reopened release is released again on new evidence.
        .filter(|v| v.invariant != "each hold was resolved at most once")
        .collect();
    assert!(violations.is_empty(), "{violations:?}");
    Ok(())
}
