//! One JSON-RPC node at a time turned lagging, pruned, lying or down: never a reading that the
//! chain does not support, and never one node's word alone; a node of another chain is no
//! evidence at all.

use crate::{World, config, sender};
use opledger_chain::evidence::{
    EvidenceReader, Finality, Inclusion, NoAgreement, PinError, Reading,
};
use opledger_testkit::{Anvil, AnvilOptions, RpcMode};

#[tokio::test]
async fn two_honest_endpoints_agree_on_a_final_inclusion() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, included) = world.send().await?;
    assert_eq!(included.number, 1);
    world.anvil.mine(1).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;

    let pass = reader.pin().await?;
    assert_eq!(pass.pinned, world.block(2).await?);
    assert_eq!(pass.final_block, included);
    let reading = pass.read(sender()?, 0, &[tx]).await?;
    assert_eq!(
        reading,
        Reading {
            pinned: world.block(2).await?,
            final_block: included,
            inclusions: vec![Some(Inclusion {
                block: included,
                succeeded: true
            })],
            nonce_at_pinned: 1,
            nonce_at_final: 1,
        }
    );
    Ok(())
}

#[tokio::test]
async fn a_read_is_one_batched_request_per_endpoint() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (first, first_block) = world.send().await?;
    let (second, second_block) = world.send().await?;
    world.anvil.mine(3).await?;
    // Head 5, final block 4: neither inclusion's block is known to the pass yet.
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;
    assert_eq!((pass.pinned.number, pass.final_block.number), (5, 4));

    let before: Vec<u64> = world.proxies.iter().map(|p| p.requests()).collect();
    let reading = pass.read(sender()?, 0, &[first, second]).await?;
    assert_eq!(
        reading.inclusions,
        vec![
            Some(Inclusion {
                block: first_block,
                succeeded: true
            }),
            Some(Inclusion {
                block: second_block,
                succeeded: true
            }),
        ]
    );
    assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (2, 2));
    // Receipts and nonces in one batch, then the two unknown block hashes in a second one.
    for (proxy, before) in world.proxies.iter().zip(&before) {
        assert_eq!(proxy.requests() - before, 2);
    }
    // The block hashes are kept for the rest of the pass: one request each from now on.
    let before: Vec<u64> = world.proxies.iter().map(|p| p.requests()).collect();
    assert_eq!(pass.read(sender()?, 0, &[first, second]).await?, reading);
    assert_eq!(
        pass.read(sender()?, 0, &[second]).await?.inclusions,
        vec![Some(Inclusion {
            block: second_block,
            succeeded: true
        })]
    );
    for (proxy, before) in world.proxies.iter().zip(&before) {
        assert_eq!(proxy.requests() - before, 2);
    }
    Ok(())
}

#[tokio::test]
async fn a_lagging_endpoint_gives_no_agreement() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = world.send().await?;
    world.anvil.mine(4).await?;
    let reader = world.reader(2, Finality::Confirmations(1), 2)?;

    // Pinned while both are in step, then one falls behind: it cannot read at the pinned block.
    let pass = reader.pin().await?;
    assert_eq!(pass.pinned.number, 5);
    world.proxies[1].set_mode(RpcMode::Lag(3));
    assert_eq!(
        pass.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2
        })
    );
    // A new pass sees heads 5 and 2: further apart than allowed.
    assert_eq!(
        reader.pin().await.err(),
        Some(PinError::Head(NoAgreement::Lag {
            blocks: 3,
            max_lag: 2
        }))
    );
    Ok(())
}

#[tokio::test]
async fn a_lagging_endpoint_within_max_lag_pins_its_lower_head() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    world.anvil.mine(4).await?;
    let (tx, included) = world.send().await?;
    assert_eq!(included.number, 5);
    world.proxies[0].set_mode(RpcMode::Lag(3));
    let reader = world.reader(2, Finality::Confirmations(1), 3)?;

    // The honest node's newer blocks do not count: the pass is pinned at the lagging head, where
    // the transfer is not included and the nonce is unconsumed, and both agree on that.
    let pass = reader.pin().await?;
    assert_eq!(pass.pinned, world.block(2).await?);
    let reading = pass.read(sender()?, 0, &[tx]).await?;
    assert_eq!(reading.inclusions, vec![None]);
    assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (0, 0));
    Ok(())
}

#[tokio::test]
async fn an_endpoint_hiding_receipts_gives_no_agreement() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = world.send().await?;
    world.proxies[1].set_mode(RpcMode::HideReceipts);
    let reader = world.reader(2, Finality::Confirmations(1), 0)?;

    let pass = reader.pin().await?;
    // Its "no receipt, nonce consumed" is refuted by its own block that consumed the nonce, which
    // holds the transfer: it is no answer at all, and one answer is no quorum of two.
    assert_eq!(
        pass.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2
        })
    );
    // With a quorum of 1 set explicitly, the pruned node's claim still counts for nothing: the
    // honest node's inclusion is the reading.
    let lenient = world.reader(1, Finality::Confirmations(1), 0)?;
    let reading = lenient.pin().await?.read(sender()?, 0, &[tx]).await?;
    assert_eq!(reading.inclusions.len(), 1);
    assert!(reading.inclusions[0].is_some(), "{reading:?}");
    // Alone, it gives no reading (before, it read as "nonce moved without our attempt": a paid
    // transfer escalated as a compromised key).
    let alone = EvidenceReader::new(&config(
        vec![world.proxies[1].url()],
        1,
        Finality::Confirmations(1),
        0,
    ))?;
    assert_eq!(
        alone.pin().await?.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum: 1
        })
    );
    Ok(())
}

#[tokio::test]
async fn an_endpoint_rewriting_nonces_gives_no_agreement() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = world.send().await?;
    let reader = world.reader(2, Finality::Confirmations(1), 0)?;
    let pass = reader.pin().await?;

    // "The nonce never moved": the transfer could be taken for never sent.
    world.proxies[0].set_mode(RpcMode::RewriteNonce(-1));
    assert_eq!(
        pass.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::Disagreement)
    );
    // "The nonce moved" one further than it did: its own blocks hold no transaction of the
    // sender at the nonce its counts say was consumed, so the liar gives no answer at all.
    world.proxies[0].set_mode(RpcMode::RewriteNonce(1));
    for nonce in [0, 1] {
        assert_eq!(
            pass.read(sender()?, nonce, &[]).await,
            Err(NoAgreement::TooFewAnswers {
                answered: 1,
                quorum: 2
            }),
            "nonce {nonce}"
        );
    }
    // Honest again, in a new pass (a pass keeps what each endpoint said during it).
    world.proxies[0].set_mode(RpcMode::Honest);
    let pass = reader.pin().await?;
    assert_eq!(pass.read(sender()?, 0, &[]).await?.nonce_at_pinned, 1);
    Ok(())
}

#[tokio::test]
async fn a_down_endpoint_below_quorum_gives_no_agreement() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = world.send().await?;
    let reader = world.reader(2, Finality::Confirmations(1), 0)?;

    let pass = reader.pin().await?;
    world.proxies[1].set_mode(RpcMode::Down);
    assert_eq!(
        pass.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2
        })
    );
    assert_eq!(
        reader.pin().await.err(),
        Some(PinError::Head(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2
        }))
    );
    // Silence is never evidence, not even of absence.
    world.proxies[0].set_mode(RpcMode::Down);
    assert_eq!(
        pass.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum: 2
        })
    );
    Ok(())
}

#[tokio::test]
async fn three_endpoints_quorum_two_tolerate_one_down_but_not_one_lying() -> anyhow::Result<()> {
    let world = World::start(3).await?;
    let (tx, included) = world.send().await?;
    let reader = world.reader(2, Finality::Confirmations(1), 0)?;
    let expected = Reading {
        pinned: included,
        final_block: included,
        inclusions: vec![Some(Inclusion {
            block: included,
            succeeded: true,
        })],
        nonce_at_pinned: 1,
        nonce_at_final: 1,
    };

    // One down while pinning: the other two are a quorum.
    world.proxies[2].set_mode(RpcMode::Down);
    let pass = reader.pin().await?;
    assert_eq!(pass.read(sender()?, 0, &[tx]).await?, expected);
    // One down after pinning: the same.
    world.proxies[2].set_mode(RpcMode::Honest);
    let pass = reader.pin().await?;
    world.proxies[0].set_mode(RpcMode::Down);
    assert_eq!(pass.read(sender()?, 0, &[tx]).await?, expected);

    // One hiding a receipt among three: its claim is refuted by its own block (it does not
    // count as an answer), and the two honest ones are a quorum.
    world.proxies[0].set_mode(RpcMode::Honest);
    world.proxies[1].set_mode(RpcMode::HideReceipts);
    assert_eq!(pass.read(sender()?, 0, &[tx]).await?, expected);
    // One lying and one down: still no verdict.
    world.proxies[2].set_mode(RpcMode::Down);
    world.proxies[1].set_mode(RpcMode::RewriteNonce(5));
    assert_eq!(
        pass.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::Disagreement)
    );
    Ok(())
}

#[tokio::test]
async fn an_endpoint_on_another_fork_gives_no_agreement() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = world.send().await?;
    world.anvil.mine(1).await?;
    world.proxies[1].set_mode(RpcMode::ForkedReceipts);

    // Its receipt names a block that is not its canonical one at that height, and its own
    // canonical block that consumed the nonce holds the transfer: no answer, no quorum of two.
    let reader = world.reader(2, Finality::Confirmations(1), 0)?;
    assert_eq!(
        reader.pin().await?.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2
        })
    );
    // Alone (a quorum of 1, set explicitly), its receipt still counts for nothing.
    let alone = EvidenceReader::new(&config(
        vec![world.proxies[1].url()],
        1,
        Finality::Confirmations(1),
        0,
    ))?;
    assert_eq!(
        alone.pin().await?.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum: 1
        })
    );
    Ok(())
}

#[tokio::test]
async fn a_nonce_consumed_by_a_transaction_that_is_none_of_ours_is_proven_by_its_block()
-> anyhow::Result<()> {
    let world = World::start(2).await?;
    // The sender's nonce 0 is consumed by a transaction that is not the attempt we ask about.
    let (_foreign, _) = world.send().await?;
    world.anvil.mine(2).await?;
    let ours = opledger_chain::evidence::B256::repeat_byte(0x42);
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;
    let before: Vec<u64> = world.proxies.iter().map(|p| p.requests()).collect();
    let reading = pass.read(sender()?, 0, &[ours]).await?;
    // Both endpoints searched back to the consuming block and found only the foreign one there:
    // "not included, nonce moved" is evidence here, not silence.
    assert_eq!(reading.inclusions, vec![None]);
    assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (1, 1));
    for (proxy, before) in world.proxies.iter().zip(before) {
        assert!(
            proxy.requests() > before + 1,
            "the consuming block was not looked up"
        );
    }
    Ok(())
}

#[tokio::test]
async fn many_operations_are_read_in_one_batched_request_per_endpoint() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (first, _) = world.send().await?;
    let (second, _) = world.send().await?;
    world.anvil.mine(2).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;
    let queries = vec![
        opledger_chain::evidence::Query {
            sender: sender()?,
            nonce: 0,
            attempts: vec![first],
        },
        opledger_chain::evidence::Query {
            sender: sender()?,
            nonce: 1,
            attempts: vec![second],
        },
    ];
    let one_by_one = vec![
        pass.read(sender()?, 0, &[first]).await,
        pass.read(sender()?, 1, &[second]).await,
    ];
    // The same readings, and for both operations (both blocks' hashes now cached in the pass)
    // exactly one request per endpoint.
    let before: Vec<u64> = world.proxies.iter().map(|p| p.requests()).collect();
    let together = pass.read_all(&queries).await;
    assert_eq!(together, one_by_one);
    assert!(
        together
            .iter()
            .all(|r| r.as_ref().is_ok_and(|r| r.inclusions[0].is_some()))
    );
    for (proxy, before) in world.proxies.iter().zip(before) {
        assert_eq!(proxy.requests(), before + 1);
    }
    Ok(())
}

#[tokio::test]
async fn an_endpoint_serving_another_chain_is_no_evidence() -> anyhow::Result<()> {
    // The network is anvil's 31337; a second node runs chain 5 (a testnet where the mainnet
    // was meant), at the same height.
    let world = World::start(1).await?;
    world.send().await?;
    let testnet = Anvil::start_with(AnvilOptions {
        chain_id: 5,
        ..AnvilOptions::default()
    })
    .await?;
    testnet.mine(1).await?;

    // Alone, even with a quorum of 1, it answers nothing.
    let alone = EvidenceReader::new(&config(
        vec![testnet.rpc_url()],
        1,
        Finality::Confirmations(1),
        0,
    ))?;
    assert_eq!(
        alone.pin().await.err(),
        Some(PinError::Head(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum: 1
        }))
    );
    // Beside an endpoint of the network, it takes no part: the pass is the network's block.
    let both = EvidenceReader::new(&config(
        vec![world.proxies[0].url(), testnet.rpc_url()],
        1,
        Finality::Confirmations(1),
        0,
    ))?;
    assert_eq!(both.pin().await?.pinned, world.block(1).await?);
    Ok(())
}
