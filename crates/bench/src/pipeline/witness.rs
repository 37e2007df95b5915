//! The witness in the pipeline: one per broadcaster and reconciler instance, ticking the way
//! `opledger_witness::run` ticks it (a pass, then `poll_interval_ms`), and what its passes did.
//! On the happy path no release is proposed, so each pass is one `releases_to_witness` query
//! that finds nothing; the totals show what that costs and that nothing was attested or refused.

use opledger_witness::{Outcome, Witness};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// What the witnesses' passes did, summed over the instances.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WitnessTotals {
    /// Passes run.
    pub passes: u64,
    /// Time spent in them.
    pub busy: Duration,
    /// Proposals attested.
    pub attested: u64,
    /// Proposals examined without a verdict (read again next pass).
    pub no_verdict: u64,
    /// Proposals refused for good, by reason code.
    pub refused: BTreeMap<&'static str, u64>,
}

impl WitnessTotals {
    /// Counts one pass that took `took` and ended in `outcomes`.
    pub fn record(&mut self, outcomes: &[Outcome], took: Duration) {
        self.passes += 1;
        self.busy += took;
        for outcome in outcomes {
            match outcome {
                Outcome::Attested => self.attested += 1,
                Outcome::NoVerdict => self.no_verdict += 1,
                Outcome::Refused(reason) => *self.refused.entry(reason).or_default() += 1,
            }
        }
    }

    /// Proposals refused, whatever the reason.
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }

    /// Mean milliseconds per pass (0 without passes).
    pub fn mean_ms(&self) -> f64 {
        if self.passes == 0 {
            0.0
        } else {
            self.busy.as_secs_f64() * 1000.0 / self.passes as f64
        }
    }

    /// What happened from `self` until `later`.
    pub fn until(&self, later: &WitnessTotals) -> WitnessTotals {
        WitnessTotals {
            passes: later.passes.saturating_sub(self.passes),
            busy: later.busy.saturating_sub(self.busy),
            attested: later.attested.saturating_sub(self.attested),
            no_verdict: later.no_verdict.saturating_sub(self.no_verdict),
            refused: later
                .refused
                .iter()
                .map(|(&reason, &n)| {
                    let was = self.refused.get(reason).copied().unwrap_or(0);
                    (reason, n.saturating_sub(was))
                })
                .filter(|&(_, n)| n > 0)
                .collect(),
        }
    }
}

/// Runs `witness` until aborted: a pass of up to `batch` proposals, then `poll`, each pass
/// counted into `totals`.
pub fn spawn(
    witness: Witness,
    batch: u32,
    poll: Duration,
    totals: Arc<Mutex<WitnessTotals>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let started = Instant::now();
            let outcomes = witness.tick(batch).await;
            let took = started.elapsed();
            if let Ok(mut t) = totals.lock() {
                t.record(&outcomes, took);
            }
            tokio::time::sleep(poll).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_count_each_outcome_and_subtract_per_reason() {
        let mut before = WitnessTotals::default();
        before.record(&[Outcome::Refused("A")], Duration::from_millis(4));
        let mut after = before.clone();
        after.record(&[], Duration::from_millis(2));
        after.record(
            &[
                Outcome::Attested,
                Outcome::NoVerdict,
                Outcome::Refused("A"),
                Outcome::Refused("B"),
            ],
            Duration::from_millis(6),
        );
        let used = before.until(&after);
        assert_eq!(used.passes, 2);
        assert_eq!(used.busy, Duration::from_millis(8));
        assert_eq!((used.attested, used.no_verdict), (1, 1));
        assert_eq!(used.refused, BTreeMap::from([("A", 1), ("B", 1)]));
        assert_eq!(used.refused_total(), 2);
        assert!((used.mean_ms() - 4.0).abs() < 1e-9);
        assert!(WitnessTotals::default().mean_ms().abs() < 1e-12);
    }
}
