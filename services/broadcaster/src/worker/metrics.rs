//! The broadcaster's metrics: submission and deferral counters of this process, and the
//! back-off gauges read from the database at scrape time.

use super::Broadcaster;
use super::types::DeferralClass;
use opledger_chain::SubmitClass;
use std::sync::atomic::Ordering;

impl Broadcaster {
    /// Submissions so far by class, in [`SubmitClass::ALL`] order.
    pub fn submission_counts(&self) -> Vec<(SubmitClass, u64)> {
        SubmitClass::ALL
            .iter()
            .map(|c| (*c, self.submissions[c.index()].load(Ordering::Relaxed)))
            .collect()
    }

    /// Passes that deferred an operation so far, by class, in [`DeferralClass::ALL`] order.
    pub fn deferral_counts(&self) -> Vec<(DeferralClass, u64)> {
        DeferralClass::ALL
            .iter()
            .map(|c| (*c, self.deferrals[c.index()].load(Ordering::Relaxed)))
            .collect()
    }

    /// Prometheus text exposition of the submission and deferral counters (and this process's
    /// gRPC metrics).
    pub fn metrics(&self) -> String {
        let mut out = String::from(
            "# HELP opledger_submissions_total eth_sendRawTransaction results by class.\n\
             # TYPE opledger_submissions_total counter\n",
        );
        for (class, count) in self.submission_counts() {
            out.push_str(&format!(
                "opledger_submissions_total{{class=\"{}\"}} {count}\n",
                class.as_str()
            ));
        }
        out.push_str(
            "# HELP opledger_broadcast_deferrals_total Passes that could not move an operation \
             (each puts it in back-off), by class.\n\
             # TYPE opledger_broadcast_deferrals_total counter\n",
        );
        for (class, count) in self.deferral_counts() {
            out.push_str(&format!(
                "opledger_broadcast_deferrals_total{{class=\"{}\"}} {count}\n",
                class.as_str()
            ));
        }
        out.push_str(&opledger_grpc::metrics::global().render());
        out
    }

    /// [`Broadcaster::metrics`] with the back-off gauges read from the database at scrape time
    /// (what every replica sees): due operations waiting in back-off, and the longest run of
    /// failed passes. A store failure leaves the gauges out of this scrape.
    pub async fn scrape(&self) -> String {
        let mut out = self.metrics();
        match self.store.backoff_summary().await {
            Ok(summary) => out.push_str(&format!(
                "# HELP opledger_broadcast_backoff_operations Due operations waiting in back-off.\n\
                 # TYPE opledger_broadcast_backoff_operations gauge\n\
                 opledger_broadcast_backoff_operations {}\n\
                 # HELP opledger_broadcast_backoff_max_failures Most consecutive failed passes \
                 of a due operation.\n\
                 # TYPE opledger_broadcast_backoff_max_failures gauge\n\
                 opledger_broadcast_backoff_max_failures {}\n",
                summary.waiting, summary.max_failures
            )),
            Err(e) => tracing::warn!(error = %e.log_safe(), "cannot read the back-off gauges"),
        }
        out.push_str(&opledger_chain::evidence::no_evidence().render("broadcaster"));
        out
    }
}
