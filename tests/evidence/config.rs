//! Configurations that would make one node's word, or a clear-text link, count as evidence are
//! refused before anything is read.

use crate::{World, config};
use opledger_chain::evidence::{EvidenceReader, EvidenceSetupError, Finality};

#[tokio::test]
async fn clear_text_non_loopback_endpoint_is_refused() -> anyhow::Result<()> {
    let world = World::start(1).await?;
    let local = world.proxies[0].url();
    for remote in [
        "http://10.1.2.3:8545",
        "http://node.example.com/v3/key",
        "http://[fd00::1]:8545",
    ] {
        let error = EvidenceReader::new(&config(
            vec![local.clone(), remote.to_owned()],
            1,
            Finality::Confirmations(1),
            0,
        ))
        .err();
        assert!(
            matches!(error, Some(EvidenceSetupError::NotHttps { endpoint: 1 })),
            "{remote}: {error:?}"
        );
        // The refusal names the endpoint by position, never by URL (which may carry a key).
        let text = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            !text.contains("example") && !text.contains("10.1.2.3"),
            "{text}"
        );
    }
    // The same remote node over https://, and clear text on loopback, are accepted.
    let reader = EvidenceReader::new(&config(
        vec![local, "https://node.example.com/v3/key".to_owned()],
        1,
        Finality::Confirmations(1),
        0,
    ))?;
    assert_eq!(reader.endpoints(), 2);
    Ok(())
}

#[tokio::test]
async fn quorum_above_endpoints_is_refused() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let urls: Vec<String> = world.proxies.iter().map(|p| p.url()).collect();
    let refused = |quorum: usize, finality: Finality, urls: Vec<String>| {
        EvidenceReader::new(&config(urls, quorum, finality, 0)).err()
    };
    assert!(matches!(
        refused(3, Finality::Confirmations(1), urls.clone()),
        Some(EvidenceSetupError::QuorumAboveEndpoints {
            quorum: 3,
            endpoints: 2
        })
    ));
    assert!(matches!(
        refused(0, Finality::Confirmations(1), urls.clone()),
        Some(EvidenceSetupError::QuorumZero)
    ));
    assert!(matches!(
        refused(2, Finality::Confirmations(0), urls.clone()),
        Some(EvidenceSetupError::ZeroConfirmations)
    ));
    // The same endpoint twice would count twice towards the quorum.
    assert!(matches!(
        refused(
            2,
            Finality::Confirmations(1),
            vec![urls[0].clone(), urls[0].clone()]
        ),
        Some(EvidenceSetupError::DuplicateUrl {
            first: 0,
            second: 1
        })
    ));
    let reader = world.reader(2, Finality::Confirmations(1), 0)?;
    assert_eq!(
        (reader.quorum(), reader.endpoints(), reader.finality()),
        (2, 2, Finality::Confirmations(1))
    );
    Ok(())
}
