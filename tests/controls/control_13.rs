//! Control 13: the serialization limits are written down (docs/serialization.md) and the statement
//! matches the code: the lease default, the nonce row lock (an upsert held until commit), the queue claims, the fast-mode-only
//! relaxed durability, the failover topology of `scripts/ha.sh`; and two writers racing on one operation through separate connection pools
//! cannot both win.

use crate::repo_file;
use opledger_domain::state::{Actor, OperationState};
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreConfig};
use opledger_tests::{ALICE, Stack};

#[test]
fn control_13_the_serialization_statement_exists_and_matches_the_code() -> anyhow::Result<()> {
    let doc = repo_file("docs/serialization.md")?;
    for section in ["## Single-writer scope", "## Failover", "## Multi-region"] {
        assert!(
            doc.contains(section),
            "docs/serialization.md lacks {section}"
        );
    }
    assert!(doc.contains("Owner: platform-engineering"));
    assert!(doc.contains("single writer"));

    let lease = opledger_signer::Config::default().lease_secs;
    assert!(
        doc.contains(&format!("`lease_secs` = {lease} by default")),
        "the documented signer lease is not the configured {lease} s"
    );
    let signing = repo_file("crates/store/src/signing.rs")?;
    assert!(doc.contains("`signer_nonces (network, sender)`"));
    assert!(doc.contains("advances the row by the batch's size"));
    assert!(signing.contains(
        "ON CONFLICT (network, sender) DO UPDATE SET next_nonce = signer_nonces.next_nonce + $4"
    ));
    let inbox = repo_file("crates/store/src/inbox.rs")?;
    assert!(doc.contains("`FOR UPDATE SKIP LOCKED`"));
    assert!(inbox.contains("FOR UPDATE OF w SKIP LOCKED"));
    let transition = repo_file("crates/store/src/transition.rs")?;
    assert!(doc.contains("`opledger_store::transition::transition_in`"));
    assert!(transition.contains("pub async fn transition_in("));
    assert!(transition.contains("WHERE tenant_id = $1 AND op_id = $2 AND state = $3"));

    // The failover topology is the one documented: strict synchronous replication, a crashed
    // primary failed over at once, a router that follows Patroni's leader and cuts the sessions
    // of a node that lost it.
    let ha = repo_file("scripts/ha.sh")?;
    for setting in [
        "synchronous_mode: true",
        "synchronous_mode_strict: true",
        "synchronous_commit: \"on\"",
        "primary_start_timeout: 0",
        "use_pg_rewind: true",
        "option httpchk OPTIONS /primary",
        "on-marked-down shutdown-sessions",
    ] {
        assert!(ha.contains(setting), "scripts/ha.sh lacks {setting}");
    }
    for claim in [
        "`synchronous_mode_strict: true`",
        "`primary_start_timeout: 0`",
        "`OPTIONS /primary`",
        "`on-marked-down shutdown-sessions`",
        "### The signed-bytes gate",
    ] {
        assert!(doc.contains(claim), "docs/serialization.md lacks {claim}");
    }

    // Relaxed durability exists only in the tests' fast mode.
    let pg = repo_file("scripts/pg.sh")?;
    assert!(doc.contains("`synchronous_commit = on`"));
    let relaxed = pg
        .find("synchronous_commit = off")
        .ok_or_else(|| anyhow::anyhow!("pg.sh never relaxes durability?"))?;
    let fast_branch = pg[..relaxed]
        .rfind("OPLEDGER_PG_FAST")
        .ok_or_else(|| anyhow::anyhow!("synchronous_commit = off outside the fast mode"))?;
    assert!(
        relaxed - fast_branch < 400,
        "synchronous_commit = off is not in the fast-mode branch"
    );
    Ok(())
}

#[tokio::test]
async fn control_13_two_writers_on_separate_pools_cannot_both_move_one_operation()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let op_id = w.withdrawal_id.parse()?;
    // Two "hosts": two independent pools on the same primary, 16 writers each.
    let mut tasks = Vec::new();
    for host in 0..2 {
        let store = Store::connect(
            &stack.url(opledger_testkit::ServiceRole::Reconciler),
            StoreConfig::default(),
        )
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        for n in 0..16 {
            let store = store.clone();
            let tenant = acme.id;
            tasks.push(tokio::spawn(async move {
                let actor_id = format!("host{host}-writer{n}");
                let request = TransitionRequest::new(
                    tenant,
                    op_id,
                    OperationState::Requested,
                    OperationState::Rejected,
                    Actor::Operator,
                    &actor_id,
                    "race",
                );
                store.transition(&request).await.is_ok()
            }));
        }
    }
    let mut winners = 0;
    for task in tasks {
        winners += usize::from(task.await?);
    }
    assert_eq!(winners, 1, "exactly one writer moves the operation");
    assert_eq!(stack.state(&w.withdrawal_id).await?, "REJECTED");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (1000, 0),
        "released once"
    );
    // The create and the one move: no second transition was logged.
    assert_eq!(stack.count("operation_transitions", acme.id).await?, 2);
    stack.assert_invariants().await?;
    Ok(())
}
