//! The model checks run under `cargo test`: the domain's decisions hold every property through
//! every explored interleaving, and the old decisions are caught with a counterexample. Every
//! check prints `model: states=... elapsed=...ms`.

mod custodian;
mod domain;
mod faults;
mod legacy;
mod reopen;
mod witness;

use opledger_model::Report;

/// Fails with every violated property's trace and every unreached example.
pub fn assert_holds(report: &Report) {
    let problems = report.problems();
    assert!(
        problems.is_empty(),
        "{}: {} problem(s)\n{}",
        report.label,
        problems.len(),
        problems.join("\n")
    );
}

/// The first step of the counterexample to `property` after which `what` holds, with the state
/// it led to; fails when there is no counterexample or no such step.
pub fn first_step_where(
    report: &Report,
    property: &str,
    what: impl Fn(&opledger_model::State) -> bool,
) -> (opledger_model::Action, opledger_model::State) {
    report
        .discoveries
        .get(property)
        .unwrap_or_else(|| panic!("{}: no counterexample for {property:?}", report.label))
        .steps
        .iter()
        .find(|(_, state)| what(state))
        .cloned()
        .unwrap_or_else(|| panic!("{}: no such step in the counterexample", report.label))
}

/// The counterexample found for `property`, printed; fails when there is none.
pub fn counterexample(report: &Report, property: &str) -> opledger_model::State {
    let trace = report
        .trace(property)
        .unwrap_or_else(|| panic!("{}: no counterexample for {property:?}", report.label));
    println!("counterexample to {property:?}:\n{trace}");
    report
        .discoveries
        .get(property)
        .expect("a trace implies a discovery")
        .last_state()
        .clone()
}
