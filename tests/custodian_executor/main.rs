//! The custodian executor as operators run it: the real `run` (health, metrics, passes) on its
//! own login (`opledger_custodian`), against the conformance double executing real transfers on
//! its own anvil. What `/metrics` serves is read from the database at scrape time, so these tests
//! watch the gauges the alert rules read move with the withdrawals.

mod metrics;
