//! Final depth: by confirmations, by the `finalized` tag, and across a reorganization.

use crate::{RECEIPT_TIMEOUT, World, b256, quantity, sender};
use opledger_chain::evidence::{B256, BlockRef, Finality, Inclusion, NoAgreement};
use opledger_testkit::{DEV_KEYS, RpcMode};
use serde_json::json;

#[tokio::test]
async fn inclusion_not_yet_final_is_not_final() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, included) = world.send().await?;
    assert_eq!(included.number, 1);
    let reader = world.reader(2, Finality::Confirmations(3), 0)?;
    let inclusion = Some(Inclusion {
        block: included,
        succeeded: true,
    });

    // One and two confirmations: not final. The final block is genesis: with one confirmation
    // the chain is shorter than the depth, with two the depth reaches exactly block 0.
    for head in [1, 2] {
        let pass = reader.pin().await?;
        assert_eq!(pass.pinned.number, head);
        assert_eq!(pass.final_block, world.block(0).await?);
        let reading = pass.read(sender()?, 0, &[tx]).await?;
        assert_eq!(reading.inclusions, vec![inclusion]);
        assert!(reading.final_block.number < included.number);
        assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (1, 0));
        world.anvil.mine(1).await?;
    }
    // Three confirmations, the including block counted: final.
    let pass = reader.pin().await?;
    assert_eq!(pass.pinned.number, 3);
    assert_eq!(pass.final_block, included);
    let reading = pass.read(sender()?, 0, &[tx]).await?;
    assert_eq!(reading.inclusions, vec![inclusion]);
    assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (1, 1));
    // Four: the final block moves on.
    world.anvil.mine(1).await?;
    assert_eq!(reader.pin().await?.final_block, world.block(2).await?);
    Ok(())
}

#[tokio::test]
async fn finalized_tag() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    // Anvil's `finalized` block trails its head by 64 blocks (two epochs of 32 slots), genesis
    // until then.
    let (tx, included) = world.send().await?;
    let reader = world.reader(2, Finality::FinalizedTag, 2)?;
    let pass = reader.pin().await?;
    assert_eq!(
        (pass.pinned.number, pass.final_block),
        (1, world.block(0).await?)
    );

    world.anvil.mine(63).await?;
    let pass = reader.pin().await?;
    assert_eq!(
        (pass.pinned.number, pass.final_block),
        (64, world.block(0).await?)
    );
    let reading = pass.read(sender()?, 0, &[tx]).await?;
    assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (1, 0));

    world.anvil.mine(1).await?;
    let pass = reader.pin().await?;
    assert_eq!((pass.pinned.number, pass.final_block), (65, included));
    let reading = pass.read(sender()?, 0, &[tx]).await?;
    assert_eq!(
        reading.inclusions,
        vec![Some(Inclusion {
            block: included,
            succeeded: true
        })]
    );
    assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (1, 1));

    // The lowest finalized block named counts: a node two blocks behind says 70 - 2 - 64.
    world.anvil.mine(5).await?;
    world.proxies[1].set_mode(RpcMode::Lag(2));
    let pass = reader.pin().await?;
    assert_eq!(pass.pinned, world.block(68).await?);
    assert_eq!(pass.final_block, world.block(4).await?);
    Ok(())
}

#[tokio::test]
async fn a_reorganization_makes_the_replaced_block_not_canonical() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    world.anvil.mine(1).await?;
    let (tx, included) = world.send().await?;
    assert_eq!(included.number, 2);
    world.anvil.mine(2).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let before = reader.pin().await?;
    assert_eq!(before.pinned.number, 4);
    assert_eq!(before.canonical(included).await, Ok(true));
    assert_eq!(
        before.read(sender()?, 0, &[tx]).await?.inclusions,
        vec![Some(Inclusion {
            block: included,
            succeeded: true
        })]
    );

    // Blocks 2 to 4 are replaced; the transfer is gone with them (anvil does not re-include it).
    world.anvil.reorg(3).await?;
    let after = reader.pin().await?;
    assert_eq!(after.pinned.number, 4);
    assert_ne!(after.pinned, before.pinned);
    assert_eq!(after.canonical(included).await, Ok(false));
    assert_eq!(after.canonical(world.block(1).await?).await, Ok(true));
    let reading = after.read(sender()?, 0, &[tx]).await?;
    assert_eq!(reading.inclusions, vec![None]);
    assert_eq!((reading.nonce_at_pinned, reading.nonce_at_final), (0, 0));

    // The pass pinned before the reorganization reads nothing any more: its pinned block is
    // gone, so no endpoint answers at it.
    assert_eq!(
        before.read(sender()?, 0, &[tx]).await,
        Err(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum: 2
        })
    );
    // A block above the pinned one is not canonical as of it.
    world.anvil.mine(1).await?;
    assert_eq!(after.canonical(world.block(5).await?).await, Ok(false));
    Ok(())
}

#[tokio::test]
async fn a_reorganization_that_re_includes_the_transfer_moves_its_inclusion() -> anyhow::Result<()>
{
    let world = World::start(2).await?;
    world.anvil.mine(1).await?;
    let (from, _) = DEV_KEYS[0];
    let (to, _) = DEV_KEYS[1];
    let raw = world
        .anvil
        .sign_transaction(json!({
            "from": from, "to": to, "value": "0x1", "nonce": "0x0", "gas": "0x5208",
            "maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x1",
            "chainId": format!("{:#x}", world.anvil.chain_id()),
        }))
        .await?;
    let hash = world.anvil.send_raw_transaction(&raw).await?;
    let tx: B256 = hash.parse()?;
    let first = inclusion_of(&world, &hash).await?;
    assert_eq!(first.number, 2);
    world.anvil.mine(2).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let before = reader.pin().await?;
    assert_eq!(
        before.read(sender()?, 0, &[tx]).await?.inclusions,
        vec![Some(Inclusion {
            block: first,
            succeeded: true
        })]
    );

    // Blocks 2 to 4 are replaced and the same signed bytes are mined again in the first new one.
    world
        .anvil
        .rpc(
            "anvil_reorg",
            json!([3, [[format!("0x{}", hex::encode(&raw)), 0]]]),
        )
        .await?;
    let moved = inclusion_of(&world, &hash).await?;
    assert_ne!(moved, first);
    let after = reader.pin().await?;
    assert_eq!(after.canonical(first).await, Ok(false));
    assert_eq!(after.canonical(moved).await, Ok(true));
    let reading = after.read(sender()?, 0, &[tx]).await?;
    assert_eq!(
        reading.inclusions,
        vec![Some(Inclusion {
            block: moved,
            succeeded: true
        })]
    );
    assert_eq!(reading.nonce_at_pinned, 1);
    Ok(())
}

/// The block anvil names in the receipt of `hash`.
async fn inclusion_of(world: &World, hash: &str) -> anyhow::Result<BlockRef> {
    let receipt = world.anvil.wait_receipt(hash, RECEIPT_TIMEOUT).await?;
    Ok(BlockRef {
        number: quantity(&receipt["blockNumber"])?,
        hash: b256(&receipt["blockHash"])?.0,
    })
}
