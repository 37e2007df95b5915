//! What the configured endpoints can answer, and what `opledger_domain::evidence::agree` makes
//! of it. A reader pins a block at or a little below the head; each endpoint then answers at that
//! block or not at all: an honest one with the canonical chain, a lagging one likewise (its own
//! head behind, so it cannot answer above it), a liar with the truth or any of its fabrications.
//! Every combination of answers is handed to `agree`, and the distinct results are the evidence a
//! worker may act on.

use opledger_domain::evidence::{EndpointReading, Inclusion, NoAgreement, Reading, agree};

use crate::chain::{Chain, NONCE};
use crate::config::{Config, Endpoint, Side};

/// What a worker holds after asking the endpoints: an agreed reading or why there is none.
pub type Evidence = Result<Reading, NoAgreement>;

/// The readings a liar may give instead of `honest`, read at `honest.pinned` on `chain`, about
/// `attempts` attempts: receipts hidden (with the nonce as it is, unconsumed, or consumed), a
/// receipt at final depth or pending for an attempt that may not be included at all, every
/// inclusion counted final, and a wrong nonce.
pub fn fabrications(honest: &Reading, chain: &Chain, attempts: usize) -> Vec<Reading> {
    let mut lies = Vec::new();
    let hidden = Reading {
        inclusions: vec![None; attempts],
        ..honest.clone()
    };
    lies.push(hidden.clone());
    lies.push(Reading {
        nonce_at_pinned: NONCE,
        nonce_at_final: NONCE,
        ..hidden.clone()
    });
    lies.push(Reading {
        nonce_at_pinned: NONCE + 1,
        nonce_at_final: NONCE + 1,
        ..hidden.clone()
    });
    let pinned = u8::try_from(honest.pinned.number).unwrap_or(u8::MAX);
    if pinned > 0 {
        let final_number = u8::try_from(honest.final_block.number).unwrap_or(0);
        for attempt in 0..attempts {
            for succeeded in [true, false] {
                // A receipt at final depth (the pinned block made final when nothing is yet).
                let (block, final_block) = if final_number > 0 {
                    (final_number, honest.final_block)
                } else {
                    (pinned, honest.pinned)
                };
                let mut inclusions = vec![None; attempts];
                inclusions[attempt] = Some(Inclusion {
                    block: chain.block(block),
                    succeeded,
                });
                lies.push(Reading {
                    pinned: honest.pinned,
                    final_block,
                    inclusions,
                    nonce_at_pinned: NONCE + 1,
                    nonce_at_final: NONCE + 1,
                });
            }
            // A receipt at the pinned block, not yet final.
            let mut inclusions = vec![None; attempts];
            inclusions[attempt] = Some(Inclusion {
                block: honest.pinned,
                succeeded: true,
            });
            lies.push(Reading {
                inclusions,
                nonce_at_pinned: NONCE + 1,
                nonce_at_final: NONCE,
                ..honest.clone()
            });
        }
    }
    lies.push(Reading {
        final_block: honest.pinned,
        nonce_at_final: honest.nonce_at_pinned,
        ..honest.clone()
    });
    lies.push(Reading {
        nonce_at_pinned: honest.nonce_at_pinned + 1,
        nonce_at_final: honest.nonce_at_final + 1,
        ..honest.clone()
    });
    lies.retain(|lie| lie != honest);
    lies
}

/// How far ahead of the network a liar may claim its head is.
const LIAR_HEAD_AHEAD: u8 = 3;

/// What `endpoint` may answer when the head is `head` and the reader pinned `honest.pinned`.
fn answers(
    endpoint: Endpoint,
    head: u8,
    honest: &Reading,
    lies: &[Reading],
) -> Vec<Option<EndpointReading>> {
    let pinned = honest.pinned.number;
    let say = |head: u8, reading: &Reading| {
        Some(EndpointReading {
            head: u64::from(head),
            reading: reading.clone(),
        })
    };
    let mut out = vec![None];
    match endpoint {
        Endpoint::Honest => out.push(say(head, honest)),
        Endpoint::Lagging { blocks } => {
            for behind in 0..=blocks {
                if let Some(own) = head.checked_sub(behind)
                    && u64::from(own) >= pinned
                {
                    out.push(say(own, honest));
                }
            }
        }
        Endpoint::Liar => {
            out.push(say(head, honest));
            // The truth with a head far ahead, which the others' lag contradicts.
            out.push(say(head.saturating_add(LIAR_HEAD_AHEAD), honest));
            out.extend(lies.iter().map(|lie| say(head, lie)));
        }
    }
    out
}

/// Every distinct result of `agree` over every combination of `side`'s endpoints' answers, for
/// each block a reader may pin (the head, and up to its pinning depth below it), in a fixed
/// order.
pub fn outcomes(config: &Config, side: Side, chain: &Chain, attempts: usize) -> Vec<Evidence> {
    let (endpoints, quorum, pin_back) = config.readers(side);
    let mut found: Vec<Evidence> = Vec::new();
    let lowest = chain.height.saturating_sub(pin_back);
    for pinned in (lowest..=chain.height).rev() {
        let honest = chain.reading(pinned, attempts, config.confirmations);
        let lies = fabrications(&honest, chain, attempts);
        let options: Vec<Vec<Option<EndpointReading>>> = endpoints
            .iter()
            .map(|e| answers(*e, chain.height, &honest, &lies))
            .collect();
        for_each_combination(&options, |combination| {
            let result = agree(combination, quorum, config.max_lag);
            if !found.contains(&result) {
                found.push(result);
            }
        });
    }
    found
}

/// The evidence when every endpoint of `side` answers honestly at the head: what a fair run
/// sees.
pub fn honest(config: &Config, side: Side, chain: &Chain, attempts: usize) -> Evidence {
    let (endpoints, quorum, _) = config.readers(side);
    let reading = chain.reading(chain.height, attempts, config.confirmations);
    let answers: Vec<Option<EndpointReading>> = endpoints
        .iter()
        .map(|_| {
            Some(EndpointReading {
                head: u64::from(chain.height),
                reading: reading.clone(),
            })
        })
        .collect();
    agree(&answers, quorum, config.max_lag)
}

/// The evidence when `side`'s honest endpoints answer at the head and every faulty one (lagging
/// or lying) gives any of its answers except the truth: what a fair run sees when the fault
/// persists.
pub fn persistent_fault(
    config: &Config,
    side: Side,
    chain: &Chain,
    attempts: usize,
) -> Vec<Evidence> {
    let (endpoints, quorum, _) = config.readers(side);
    let honest = chain.reading(chain.height, attempts, config.confirmations);
    let lies = fabrications(&honest, chain, attempts);
    let options: Vec<Vec<Option<EndpointReading>>> = endpoints
        .iter()
        .map(|e| match e {
            Endpoint::Honest => vec![Some(EndpointReading {
                head: u64::from(chain.height),
                reading: honest.clone(),
            })],
            faulty => answers(*faulty, chain.height, &honest, &lies)
                .into_iter()
                .filter(|a| a.as_ref().is_none_or(|a| a.reading != honest))
                .collect(),
        })
        .collect();
    let mut found: Vec<Evidence> = Vec::new();
    for_each_combination(&options, |combination| {
        let result = agree(combination, quorum, config.max_lag);
        if !found.contains(&result) {
            found.push(result);
        }
    });
    found
}

/// Calls `f` with every combination taking one element of each of `options`.
fn for_each_combination<T: Clone>(options: &[Vec<T>], mut f: impl FnMut(&[T])) {
    if options.iter().any(Vec::is_empty) {
        return;
    }
    let mut choice = vec![0usize; options.len()];
    let mut current: Vec<T> = options.iter().map(|o| o[0].clone()).collect();
    loop {
        f(&current);
        let mut digit = 0;
        loop {
            if digit == options.len() {
                return;
            }
            choice[digit] += 1;
            if choice[digit] < options[digit].len() {
                current[digit] = options[digit][choice[digit]].clone();
                break;
            }
            choice[digit] = 0;
            current[digit] = options[digit][0].clone();
            digit += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{Mined, Tx};

    fn chain() -> Chain {
        Chain {
            height: 4,
            a: Some(Mined {
                block: 2,
                tx: Tx::Attempt(0),
                succeeded: true,
            }),
            ..Chain::genesis(0)
        }
    }

    #[test]
    fn with_a_quorum_of_two_every_agreed_reading_is_the_truth_at_its_pinned_block() {
        let config = Config::default();
        let chain = chain();
        let outcomes = outcomes(&config, Side::Workers, &chain, 2);
        let agreed: Vec<&Reading> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        let truth: Vec<Reading> = [4, 3, 2].map(|p| chain.reading(p, 2, 3)).into();
        assert_eq!(agreed.len(), 3, "{agreed:?}");
        assert!(agreed.iter().all(|r| truth.contains(r)));
        assert!(outcomes.contains(&Err(NoAgreement::Disagreement)));
        assert!(
            outcomes
                .iter()
                .any(|o| matches!(o, Err(NoAgreement::Lag { .. })))
        );
        assert!(
            outcomes
                .iter()
                .any(|o| matches!(o, Err(NoAgreement::TooFewAnswers { .. })))
        );
    }

    #[test]
    fn with_a_quorum_of_one_the_liar_alone_is_agreed() {
        let config = Config {
            quorum: 1,
            ..Config::default()
        };
        let chain = chain();
        let honest = chain.reading(4, 2, 3);
        let lies = fabrications(&honest, &chain, 2);
        let outcomes = outcomes(&config, Side::Workers, &chain, 2);
        assert!(!lies.is_empty());
        assert!(lies.iter().all(|lie| outcomes.contains(&Ok(lie.clone()))));
    }

    #[test]
    fn a_persistent_liar_blocks_every_verdict() {
        let chain = chain();
        let found = persistent_fault(&Config::default(), Side::Workers, &chain, 2);
        assert!(!found.is_empty());
        assert!(found.iter().all(Result::is_err), "{found:?}");
    }
}
