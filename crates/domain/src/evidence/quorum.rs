//! Agreement of independent endpoints. One node's word is not evidence: a lagging or pruned node
//! says "no receipt", a node on another fork names other blocks, a man in the middle of a
//! clear-text link says whatever it likes. A reading counts only when at least `quorum` endpoints
//! answered, their heads are within `max_lag` blocks of each other, and every endpoint that
//! answered gave exactly the same reading at the same pinned block (by hash).

use super::{BlockRef, Inclusion};

/// What one endpoint says about an operation, every answer read at one pinned block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The block all of the reading is read at (named by hash, so every endpoint reads the same
    /// chain or the readings differ).
    pub pinned: BlockRef,
    /// The newest block the network's finality rule counts final, at or below `pinned`.
    pub final_block: BlockRef,
    /// For each attempt (oldest first): its inclusion in a canonical block at or below `pinned`.
    pub inclusions: Vec<Option<Inclusion>>,
    /// The sender's transaction count (next nonce) as of `pinned`.
    pub nonce_at_pinned: u64,
    /// The sender's transaction count as of `final_block`.
    pub nonce_at_final: u64,
}

/// One endpoint's answer: its own head and its reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointReading {
    /// The endpoint's head when it was asked.
    pub head: u64,
    /// What it said.
    pub reading: Reading,
}

/// Why the endpoints' answers are not evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoAgreement {
    /// Fewer endpoints answered than the quorum needs.
    #[error("{answered} endpoint(s) answered, the quorum is {quorum}")]
    TooFewAnswers {
        /// How many answered.
        answered: usize,
        /// How many must.
        quorum: usize,
    },
    /// The endpoints' heads are too far apart.
    #[error("endpoint heads are {blocks} blocks apart, more than {max_lag}")]
    Lag {
        /// The spread of the heads.
        blocks: u64,
        /// The largest spread allowed.
        max_lag: u64,
    },
    /// Two endpoints that answered gave different readings.
    #[error("endpoints disagree")]
    Disagreement,
}

/// The reading every answering endpoint agrees on, if it is evidence: `answers` has one entry per
/// configured endpoint (`None`: it did not answer). A quorum of 0 is taken as 1.
pub fn agree(
    answers: &[Option<EndpointReading>],
    quorum: usize,
    max_lag: u64,
) -> Result<Reading, NoAgreement> {
    let quorum = quorum.max(1);
    let answered: Vec<&EndpointReading> = answers.iter().flatten().collect();
    let Some(first) = answered.first() else {
        return Err(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum,
        });
    };
    if answered.len() < quorum {
        return Err(NoAgreement::TooFewAnswers {
            answered: answered.len(),
            quorum,
        });
    }
    let lowest = answered.iter().map(|a| a.head).min().unwrap_or(first.head);
    let highest = answered.iter().map(|a| a.head).max().unwrap_or(first.head);
    if highest - lowest > max_lag {
        return Err(NoAgreement::Lag {
            blocks: highest - lowest,
            max_lag,
        });
    }
    if answered.iter().any(|a| a.reading != first.reading) {
        return Err(NoAgreement::Disagreement);
    }
    let reading = &first.reading;
    // A reading that contradicts itself is no evidence either.
    if reading.final_block.number > reading.pinned.number
        || reading.nonce_at_final > reading.nonce_at_pinned
    {
        return Err(NoAgreement::Disagreement);
    }
    Ok(reading.clone())
}
